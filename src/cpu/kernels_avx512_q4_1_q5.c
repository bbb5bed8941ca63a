/* Q4_1, Q5_0 and Q5_1 x Q8A on AVX-512 (BW, VNNI): the Q4_0 tile of kernels_avx512.c
 * generalised, two 32-blocks per vector. The weights are unsigned as stored (nibbles,
 * plus 16 where the block's qh bit is set: the 64 bits of two blocks are a byte mask as
 * they are) and go straight into vpdpbusd. Q5_0's -16 offset becomes -16 * sum(activation
 * block) in the accumulator's start (2 * nsum on each of the block's 8 lanes); the
 * Q4_1 / Q5_1 min m adds m * s per block (s of the Q8A1 activations, as llama.cpp's
 * Q8_1), spread as an eighth on each of the block's 8 lanes (exact: a power of two) with
 * one more FMA. */
#include <immintrin.h>
#include <string.h>

#include "cpu/kernels_avx512_impl.h"
#include "cpu/kernels_impl.h"
#include "cpu/kernels_tile.h"

/* Block b (and b+1 when two) of a row: the 64 unsigned weights in activation order
 * [lo0 hi0 lo1 hi1], [d0 x8, d1 x8] and (Q4_1 / Q5_1) [m0 x8, m1 x8]. */
AI __m512i unpack2(const int KIND, const uint8_t *blk, int two, __m512 *d, __m512 *m) {
    const size_t bs = lin_blk_bytes(KIND);
    const uint8_t *b1 = blk + bs;
    const size_t qs_off = KIND == K_Q4_1   ? offsetof(blk_q4_1, qs)
                          : KIND == K_Q5_0 ? offsetof(blk_q5_0, qs)
                                           : offsetof(blk_q5_1, qs);
    __m256i a = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(blk + qs_off)));
    __m256i c = two ? _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(b1 + qs_off)))
                    : _mm256_setzero_si256();
    __m512i v = join256(a, c);
    v = _mm512_mask_srli_epi16(v, (__mmask32)0xFF00FF00u, v, 4);
    v = _mm512_and_si512(v, _mm512_set1_epi8(0x0F));
    uint16_t h[2][2] = {{0, 0}, {0, 0}}; /* (d, m) of each block; d comes first in all */
    memcpy(h[0], blk, KIND == K_Q5_0 ? 2 : 4);
    if (two) memcpy(h[1], b1, KIND == K_Q5_0 ? 2 : 4);
    *d = halves_to_ps(h[0][0], h[1][0]);
    if (KIND != K_Q5_0) *m = halves_to_ps(h[0][1], h[1][1]);
    if (KIND != K_Q4_1) {
        const size_t qh_off = KIND == K_Q5_0 ? offsetof(blk_q5_0, qh) : offsetof(blk_q5_1, qh);
        uint64_t bits = ul_q5_qh(blk + qh_off);
        if (two) bits |= (uint64_t)ul_q5_qh(b1 + qh_off) << 32;
        v = _mm512_mask_add_epi8(v, (__mmask64)bits, v, _mm512_set1_epi8(16));
    }
    return v;
}

AI void tile_lin(const int NR, const int NT, int64_t n_cols, const uint8_t *w, size_t ws,
                 const uint8_t *x, size_t xs, float *y, int64_t ys, const int KIND) {
    const int64_t nb = n_cols / QK;
    const size_t bs = lin_blk_bytes(KIND);
    __m512 acc[4][4];
    FOR_RT acc[r][t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b += 2) {
        const int two = b + 1 < nb;
        __m512i W[4];
        __m512 dw[4], mw[4];
        _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) W[r] =
            unpack2(KIND, w + (size_t)r * ws + (size_t)b * bs, two, &dw[r], &mw[r]);
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
            /* Q5_0 reads Q8A blocks, Q4_1 / Q5_1 Q8A1 ones (same size, qs at the same place) */
            const blk_q8a *p = (const blk_q8a *)(x + (size_t)t * xs) + b;
            const blk_q8a1 *p1 = (const blk_q8a1 *)(x + (size_t)t * xs) + b;
            const int8_t *q0 = KIND == K_Q5_0 ? p[0].qs : p1[0].qs;
            const int8_t *q1 = KIND == K_Q5_0 ? p[1].qs : p1[1].qs;
            __m256i xa = _mm256_loadu_si256((const __m256i *)q0);
            __m256i xc = two ? _mm256_loadu_si256((const __m256i *)q1) : _mm256_setzero_si256();
            const __m512i X = join256(xa, xc);
            const float d0 = KIND == K_Q5_0 ? p[0].d : p1[0].d;
            const float d1 = two ? (KIND == K_Q5_0 ? p[1].d : p1[1].d) : 0.f;
            const __m512 dx = _mm512_insertf32x8(_mm512_set1_ps(d0), _mm256_set1_ps(d1), 1);
            __m512i I = _mm512_setzero_si512();
            __m512 xsum = _mm512_setzero_ps();
            if (KIND == K_Q5_0)
                I = _mm512_inserti64x4(_mm512_set1_epi32(2 * p[0].nsum),
                                       _mm256_set1_epi32(two ? 2 * p[1].nsum : 0), 1);
            else /* s / 8 per lane */
                xsum = _mm512_insertf32x8(_mm512_set1_ps(p1[0].s * 0.125f),
                                          _mm256_set1_ps(two ? p1[1].s * 0.125f : 0.f), 1);
            _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {
                __m512i s = _mm512_dpbusd_epi32(I, W[r], X);
                acc[r][t] =
                    _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw[r], dx), acc[r][t]);
                if (KIND != K_Q5_0) acc[r][t] = _mm512_fmadd_ps(mw[r], xsum, acc[r][t]);
            }
        }
    }
    FOR_RT y[t * ys + r] = _mm512_reduce_add_ps(acc[r][t]);
}

/* the entry points of kernels_impl.h */
MM_DRIVER_FN(void ul_cpu_mm_q4_1_avx512, tile_lin, 4, 4, K_Q4_1)
MM_DRIVER_FN(void ul_cpu_mm_q5_0_avx512, tile_lin, 4, 4, K_Q5_0)
MM_DRIVER_FN(void ul_cpu_mm_q5_1_avx512, tile_lin, 4, 4, K_Q5_1)
