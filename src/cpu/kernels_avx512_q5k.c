/* Q5_K x Q8K on AVX-512 (BW, VNNI): the Q4_K tile of kernels_avx512.c with the fifth bit
 * of every element (qh, bit j of byte l for sub-block j) ORed into the nibbles as 16;
 * vpmaddubsw then vpdpwssd with the sub-block scales, the mins through the activation
 * sums per 16. For one to three tokens the AVX2 kernel is faster (as for Q4_K: its
 * per-super-block setup is cheaper) and is used instead. */
#include <immintrin.h>
#include <string.h>

#include "cpu/kernels_avx512_impl.h"
#include "cpu/kernels_impl.h"
#include "cpu/kernels_tile.h"

AI void tile_q5_K(const int NR, const int NT, int64_t n_cols, const uint8_t *w, size_t ws,
                  const uint8_t *x, size_t xs, float *y, int64_t ys) {
    const int64_t nb = n_cols / QKK;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m1 = _mm256_set1_epi8(1);
    __m512 acc[4][4];
    FOR_RT acc[r][t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m512i sc16[4];
        __m512i isum[4][4];
        __m256i qh[4]; /* shifted right by 2 after every chunk */
        _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {
            const blk_q5_K *q = (const blk_q5_K *)(w + (size_t)r * ws) + b;
            uint8_t sm[16];
            q4k_unpack_scales(q->scales, sm);
            sc16[r] =
                _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)sm)));
            qh[r] = _mm256_loadu_si256((const __m256i *)q->qh);
            /* minus dmin * sum_j m_j * bsum_j goes through the float accumulator */
            __m256i mins = _mm256_permutexvar_epi16(_mm256_loadu_si256((const __m256i *)k_dup_idx),
                                                    _mm256_cvtepu8_epi16(_mm_loadu_si64(sm + 8)));
            float dmin = ul_fp16_to_fp32(q->dmin);
            _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
                const blk_q8K *p = (const blk_q8K *)(x + (size_t)t * xs) + b;
                __m256i ms = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)p->bsums), mins);
                acc[r][t] = _mm512_fnmadd_ps(_mm512_castps256_ps512(_mm256_cvtepi32_ps(ms)),
                                             _mm512_set1_ps(dmin * p->d), acc[r][t]);
                isum[r][t] = _mm512_setzero_si512();
            }
        }
        for (int c = 0; c < 4; c++) {
            __m512i W[4], S[4];
            const __m512i idx = _mm512_loadu_si512(k_q4k_idx[c]);
            _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {
                const blk_q5_K *q = (const blk_q5_K *)(w + (size_t)r * ws) + b;
                __m256i v = _mm256_loadu_si256((const __m256i *)(q->qs + 32 * c));
                __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(qh[r], m1), 4);
                __m256i h1 =
                    _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh[r], 1), m1), 4);
                qh[r] = _mm256_srli_epi16(qh[r], 2);
                W[r] = join256(_mm256_or_si256(_mm256_and_si256(v, m4), h0),
                               _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), h1));
                S[r] = _mm512_permutexvar_epi16(idx, sc16[r]);
            }
            _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
                const blk_q8K *p = (const blk_q8K *)(x + (size_t)t * xs) + b;
                __m512i X = _mm512_loadu_si512(p->qs + 64 * c);
                _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) isum[r][t] =
                    _mm512_dpwssd_epi32(isum[r][t], _mm512_maddubs_epi16(W[r], X), S[r]);
            }
        }
        _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {
            const blk_q5_K *q = (const blk_q5_K *)(w + (size_t)r * ws) + b;
            float d = ul_fp16_to_fp32(q->d);
            _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
                const blk_q8K *p = (const blk_q8K *)(x + (size_t)t * xs) + b;
                acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[r][t]),
                                            _mm512_set1_ps(d * p->d), acc[r][t]);
            }
        }
    }
    FOR_RT y[t * ys + r] = _mm512_reduce_add_ps(acc[r][t]);
}
MM_DRIVER(q5_K, 2, 4)

void ul_cpu_mm_q5_K_avx512(int64_t n_cols, const uint8_t *w, size_t ws, int nr, const uint8_t *x,
                           size_t xs, int nt, float *y, int64_t ys) {
    if (nt < 4)
        ul_cpu_mm_q5_K_avx2(n_cols, w, ws, nr, x, xs, nt, y, ys);
    else
        mm_q5_K(n_cols, w, ws, nr, x, xs, nt, y, ys);
}
