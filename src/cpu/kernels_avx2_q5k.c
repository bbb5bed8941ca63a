/* Q5_K x Q8K on AVX2 (+FMA, F16C): the Q4_K kernel of kernels_avx2.c with the fifth bit
 * of every element (qh, bit j of byte l for sub-block j) ORed into the nibbles as 16, so
 * the unsigned operand of vpmaddubsw is 0..31 (pairs of 31 * 127 stay inside int16).
 * Also used by the AVX-512 path for one to three tokens, as Q4_K's is. */
#include <immintrin.h>

#include "cpu/kernels_avx2_impl.h"

AI void tile_q5_K(const int NR, const int NT, int64_t n_cols, const uint8_t *w, size_t ws,
                  const uint8_t *x, size_t xs, float *y, int64_t ys) {
    const int64_t nb = n_cols / QKK;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m1 = _mm256_set1_epi8(1);
    float acc[4][4] = {{0}};
    for (int64_t b = 0; b < nb; b++) {
        _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {
            const blk_q5_K *q = (const blk_q5_K *)(w + (size_t)r * ws) + b;
            uint8_t sc[8], mn[8];
            for (int j = 0; j < 8; j++) ul_q4k_scale_min(j, q->scales, &sc[j], &mn[j]);
            __m256i isum[4];
            _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) isum[t] = _mm256_setzero_si256();
            __m256i qh = _mm256_loadu_si256((const __m256i *)q->qh); /* shifted 2 per chunk */
            for (int c = 0; c < 4; c++) {
                __m256i v = _mm256_loadu_si256((const __m256i *)(q->qs + 32 * c));
                __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(qh, m1), 4);
                __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 1), m1), 4);
                qh = _mm256_srli_epi16(qh, 2);
                __m256i lo = _mm256_or_si256(_mm256_and_si256(v, m4), h0);
                __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), h1);
                q45k_chunk(NT, lo, hi, sc, c, x, xs, b, isum);
            }
            q45k_fold(NT, q->d, q->dmin, mn, x, xs, b, isum, acc[r]);
        }
    }
    FOR_RT y[t * ys + r] = acc[r][t];
}
MM_DRIVER(q5_K, 1, 4)

void ul_cpu_mm_q5_K_avx2(int64_t n_cols, const uint8_t *w, size_t ws, int nr, const uint8_t *x,
                         size_t xs, int nt, float *y, int64_t ys) {
    mm_q5_K(n_cols, w, ws, nr, x, xs, nt, y, ys);
}
