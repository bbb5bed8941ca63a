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
            qh[r] = _mm256_loadu_si256((const __m256i *)q->qh);
            q45k_head(NT, q->scales, q->dmin, x, xs, b, &sc16[r], acc[r], isum[r]);
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
            kq_chunk(NR, NT, W, S, x, xs, b, c, isum);
        }
        _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {
            const blk_q5_K *q = (const blk_q5_K *)(w + (size_t)r * ws) + b;
            kq_fold(NT, ul_fp16_to_fp32(q->d), x, xs, b, isum[r], acc[r]);
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
