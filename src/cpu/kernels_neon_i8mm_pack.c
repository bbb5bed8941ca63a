/* AArch64 i8mm packed Q8_0 and Q4_0 weights (pack.h): 16 rows per group as eight row
 * pairs, each vector holding 8 bytes of two rows, the operand SMMLA (vmmlaq_s32) reads as
 * a 2x8 matrix. One SMMLA multiplies it by the same 8 columns of two tokens into the four
 * (row, token) sums of the pair. Compiled with +i8mm (cpu.cmake's kernels_neon_i8mm*.c),
 * reached only through ul_cpu_pack_kern_arm at the i8mm ISA.
 *
 * Why not the dotprod layout (kernels_neon_dotprod_pack.c: lane r of a vector is 4 bytes of
 * row r of a quad): SMMLA wants 8 consecutive bytes of one row in each half, so every
 * weight vector would need a ZIP of two loaded vectors first, one shuffle per SMMLA on
 * the stream that dominates a decode step. Here the weights go to SMMLA as loaded; only
 * the activations are zipped, once per block and token pair for all 16 rows.
 *
 * Layout of a group: one record per block (32 columns), in block order:
 *   [16 f16 scales, rows 0..15][QC chunks x 8 pairs of 16 bytes]
 * Vector (c, p) at 32 + 16 (8 c + p) holds bytes 8c..8c+7 of the qs of row 2p, then the
 * same bytes of row 2p + 1:
 *  - Q4_0 (QC 2, 288 B): as stored, so the low nibbles are weights k = 8c..8c+7 and the
 *    high nibbles k = 16+8c..16+8c+7, unsigned 0..15;
 *  - Q8_0 (QC 4, 544 B): weights k = 8c..8c+7, signed.
 * Records are exactly the 16 rows' GGUF bytes rearranged (no padding), as the other
 * packed layouts.
 *
 * Results equal the row kernels' bit for bit: a block's integer sum is exact (Q4_0 adds
 * 8 * nsum, the -8 offset, to the unsigned nibbles' sum), and each block adds
 * (float)sum * (d_w * d_x) to the row's float sum in block order, a multiply and an add
 * (no FMA: -ffp-contract=off). Register tile: the 8 pairs x 2 tokens (8 int32 and 8 float
 * accumulators, lanes (row 2p, token 0), (2p, 1), (2p+1, 0), (2p+1, 1)). A lone last token
 * goes through the same SMMLA with itself as the second token; the duplicate lanes are
 * dropped (with one token, SMMLA's useful work per instruction equals an SDOT's). */
#include <arm_neon.h>
#include <string.h>

#include "cpu/kernels_neon.h"
#include "cpu/pack.h"

#define REC(QC) (32 + 128 * (QC))

static size_t gb_q4_0(int64_t n_cols) { return (size_t)(n_cols / QK) * REC(2); }
static size_t gb_q8_0(int64_t n_cols) { return (size_t)(n_cols / QK) * REC(4); }

static void pack_rows(int q8, const uint8_t *rows, size_t rs, int64_t n_cols, uint8_t *dst) {
    ul_neon_pack_chunks(q8, 8, rows, rs, n_cols, dst);
}

#define AI static inline __attribute__((always_inline))

/* [a[0..8), b[0..8)] and [a[8..16), b[8..16)]: two tokens' 8 columns as SMMLA reads them */
AI int8x16_t lo64(int8x16_t a, int8x16_t b) {
    return vreinterpretq_s8_s64(vzip1q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)));
}
AI int8x16_t hi64(int8x16_t a, int8x16_t b) {
    return vreinterpretq_s8_s64(vzip2q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)));
}

