/* Q4_1, Q5_0 and Q5_1 x Q8A on AVX2 (+FMA, F16C), the Q4_0 tile of kernels_avx2.c
 * generalised: the weights are unsigned (nibbles, plus the fifth bit from qh as 16 for the
 * Q5 types) for vpmaddubsw; Q5_0's -16 offset becomes -16 * sum(activation block) in the
 * accumulator's start (as Q4_0's -8), and the Q4_1 / Q5_1 min m adds m * s per block (s of
 * the Q8A1 activations, as llama.cpp's Q8_1), kept in a float beside the vector
 * accumulator. (AVX-512: kernels_avx512_q4_1_q5.c) */
#include <immintrin.h>

#include "cpu/kernels_avx2_impl.h"

/* byte j = 16 where bit j of the block's qh is set (llama.cpp's bytes_from_bits_32) */
AI __m256i fifth_bits(const uint8_t qh[4]) {
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                           0x0101010101010101, 0x0000000000000000);
    __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)ul_q5_qh(qh)), shuf);
    b = _mm256_or_si256(b, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
    return _mm256_and_si256(_mm256_cmpeq_epi8(b, _mm256_set1_epi64x(-1)), _mm256_set1_epi8(0x10));
}

AI void tile_lin(const int NR, const int NT, int64_t n_cols, const uint8_t *w, size_t ws,
                 const uint8_t *x, size_t xs, float *y, int64_t ys, const int KIND) {
    const int64_t nb = n_cols / QK;
    const size_t bs = lin_blk_bytes(KIND);
    const __m128i m4 = _mm_set1_epi8(0x0F);
    const __m256i one16 = _mm256_set1_epi16(1);
    __m256 acc[4][4];
    float macc[4][4] = {{0}};
    FOR_RT acc[r][t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m256i W[4];
        float dw[4], mw[4];
        _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {
            const uint8_t *blk = w + (size_t)r * ws + (size_t)b * bs, *qs;
            if (KIND == K_Q4_1) {
                const blk_q4_1 *q = (const blk_q4_1 *)blk;
                qs = q->qs, dw[r] = ul_fp16_to_fp32(q->d), mw[r] = ul_fp16_to_fp32(q->m);
            } else if (KIND == K_Q5_0) {
                const blk_q5_0 *q = (const blk_q5_0 *)blk;
                qs = q->qs, dw[r] = ul_fp16_to_fp32(q->d), mw[r] = 0;
            } else {
                const blk_q5_1 *q = (const blk_q5_1 *)blk;
                qs = q->qs, dw[r] = ul_fp16_to_fp32(q->d), mw[r] = ul_fp16_to_fp32(q->m);
            }
            __m128i v = _mm_loadu_si128((const __m128i *)qs);
            W[r] = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m4), _mm_and_si128(v, m4));
            if (KIND == K_Q5_0)
                W[r] = _mm256_or_si256(W[r], fifth_bits(((const blk_q5_0 *)blk)->qh));
            if (KIND == K_Q5_1)
                W[r] = _mm256_or_si256(W[r], fifth_bits(((const blk_q5_1 *)blk)->qh));
        }
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
            /* Q5_0 reads Q8A blocks, Q4_1 / Q5_1 Q8A1 ones */
            const blk_q8a *p = (const blk_q8a *)(x + (size_t)t * xs) + b;
            const blk_q8a1 *p1 = (const blk_q8a1 *)(x + (size_t)t * xs) + b;
            const float dx = KIND == K_Q5_0 ? p->d : p1->d;
            __m256i X = _mm256_loadu_si256((const __m256i *)(KIND == K_Q5_0 ? p->qs : p1->qs));
            /* Q5_0: -16 * sum over the block = -2 * sum on each of its 8 lanes */
            __m256i I = KIND == K_Q5_0 ? _mm256_set1_epi32(2 * p->nsum) : _mm256_setzero_si256();
            _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {
                __m256i s =
                    _mm256_add_epi32(I, _mm256_madd_epi16(_mm256_maddubs_epi16(W[r], X), one16));
                acc[r][t] =
                    _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dw[r] * dx), acc[r][t]);
                if (KIND != K_Q5_0) macc[r][t] += mw[r] * p1->s;
            }
        }
    }
    FOR_RT y[t * ys + r] = hsum8(acc[r][t]) + macc[r][t];
}

/* the entry points of kernels_impl.h */
MM_DRIVER_FN(void ul_cpu_mm_q4_1_avx2, tile_lin, 4, 2, K_Q4_1)
MM_DRIVER_FN(void ul_cpu_mm_q5_0_avx2, tile_lin, 4, 2, K_Q5_0)
MM_DRIVER_FN(void ul_cpu_mm_q5_1_avx2, tile_lin, 4, 2, K_Q5_1)
