/* AVX2 + FMA + F16C kernels, for x86 CPUs without AVX-512. Same tiling as the AVX-512
 * file (rows x tokens register tiles) at 256 bits. Without VNNI the integer products go
 * through vpmaddubsw (u8 x s8 -> s16 pairs) and vpmaddwd:
 *  - Q4_0: unsigned nibbles against signed activations, -8 * sum(activations) per block
 *    as the accumulator's initial value (as in the AVX-512 kernel).
 *  - Q8_0: llama.cpp's sign trick, |w| x (x * sign(w)), per (row, token).
 *  - Q4_K / Q6_K: vpmaddwd against the sub-block scales. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "cpu/kernels_avx2_impl.h"

/* ---- Q4_0 ---- */
AI void tile_q4_0(const int NR, const int NT, int64_t n_cols, const uint8_t *w, size_t ws,
                  const uint8_t *x, size_t xs, float *y, int64_t ys) {
    const int64_t nb = n_cols / QK;
    const __m128i m4 = _mm_set1_epi8(0x0F);
    const __m256i one16 = _mm256_set1_epi16(1);
    __m256 acc[4][4];
    FOR_RT acc[r][t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m256i W[4];
        float dw[4];
        _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {
            const blk_q4_0 *q = (const blk_q4_0 *)(w + (size_t)r * ws) + b;
            __m128i v = _mm_loadu_si128((const __m128i *)q->qs);
            W[r] = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m4), _mm_and_si128(v, m4));
            dw[r] = ul_fp16_to_fp32(q->d);
        }
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
            const blk_q8a *p = (const blk_q8a *)(x + (size_t)t * xs) + b;
            __m256i X = _mm256_loadu_si256((const __m256i *)p->qs);
            __m256i I = _mm256_set1_epi32(p->nsum);
            _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {
                __m256i s =
                    _mm256_add_epi32(I, _mm256_madd_epi16(_mm256_maddubs_epi16(W[r], X), one16));
                acc[r][t] =
                    _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dw[r] * p->d), acc[r][t]);
            }
        }
    }
    FOR_RT y[t * ys + r] = hsum8(acc[r][t]);
}
MM_DRIVER(q4_0, 4, 2)

/* ---- Q8_0 ---- */
AI void tile_q8_0(const int NR, const int NT, int64_t n_cols, const uint8_t *w, size_t ws,
                  const uint8_t *x, size_t xs, float *y, int64_t ys) {
    const int64_t nb = n_cols / QK;
    const __m256i one16 = _mm256_set1_epi16(1);
    __m256 acc[4][4];
    FOR_RT acc[r][t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m256i W[4], A[4];
        float dw[4];
        _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {
            const blk_q8_0 *q = (const blk_q8_0 *)(w + (size_t)r * ws) + b;
            W[r] = _mm256_loadu_si256((const __m256i *)q->qs);
            A[r] = _mm256_sign_epi8(W[r], W[r]); /* |w| as unsigned */
            dw[r] = ul_fp16_to_fp32(q->d);
        }
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
            const blk_q8a *p = (const blk_q8a *)(x + (size_t)t * xs) + b;
            __m256i X = _mm256_loadu_si256((const __m256i *)p->qs);
            _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {
                __m256i s =
                    _mm256_madd_epi16(_mm256_maddubs_epi16(A[r], _mm256_sign_epi8(X, W[r])), one16);
                acc[r][t] =
                    _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dw[r] * p->d), acc[r][t]);
            }
        }
    }
    FOR_RT y[t * ys + r] = hsum8(acc[r][t]);
}
MM_DRIVER(q8_0, 4, 2)

/* ---- F16 / F32 / BF16 ---- */
AI __m256i tail_mask8(int64_t left) {
    const int32_t idx[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(left < 8 ? left : 8)),
                              _mm256_loadu_si256((const __m256i *)idx));
}
AI __m256 ld_f32(const uint8_t *row, int64_t k, int64_t n) {
    const float *f = (const float *)row + k;
    if (n - k >= 8) return _mm256_loadu_ps(f);
    return _mm256_maskload_ps(f, tail_mask8(n - k));
}
AI __m256 ld_f16(const uint8_t *row, int64_t k, int64_t n) {
    const uint16_t *h = (const uint16_t *)row + k;
    if (n - k >= 8) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h));
    uint16_t tmp[8] = {0};
    memcpy(tmp, h, (size_t)(n - k) * 2);
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)tmp));
}
AI __m256 ld_bf16(const uint8_t *row, int64_t k, int64_t n) {
    const uint16_t *h = (const uint16_t *)row + k;
    __m128i v;
    if (n - k >= 8) {
        v = _mm_loadu_si128((const __m128i *)h);
    } else {
        uint16_t tmp[8] = {0};
        memcpy(tmp, h, (size_t)(n - k) * 2);
        v = _mm_loadu_si128((const __m128i *)tmp);
    }
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
}

