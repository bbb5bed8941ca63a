/* Q4_1, Q5_0, Q5_1, IQ4_NL (x Q8A / Q8A1) and IQ4_XS (x Q8K) dot products for AArch64,
 * included by kernels_neon.c and kernels_neon_dotprod.c after each defines dot16 (the sum
 * of 16 int8 products). Integer sums exact, float steps as kernels_scalar.c's, in its
 * order: the scalar results bit for bit. */
#ifndef UL_CPU_KERNELS_NEON_Q_H
#define UL_CPU_KERNELS_NEON_Q_H

#include <arm_neon.h>

#include "cpu/kernels_neon.h"

/* the 16 fifth bits qh >> (b0 .. b0 + 15) as 0 / 16 per byte */
static inline uint8x16_t q5_bits(uint32_t qh, int b0) {
    static const uint8_t k_bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint16_t h = (uint16_t)(qh >> b0);
    const uint8x16_t bytes = vcombine_u8(vdup_n_u8((uint8_t)h), vdup_n_u8((uint8_t)(h >> 8)));
    return vandq_u8(vtstq_u8(bytes, vld1q_u8(k_bit)), vdupq_n_u8(16));
}

/* the block's integer sum: nibbles (plus fifth bits, minus off) against 32 activations */
static inline int32_t q45_sum(const uint8_t *qs, int q5, uint32_t qh, int off, const int8_t *xq) {
    const uint8x16_t q = vld1q_u8(qs);
    uint8x16_t lo = vandq_u8(q, vdupq_n_u8(15)), hi = vshrq_n_u8(q, 4);
    if (q5) {
        lo = vorrq_u8(lo, q5_bits(qh, 0));
        hi = vorrq_u8(hi, q5_bits(qh, 16));
    }
    const int8x16_t o = vdupq_n_s8((int8_t)off);
    return dot16(vsubq_s8(vreinterpretq_s8_u8(lo), o), vld1q_s8(xq)) +
           dot16(vsubq_s8(vreinterpretq_s8_u8(hi), o), vld1q_s8(xq + 16));
}

static float dot_q4_1(int64_t n, const void *w, const void *x) {
    const blk_q4_1 *a = w;
    const blk_q8a1 *b = x;
    float s = 0;
    for (int64_t i = 0; i < n / QK; i++) {
        const int32_t si = q45_sum(a[i].qs, 0, 0, 0, b[i].qs);
        s += (float)si * (ul_fp16_to_fp32(a[i].d) * b[i].d) + ul_fp16_to_fp32(a[i].m) * b[i].s;
    }
    return s;
}

static float dot_q5_0(int64_t n, const void *w, const void *x) {
    const blk_q5_0 *a = w;
    const blk_q8a *b = x;
    float s = 0;
    for (int64_t i = 0; i < n / QK; i++) {
        const int32_t si = q45_sum(a[i].qs, 1, ul_q5_qh(a[i].qh), 16, b[i].qs);
        s += (float)si * (ul_fp16_to_fp32(a[i].d) * b[i].d);
    }
    return s;
}

static float dot_q5_1(int64_t n, const void *w, const void *x) {
    const blk_q5_1 *a = w;
    const blk_q8a1 *b = x;
    float s = 0;
    for (int64_t i = 0; i < n / QK; i++) {
        const int32_t si = q45_sum(a[i].qs, 1, ul_q5_qh(a[i].qh), 0, b[i].qs);
        s += (float)si * (ul_fp16_to_fp32(a[i].d) * b[i].d) + ul_fp16_to_fp32(a[i].m) * b[i].s;
    }
    return s;
}

/* 16 bytes of IQ4 indices against 32 activations: the table levels by TBL */
static inline int32_t iq4_sum(const uint8_t *qs, const int8_t *xq) {
    const int8x16_t tab = vld1q_s8(ul_iq4nl_values);
    const uint8x16_t q = vld1q_u8(qs);
    return dot16(vqtbl1q_s8(tab, vandq_u8(q, vdupq_n_u8(15))), vld1q_s8(xq)) +
           dot16(vqtbl1q_s8(tab, vshrq_n_u8(q, 4)), vld1q_s8(xq + 16));
}

static float dot_iq4_nl(int64_t n, const void *w, const void *x) {
    const blk_iq4_nl *a = w;
    const blk_q8a *b = x;
    float s = 0;
    for (int64_t i = 0; i < n / QK; i++)
        s += (float)iq4_sum(a[i].qs, b[i].qs) * (ul_fp16_to_fp32(a[i].d) * b[i].d);
    return s;
}

static float dot_iq4_xs(int64_t n, const void *w, const void *x) {
    const blk_iq4_xs *a = w;
    const blk_q8K *b = x;
    float s = 0;
    for (int64_t i = 0; i < n / QKK; i++) {
        int32_t sumi = 0;
        for (int ib = 0; ib < 8; ib++)
            sumi += ul_iq4xs_scale(&a[i], ib) * iq4_sum(a[i].qs + 16 * ib, b[i].qs + 32 * ib);
        s += ul_fp16_to_fp32(a[i].d) * b[i].d * (float)sumi;
    }
    return s;
}

#endif
