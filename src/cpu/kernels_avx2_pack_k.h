/* Private to the AVX2 packed K-quant / IQ4 files (kernels_avx2_pack_{k,q6k,iq4}.c): what their
 * layouts share.
 *
 * AVX2 has no vpdpbusd: a 256-bit vector is 8 lanes of 4 bytes, so each 16-row group of
 * pack.h is stored as two halves of 8 rows, and a half's records for the whole row come
 * one after the other (one sequential stream per half). In every weight vector lane r
 * holds 4 weights of row r (4 consecutive columns); the matching 4 activation bytes are
 * broadcast to all lanes, vpmaddubsw (unsigned weight x signed activation) gives lane r
 * two int16 pair sums, and vpmaddwd against the lane's sub-block scale (the same int16 in
 * both halves of the lane) turns them into one int32 per row. No horizontal sums: the 8
 * results of a half are stored as one vector per token.
 *
 * vpmaddubsw saturates at 32767, so how many of its outputs may be added in int16 before
 * the vpmaddwd depends on the weights' range (|activation| <= 127): 4-bit 0..15 - 8 of
 * them (8 * 2 * 15 * 127 = 30480), 5-bit - 4, 6-bit - 2, signed IQ4 levels (sign trick,
 * |w| <= 127) - 1. */
#ifndef UL_CPU_KERNELS_AVX2_PACK_K_H
#define UL_CPU_KERNELS_AVX2_PACK_K_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "cpu/kernels_impl.h"
#include "cpu/pack.h"

#include "cpu/kernels_tile.h"

#define HALF_ROWS 8
/* tokens per register tile */
#define PK_NT 4

