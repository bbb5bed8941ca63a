/* AArch64 with the dot-product extension (SDOT, Armv8.2 dotprod; compiled with +dotprod,
 * called only when HWCAP_ASIMDDP says so): Q8_0, Q4_0, Q4_K and Q6_K products (the
 * K-quants in kernels_neon_k.h), four int8 products summed into each int32 lane per
 * instruction. Integer sums exact, block floats added in the scalar order: the scalar
 * kernels' results. The types it leaves out come from the NEON table (ul_cpu_isa_parent). */
#include <arm_neon.h>

#include "cpu/kernels_neon.h"

#define F16(h) ul_fp16_to_fp32(h)

static inline int32_t dot16(int8x16_t a, int8x16_t b) {
    return vaddvq_s32(vdotq_s32(vdupq_n_s32(0), a, b));
}
#include "cpu/kernels_neon_k.h"
#include "cpu/kernels_neon_q.h"

static float dot_q8_0(int64_t n, const void *w, const void *x) {
    const blk_q8_0 *a = w;
    const blk_q8a *b = x;
    float s = 0;
    for (int64_t i = 0; i < n / QK; i++) {
        int32x4_t acc = vdotq_s32(vdupq_n_s32(0), vld1q_s8(a[i].qs), vld1q_s8(b[i].qs));
        acc = vdotq_s32(acc, vld1q_s8(a[i].qs + 16), vld1q_s8(b[i].qs + 16));
        s += (float)vaddvq_s32(acc) * (F16(a[i].d) * b[i].d);
    }
    return s;
}

/* unsigned nibbles against the activations, then 8 * sum(x) off at once: nsum is minus
 * the block's sum of quants (blk_q8a) */
static float dot_q4_0(int64_t n, const void *w, const void *x) {
    const blk_q4_0 *a = w;
    const blk_q8a *b = x;
    const uint8x16_t m4 = vdupq_n_u8(15);
    float s = 0;
    for (int64_t i = 0; i < n / QK; i++) {
        const uint8x16_t q = vld1q_u8(a[i].qs);
        const int8x16_t lo = vreinterpretq_s8_u8(vandq_u8(q, m4));
        const int8x16_t hi = vreinterpretq_s8_u8(vshrq_n_u8(q, 4));
        int32x4_t acc = vdotq_s32(vdupq_n_s32(0), lo, vld1q_s8(b[i].qs));
        acc = vdotq_s32(acc, hi, vld1q_s8(b[i].qs + 16));
        const int32_t si = vaddvq_s32(acc) + 8 * b[i].nsum;
        s += (float)si * (F16(a[i].d) * b[i].d);
    }
    return s;
}

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

const ul_cpu_kern_t ul_cpu_kern_dotprod = {
    .mm =
        {
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
