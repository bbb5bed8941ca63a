/* expf of 4 floats at once on AArch64 NEON, bit-identical to glibc's expf on AArch64, and
 * SwiGLU built on it, for ops.c's AArch64 table (the per-token attention's online softmax,
 * the tiled softmax, the MoE router and SwiGLU, which the scalar path computes with the
 * library's expf). glibc's AArch64 expf is its generic e_expf.c with TOINT_INTRINSICS:
 * z = x * 32/ln2 rounded to double, k = round(z) with ties away from zero (frinta/fcvtas,
 * where x86's build adds a shift constant), r = z - k (exact), 2^(k/32) from the 32-entry
 * table of expf_tab.c, the cubic in r with its fused multiply-adds, one final rounding to
 * float. Arguments with |x| >= 80 (where glibc takes its special-case path), infinities and
 * NaNs go to expf itself. The multiply-adds here are explicit intrinsics, so ul_cpu's
 * -ffp-contract=off on AArch64 does not change them. */
#include <arm_neon.h>
#include <math.h>
#include <stdint.h>

#include "cpu/kernels.h"
#include "cpu/kernels_impl.h"

#define AI static inline __attribute__((always_inline))

/* 2 lanes in double: glibc's expf steps after the conversion to double */
AI float64x2_t exp2d(float64x2_t xd) {
    const float64x2_t z = vmulq_f64(vdupq_n_f64(0x1.71547652b82fep+5), xd);
    const float64x2_t kd = vrndaq_f64(z);
    const int64x2_t ki = vcvtaq_s64_f64(z);
    const float64x2_t r = vsubq_f64(z, kd);
    const uint64_t i0 = (uint64_t)vgetq_lane_s64(ki, 0), i1 = (uint64_t)vgetq_lane_s64(ki, 1);
    const uint64x2_t t =
        vcombine_u64(vcreate_u64(ul_expf_tab[i0 % 32]), vcreate_u64(ul_expf_tab[i1 % 32]));
    const float64x2_t s =
        vreinterpretq_f64_u64(vaddq_u64(t, vshlq_n_u64(vreinterpretq_u64_s64(ki), 47)));
    const float64x2_t zp =
        vfmaq_f64(vdupq_n_f64(0x1.ebfce50fac4f3p-13), vdupq_n_f64(0x1.c6af84b912394p-20), r);
    const float64x2_t r2 = vmulq_f64(r, r);
    float64x2_t y = vfmaq_f64(vdupq_n_f64(1.0), vdupq_n_f64(0x1.62e42ff0c52d6p-6), r);
    y = vfmaq_f64(y, zp, r2);
    return vmulq_f64(y, s);
}

/* expf of 4 lanes; lanes with |x| >= 80, infinities and NaNs are left to the caller
 * (their bits in the returned mask) */
AI float32x4_t exp4(float32x4_t v, uint32x4_t *big) {
    const float32x2_t a = vcvt_f32_f64(exp2d(vcvt_f64_f32(vget_low_f32(v))));
    const float32x2_t b = vcvt_f32_f64(exp2d(vcvt_high_f64_f32(v)));
    /* !(|x| < 80): true for NaN too */
    *big = vmvnq_u32(vcaltq_f32(v, vdupq_n_f32(80.0f)));
    return vcombine_f32(a, b);
}

/* y[i] = expf(x[i]) for i < n <= 4 */
static void expf4(const float *x, float *y, int n) {
    float in[4] = {0, 0, 0, 0}, out[4];
    for (int i = 0; i < n; i++) in[i] = x[i];
    uint32x4_t big;
    vst1q_f32(out, exp4(vld1q_f32(in), &big));
    uint32_t bm[4];
    vst1q_u32(bm, big);
    for (int i = 0; i < n; i++) y[i] = bm[i] ? expf(x[i]) : out[i];
}

void ul_expf8_neon(const float *x, float *y, int n) {
    if (n == 8) {
        uint32x4_t b0, b1;
        const float32x4_t e0 = exp4(vld1q_f32(x), &b0), e1 = exp4(vld1q_f32(x + 4), &b1);
        vst1q_f32(y, e0);
        vst1q_f32(y + 4, e1);
        if (vmaxvq_u32(vorrq_u32(b0, b1)))
            for (int i = 0; i < 8; i++)
                if (!(fabsf(x[i]) < 80.0f)) y[i] = expf(x[i]);
        return;
    }
    if (n > 4) {
        expf4(x, y, 4);
        expf4(x + 4, y + 4, n - 4);
    } else if (n > 0) {
        expf4(x, y, n);
    }
}

/* g[i] = g[i] / (1 + expf(-g[i])) * u[i], bit-identical to that C expression with glibc's
 * expf (division and product are single IEEE roundings either way). */
void ul_swiglu_neon(float *g, const float *u, size_t n) {
    size_t i = 0;
    const float32x4_t one = vdupq_n_f32(1.0f);
    for (; i + 4 <= n; i += 4) {
        const float32x4_t gv = vld1q_f32(g + i), a = vnegq_f32(gv);
        uint32x4_t big;
        float32x4_t e = exp4(a, &big);
        if (vmaxvq_u32(big)) {
            float ea[4], aa[4];
            vst1q_f32(ea, e);
            vst1q_f32(aa, a);
            for (int j = 0; j < 4; j++)
                if (!(fabsf(aa[j]) < 80.0f)) ea[j] = expf(aa[j]);
            e = vld1q_f32(ea);
        }
        vst1q_f32(g + i, vmulq_f32(vdivq_f32(gv, vaddq_f32(one, e)), vld1q_f32(u + i)));
    }
    for (; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}
