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

/* ---- K-quants (Q4_K, Q5_K, Q6_K) x Q8K: one tile for the three ----
 * vpmaddubsw (unsigned weight bytes x signed activations -> s16 pairs) then vpdpwssd with
 * the sub-block scales, as in llama.cpp; Q4_K / Q5_K's mins and Q6_K's -32 offset go
 * through the activation sums per 16. Q5_K is Q4_K with the fifth bit of every element
 * (qh, bit j of byte l for sub-block j) ORed into the nibbles as 16. */
enum { KQ_Q4_K, KQ_Q5_K, KQ_Q6_K };

/* v repeated, for the index tables */
#define UL_R8(v) v, v, v, v, v, v, v, v
#define UL_R16(v) UL_R8(v), UL_R8(v)

/* word i of the chunk-c scale vector is the scale of the element pair 2i of that chunk */
static const uint16_t k_q4k_idx[4][32] = {
    {UL_R16(0), UL_R16(1)}, {UL_R16(2), UL_R16(3)}, {UL_R16(4), UL_R16(5)}, {UL_R16(6), UL_R16(7)}};
/* Q6_K's: word i of chunk c, the scale of its 16-group */
static const uint16_t k_q6k_idx[4][32] = {{UL_R8(0), UL_R8(1), UL_R8(2), UL_R8(3)},
                                          {UL_R8(4), UL_R8(5), UL_R8(6), UL_R8(7)},
                                          {UL_R8(8), UL_R8(9), UL_R8(10), UL_R8(11)},
                                          {UL_R8(12), UL_R8(13), UL_R8(14), UL_R8(15)}};
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

/* Q4_K / Q5_K: the sub-block scales widened to words in *sc16 and minus dmin * sum_j m_j *
 * bsum_j of every token through its float accumulator acc[t]; isum[t] zeroed. */
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

/* Q6_K: the signed sub-block scales as words in *sc16; isum[t] starts at the -32 offset,
 * -32 * sum_j sc_j * bsum_j, in its low 8 lanes. */
AI void q6k_head(const int NT, const blk_q6_K *q, const uint8_t *x, size_t xs, int64_t b,
                 __m512i *sc16, __m512i *isum) {
    __m256i s = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)q->scales));
    *sc16 = _mm512_castsi256_si512(s);
    _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
        const blk_q8K *p = (const blk_q8K *)(x + (size_t)t * xs) + b;
        __m256i corr = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)p->bsums), s);
        isum[t] = _mm512_castsi256_si512(
            _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(corr, 5)));
        isum[t] = _mm512_inserti64x4(isum[t], _mm256_setzero_si256(), 1);
    }
}

/* The head of a row's super-block blk (b of its row); Q5_K's fifth bits go to *qh. */
AI void kq_head(const int KIND, const int NT, const uint8_t *blk, const uint8_t *x, size_t xs,
                int64_t b, __m512i *sc16, __m256i *qh, __m512 *acc, __m512i *isum) {
    if (KIND == KQ_Q4_K) {
        const blk_q4_K *q = (const blk_q4_K *)blk;
        q45k_head(NT, q->scales, q->dmin, x, xs, b, sc16, acc, isum);
    } else if (KIND == KQ_Q5_K) {
        const blk_q5_K *q = (const blk_q5_K *)blk;
        *qh = _mm256_loadu_si256((const __m256i *)q->qh);
        q45k_head(NT, q->scales, q->dmin, x, xs, b, sc16, acc, isum);
    } else {
        q6k_head(NT, (const blk_q6_K *)blk, x, xs, b, sc16, isum);
    }
}

/* Chunk c (64 elements) of the super-block blk as unsigned bytes in activation order; Q5_K
 * takes its fifth bits from *qh and shifts them right by 2 for the next chunk. */
