/* Private to the AVX2 kernel files (built with -mavx2 -mfma -mf16c, cpu.cmake): the small
 * always-inline helpers several of them use. (AVX-512: kernels_avx512_impl.h) */
#ifndef UL_CPU_KERNELS_AVX2_IMPL_H
#define UL_CPU_KERNELS_AVX2_IMPL_H

#include <immintrin.h>

#include "cpu/kernels_impl.h"
#include "cpu/kernels_tile.h"

AI float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* ---- Q4_K / Q5_K x Q8K, one weight row at a time ---- */

/* Chunk c (64 elements: the low nibbles lo, then the high ones hi, as unsigned bytes) of
 * super-block b: isum[t] += the pair sums by token t's quants times the chunk's two
 * sub-block scales sc[2c], sc[2c + 1]. */
AI void q45k_chunk(const int NT, __m256i lo, __m256i hi, const uint8_t sc[8], int c,
                   const uint8_t *x, size_t xs, int64_t b, __m256i *isum) {
    __m256i s0 = _mm256_set1_epi16(sc[2 * c]), s1 = _mm256_set1_epi16(sc[2 * c + 1]);
    _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
        const blk_q8K *p = (const blk_q8K *)(x + (size_t)t * xs) + b;
        __m256i x0 = _mm256_loadu_si256((const __m256i *)(p->qs + 64 * c));
        __m256i x1 = _mm256_loadu_si256((const __m256i *)(p->qs + 64 * c + 32));
        isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(lo, x0), s0));
        isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(hi, x1), s1));
    }
}

/* The tail of a row's super-block b: acc[t] += token t's d * (d * isum[t] - dmin *
 * sum_j mn[j] * bsum_j), the mins through the activation sums per 32. */
AI void q45k_fold(const int NT, uint16_t d16, uint16_t dmin16, const uint8_t mn[8],
                  const uint8_t *x, size_t xs, int64_t b, const __m256i *isum, float *acc) {
    float d = ul_fp16_to_fp32(d16), dmin = ul_fp16_to_fp32(dmin16);
    _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
        const blk_q8K *p = (const blk_q8K *)(x + (size_t)t * xs) + b;
        int32_t summ = 0;
        for (int j = 0; j < 8; j++) summ += mn[j] * (p->bsums[2 * j] + p->bsums[2 * j + 1]);
        acc[t] += p->d * (d * hsum8(_mm256_cvtepi32_ps(isum[t])) - dmin * (float)summ);
    }
}

#endif
