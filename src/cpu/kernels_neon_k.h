/* Q4_K and Q6_K x Q8K dot products for AArch64, included by kernels_neon.c (widening
 * multiplies) and kernels_neon_dotprod.c (SDOT) after each defines
 *   static inline int32_t dot16(int8x16_t a, int8x16_t b)   the sum of 16 int8 products.
 * The integer sums are exact and the float steps are the scalar kernels', in their order:
 * the results are kernels_scalar.c's bit for bit. */
#ifndef UL_CPU_KERNELS_NEON_K_H
#define UL_CPU_KERNELS_NEON_K_H

#include <arm_neon.h>

#include "cpu/kernels_neon.h"

static float dot_q4_K(int64_t n, const void *w, const void *x) {
    const blk_q4_K *a = w;
    const blk_q8K *b = x;
    const uint8x16_t m4 = vdupq_n_u8(15);
    float s = 0;
    for (int64_t i = 0; i < n / QKK; i++) {
        int32_t sumi = 0, summ = 0;
        for (int jj = 0; jj < 4; jj++) { /* 32 bytes: sub-block 2jj low, 2jj + 1 high nibbles */
            const uint8x16_t q0 = vld1q_u8(a[i].qs + 32 * jj),
                             q1 = vld1q_u8(a[i].qs + 32 * jj + 16);
            const int8_t *y = b[i].qs + 64 * jj;
            const int32_t dl = dot16(vreinterpretq_s8_u8(vandq_u8(q0, m4)), vld1q_s8(y)) +
                               dot16(vreinterpretq_s8_u8(vandq_u8(q1, m4)), vld1q_s8(y + 16));
            const int32_t dh = dot16(vreinterpretq_s8_u8(vshrq_n_u8(q0, 4)), vld1q_s8(y + 32)) +
                               dot16(vreinterpretq_s8_u8(vshrq_n_u8(q1, 4)), vld1q_s8(y + 48));
            for (int h = 0; h < 2; h++) {
                const int j = 2 * jj + h;
                uint8_t sc, m;
                ul_q4k_scale_min(j, a[i].scales, &sc, &m);
                sumi += sc * (h ? dh : dl);
                summ += m * (b[i].bsums[2 * j] + b[i].bsums[2 * j + 1]);
            }
        }
        s += b[i].d *
             (ul_fp16_to_fp32(a[i].d) * (float)sumi - ul_fp16_to_fp32(a[i].dmin) * (float)summ);
    }
    return s;
}

/* Q4_K's nibbles plus a fifth bit from qh (bit j of byte l: sub-block j, element l) */
static float dot_q5_K(int64_t n, const void *w, const void *x) {
    const blk_q5_K *a = w;
    const blk_q8K *b = x;
    const uint8x16_t m4 = vdupq_n_u8(15), k16 = vdupq_n_u8(16);
    float s = 0;
    for (int64_t i = 0; i < n / QKK; i++) {
        int32_t sumi = 0, summ = 0;
        const uint8x16_t h0 = vld1q_u8(a[i].qh), h1 = vld1q_u8(a[i].qh + 16);
        for (int j = 0; j < 8; j++) {
            const uint8_t *q = a[i].qs + (j / 2) * 32;
            const uint8x16_t q0 = vld1q_u8(q), q1 = vld1q_u8(q + 16),
                             bit = vdupq_n_u8((uint8_t)(1 << j));
            const uint8x16_t v0 = vorrq_u8((j & 1) ? vshrq_n_u8(q0, 4) : vandq_u8(q0, m4),
                                           vandq_u8(vtstq_u8(h0, bit), k16));
            const uint8x16_t v1 = vorrq_u8((j & 1) ? vshrq_n_u8(q1, 4) : vandq_u8(q1, m4),
                                           vandq_u8(vtstq_u8(h1, bit), k16));
            const int8_t *y = b[i].qs + 32 * j;
            const int32_t d = dot16(vreinterpretq_s8_u8(v0), vld1q_s8(y)) +
                              dot16(vreinterpretq_s8_u8(v1), vld1q_s8(y + 16));
            uint8_t sc, m;
            ul_q4k_scale_min(j, a[i].scales, &sc, &m);
            sumi += sc * d;
            summ += m * (b[i].bsums[2 * j] + b[i].bsums[2 * j + 1]);
        }
        s += b[i].d *
             (ul_fp16_to_fp32(a[i].d) * (float)sumi - ul_fp16_to_fp32(a[i].dmin) * (float)summ);
    }
    return s;
}

/* six bits: the low four from ql, the high two from qh, minus 32; 16-element scales */
static float dot_q6_K(int64_t n, const void *w, const void *x) {
    const blk_q6_K *a = w;
    const blk_q8K *b = x;
    const uint8x16_t m4 = vdupq_n_u8(15), m3 = vdupq_n_u8(3);
    const int8x16_t k32 = vdupq_n_s8(32);
    float s = 0;
    for (int64_t i = 0; i < n / QKK; i++) {
        int32_t sumi = 0;
        const uint8_t *ql = a[i].ql, *qh = a[i].qh;
        const int8_t *y = b[i].qs, *sc = a[i].scales;
        for (int n0 = 0; n0 < QKK; n0 += 128, ql += 64, qh += 32, y += 128, sc += 8) {
            for (int l = 0; l < 32; l += 16) { /* elements n0 + l + {0, 32, 64, 96} .. + 15 */
                const uint8x16_t l0 = vld1q_u8(ql + l), l1 = vld1q_u8(ql + l + 32),
                                 h = vld1q_u8(qh + l);
                const uint8x16_t u[4] = {
                    vorrq_u8(vandq_u8(l0, m4), vshlq_n_u8(vandq_u8(h, m3), 4)),
                    vorrq_u8(vandq_u8(l1, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(h, 2), m3), 4)),
                    vorrq_u8(vshrq_n_u8(l0, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(h, 4), m3), 4)),
                    vorrq_u8(vshrq_n_u8(l1, 4), vshlq_n_u8(vshrq_n_u8(h, 6), 4)),
                };
                for (int k = 0; k < 4; k++) { /* 16 elements at n0 + 32 k + l: scale (32k+l)/16 */
                    const int8x16_t q = vsubq_s8(vreinterpretq_s8_u8(u[k]), k32);
                    sumi += sc[(32 * k + l) / 16] * dot16(q, vld1q_s8(y + 32 * k + l));
                }
            }
        }
        s += ul_fp16_to_fp32(a[i].d) * b[i].d * (float)sumi;
    }
    return s;
}

#endif
