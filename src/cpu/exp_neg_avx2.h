/* e^x in f32 for x <= 0, 8 lanes (AVX2 + FMA): a degree-6 polynomial on the Cody-Waite
 * reduced argument, within 2 ulp, for x > -87.3 (where 2^n stays normal; callers zero the
 * rest). The softmaxes of the tiled attention path (kernels_avx2_attn.c) and of BERT's
 * attention (forward_bert.c) use it: llama.cpp's softmaxes there use its own vector
 * exponential too, not the library's bits. Its target attribute lets files built without
 * -mavx2 inline it into their AVX2 functions. */
#ifndef UL_CPU_EXP_NEG_AVX2_H
#define UL_CPU_EXP_NEG_AVX2_H

#include <immintrin.h>

static inline __attribute__((always_inline, target("avx2,fma"))) __m256 ul_exp_neg8(__m256 x) {
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145752f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.42860677e-6f), r);
    __m256 p = _mm256_set1_ps(1.0f / 720);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    const __m256i e =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

#endif
