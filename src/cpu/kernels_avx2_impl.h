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

AI float hmax8(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

/* The largest of the n floats at p (n a multiple of 8) */
AI float max_row8(const float *p, int n) {
    __m256 m = _mm256_loadu_ps(p);
    for (int i = 8; i < n; i += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(p + i));
    return hmax8(m);
}

/* ---- Q4_K / Q5_K x Q8K: one row at a time, tokens tiled ----
 * Q5_K is Q4_K with the fifth bit of every element (qh, bit j of byte l for sub-block j)
 * ORed into the nibbles as 16, so the unsigned operand of vpmaddubsw is 0..31 (pairs of
 * 31 * 127 stay inside int16); vpmaddwd against the sub-block scales. */
AI void tile_q45_K(const int NR, const int NT, int64_t n_cols, const uint8_t *w, size_t ws,
                   const uint8_t *x, size_t xs, float *y, int64_t ys, const int Q5) {
    const int64_t nb = n_cols / QKK;
    const size_t bs = Q5 ? sizeof(blk_q5_K) : sizeof(blk_q4_K);
    const __m256i m4 = _mm256_set1_epi8(0x0F), m1 = _mm256_set1_epi8(1);
    float acc[4][4] = {{0}};
    for (int64_t b = 0; b < nb; b++) {
        _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {
            const uint8_t *blk = w + (size_t)r * ws + (size_t)b * bs;
            const blk_q4_K *q4 = (const blk_q4_K *)blk;
            const blk_q5_K *q5 = (const blk_q5_K *)blk;
            const uint8_t *qs = Q5 ? q5->qs : q4->qs;
            uint8_t sc[8], mn[8];
            for (int j = 0; j < 8; j++)
                ul_q4k_scale_min(j, Q5 ? q5->scales : q4->scales, &sc[j], &mn[j]);
            __m256i isum[4];
            _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) isum[t] = _mm256_setzero_si256();
            /* Q5_K: shifted right by 2 per chunk */
            __m256i qh = Q5 ? _mm256_loadu_si256((const __m256i *)q5->qh) : _mm256_setzero_si256();
            for (int c = 0; c < 4; c++) {
                __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
                __m256i lo = _mm256_and_si256(v, m4),
                        hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                if (Q5) {
                    lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(qh, m1), 4));
                    hi = _mm256_or_si256(
                        hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 1), m1), 4));
                    qh = _mm256_srli_epi16(qh, 2);
                }
                __m256i s0 = _mm256_set1_epi16(sc[2 * c]), s1 = _mm256_set1_epi16(sc[2 * c + 1]);
                _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
                    const blk_q8K *p = (const blk_q8K *)(x + (size_t)t * xs) + b;
                    __m256i x0 = _mm256_loadu_si256((const __m256i *)(p->qs + 64 * c));
                    __m256i x1 = _mm256_loadu_si256((const __m256i *)(p->qs + 64 * c + 32));
                    isum[t] = _mm256_add_epi32(isum[t],
                                               _mm256_madd_epi16(_mm256_maddubs_epi16(lo, x0), s0));
                    isum[t] = _mm256_add_epi32(isum[t],
                                               _mm256_madd_epi16(_mm256_maddubs_epi16(hi, x1), s1));
                }
            }
            /* the mins through the activation sums per 32 */
            float d = ul_fp16_to_fp32(Q5 ? q5->d : q4->d);
            float dmin = ul_fp16_to_fp32(Q5 ? q5->dmin : q4->dmin);
            _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
                const blk_q8K *p = (const blk_q8K *)(x + (size_t)t * xs) + b;
                int32_t summ = 0;
                for (int j = 0; j < 8; j++) summ += mn[j] * (p->bsums[2 * j] + p->bsums[2 * j + 1]);
                acc[r][t] += p->d * (d * hsum8(_mm256_cvtepi32_ps(isum[t])) - dmin * (float)summ);
            }
        }
    }
    FOR_RT y[t * ys + r] = acc[r][t];
}

#endif
