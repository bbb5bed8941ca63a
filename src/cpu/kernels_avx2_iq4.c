/* IQ4_NL x Q8A and IQ4_XS x Q8K on AVX2 (+FMA, F16C). The nibbles index the 16-level
 * table with one vpshufb; the levels are signed, so the products take llama.cpp's sign
 * trick: vpmaddubsw(|w|, x * sign(w)), exact since |w|, |x| <= 127 keep each pair sum
 * within int16. IQ4_NL then scales per 32-block in float (like Q4_0); IQ4_XS multiplies
 * the pair sums by the signed 6-bit sub-block scales in integers (vpmaddwd) and converts
 * once per super-block. */
#include <immintrin.h>

#include "cpu/kernels_avx2_impl.h"

/* 16 bytes of nibbles as the 32 signed levels in element order [lo x16, hi x16] */
AI __m256i levels32(const uint8_t *qs, __m256i table) {
    const __m128i m4 = _mm_set1_epi8(0x0F);
    __m128i v = _mm_loadu_si128((const __m128i *)qs);
    __m256i n = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m4), _mm_and_si128(v, m4));
    return _mm256_shuffle_epi8(table, n);
}

/* 16 int16 pair sums of w * x for signed bytes w, x in [-127, 127] */
AI __m256i dot_pairs(__m256i w, __m256i x) {
    return _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
}

AI __m256i load_table(void) {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)ul_iq4nl_values));
}

AI void tile_iq4_nl(const int NR, const int NT, int64_t n_cols, const uint8_t *w, size_t ws,
                    const uint8_t *x, size_t xs, float *y, int64_t ys) {
    const int64_t nb = n_cols / QK;
    const __m256i table = load_table(), one16 = _mm256_set1_epi16(1);
    __m256 acc[4][4];
    FOR_RT acc[r][t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m256i W[4];
        float dw[4];
        _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {
            const blk_iq4_nl *q = (const blk_iq4_nl *)(w + (size_t)r * ws) + b;
            W[r] = levels32(q->qs, table);
            dw[r] = ul_fp16_to_fp32(q->d);
        }
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
            const blk_q8a *p = (const blk_q8a *)(x + (size_t)t * xs) + b;
            __m256i X = _mm256_loadu_si256((const __m256i *)p->qs);
            _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {
                __m256i s = _mm256_madd_epi16(dot_pairs(W[r], X), one16);
                acc[r][t] =
                    _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dw[r] * p->d), acc[r][t]);
            }
        }
    }
    FOR_RT y[t * ys + r] = hsum8(acc[r][t]);
}
MM_DRIVER_FN(void ul_cpu_mm_iq4_nl_avx2, tile_iq4_nl, 4, 2)

AI void tile_iq4_xs(const int NR, const int NT, int64_t n_cols, const uint8_t *w, size_t ws,
                    const uint8_t *x, size_t xs, float *y, int64_t ys) {
    const int64_t nb = n_cols / QKK;
    const __m256i table = load_table();
    __m256 acc[4][4];
    FOR_RT acc[r][t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m256i isum[4][4];
        FOR_RT isum[r][t] = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++) {
            __m256i W[4], S[4];
            _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {
                const blk_iq4_xs *q = (const blk_iq4_xs *)(w + (size_t)r * ws) + b;
                W[r] = levels32(q->qs + 16 * ib, table);
                S[r] = _mm256_set1_epi16((short)ul_iq4xs_scale(q, ib));
            }
            _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
                const blk_q8K *p = (const blk_q8K *)(x + (size_t)t * xs) + b;
                __m256i X = _mm256_loadu_si256((const __m256i *)(p->qs + 32 * ib));
                _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) isum[r][t] =
                    _mm256_add_epi32(isum[r][t], _mm256_madd_epi16(dot_pairs(W[r], X), S[r]));
            }
        }
        _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {
            const float d = ul_fp16_to_fp32(((const blk_iq4_xs *)(w + (size_t)r * ws) + b)->d);
            _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
                const blk_q8K *p = (const blk_q8K *)(x + (size_t)t * xs) + b;
                acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r][t]),
                                            _mm256_set1_ps(d * p->d), acc[r][t]);
            }
        }
    }
    FOR_RT y[t * ys + r] = hsum8(acc[r][t]);
}
MM_DRIVER_FN(void ul_cpu_mm_iq4_xs_avx2, tile_iq4_xs, 2, 4)
