/* expf of 8 floats at once on AVX2 + FMA, bit-identical to glibc's expf: the algorithm of
 * kernels_avx512_expf.c (8-lane double there) in 4-lane double, the table read with a
 * gather. Used by the per-token attention's online softmax (llama.cpp calls the library's
 * expf there) and by SwiGLU, so both keep the scalar path's exact values. */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>

#include "cpu/kernels_impl.h"

#define AI static inline __attribute__((always_inline))

AI __m256d exp4(__m256d xd) {
    const __m256d invln2n = _mm256_set1_pd(0x1.71547652b82fep+5), shift = _mm256_set1_pd(0x1.8p+52);
    const __m256d kds = _mm256_fmadd_pd(invln2n, xd, shift);
    const __m256i ki = _mm256_castpd_si256(kds);
    const __m256d kd = _mm256_sub_pd(kds, shift);
    const __m256d r = _mm256_fmsub_pd(invln2n, xd, kd);
    const __m256i t = _mm256_i64gather_epi64((const long long *)ul_expf_tab,
                                             _mm256_and_si256(ki, _mm256_set1_epi64x(31)), 8);
    const __m256d s = _mm256_castsi256_pd(_mm256_add_epi64(t, _mm256_slli_epi64(ki, 47)));
    const __m256d z = _mm256_fmadd_pd(_mm256_set1_pd(0x1.c6af84b912394p-20), r,
                                      _mm256_set1_pd(0x1.ebfce50fac4f3p-13));
    const __m256d r2 = _mm256_mul_pd(r, r);
    __m256d y = _mm256_fmadd_pd(r, _mm256_set1_pd(0x1.62e42ff0c52d6p-6), _mm256_set1_pd(1.0));
    y = _mm256_fmadd_pd(z, r2, y);
    return _mm256_mul_pd(y, s);
}

AI __m256i lane_mask(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

void ul_expf8_avx2(const float *x, float *y, int n) {
    const __m256i m = lane_mask(n);
    const __m256 v = _mm256_maskload_ps(x, m);
    const __m128 a = _mm256_cvtpd_ps(exp4(_mm256_cvtps_pd(_mm256_castps256_ps128(v))));
    const __m128 b = _mm256_cvtpd_ps(exp4(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1))));
    _mm256_maskstore_ps(y, m, _mm256_set_m128(b, a));
    /* |x| >= 80, inf, NaN: the library's special cases */
    const __m256 absv = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
    unsigned big =
        (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(absv, _mm256_set1_ps(80.0f), _CMP_NLT_UQ)) &
        ((1u << n) - 1);
    while (big) {
        const int i = __builtin_ctz(big);
        y[i] = expf(x[i]);
        big &= big - 1;
    }
}

/* g[i] = g[i] / (1 + expf(-g[i])) * u[i], bit-identical to that C expression with glibc's
 * expf (as ul_swiglu_avx512). */
void ul_swiglu_avx2(float *g, const float *u, size_t n) {
    size_t i = 0;
    const __m256 one = _mm256_set1_ps(1.0f);
    for (; i + 8 <= n; i += 8) {
        float a[8], e[8];
        const __m256 gv = _mm256_loadu_ps(g + i);
        _mm256_storeu_ps(a, _mm256_sub_ps(_mm256_setzero_ps(), gv));
        ul_expf8_avx2(a, e, 8);
        const __m256 s = _mm256_div_ps(gv, _mm256_add_ps(one, _mm256_loadu_ps(e)));
        _mm256_storeu_ps(g + i, _mm256_mul_ps(s, _mm256_loadu_ps(u + i)));
    }
    for (; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}
