/* The quad layout of AArch64's packed Q8_0 and Q4_0 weights (pack.h), shared by the
 * dotprod kernels (kernels_neon_dotprod_pack.c: SDOT by lane) and plain NEON's
 * (kernels_neon_pack_mull.c: widening multiplies). 16 rows per group as four quads of 4
 * rows; in every vector, 32-bit lane r holds 4 bytes of row r of the quad.
 *
 * Layout of a group: one record per block (32 columns), in block order:
 *   [16 f16 scales, rows 0..15][QV chunks x 4 quads of 16 bytes]
 * Vector (j, q) at 32 + 16 (4 j + q) holds, in lane r, 4 bytes of row 4 q + r's block:
 *  - Q4_0 (QV 4, 288 B): bytes 4j..4j+3 of qs as stored, so the low nibbles are weights
 *    k = 4j..4j+3 and the high nibbles k = 16+4j..16+4j+3, unsigned 0..15;
 *  - Q8_0 (QV 8, 544 B): weights k = 4j..4j+3, signed.
 * Records are exactly the 16 rows' GGUF bytes rearranged (no padding), as on x86.
 *
 * Results equal the row kernels' bit for bit: a block's integer sum is exact (Q4_0 adds
 * 8 * nsum, the -8 offset, to the unsigned nibbles' sum), and each block adds
 * (float)sum * (d_w * d_x) to the row's float sum in block order, a multiply and an add
 * (no FMA: -ffp-contract=off). Register tile: the 4 quads x up to 2 tokens (8 int32 and
 * 8 float accumulators).
 *
 * Included first by each of those two files, which then defines the integer step declared
 * here (always inlined) and names its tables with UL_PACK_Q4_0_Q8_0_TABLES:
 *   int32x4_t quad_sums(const int Q8, const uint8_t *v, int8x16_t x0, int8x16_t x1)
 * the 4 rows' sums over one block: v the quad's first vector (chunk j at v + 64 j), x0 | x1
 * one token's 32 activations; Q4_0 with the unsigned nibbles (no -8). This header gives the
 * file its own static gb_q4_0, gb_q8_0, pack_rows and mm_any, compiled with its flags. */
#ifndef UL_CPU_KERNELS_NEON_QUADS_H
#define UL_CPU_KERNELS_NEON_QUADS_H

#include <arm_neon.h>
#include <string.h>

#include "cpu/kernels_neon.h"
#include "cpu/pack.h"

#define REC(QV) (32 + 64 * (QV))

static size_t gb_q4_0(int64_t n_cols) { return (size_t)(n_cols / QK) * REC(4); }
static size_t gb_q8_0(int64_t n_cols) { return (size_t)(n_cols / QK) * REC(8); }

static void pack_rows(int q8, const uint8_t *rows, size_t rs, int64_t n_cols, uint8_t *dst) {
    ul_neon_pack_chunks(q8, 4, rows, rs, n_cols, dst);
}

#define AI static inline __attribute__((always_inline))

AI int32x4_t quad_sums(const int Q8, const uint8_t *v, int8x16_t x0, int8x16_t x1);

/* the 4 quads x NT tokens of one group over all nb blocks: y[t * ys + 4 q + r] */
AI void tile(const int Q8, const int NT, const uint8_t *g, int64_t nb, const uint8_t *x, size_t xs,
             float *y, int64_t ys) {
    const int QV = Q8 ? 8 : 4;
    float32x4_t acc[4][2];
    for (int q = 0; q < 4; q++)
        for (int t = 0; t < NT; t++) acc[q][t] = vdupq_n_f32(0);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *rec = g + (size_t)b * REC(QV);
        int32x4_t is[4][2];
        for (int t = 0; t < NT; t++) {
            const blk_q8a *p = (const blk_q8a *)(x + (size_t)t * xs) + b;
            const int8x16_t x0 = vld1q_s8(p->qs), x1 = vld1q_s8(p->qs + 16);
            for (int q = 0; q < 4; q++) {
                is[q][t] = quad_sums(Q8, rec + 32 + 16 * q, x0, x1);
                if (!Q8) is[q][t] = vaddq_s32(is[q][t], vdupq_n_s32(8 * p->nsum));
            }
        }
        for (int q = 0; q < 4; q++) {
            const float32x4_t dw =
                vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)rec + 4 * q)));
            for (int t = 0; t < NT; t++) {
                const blk_q8a *p = (const blk_q8a *)(x + (size_t)t * xs) + b;
                const float32x4_t d = vmulq_f32(dw, vdupq_n_f32(p->d));
                acc[q][t] = vaddq_f32(acc[q][t], vmulq_f32(vcvtq_f32_s32(is[q][t]), d));
            }
        }
    }
    for (int q = 0; q < 4; q++)
        for (int t = 0; t < NT; t++) vst1q_f32(y + (int64_t)t * ys + 4 * q, acc[q][t]);
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

#endif