AI __m512i kq_weights(const int KIND, const uint8_t *blk, int c, __m256i *qh) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    if (KIND == KQ_Q6_K) {
        const blk_q6_K *q = (const blk_q6_K *)blk;
        const __m512i m4w = _mm512_set1_epi8(0x0F), m2 = _mm512_set1_epi8(0x03);
        const int h = c >> 1;
        __m512i ql = _mm512_loadu_si512(q->ql + 64 * h);
        __m256i qh6 = _mm256_loadu_si256((const __m256i *)(q->qh + 32 * h));
        __m512i hb;
        if (c & 1) {
            ql = _mm512_and_si512(_mm512_srli_epi16(ql, 4), m4w);
            hb = join256(_mm256_srli_epi16(qh6, 4), _mm256_srli_epi16(qh6, 6));
        } else {
            ql = _mm512_and_si512(ql, m4w);
            hb = join256(qh6, _mm256_srli_epi16(qh6, 2));
        }
        return _mm512_or_si512(ql, _mm512_slli_epi16(_mm512_and_si512(hb, m2), 4));
    }
    const uint8_t *qs = KIND == KQ_Q4_K ? ((const blk_q4_K *)blk)->qs : ((const blk_q5_K *)blk)->qs;
    __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
    __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    if (KIND == KQ_Q5_K) {
        const __m256i m1 = _mm256_set1_epi8(1);
        lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(*qh, m1), 4));
        hi = _mm256_or_si256(hi,
                             _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(*qh, 1), m1), 4));
        *qh = _mm256_srli_epi16(*qh, 2);
    }
    return join256(lo, hi);
}

AI size_t kq_blk_bytes(const int KIND) {
    return KIND == KQ_Q4_K   ? sizeof(blk_q4_K)
           : KIND == KQ_Q5_K ? sizeof(blk_q5_K)
                             : sizeof(blk_q6_K);
}

AI float kq_d(const int KIND, const uint8_t *blk) {
    return ul_fp16_to_fp32(KIND == KQ_Q4_K   ? ((const blk_q4_K *)blk)->d
                           : KIND == KQ_Q5_K ? ((const blk_q5_K *)blk)->d
                                             : ((const blk_q6_K *)blk)->d);
}

/* Weight rows r < NR x tokens t < NT of one kind, per super-block: the rows' heads, then
 * per 64-element chunk the rows' weight bytes and scales against each token's quants
 * (isum[r][t] += S[r] * pair sums), then isum into the float accumulators (d * dx). */
AI void tile_kq(const int NR, const int NT, int64_t n_cols, const uint8_t *w, size_t ws,
                const uint8_t *x, size_t xs, float *y, int64_t ys, const int KIND) {
    const int64_t nb = n_cols / QKK;
    const size_t bs = kq_blk_bytes(KIND);
    __m512 acc[4][4];
    FOR_RT acc[r][t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m512i sc16[4];
        __m512i isum[4][4];
        __m256i qh[4]; /* Q5_K only */
        _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++)
            kq_head(KIND, NT, w + (size_t)r * ws + (size_t)b * bs, x, xs, b, &sc16[r], &qh[r],
                    acc[r], isum[r]);
        for (int c = 0; c < 4; c++) {
            __m512i W[4], S[4];
            const __m512i idx = _mm512_loadu_si512(KIND == KQ_Q6_K ? k_q6k_idx[c] : k_q4k_idx[c]);
            _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {
                W[r] = kq_weights(KIND, w + (size_t)r * ws + (size_t)b * bs, c, &qh[r]);
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
            const float d = kq_d(KIND, w + (size_t)r * ws + (size_t)b * bs);
            _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
                const blk_q8K *p = (const blk_q8K *)(x + (size_t)t * xs) + b;
                acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[r][t]),
                                            _mm512_set1_ps(d * p->d), acc[r][t]);
            }
        }
    }
    FOR_RT y[t * ys + r] = _mm512_reduce_add_ps(acc[r][t]);
}

#endif