/* The 4 bytes at p broadcast to every lane (vpbroadcastd from memory). */
AI __m256i bcast4(const void *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* a + b as int16 / int32, opaque to the optimiser: GCC otherwise re-associates a tile's
 * accumulation chains into trees that compute every product first and spill them (the
 * 4-token Q4_K tile had 30 spilled vectors per sub-block). */
AI __m256i acc16(__m256i a, __m256i b) {
    a = _mm256_add_epi16(a, b);
    __asm__("" : "+x"(a));
    return a;
}
AI __m256i acc32(__m256i a, __m256i b) {
    a = _mm256_add_epi32(a, b);
    __asm__("" : "+x"(a));
    return a;
}

/* 8 f16 at p as f32. */
AI __m256 ld_f16x8(const void *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }

/* 8 unsigned bytes at p (one per row) as int16 pairs: lane r = (p[r], p[r]); the vpmaddwd
 * operand that applies a per-row sub-block scale to both pair sums of the lane. */
AI __m256i scale_dup_u8(const uint8_t *p) {
    const __m256i dup = _mm256_setr_epi8(0, -1, 0, -1, 1, -1, 1, -1, 2, -1, 2, -1, 3, -1, 3, -1, 4,
                                         -1, 4, -1, 5, -1, 5, -1, 6, -1, 6, -1, 7, -1, 7, -1);
    int64_t v;
    memcpy(&v, p, 8);
    return _mm256_shuffle_epi8(_mm256_set1_epi64x(v), dup);
}

/* The same for 8 signed bytes (sign-extended). */
AI __m256i scale_dup_s8(const int8_t *p) {
    const __m256i dup = _mm256_setr_epi8(-1, 0, -1, 0, -1, 1, -1, 1, -1, 2, -1, 2, -1, 3, -1, 3, -1,
                                         4, -1, 4, -1, 5, -1, 5, -1, 6, -1, 6, -1, 7, -1, 7);
    int64_t v;
    memcpy(&v, p, 8);
    return _mm256_srai_epi16(_mm256_shuffle_epi8(_mm256_set1_epi64x(v), dup), 8);
}

/* The token-tile driver of a packed type: tokens in tiles of up to PK_NT (their
 * activations stay in L1), each tile over every group of the call (a 64-row chunk, whose
 * packed rows stay in L2 for the next tile), each group's two halves. When the tile needs
 * per-token helper bytes (AUXB per block, written by PREP(x_row, aux_row, b0, b1) for each
 * token, once for all the groups of the call), the row goes in passes of KB blocks and
 * token t's helper bytes for block b are at aux + (t * KB + b - b0) * AUXB. TILE(NT, half,
 * b0, b1, x, xs, aux, y, ys, add) computes 8 rows x NT tokens over blocks [b0, b1), adding
 * to y when add. */
AI void pk_prep_none(const uint8_t *x, uint8_t *aux, int64_t b0, int64_t b1) {
    (void)x, (void)aux, (void)b0, (void)b1;
}
#define PK_MM(name, TILE, NB, HALF_BYTES, AUXB, KB, PREP)                                          \
    static void mm_##name(int64_t n_cols, const uint8_t *wp, int n_groups, const uint8_t *x,       \
                          size_t xs, int nt, float *y, int64_t ys) {                               \
        const int64_t nb = (NB);                                                                   \
        const size_t hb = (HALF_BYTES);                                                            \
        const int64_t kb = (AUXB) ? (KB) : nb;                                                     \
        _Alignas(32) uint8_t aux[PK_NT * (KB) * (AUXB) + 32];                                      \
        for (int t = 0; t < nt;) {                                                                 \
            const int tn = nt - t < PK_NT ? nt - t : PK_NT;                                        \
            const uint8_t *xt = x + (size_t)t * xs;                                                \
            for (int64_t b0 = 0; b0 < nb; b0 += kb) {                                              \
                const int64_t b1 = nb < b0 + kb ? nb : b0 + kb;                                    \
                if (AUXB)                                                                          \
                    for (int tt = 0; tt < tn; tt++)                                                \
                        PREP(xt + (size_t)tt * xs, aux + (size_t)tt * (KB) * (AUXB), b0, b1);      \
                for (int h = 0; h < 2 * n_groups; h++) {                                           \
                    const uint8_t *w = wp + (size_t)h * hb;                                        \
                    float *yh = y + (int64_t)h * HALF_ROWS + (int64_t)t * ys;                      \
                    const int add = b0 > 0;                                                        \
                    switch (tn) {                                                                  \
                    case 1:                                                                        \
                        TILE(1, w, b0, b1, xt, xs, aux, yh, ys, add);                              \
                        break;                                                                     \
                    case 2:                                                                        \
                        TILE(2, w, b0, b1, xt, xs, aux, yh, ys, add);                              \
                        break;                                                                     \
                    case 3:                                                                        \
                        TILE(3, w, b0, b1, xt, xs, aux, yh, ys, add);                              \
                        break;                                                                     \
                    default:                                                                       \
                        TILE(4, w, b0, b1, xt, xs, aux, yh, ys, add);                              \
                        break;                                                                     \
                    }                                                                              \
                }                                                                                  \
            }                                                                                      \
            t += tn;                                                                               \
        }                                                                                          \
    }

/* Decode (one token) streams every record from DRAM once: ask for the bytes PK_PF ahead
 * of the record being read (about two Q4_K records), line by line. */
#define PK_PF 2560
AI void prefetch_rec(const int NT, const uint8_t *rec, size_t bytes) {
    if (NT > 1) return;
    for (size_t o = 0; o < bytes; o += 64) _mm_prefetch((const char *)rec + PK_PF + o, _MM_HINT_T0);
}

/* Loads the NT accumulators of a tile (y when add, else zero) and stores them back. */
AI void acc_init(const int NT, __m256 *acc, const float *y, int64_t ys, int add) {
    _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) acc[t] =
        add ? _mm256_loadu_ps(y + (int64_t)t * ys) : _mm256_setzero_ps();
}
AI void acc_store(const int NT, const __m256 *acc, float *y, int64_t ys) {
    _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++)
        _mm256_storeu_ps(y + (int64_t)t * ys, acc[t]);
}

#endif
