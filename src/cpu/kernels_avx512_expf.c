/* expf of 16 floats at once, bit-identical to glibc's expf (2.27 and later, the FMA
 * variant this CPU runs): the attention's online softmax takes an exponential per
 * (key, head), and llama.cpp's flash-attention, whose roundings the golden tests follow,
 * calls the C library's expf there. Same algorithm in 8-lane double precision: x * 32/ln2
 * split into k + r, 2^(k/32) from a 32-entry table, a cubic in r, the same FMA
 * contractions and the same final rounding to float. Arguments with |x| >= 80 (where
 * glibc takes its special-case path), infinities and NaNs go to expf itself. */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>

#include "cpu/kernels_impl.h"

static inline __m512d exp8(__m512d xd, __m512i t0, __m512i t1, __m512i t2, __m512i t3) {
    const __m512d invln2n = _mm512_set1_pd(0x1.71547652b82fep+5), shift = _mm512_set1_pd(0x1.8p+52);
    __m512d kds = _mm512_fmadd_pd(invln2n, xd, shift);
    __m512i ki = _mm512_castpd_si512(kds);
    __m512d kd = _mm512_sub_pd(kds, shift);
    __m512d r = _mm512_fmsub_pd(invln2n, xd, kd);
    __m512i lo = _mm512_permutex2var_epi64(t0, ki, t1), hi = _mm512_permutex2var_epi64(t2, ki, t3);
    __mmask8 upper = _mm512_test_epi64_mask(ki, _mm512_set1_epi64(16));
    __m512i t = _mm512_mask_blend_epi64(upper, lo, hi);
    __m512d s = _mm512_castsi512_pd(_mm512_add_epi64(t, _mm512_slli_epi64(ki, 47)));
    __m512d z = _mm512_fmadd_pd(_mm512_set1_pd(0x1.c6af84b912394p-20), r,
                                _mm512_set1_pd(0x1.ebfce50fac4f3p-13));
    __m512d r2 = _mm512_mul_pd(r, r);
    __m512d y = _mm512_fmadd_pd(r, _mm512_set1_pd(0x1.62e42ff0c52d6p-6), _mm512_set1_pd(1.0));
    y = _mm512_fmadd_pd(z, r2, y);
    return _mm512_mul_pd(y, s);
}

void ul_expf16_avx512(const float *x, float *y, int n) {
    const __mmask16 m = (__mmask16)((1u << n) - 1);
    const __m512i t0 = _mm512_loadu_si512(ul_expf_tab), t1 = _mm512_loadu_si512(ul_expf_tab + 8),
                  t2 = _mm512_loadu_si512(ul_expf_tab + 16),
                  t3 = _mm512_loadu_si512(ul_expf_tab + 24);
    __m512 v = _mm512_maskz_loadu_ps(m, x);
    __m256 a = _mm512_castps512_ps256(v);
    __m256 b = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    __m256 ya = _mm512_cvtpd_ps(exp8(_mm512_cvtps_pd(a), t0, t1, t2, t3));
    __m256 yb = _mm512_cvtpd_ps(exp8(_mm512_cvtps_pd(b), t0, t1, t2, t3));
    _mm512_mask_storeu_ps(y, m, _mm512_insertf32x8(_mm512_castps256_ps512(ya), yb, 1));
    /* |x| >= 80, inf, NaN: the library's special cases */
    __mmask16 big = _mm512_cmp_ps_mask(_mm512_abs_ps(v), _mm512_set1_ps(80.0f), _CMP_NLT_UQ) & m;
    while (big) {
        int i = __builtin_ctz(big);
        y[i] = expf(x[i]);
        big &= (__mmask16)(big - 1);
    }
}

/* SwiGLU of a step's FFN rows: g[i] = g[i] / (1 + expf(-g[i])) * u[i], bit-identical to
 * that expression in C with glibc's expf (division and product are single IEEE roundings
 * either way), 16 lanes at a time: a batched step has n_ff x tokens of them, and one
 * scalar expf per element cost more than the attention of a short-context decode step. */
void ul_swiglu_avx512(float *g, const float *u, size_t n) {
    size_t i = 0;
    const __m512 one = _mm512_set1_ps(1.0f);
    for (; i + 16 <= n; i += 16) {
        float a[16], e[16];
        const __m512 gv = _mm512_loadu_ps(g + i);
        _mm512_storeu_ps(a, _mm512_sub_ps(_mm512_setzero_ps(), gv));
        ul_expf16_avx512(a, e, 16);
        const __m512 s = _mm512_div_ps(gv, _mm512_add_ps(one, _mm512_loadu_ps(e)));
        _mm512_storeu_ps(g + i, _mm512_mul_ps(s, _mm512_loadu_ps(u + i)));
    }
    for (; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}
