/* IQ4_NL x Q8A and IQ4_XS x Q8K on AVX-512 (BW, VNNI). The nibbles index the table of
 * levels + 128 (1..241, unsigned) with one vpshufb per 64 elements, so vpdpbusd takes them
 * as they are; the +128 becomes -128 * sum(activations), folded into the accumulator's
 * start (IQ4_NL: 16 * nsum on each of a block's 8 lanes, as Q8_0 does) or, for IQ4_XS,
 * subtracted once per super-block through the activation sums per 16 times the sub-block
 * scales. IQ4_XS applies its signed 6-bit sub-block scales to the exact int32 dot products
 * (vpmulld) and converts once per super-block. One-token steps take IQ4_NL 8 rows per
 * pass, like Q4_0's decode path. */
#include <immintrin.h>
#include <string.h>

#include "cpu/kernels_avx512_impl.h"
#include "cpu/kernels_impl.h"
#include "cpu/kernels_tile.h"

/* the table of levels + 128 in every 128-bit lane */
AI __m512i utable(void) {
    __m128i v = _mm_loadu_si128((const __m128i *)ul_iq4nl_values);
    return _mm512_broadcast_i32x4(_mm_xor_si128(v, _mm_set1_epi8((char)0x80)));
}

/* 32 bytes of nibbles (two 16-byte groups a, c) as 64 unsigned levels in element order
 * [lo(a) hi(a) lo(c) hi(c)] */
AI __m512i ulevels64(const uint8_t *a, const uint8_t *c, __m512i table) {
    __m256i va = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)a));
    __m256i vc = c ? _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)c))
                   : _mm256_setzero_si256();
    __m512i v = join256(va, vc);
    v = _mm512_mask_srli_epi16(v, (__mmask32)0xFF00FF00u, v, 4);
    return _mm512_shuffle_epi8(table, _mm512_and_si512(v, _mm512_set1_epi8(0x0F)));
}

/* Activation blocks b, b+1: the 64 bytes, [dx0 x8, dx1 x8] and the accumulator start
 * [16 nsum0 x8, 16 nsum1 x8] (zeros for a missing second block). */
AI __m512i q8a_pair(const blk_q8a *p, int two, __m512 *dx, __m512i *start) {
    __m256i xa = _mm256_loadu_si256((const __m256i *)p[0].qs);
    __m256i xc = two ? _mm256_loadu_si256((const __m256i *)p[1].qs) : _mm256_setzero_si256();
    float d1 = two ? p[1].d : 0.f;
    int32_t n1 = two ? p[1].nsum : 0;
    *dx = _mm512_insertf32x8(_mm512_set1_ps(p[0].d), _mm256_set1_ps(d1), 1);
    *start = _mm512_slli_epi32(
        _mm512_inserti64x4(_mm512_set1_epi32(p[0].nsum), _mm256_set1_epi32(n1), 1), 4);
    return join256(xa, xc);
}

AI void tile_iq4_nl(const int NR, const int NT, int64_t n_cols, const uint8_t *w, size_t ws,
                    const uint8_t *x, size_t xs, float *y, int64_t ys) {
    const int64_t nb = n_cols / QK;
    const __m512i table = utable();
    __m512 acc[4][4];
    FOR_RT acc[r][t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b += 2) {
        const int two = b + 1 < nb;
        __m512i W[4];
        __m512 dw[4];
        _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {
            const blk_iq4_nl *q = (const blk_iq4_nl *)(w + (size_t)r * ws) + b;
            W[r] = ulevels64(q[0].qs, two ? q[1].qs : NULL, table);
            dw[r] = halves_to_ps(q[0].d, two ? q[1].d : 0);
        }
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
            const blk_q8a *p = (const blk_q8a *)(x + (size_t)t * xs) + b;
            __m512 dx;
            __m512i I, X = q8a_pair(p, two, &dx, &I);
            _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {
                __m512i s = _mm512_dpbusd_epi32(I, W[r], X);
                acc[r][t] =
                    _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw[r], dx), acc[r][t]);
            }
        }
    }
    FOR_RT y[t * ys + r] = _mm512_reduce_add_ps(acc[r][t]);
}
MM_DRIVER(iq4_nl, 4, 4)

/* one token, 8 rows per pass: the activation pair is loaded once for 8 rows */
#define DEC_R 8
static void dec_iq4_nl(int64_t n_cols, const uint8_t *w, size_t ws, const uint8_t *x, float *y) {
    const int64_t nb = n_cols / QK;
    const __m512i table = utable();
    __m512 acc[DEC_R];
    _Pragma("GCC unroll 8") for (int r = 0; r < DEC_R; r++) acc[r] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b += 2) {
        const int two = b + 1 < nb;
        __m512 dx;
        __m512i I, X = q8a_pair((const blk_q8a *)x + b, two, &dx, &I);
        _Pragma("GCC unroll 8") for (int r = 0; r < DEC_R; r++) {
            const blk_iq4_nl *q = (const blk_iq4_nl *)(w + (size_t)r * ws) + b;
            __m512i W = ulevels64(q[0].qs, two ? q[1].qs : NULL, table);
            __m512 dw = halves_to_ps(q[0].d, two ? q[1].d : 0);
            __m512i s = _mm512_dpbusd_epi32(I, W, X);
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, dx), acc[r]);
        }
    }
    _Pragma("GCC unroll 8") for (int r = 0; r < DEC_R; r++) y[r] = _mm512_reduce_add_ps(acc[r]);
}

