/* AArch64 NEON (baseline ASIMD, no dot-product instructions): F32, F16, Q8_0, Q4_0, Q4_K
 * and Q6_K products (the K-quants in kernels_neon_k.h), and the activation converters every AArch64
 * table shares. The integer sums are exact and each block's float product is added in the scalar
 * kernels' order, so the quantised products give the scalar results; F32/F16 differ only by
 * summation order. */
#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "cpu/kernels_neon.h"

#define F16(h) ul_fp16_to_fp32(h)

static float dot_f32(int64_t n, const void *w, const void *x) {
    const float *a = w, *b = x;
    float32x4_t s0 = vdupq_n_f32(0), s1 = vdupq_n_f32(0);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
        s1 = vfmaq_f32(s1, vld1q_f32(a + i + 4), vld1q_f32(b + i + 4));
    }
    float s = vaddvq_f32(vaddq_f32(s0, s1));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

/* f16 weights widened with FCVTL (baseline AArch64), activations already f16-rounded f32 */
static float dot_f16(int64_t n, const void *w, const void *x) {
    const uint16_t *a = w;
    const float *b = x;
    float32x4_t s0 = vdupq_n_f32(0), s1 = vdupq_n_f32(0);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(a + i));
        s0 = vfmaq_f32(s0, vcvt_f32_f16(vget_low_f16(h)), vld1q_f32(b + i));
        s1 = vfmaq_f32(s1, vcvt_high_f32_f16(h), vld1q_f32(b + i + 4));
    }
    float s = vaddvq_f32(vaddq_f32(s0, s1));
    for (; i < n; i++) s += F16(a[i]) * b[i];
    return s;
}

/* bf16 weights and activations: the high halves of f32 (a 16-bit shift widens them) */
static float dot_bf16(int64_t n, const void *w, const void *x) {
    const uint16_t *a = w, *b = x;
    float32x4_t s0 = vdupq_n_f32(0);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        s0 = vfmaq_f32(s0, vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(a + i), 16)),
                       vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(b + i), 16)));
    float s = vaddvq_f32(s0);
    for (; i < n; i++) s += ul_bf16_to_fp32(a[i]) * ul_bf16_to_fp32(b[i]);
    return s;
}

/* sum of a[j] * b[j] over 32 int8 pairs: widening multiplies, pairwise accumulation
 * (each product fits int16, even -128 * -128) */
static inline int32_t dot32_s8(int8x16_t a0, int8x16_t a1, int8x16_t b0, int8x16_t b1) {
    int32x4_t s = vpaddlq_s16(vmull_s8(vget_low_s8(a0), vget_low_s8(b0)));
    s = vpadalq_s16(s, vmull_high_s8(a0, b0));
    s = vpadalq_s16(s, vmull_s8(vget_low_s8(a1), vget_low_s8(b1)));
    s = vpadalq_s16(s, vmull_high_s8(a1, b1));
    return vaddvq_s32(s);
}

static inline int32_t dot16(int8x16_t a, int8x16_t b) {
    return vaddvq_s32(
        vpadalq_s16(vpaddlq_s16(vmull_s8(vget_low_s8(a), vget_low_s8(b))), vmull_high_s8(a, b)));
}
#include "cpu/kernels_neon_k.h"
#include "cpu/kernels_neon_q.h"

static float dot_q8_0(int64_t n, const void *w, const void *x) {
    const blk_q8_0 *a = w;
    const blk_q8a *b = x;
    float s = 0;
    for (int64_t i = 0; i < n / QK; i++) {
        const int32_t si = dot32_s8(vld1q_s8(a[i].qs), vld1q_s8(a[i].qs + 16), vld1q_s8(b[i].qs),
                                    vld1q_s8(b[i].qs + 16));
        s += (float)si * (F16(a[i].d) * b[i].d);
    }
    return s;
}

/* element j in the low nibble of qs[j], element j + 16 in the high one; both minus 8 */
static float dot_q4_0(int64_t n, const void *w, const void *x) {
    const blk_q4_0 *a = w;
    const blk_q8a *b = x;
    const uint8x16_t m4 = vdupq_n_u8(15);
    const int8x16_t k8 = vdupq_n_s8(8);
    float s = 0;
    for (int64_t i = 0; i < n / QK; i++) {
        const uint8x16_t q = vld1q_u8(a[i].qs);
        const int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, m4)), k8);
        const int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), k8);
        const int32_t si = dot32_s8(lo, hi, vld1q_s8(b[i].qs), vld1q_s8(b[i].qs + 16));
        s += (float)si * (F16(a[i].d) * b[i].d);
    }
    return s;
}

UL_NEON_MM(mm_f32, dot_f32)
UL_NEON_MM(mm_f16, dot_f16)
UL_NEON_MM(mm_bf16, dot_bf16)
UL_NEON_MM(mm_q8_0, dot_q8_0)
UL_NEON_MM(mm_q4_0, dot_q4_0)
UL_NEON_MM(mm_q4_K, dot_q4_K)
UL_NEON_MM(mm_q6_K, dot_q6_K)
UL_NEON_MM(mm_q5_K, dot_q5_K)
UL_NEON_MM(mm_q4_1, dot_q4_1)
UL_NEON_MM(mm_q5_0, dot_q5_0)
UL_NEON_MM(mm_q5_1, dot_q5_1)
UL_NEON_MM(mm_iq4_nl, dot_iq4_nl)
UL_NEON_MM(mm_iq4_xs, dot_iq4_xs)

/* ---- activations: the scalar converters' exact bytes (quant.c) ---- */

