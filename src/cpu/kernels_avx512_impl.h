/* Private to the AVX-512 kernel files (built with the AVX-512 flags, cpu.cmake): the small
 * always-inline helpers and index tables several of them use. */
#ifndef UL_CPU_KERNELS_AVX512_IMPL_H
#define UL_CPU_KERNELS_AVX512_IMPL_H

#include <immintrin.h>
#include <string.h>

#include "cpu/kernels_impl.h"
#include "cpu/kernels_tile.h"

AI __m512i join256(__m256i a, __m256i b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
}
AI __m512 halves_to_ps(uint16_t a, uint16_t b) { /* [a x8, b x8] */
    return _mm512_cvtph_ps(_mm256_set_m128i(_mm_set1_epi16((short)b), _mm_set1_epi16((short)a)));
}

/* ---- Q4_K / Q5_K super-blocks ---- */

/* v repeated, for the index tables */
#define UL_R8(v) v, v, v, v, v, v, v, v
#define UL_R16(v) UL_R8(v), UL_R8(v)

/* word i of the chunk-c scale vector is the scale of the element pair 2i of that chunk */
static const uint16_t k_q4k_idx[4][32] = {
    {UL_R16(0), UL_R16(1)}, {UL_R16(2), UL_R16(3)}, {UL_R16(4), UL_R16(5)}, {UL_R16(6), UL_R16(7)}};
static const uint16_t k_dup_idx[16] = {0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7};

/* scales (8 bytes) then mins (8 bytes) from the packed 12 (llama.cpp's utmp shuffle) */
AI void q4k_unpack_scales(const uint8_t *s12, uint8_t out[16]) {
    uint32_t u[4];
    memcpy(u, s12, 12);
    const uint32_t km1 = 0x3f3f3f3f, km2 = 0x0f0f0f0f, km3 = 0x03030303;
    u[3] = ((u[2] >> 4) & km2) | (((u[1] >> 6) & km3) << 4);
    const uint32_t aux = u[1] & km1;
    u[1] = (u[2] & km2) | (((u[0] >> 6) & km3) << 4);
    u[2] = aux;
    u[0] &= km1;
    memcpy(out, u, 16);
}

/* The head of a Q4_K / Q5_K row's super-block b: its sub-block scales widened to words in
 * *sc16 (the chunks' vpdpwssd operand), minus dmin * sum_j m_j * bsum_j of every token
 * through its float accumulator acc[t] (the mins go through the activation sums per 16),
 * and the integer sums isum[t] zeroed. */
AI void q45k_head(const int NT, const uint8_t *scales, uint16_t dmin16, const uint8_t *x, size_t xs,
                  int64_t b, __m512i *sc16, __m512 *acc, __m512i *isum) {
    uint8_t sm[16];
    q4k_unpack_scales(scales, sm);
    *sc16 = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)sm)));
    __m256i mins = _mm256_permutexvar_epi16(_mm256_loadu_si256((const __m256i *)k_dup_idx),
                                            _mm256_cvtepu8_epi16(_mm_loadu_si64(sm + 8)));
    float dmin = ul_fp16_to_fp32(dmin16);
    _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
        const blk_q8K *p = (const blk_q8K *)(x + (size_t)t * xs) + b;
        __m256i ms = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)p->bsums), mins);
        acc[t] = _mm512_fnmadd_ps(_mm512_castps256_ps512(_mm256_cvtepi32_ps(ms)),
                                  _mm512_set1_ps(dmin * p->d), acc[t]);
        isum[t] = _mm512_setzero_si512();
    }
}

/* ---- K-quant tiles (Q4_K, Q5_K, Q6_K x Q8K) ---- */

/* Chunk c (64 elements) of super-block b: isum[r][t] += the sub-block scales S[r] times the
 * pair sums of the unsigned weight bytes W[r] by token t's quants (vpmaddubsw, vpdpwssd). */
AI void kq_chunk(const int NR, const int NT, const __m512i *W, const __m512i *S, const uint8_t *x,
                 size_t xs, int64_t b, int c, __m512i isum[][4]) {
    _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
        const blk_q8K *p = (const blk_q8K *)(x + (size_t)t * xs) + b;
        __m512i X = _mm512_loadu_si512(p->qs + 64 * c);
        _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) isum[r][t] =
            _mm512_dpwssd_epi32(isum[r][t], _mm512_maddubs_epi16(W[r], X), S[r]);
    }
}

/* The tail of one row's super-block b: acc[t] += d * token t's d * isum[t]. */
AI void kq_fold(const int NT, float d, const uint8_t *x, size_t xs, int64_t b, const __m512i *isum,
                __m512 *acc) {
    _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
        const blk_q8K *p = (const blk_q8K *)(x + (size_t)t * xs) + b;
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_set1_ps(d * p->d), acc[t]);
    }
}

#endif
