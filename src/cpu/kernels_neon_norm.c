/* RMSNorm, RoPE and the f16 roundings of the KV cache on AArch64 NEON, for ops.c's AArch64
 * table. RoPE and the f16 conversions give the scalar bits (separate multiplies and adds:
 * ul_cpu is compiled with -ffp-contract=off on AArch64, so neither side fuses); RMSNorm's
 * double sum of squares is taken in four lanes, within one ulp of the scalar order. */
#include <arm_neon.h>
#include <math.h>

#include "cpu/kernels.h"

void ul_rmsnorm_neon(float *dst, const float *x, const float *w, int n, float eps) {
    float64x2_t s0 = vdupq_n_f64(0), s1 = vdupq_n_f64(0);
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t v = vld1q_f32(x + i), sq = vmulq_f32(v, v); /* f32 squares, as scalar */
        s0 = vaddq_f64(s0, vcvt_f64_f32(vget_low_f32(sq)));
        s1 = vaddq_f64(s1, vcvt_high_f64_f32(sq));
    }
    double ss = vaddvq_f64(vaddq_f64(s0, s1));
    for (; i < n; i++) ss += (double)(x[i] * x[i]);
    const float scale = 1.0f / sqrtf((float)(ss / n) + eps);
    const float32x4_t sv = vdupq_n_f32(scale);
    for (i = 0; i + 4 <= n; i += 4)
        vst1q_f32(dst + i, vmulq_f32(vmulq_f32(vld1q_f32(x + i), sv), vld1q_f32(w + i)));
    for (; i < n; i++) dst[i] = (x[i] * scale) * w[i];
}

/* x0' = x0 c - x1 s, x1' = x0 s + x1 c on (x0, x1) pairs and (c, s) from the cache */
static inline void rot(float32x4_t *x0, float32x4_t *x1, float32x4x2_t cs) {
    const float32x4_t a = *x0, b = *x1;
    *x0 = vsubq_f32(vmulq_f32(a, cs.val[0]), vmulq_f32(b, cs.val[1]));
    *x1 = vaddq_f32(vmulq_f32(a, cs.val[1]), vmulq_f32(b, cs.val[0]));
}

void ul_rope_norm_neon(float *x, const float *cs, int n_rot) {
    int i = 0;
    for (; i + 8 <= n_rot; i += 8) { /* adjacent pairs: de-interleaved by LD2 */
        float32x4x2_t v = vld2q_f32(x + i);
        rot(&v.val[0], &v.val[1], vld2q_f32(cs + i));
        vst2q_f32(x + i, v);
    }
    for (; i < n_rot; i += 2) {
        const float x0 = x[i], x1 = x[i + 1], c = cs[i], s = cs[i + 1];
        x[i] = x0 * c - x1 * s;
        x[i + 1] = x0 * s + x1 * c;
    }
}

void ul_rope_neox_neon(float *x, const float *cs, int n_rot) {
    const int half = n_rot / 2;
    int i = 0;
    for (; i + 4 <= half; i += 4) { /* pairs (i, i + half) */
        float32x4_t a = vld1q_f32(x + i), b = vld1q_f32(x + i + half);
        rot(&a, &b, vld2q_f32(cs + 2 * i));
        vst1q_f32(x + i, a);
        vst1q_f32(x + i + half, b);
    }
    for (; i < half; i++) {
        const float x0 = x[i], x1 = x[i + half], c = cs[2 * i], s = cs[2 * i + 1];
        x[i] = x0 * c - x1 * s;
        x[i + half] = x0 * s + x1 * c;
    }
}

/* FCVTN / FCVTL: round to nearest even, as ul_fp32_to_fp16 */
void ul_round_f16_neon(float *dst, const float *src, int n) {
    int i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(dst + i, vcvt_f32_f16(vcvt_f16_f32(vld1q_f32(src + i))));
    for (; i < n; i++) dst[i] = ul_fp16_to_fp32(ul_fp32_to_fp16(src[i]));
}

void ul_to_f16_neon(uint16_t *dst, size_t stride, const float *src, int n) {
    int i = 0;
    if (stride == 1) /* a V row; K columns (stride > 1) take the scalar loop */
        for (; i + 4 <= n; i += 4)
            vst1_u16(dst + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(src + i))));
    for (; i < n; i++) dst[(size_t)i * stride] = ul_fp32_to_fp16(src[i]);
}