/* pair p's four sums of one block; xc[j]: the two tokens' columns 8j..8j+7 */
AI int32x4_t pair_sums(const int Q8, const uint8_t *v, const int8x16_t xc[4]) {
    int32x4_t s = vdupq_n_s32(0);
    if (Q8) {
        for (int c = 0; c < 4; c++) s = vmmlaq_s32(s, vld1q_s8((const int8_t *)v + 128 * c), xc[c]);
        return s;
    }
    for (int c = 0; c < 2; c++) {
        const uint8x16_t u = vld1q_u8(v + 128 * c);
        s = vmmlaq_s32(s, vreinterpretq_s8_u8(vandq_u8(u, vdupq_n_u8(15))), xc[c]);
        s = vmmlaq_s32(s, vreinterpretq_s8_u8(vshrq_n_u8(u, 4)), xc[2 + c]);
    }
    return s;
}

/* the 8 pairs x NT tokens of one group over all nb blocks: y[t * ys + r] */
AI void tile(const int Q8, const int NT, const uint8_t *g, int64_t nb, const uint8_t *x, size_t xs,
             float *y, int64_t ys) {
    const int QC = Q8 ? 4 : 2;
    float32x4_t acc[8];
    for (int p = 0; p < 8; p++) acc[p] = vdupq_n_f32(0);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *rec = g + (size_t)b * REC(QC);
        const blk_q8a *u = (const blk_q8a *)x + b;
        const blk_q8a *v = NT == 2 ? (const blk_q8a *)(x + xs) + b : u;
        const int8x16_t ua = vld1q_s8(u->qs), ub = vld1q_s8(u->qs + 16);
        const int8x16_t va = vld1q_s8(v->qs), vb = vld1q_s8(v->qs + 16);
        const int8x16_t xc[4] = {lo64(ua, va), hi64(ua, va), lo64(ub, vb), hi64(ub, vb)};
        /* per lane (row, token): token 0, 1, 0, 1 */
        const float32x4_t dx = {u->d, v->d, u->d, v->d};
        const int32x4_t off = {8 * u->nsum, 8 * v->nsum, 8 * u->nsum, 8 * v->nsum};
        int32x4_t is[8];
        for (int p = 0; p < 8; p++) {
            is[p] = pair_sums(Q8, rec + 32 + 16 * p, xc);
            if (!Q8) is[p] = vaddq_s32(is[p], off);
        }
        for (int h = 0; h < 4; h++) {
            /* rows 4h..4h+3, each scale twice: lanes (row, token) of pairs 2h and 2h + 1 */
            const float32x4_t dw =
                vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)rec + 4 * h)));
            const float32x4_t d0 = vmulq_f32(vzip1q_f32(dw, dw), dx);
            const float32x4_t d1 = vmulq_f32(vzip2q_f32(dw, dw), dx);
            acc[2 * h] = vaddq_f32(acc[2 * h], vmulq_f32(vcvtq_f32_s32(is[2 * h]), d0));
            acc[2 * h + 1] = vaddq_f32(acc[2 * h + 1], vmulq_f32(vcvtq_f32_s32(is[2 * h + 1]), d1));
        }
    }
    for (int h = 0; h < 4; h++) {
        vst1q_f32(y + 4 * h, vuzp1q_f32(acc[2 * h], acc[2 * h + 1]));
        if (NT == 2) vst1q_f32(y + ys + 4 * h, vuzp2q_f32(acc[2 * h], acc[2 * h + 1]));
    }
}

AI void mm_any(const int Q8, int64_t n_cols, const uint8_t *wp, int n_groups, const uint8_t *x,
               size_t xs, int nt, float *y, int64_t ys) {
    const int64_t nb = n_cols / QK;
    const size_t gb = Q8 ? gb_q8_0(n_cols) : gb_q4_0(n_cols);
    for (int t = 0; t < nt; t += 2) {
        for (int gi = 0; gi < n_groups; gi++) {
            const uint8_t *g = wp + (size_t)gi * gb;
            float *yg = y + (int64_t)gi * UL_PACK_ROWS + (int64_t)t * ys;
            if (nt - t >= 2)
                tile(Q8, 2, g, nb, x + (size_t)t * xs, xs, yg, ys);
            else
                tile(Q8, 1, g, nb, x + (size_t)t * xs, xs, yg, ys);
        }
    }
}

UL_PACK_Q4_0_Q8_0_TABLES(i8mm);
