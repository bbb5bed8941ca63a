/* AArch64 with the int8 matrix-multiply extension (SMMLA, Armv8.6 i8mm; compiled with
 * +i8mm, called only when HWCAP2_I8MM says so): Q8_0 and Q4_0 products in tiles of two
 * weight rows by two tokens. One SMMLA multiplies a 2x8 block of the rows by the
 * transposed 2x8 block of the tokens into the four int32 sums of the tile, so four of them
 * cover a 32-block of all four (row, token) pairs. The integer sums are exact and each
 * pair's block product is added in the scalar order: the scalar kernels' results. Odd rows
 * and tokens left over go to the dotprod kernels (ul_cpu_kern_dotprod); the other types
 * come from that table through ul_cpu_isa_parent. */
#include <arm_neon.h>

#include "cpu/kernels_neon.h"

#define F16(h) ul_fp16_to_fp32(h)

/* [a[0..8), b[0..8)] and [a[8..16), b[8..16)]: the row pairs SMMLA reads */
static inline int8x16_t lo64(int8x16_t a, int8x16_t b) {
    return vreinterpretq_s8_s64(vzip1q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)));
}
static inline int8x16_t hi64(int8x16_t a, int8x16_t b) {
    return vreinterpretq_s8_s64(vzip2q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)));
}

/* the 2x2 tile's sums of one 32-block: w0, w1 / x0, x1 each as elements [0,16), [16,32) */
static inline int32x4_t tile32(int8x16_t w0a, int8x16_t w0b, int8x16_t w1a, int8x16_t w1b,
                               const int8_t *x0, const int8_t *x1) {
    const int8x16_t x0a = vld1q_s8(x0), x0b = vld1q_s8(x0 + 16);
    const int8x16_t x1a = vld1q_s8(x1), x1b = vld1q_s8(x1 + 16);
    int32x4_t acc = vmmlaq_s32(vdupq_n_s32(0), lo64(w0a, w1a), lo64(x0a, x1a));
    acc = vmmlaq_s32(acc, hi64(w0a, w1a), hi64(x0a, x1a));
    acc = vmmlaq_s32(acc, lo64(w0b, w1b), lo64(x0b, x1b));
    return vmmlaq_s32(acc, hi64(w0b, w1b), hi64(x0b, x1b));
}

/* o = {w0.x0, w0.x1, w1.x0, w1.x1}; SMMLA's lanes are (row, token) in that order */
static void tile_q8_0(int64_t n, const uint8_t *w0, const uint8_t *w1, const uint8_t *x0,
                      const uint8_t *x1, float o[4]) {
    const blk_q8_0 *a = (const blk_q8_0 *)w0, *b = (const blk_q8_0 *)w1;
    const blk_q8a *u = (const blk_q8a *)x0, *v = (const blk_q8a *)x1;
    float s[4] = {0, 0, 0, 0};
    for (int64_t i = 0; i < n / QK; i++) {
        const int32x4_t acc = tile32(vld1q_s8(a[i].qs), vld1q_s8(a[i].qs + 16), vld1q_s8(b[i].qs),
                                     vld1q_s8(b[i].qs + 16), u[i].qs, v[i].qs);
        const float da = F16(a[i].d), db = F16(b[i].d);
        s[0] += (float)vgetq_lane_s32(acc, 0) * (da * u[i].d);
        s[1] += (float)vgetq_lane_s32(acc, 1) * (da * v[i].d);
        s[2] += (float)vgetq_lane_s32(acc, 2) * (db * u[i].d);
        s[3] += (float)vgetq_lane_s32(acc, 3) * (db * v[i].d);
    }
    for (int k = 0; k < 4; k++) o[k] = s[k];
}

