/* AVX2 element-wise pieces of the forward pass: RMSNorm and RoPE (both modes), with the
 * scalar code's results (forward.c, forward_arch.c):
 *  - RMSNorm sums the float squares in double, 8 at a time (only the order of that double
 *    sum differs, far below the float it becomes), then two float products per element;
 *  - RoPE keeps each product a separate rounding: the file's functions are compiled
 *    without FMA contraction (-ffp-contract=off), so x0*c - x1*s is the scalar's two
 *    products and one subtraction, bit for bit. */
#include <immintrin.h>
#include <math.h>

#include "cpu/kernels.h"

#define NOFMA __attribute__((optimize("fp-contract=off")))

void ul_rmsnorm_avx2(float *dst, const float *x, const float *w, int n, float eps) {
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i), p = _mm256_mul_ps(v, v);
        s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(p)));
        s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(p, 1)));
    }
    double lanes[4];
    _mm256_storeu_pd(lanes, _mm256_add_pd(s0, s1));
    double ss = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
    for (; i < n; i++) ss += (double)(x[i] * x[i]);
    const float scale = 1.0f / sqrtf((float)(ss / n) + eps);
    const __m256 sv = _mm256_set1_ps(scale);
    for (i = 0; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), sv),
                                                _mm256_loadu_ps(w + i)));
    for (; i < n; i++) dst[i] = (x[i] * scale) * w[i];
}

/* Adjacent pairs (x[i], x[i+1]) with cs = (cos, sin) pairs: [x0 c - x1 s, x0 s + x1 c]. */
NOFMA void ul_rope_norm_avx2(float *x, const float *cs, int n_rot) {
    int i = 0;
    for (; i + 8 <= n_rot; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i), t = _mm256_loadu_ps(cs + i);
        const __m256 a = _mm256_mul_ps(v, _mm256_moveldup_ps(t)); /* x0 c, x1 c */
        const __m256 b = _mm256_mul_ps(_mm256_permute_ps(v, 0xB1), _mm256_movehdup_ps(t));
        _mm256_storeu_ps(x + i, _mm256_addsub_ps(a, b)); /* x0 c - x1 s, x1 c + x0 s */
    }
    for (; i < n_rot; i += 2) {
        const float x0 = x[i], x1 = x[i + 1], c = cs[i], s = cs[i + 1];
        x[i] = x0 * c - x1 * s;
        x[i + 1] = x0 * s + x1 * c;
    }
}

/* NEOX pairs (x[i], x[i + n_rot/2]), cs = (cos, sin) of pair i at cs[2i], cs[2i + 1]. */
NOFMA void ul_rope_neox_avx2(float *x, const float *cs, int n_rot) {
    const int half = n_rot / 2;
    int i = 0;
    for (; i + 8 <= half; i += 8) {
        const __m256 t0 = _mm256_loadu_ps(cs + 2 * i), t1 = _mm256_loadu_ps(cs + 2 * i + 8);
        /* de-interleave: shuffle within 128-bit halves, then put the quarters in order */
        const __m256 c = _mm256_castpd_ps(
            _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(t0, t1, 0x88)), 0xD8));
        const __m256 s = _mm256_castpd_ps(
            _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(t0, t1, 0xDD)), 0xD8));
        const __m256 x0 = _mm256_loadu_ps(x + i), x1 = _mm256_loadu_ps(x + i + half);
        _mm256_storeu_ps(x + i, _mm256_sub_ps(_mm256_mul_ps(x0, c), _mm256_mul_ps(x1, s)));
        _mm256_storeu_ps(x + i + half, _mm256_add_ps(_mm256_mul_ps(x0, s), _mm256_mul_ps(x1, c)));
    }
    for (; i < half; i++) {
        const float x0 = x[i], x1 = x[i + half], c = cs[2 * i], s = cs[2 * i + 1];
        x[i] = x0 * c - x1 * s;
        x[i + half] = x0 * s + x1 * c;
    }
}