#define FLOAT_TILE(name, LOADW, LOADX)                                                             \
    AI void tile_##name(const int NR, const int NT, int64_t n_cols, const uint8_t *w, size_t ws,   \
                        const uint8_t *x, size_t xs, float *y, int64_t ys) {                       \
        __m256 acc[4][4];                                                                          \
        FOR_RT acc[r][t] = _mm256_setzero_ps();                                                    \
        for (int64_t k = 0; k < n_cols; k += 8) {                                                  \
            __m256 W[4];                                                                           \
            _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) W[r] =                            \
                LOADW(w + (size_t)r * ws, k, n_cols);                                              \
            _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {                                 \
                __m256 X = LOADX(x + (size_t)t * xs, k, n_cols);                                   \
                _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) acc[r][t] =                   \
                    _mm256_fmadd_ps(W[r], X, acc[r][t]);                                           \
            }                                                                                      \
        }                                                                                          \
        FOR_RT y[t * ys + r] = hsum8(acc[r][t]);                                                   \
    }
FLOAT_TILE(f32, ld_f32, ld_f32)
FLOAT_TILE(f16, ld_f16, ld_f32)
FLOAT_TILE(bf16, ld_bf16, ld_bf16)
MM_DRIVER(f32, 4, 3)
MM_DRIVER(f16, 4, 3)
MM_DRIVER(bf16, 4, 3)

/* ---- Q4_K / Q6_K x Q8K: one row at a time, tokens tiled ---- */
MM_DRIVER_FN(static void mm_q4_K, tile_q45_K, 1, 4, 0) /* kernels_avx2_impl.h */

AI void tile_q6_K(const int NR, const int NT, int64_t n_cols, const uint8_t *w, size_t ws,
                  const uint8_t *x, size_t xs, float *y, int64_t ys) {
    const int64_t nb = n_cols / QKK;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03);
    float acc[4][4] = {{0}};
    for (int64_t b = 0; b < nb; b++) {
        _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {
            const blk_q6_K *q = (const blk_q6_K *)(w + (size_t)r * ws) + b;
            __m256i isum[4];
            _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) isum[t] = _mm256_setzero_si256();
            for (int h = 0; h < 2; h++) {
                __m256i ql0 = _mm256_loadu_si256((const __m256i *)(q->ql + 64 * h));
                __m256i ql1 = _mm256_loadu_si256((const __m256i *)(q->ql + 64 * h + 32));
                __m256i qh = _mm256_loadu_si256((const __m256i *)(q->qh + 32 * h));
                __m256i W[4];
                W[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4),
                                       _mm256_slli_epi16(_mm256_and_si256(qh, m2), 4));
                W[1] = _mm256_or_si256(
                    _mm256_and_si256(ql1, m4),
                    _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m2), 4));
                W[2] = _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
                    _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m2), 4));
                W[3] = _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                    _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m2), 4));
                for (int c = 0; c < 4; c++) {
                    const int8_t *sc = q->scales + 8 * h + 2 * c;
                    __m256i S = _mm256_set_m128i(_mm_set1_epi16(sc[1]), _mm_set1_epi16(sc[0]));
                    _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
                        const blk_q8K *p = (const blk_q8K *)(x + (size_t)t * xs) + b;
                        __m256i X = _mm256_loadu_si256((const __m256i *)(p->qs + 128 * h + 32 * c));
                        isum[t] = _mm256_add_epi32(
                            isum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(W[c], X), S));
                    }
                }
            }
            float d = ul_fp16_to_fp32(q->d);
            _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
                const blk_q8K *p = (const blk_q8K *)(x + (size_t)t * xs) + b;
                int32_t corr = 0;
                for (int j = 0; j < 16; j++) corr += q->scales[j] * p->bsums[j];
                acc[r][t] += d * p->d * (hsum8(_mm256_cvtepi32_ps(isum[t])) - 32.0f * (float)corr);
            }
        }
    }
    FOR_RT y[t * ys + r] = acc[r][t];
}
MM_DRIVER(q6_K, 1, 4)

/* ---- activation conversion, byte-identical to quant.c's scalar code ---- */

AI int32_t hsum8i(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* 32 int32 (four vectors, in order) as 32 int8 (values within -127..127) */
AI __m256i pack32(__m256i a, __m256i b, __m256i c, __m256i d) {
    const __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
    const __m256i v = _mm256_packs_epi16(ab, cd); /* lanes interleaved by 128-bit halves */
    return _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* One Q8A / Q8A1 block (quant.c's quant_x_blk): qs and the f16-rounded d; returns the sum
 * of qs, *du the unrounded scale. */
AI int32_t xq_blk(const float *x, int8_t *qs, float *d, float *du) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 v[4], m = _mm256_setzero_ps();
    for (int i = 0; i < 4; i++) {
        v[i] = _mm256_loadu_ps(x + 8 * i);
        m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[i]));
    }
    const float amax = hmax8(m);
    float id = amax != 0 ? 127.f / amax : 0.0f;
    *du = amax / 127.f;
    *d = _cvtsh_ss(_cvtss_sh(*du, _MM_FROUND_TO_NEAREST_INT));
    if (*d == 0) id = 0; /* as the scalar code */
    __m256i q[4];
    for (int i = 0; i < 4; i++) /* the current rounding mode (nearest even) = round_even */
        q[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], _mm256_set1_ps(id)));
    _mm256_storeu_si256((__m256i *)qs, pack32(q[0], q[1], q[2], q[3]));
    return hsum8i(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
}