void ul_neon_xq_f16r(const float *x, void *dst, int64_t n) {
    float *o = dst;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) /* FCVTN/FCVTL round to nearest even, as ul_fp32_to_fp16 */
        vst1q_f32(o + i, vcvt_f32_f16(vcvt_f16_f32(vld1q_f32(x + i))));
    for (; i < n; i++) o[i] = F16(ul_fp32_to_fp16(x[i]));
}

/* One 32-block as quant.c's quant_x_blk: amax (fmaxf semantics: FMAXNM), id = 127/amax,
 * d through f16, q = round-half-even(x * id) (FCVTNS); returns the sum of q. */
static inline int32_t q8_blk(const float *x, int8_t *qs, float *d, float *du) {
    float32x4_t v[8], m = vdupq_n_f32(0);
    for (int j = 0; j < 8; j++) {
        v[j] = vld1q_f32(x + 4 * j);
        m = vmaxnmq_f32(m, vabsq_f32(v[j]));
    }
    const float amax = vmaxnmvq_f32(m);
    float id = amax != 0 ? 127.f / amax : 0.0f;
    *du = amax / 127.f;
    *d = F16(ul_fp32_to_fp16(*du));
    if (*d == 0) id = 0;
    int32x4_t sum = vdupq_n_s32(0);
    for (int j = 0; j < 8; j += 2) {
        const int32x4_t q0 = vcvtnq_s32_f32(vmulq_n_f32(v[j], id));
        const int32x4_t q1 = vcvtnq_s32_f32(vmulq_n_f32(v[j + 1], id));
        sum = vaddq_s32(sum, vaddq_s32(q0, q1));
        const int16x8_t q16 = vcombine_s16(vmovn_s32(q0), vmovn_s32(q1));
        vst1_s8(qs + 4 * j, vmovn_s16(q16));
    }
    return vaddvq_s32(sum);
}

void ul_neon_xq_q8a(const float *x, void *dst, int64_t n) {
    blk_q8a *y = dst;
    float du;
    for (int64_t i = 0; i < n / QK; i++, x += QK) y[i].nsum = -q8_blk(x, y[i].qs, &y[i].d, &du);
}

void ul_neon_xq_q8a1(const float *x, void *dst, int64_t n) {
    blk_q8a1 *y = dst;
    float du;
    for (int64_t i = 0; i < n / QK; i++, x += QK) {
        const int32_t s = q8_blk(x, y[i].qs, &y[i].d, &du);
        y[i].s = F16(ul_fp32_to_fp16((float)s * du));
    }
}

/* quant.c's quant_x_q8k: the scale from the signed value of largest magnitude (the first
 * such), iscale = -127 / max, q = min(127, round-half-even(iscale * x)), sums per 16 */
void ul_neon_xq_q8k(const float *x, void *dst, int64_t n) {
    blk_q8K *y = dst;
    for (int64_t i = 0; i < n / QKK; i++, x += QKK) {
        float32x4_t m = vdupq_n_f32(0);
        for (int j = 0; j < QKK; j += 4) m = vmaxq_f32(m, vabsq_f32(vld1q_f32(x + j)));
        const float amax = vmaxvq_f32(m);
        int jm = 0;
        while (jm < QKK - 1 && !(fabsf(x[jm]) == amax)) jm++;
        const float iscale = amax == 0 ? 0 : -127.f / x[jm];
        if (amax == 0 || isinf(iscale)) { /* zero or denormal max: the block contributes 0 */
            memset(&y[i], 0, sizeof(y[i]));
            continue;
        }
        const int32x4_t k127 = vdupq_n_s32(127);
        for (int j = 0; j < QKK; j += 16) {
            int32x4_t q[4];
            for (int k = 0; k < 4; k++)
                q[k] =
                    vminq_s32(vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + j + 4 * k), iscale)), k127);
            const int16x8_t lo = vcombine_s16(vmovn_s32(q[0]), vmovn_s32(q[1]));
            const int16x8_t hi = vcombine_s16(vmovn_s32(q[2]), vmovn_s32(q[3]));
            const int8x16_t q8 = vcombine_s8(vmovn_s16(lo), vmovn_s16(hi));
            vst1q_s8(y[i].qs + j, q8);
            y[i].bsums[j / 16] = vaddlvq_s8(q8);
        }
        y[i].d = 1 / iscale;
    }
}

const ul_cpu_kern_t ul_cpu_kern_neon = {
    .mm =
        {
            [UL_TYPE_F32] = mm_f32,
            [UL_TYPE_F16] = mm_f16,
            [UL_TYPE_BF16] = mm_bf16,
            [UL_TYPE_Q8_0] = mm_q8_0,
            [UL_TYPE_Q4_0] = mm_q4_0,
            [UL_TYPE_Q4_K] = mm_q4_K,
            [UL_TYPE_Q6_K] = mm_q6_K,
            [UL_TYPE_Q5_K] = mm_q5_K,
            [UL_TYPE_Q4_1] = mm_q4_1,
            [UL_TYPE_Q5_0] = mm_q5_0,
            [UL_TYPE_Q5_1] = mm_q5_1,
            [UL_TYPE_IQ4_NL] = mm_iq4_nl,
            [UL_TYPE_IQ4_XS] = mm_iq4_xs,
        },
    .xq =
        {
            [XF_F16R] = ul_neon_xq_f16r,
            [XF_Q8A] = ul_neon_xq_q8a,
            [XF_Q8A1] = ul_neon_xq_q8a1,
            [XF_Q8K] = ul_neon_xq_q8k,
        },
};