void ul_cpu_mm_iq4_nl_avx512(int64_t n_cols, const uint8_t *w, size_t ws, int nr, const uint8_t *x,
                             size_t xs, int nt, float *y, int64_t ys) {
    int done = 0;
    if (nt == 1)
        for (; done + DEC_R <= nr; done += DEC_R)
            dec_iq4_nl(n_cols, w + (size_t)done * ws, ws, x, y + done);
    if (done < nr) mm_iq4_nl(n_cols, w + (size_t)done * ws, ws, nr - done, x, xs, nt, y + done, ys);
}

/* ---- IQ4_XS ---- */

/* The 8 signed sub-block scales of an IQ4_XS block as int32 lanes */
AI __m256i xs_scales(const blk_iq4_xs *q) {
    uint32_t l;
    memcpy(&l, q->scales_l, 4);
    const __m256i lo =
        _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)l),
                                           _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                         _mm256_set1_epi32(15));
    const __m256i hi =
        _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(q->scales_h),
                                           _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
                         _mm256_set1_epi32(3));
    return _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32));
}

AI void tile_iq4_xs(const int NR, const int NT, int64_t n_cols, const uint8_t *w, size_t ws,
                    const uint8_t *x, size_t xs, float *y, int64_t ys) {
    const int64_t nb = n_cols / QKK;
    const __m512i table = utable();
    __m512 acc[4][4];
    FOR_RT acc[r][t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m512i isum[4][4], sc[4];
        _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {
            const blk_iq4_xs *q = (const blk_iq4_xs *)(w + (size_t)r * ws) + b;
            const __m256i s = xs_scales(q);
            sc[r] = _mm512_zextsi256_si512(s);
            /* int16 words 2 ib, 2 ib + 1 = scale ib, against the activation sums per 16:
             * -128 * sum_ib scale_ib * sum(x of ib) starts the low 8 lanes */
            const __m256i s16 = _mm256_or_si256(_mm256_and_si256(s, _mm256_set1_epi32(0xFFFF)),
                                                _mm256_slli_epi32(s, 16));
            _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
                const blk_q8K *p = (const blk_q8K *)(x + (size_t)t * xs) + b;
                __m256i m = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)p->bsums), s16);
                isum[r][t] = _mm512_zextsi256_si512(
                    _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(m, 7)));
            }
        }
        for (int c = 0; c < 4; c++) {
            __m512i W[4], S[4];
            const __m512i idx =
                _mm512_inserti64x4(_mm512_set1_epi32(2 * c), _mm256_set1_epi32(2 * c + 1), 1);
            _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {
                const blk_iq4_xs *q = (const blk_iq4_xs *)(w + (size_t)r * ws) + b;
                W[r] = ulevels64(q->qs + 32 * c, q->qs + 32 * c + 16, table);
                S[r] = _mm512_permutexvar_epi32(idx, sc[r]);
            }
            _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
                const blk_q8K *p = (const blk_q8K *)(x + (size_t)t * xs) + b;
                __m512i X = _mm512_loadu_si512(p->qs + 64 * c);
                _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {
                    __m512i d = _mm512_dpbusd_epi32(_mm512_setzero_si512(), W[r], X);
                    isum[r][t] = _mm512_add_epi32(isum[r][t], _mm512_mullo_epi32(d, S[r]));
                }
            }
        }
        _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {
            const float d = ul_fp16_to_fp32(((const blk_iq4_xs *)(w + (size_t)r * ws) + b)->d);
            _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
                const blk_q8K *p = (const blk_q8K *)(x + (size_t)t * xs) + b;
                acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[r][t]),
                                            _mm512_set1_ps(d * p->d), acc[r][t]);
            }
        }
    }
    FOR_RT y[t * ys + r] = _mm512_reduce_add_ps(acc[r][t]);
}
/* few tokens: 4 rows per tile keep more weight streams in flight */
MM_DRIVER_FN(static void mm_iq4_xs_r4, tile_iq4_xs, 4, 1)
MM_DRIVER(iq4_xs, 2, 4)

void ul_cpu_mm_iq4_xs_avx512(int64_t n_cols, const uint8_t *w, size_t ws, int nr, const uint8_t *x,
                             size_t xs, int nt, float *y, int64_t ys) {
    (nt < 4 ? mm_iq4_xs_r4 : mm_iq4_xs)(n_cols, w, ws, nr, x, xs, nt, y, ys);
}