static void xq_q8a(const float *x, void *dst, int64_t n) {
    blk_q8a *y = dst;
    float du;
    for (int64_t i = 0; i < n / QK; i++, x += QK) y[i].nsum = -xq_blk(x, y[i].qs, &y[i].d, &du);
}

static void xq_q8a1(const float *x, void *dst, int64_t n) {
    blk_q8a1 *y = dst;
    float du;
    for (int64_t i = 0; i < n / QK; i++, x += QK) {
        int32_t s = xq_blk(x, y[i].qs, &y[i].d, &du);
        y[i].s = _cvtsh_ss(_cvtss_sh((float)s * du, _MM_FROUND_TO_NEAREST_INT));
    }
}

static void xq_q8k(const float *x, void *dst, int64_t n) {
    blk_q8K *y = dst;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t i = 0; i < n / QKK; i++, x += QKK) {
        __m256 m = _mm256_setzero_ps();
        for (int j = 0; j < QKK; j += 8)
            m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)));
        float iscale;
        if (!ul_q8k_iscale(x, hmax8(m), &iscale)) {
            memset(&y[i], 0, sizeof(y[i]));
            continue;
        }
        const __m256 vs = _mm256_set1_ps(iscale);
        const __m256i lim = _mm256_set1_epi32(127);
        for (int j = 0; j < QKK; j += 32) {
            __m256i q[4];
            for (int k = 0; k < 4; k++)
                q[k] = _mm256_min_epi32(
                    _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + j + 8 * k), vs)), lim);
            _mm256_storeu_si256((__m256i *)(y[i].qs + j), pack32(q[0], q[1], q[2], q[3]));
            y[i].bsums[j / 16] = (int16_t)hsum8i(_mm256_add_epi32(q[0], q[1]));
            y[i].bsums[j / 16 + 1] = (int16_t)hsum8i(_mm256_add_epi32(q[2], q[3]));
        }
        y[i].d = 1 / iscale;
    }
}

static void xq_f16r(const float *x, void *dst, int64_t n) {
    float *o = dst;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(o + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(x + i),
                                                                _MM_FROUND_TO_NEAREST_INT)));
    for (; i < n; i++) o[i] = _cvtsh_ss(_cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT));
}

static void xq_bf16(const float *x, void *dst, int64_t n) {
    /* integer rounding like ul_fp32_to_bf16: nearest even, NaN made quiet */
    uint16_t *o = dst;
    int64_t i = 0;
    const __m256i abs = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
    for (; i + 8 <= n; i += 8) {
        const __m256i u = _mm256_loadu_si256((const __m256i *)(x + i));
        const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs), inf);
        __m256i r = _mm256_add_epi32(
            u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff),
                                _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1))));
        r = _mm256_blendv_epi8(_mm256_srli_epi32(r, 16),
                               _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(64)),
                               nan);
        const __m256i p = _mm256_packus_epi32(r, r); /* 16-bit values, per 128-bit half */
        _mm_storeu_si128((__m128i *)(o + i),
                         _mm256_castsi256_si128(_mm256_permute4x64_epi64(p, 0x08)));
    }
    for (; i < n; i++) o[i] = ul_fp32_to_bf16(x[i]);
}

const ul_cpu_kern_t ul_cpu_kern_avx2 = {.mm =
                                            {
                                                [UL_TYPE_F32] = mm_f32,
                                                [UL_TYPE_F16] = mm_f16,
                                                [UL_TYPE_BF16] = mm_bf16,
                                                [UL_TYPE_Q8_0] = mm_q8_0,
                                                [UL_TYPE_Q4_0] = mm_q4_0,
                                                [UL_TYPE_Q4_1] = ul_cpu_mm_q4_1_avx2,
                                                [UL_TYPE_Q5_0] = ul_cpu_mm_q5_0_avx2,
                                                [UL_TYPE_Q5_1] = ul_cpu_mm_q5_1_avx2,
                                                [UL_TYPE_Q4_K] = mm_q4_K,
                                                [UL_TYPE_Q5_K] = ul_cpu_mm_q5_K_avx2,
                                                [UL_TYPE_Q6_K] = mm_q6_K,
                                                [UL_TYPE_IQ4_NL] = ul_cpu_mm_iq4_nl_avx2,
                                                [UL_TYPE_IQ4_XS] = ul_cpu_mm_iq4_xs_avx2,
                                            },
                                        .xq = {
                                            [XF_F16R] = xq_f16r,
                                            [XF_BF16] = xq_bf16,
                                            [XF_Q8A] = xq_q8a,
                                            [XF_Q8A1] = xq_q8a1,
                                            [XF_Q8K] = xq_q8k,
                                        }};