static void tile_q4_0(int64_t n, const uint8_t *w0, const uint8_t *w1, const uint8_t *x0,
                      const uint8_t *x1, float o[4]) {
    const blk_q4_0 *a = (const blk_q4_0 *)w0, *b = (const blk_q4_0 *)w1;
    const blk_q8a *u = (const blk_q8a *)x0, *v = (const blk_q8a *)x1;
    const uint8x16_t m4 = vdupq_n_u8(15);
    const int8x16_t k8 = vdupq_n_s8(8);
    float s[4] = {0, 0, 0, 0};
    for (int64_t i = 0; i < n / QK; i++) {
        const uint8x16_t qa = vld1q_u8(a[i].qs), qb = vld1q_u8(b[i].qs);
        const int8x16_t a0 = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(qa, m4)), k8);
        const int8x16_t a1 = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(qa, 4)), k8);
        const int8x16_t b0 = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(qb, m4)), k8);
        const int8x16_t b1 = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(qb, 4)), k8);
        const int32x4_t acc = tile32(a0, a1, b0, b1, u[i].qs, v[i].qs);
        const float da = F16(a[i].d), db = F16(b[i].d);
        s[0] += (float)vgetq_lane_s32(acc, 0) * (da * u[i].d);
        s[1] += (float)vgetq_lane_s32(acc, 1) * (da * v[i].d);
        s[2] += (float)vgetq_lane_s32(acc, 2) * (db * u[i].d);
        s[3] += (float)vgetq_lane_s32(acc, 3) * (db * v[i].d);
    }
    for (int k = 0; k < 4; k++) o[k] = s[k];
}

typedef void (*tile_fn)(int64_t n, const uint8_t *w0, const uint8_t *w1, const uint8_t *x0,
                        const uint8_t *x1, float o[4]);

/* 2x2 tiles; the last odd token of a row pair and the last odd row through `one` */
static inline void mm_tiles(tile_fn tile, ul_mm_fn one, int64_t nc, const uint8_t *w, size_t ws,
                            int nr, const uint8_t *x, size_t xs, int nt, float *y, int64_t ys) {
    int r = 0;
    for (; r + 2 <= nr; r += 2) {
        int t = 0;
        for (; t + 2 <= nt; t += 2) {
            float o[4];
            tile(nc, w + r * ws, w + (r + 1) * ws, x + t * xs, x + (t + 1) * xs, o);
            y[t * ys + r] = o[0];
            y[(t + 1) * ys + r] = o[1];
            y[t * ys + r + 1] = o[2];
            y[(t + 1) * ys + r + 1] = o[3];
        }
        if (t < nt) one(nc, w + r * ws, ws, 2, x + t * xs, xs, 1, y + t * ys + r, ys);
    }
    if (r < nr) one(nc, w + r * ws, ws, 1, x, xs, nt, y + r, ys);
}

static void mm_q8_0(int64_t nc, const uint8_t *w, size_t ws, int nr, const uint8_t *x, size_t xs,
                    int nt, float *y, int64_t ys) {
    mm_tiles(tile_q8_0, ul_cpu_kern_dotprod.mm[UL_TYPE_Q8_0], nc, w, ws, nr, x, xs, nt, y, ys);
}

static void mm_q4_0(int64_t nc, const uint8_t *w, size_t ws, int nr, const uint8_t *x, size_t xs,
                    int nt, float *y, int64_t ys) {
    mm_tiles(tile_q4_0, ul_cpu_kern_dotprod.mm[UL_TYPE_Q4_0], nc, w, ws, nr, x, xs, nt, y, ys);
}

const ul_cpu_kern_t ul_cpu_kern_i8mm = {
    .mm =
        {
            [UL_TYPE_Q8_0] = mm_q8_0,
            [UL_TYPE_Q4_0] = mm_q4_0,
        },
    .xq =
        {
            [XF_F16R] = ul_neon_xq_f16r,
            [XF_Q8A] = ul_neon_xq_q8a,
            [XF_Q8A1] = ul_neon_xq_q8a1,
            [XF_Q8K] = ul_neon_xq_q8k,
        },
};
