/* AVX2 packed Q4_0 and Q8_0 weights (pack.h): 16 rows per group, handled as two halves
 * of 8 rows; in every vector, 32-bit lane r belongs to row r of the half.
 *
 * Layout of a group: one record per block (32 columns), in block order:
 *   [16 f16 scales, rows 0..15][half 0: QV vectors][half 1: QV vectors]
 * In vector j of a half, lane r holds 4 bytes of row r's block:
 *  - Q4_0 (QV 4, 288 B): bytes 4j..4j+3 of qs as stored, so the low nibbles are weights
 *    k = 4j..4j+3 and the high nibbles k = 16+4j..16+4j+3, unsigned 0..15;
 *  - Q8_0 (QV 8, 544 B): weights k = 4j..4j+3, signed.
 * Records are exactly the 16 rows' GGUF bytes rearranged (no padding).
 *
 * Without VNNI the integer products are vpmaddubsw (u8 x s8 -> s16 pairs) with the
 * activation's 4-byte groups broadcast from memory (the Q8A format):
 *  - Q4_0: nibbles are unsigned, so a block's 8 products of one half and token add up in
 *    s16 (|pair| <= 2 * 15 * 127, eight of them <= 30480) and one vpmaddwd widens them;
 *    the -8 offset is 8 * nsum (minus the activation sum) added once per block.
 *  - Q8_0: signed weights take the sign trick, |w| x (x * sign(w)); a pair reaches
 *    2 * 127 * 127 = 32258, so every product is widened at once.
 * A block of a half then costs one convert, one multiply (weight scales x activation
 * scale) and one FMA per token, for 8 rows, with no horizontal sum.
 *
 * Register tiles: 1 half x up to 6 tokens, or both halves x up to 3 tokens (decode and
 * verification steps: the two halves' chains side by side). Tokens in tiles over every group of the
 * call (a 64-row chunk stays in L2), each tile's activations in L1 for all its rows. */
#include <immintrin.h>
#include <string.h>

#include "cpu/kernels_impl.h"
#include "cpu/pack.h"

#include "cpu/kernels_tile.h"

#define REC(QV) (32 + 2 * 32 * (QV))

static size_t gb_q4_0(int64_t n_cols) { return (size_t)(n_cols / QK) * REC(4); }
static size_t gb_q8_0(int64_t n_cols) { return (size_t)(n_cols / QK) * REC(8); }

static void pack_rows(int q8, const uint8_t *rows, size_t rs, int64_t n_cols, uint8_t *dst) {
    const int64_t nb = n_cols / QK;
    const int qv = q8 ? 8 : 4;
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *rec = dst + (size_t)b * REC(qv);
        for (int r = 0; r < UL_PACK_ROWS; r++) {
            const uint8_t *row = rows + (size_t)r * rs;
            uint8_t *q = rec + 32 + (size_t)(r / 8) * 32 * qv + 4 * (r % 8);
            if (q8) {
                const blk_q8_0 *s = (const blk_q8_0 *)row + b;
                memcpy(rec + 2 * r, &s->d, 2);
                for (int j = 0; j < 8; j++) memcpy(q + 32 * j, s->qs + 4 * j, 4);
            } else {
                const blk_q4_0 *s = (const blk_q4_0 *)row + b;
                memcpy(rec + 2 * r, &s->d, 2);
                for (int j = 0; j < 4; j++) memcpy(q + 32 * j, s->qs + 4 * j, 4);
            }
        }
    }
}

/* acc + v in s16 lanes, as an asm statement: the compiler may not re-associate the chain
 * (it would otherwise keep a block's eight products live to sum them as a tree, which
 * spilled the register tile). */
AI __m256i add16(__m256i acc, __m256i v) {
    __asm__("vpaddw %1, %0, %0" : "+x"(acc) : "x"(v));
    return acc;
}

AI __m256i add32(__m256i acc, __m256i v) {
    __asm__("vpaddd %1, %0, %0" : "+x"(acc) : "x"(v));
    return acc;
}

AI __m256i bcast4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* Two or more tokens per tile: the records PF_BYTES ahead asked for line by line, as in
 * kernels_avx512_pack.c (a block's work for several tokens keeps too few of the stream's
 * DRAM misses in flight for the hardware prefetcher alone). Less gain here, where the
 * products themselves bound a 5-token step: TinyLlama Q4_0 at UVLLM_ISA=avx2 on the same
 * Zen 5, a 5-token step 2.37-2.49x -> 2.15-2.32x the wall time of a 1-token step (process
 * CPU time 2.33-2.47x -> 2.13-2.29x), medians of 30 interleaved steps, 5 runs each. */
#define PF_BYTES 9216

AI void prefetch_rec(const int NT, const uint8_t *rec, size_t bytes) {
    if (NT < 2) return;
    for (size_t o = 0; o < bytes; o += 64)
        _mm_prefetch((const char *)rec + PF_BYTES + o, _MM_HINT_T0);
}

/* NH halves (1 or 2, starting at half h0) x NT tokens of one group over all nb blocks:
 * y[t * ys + 8 h + r] = the products. */
AI void tile(const int Q8, const int NH, const int NT, const uint8_t *g, int h0, int64_t nb,
             const uint8_t *x, size_t xs, float *y, int64_t ys) {
    const int QV = Q8 ? 8 : 4;
    const __m256i m4 = _mm256_set1_epi8(0x0F), one16 = _mm256_set1_epi16(1);
    __m256 acc[2][6];
    _Pragma("GCC unroll 2") for (int h = 0; h < NH; h++)
        _Pragma("GCC unroll 6") for (int t = 0; t < NT; t++) acc[h][t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *rec = g + (size_t)b * REC(QV);
        prefetch_rec(NT, rec, REC(QV));
        __m256i isum[2][6];
        if (Q8) {
            _Pragma("GCC unroll 2") for (int h = 0; h < NH; h++)
                _Pragma("GCC unroll 6") for (int t = 0; t < NT; t++) isum[h][t] =
                    _mm256_setzero_si256();
            _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) {
                _Pragma("GCC unroll 2") for (int h = 0; h < NH; h++) {
                    const __m256i w = _mm256_load_si256(
                        (const __m256i *)(rec + 32 + (size_t)(h0 + h) * 256 + 32 * j));
                    const __m256i aw = _mm256_sign_epi8(w, w);
                    _Pragma("GCC unroll 6") for (int t = 0; t < NT; t++) {
                        const blk_q8a *p = (const blk_q8a *)(x + (size_t)t * xs) + b;
                        const __m256i s =
                            _mm256_maddubs_epi16(aw, _mm256_sign_epi8(bcast4(p->qs + 4 * j), w));
                        isum[h][t] = add32(isum[h][t], _mm256_madd_epi16(s, one16));
                    }
                }
            }
        } else {
            __m256i s16[2][6];
            _Pragma("GCC unroll 2") for (int h = 0; h < NH; h++)
                _Pragma("GCC unroll 6") for (int t = 0; t < NT; t++) s16[h][t] =
                    _mm256_setzero_si256();
            _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
                _Pragma("GCC unroll 2") for (int h = 0; h < NH; h++) {
                    const __m256i v = _mm256_load_si256(
                        (const __m256i *)(rec + 32 + (size_t)(h0 + h) * 128 + 32 * j));
                    const __m256i lo = _mm256_and_si256(v, m4),
                                  hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                    _Pragma("GCC unroll 6") for (int t = 0; t < NT; t++) {
                        const blk_q8a *p = (const blk_q8a *)(x + (size_t)t * xs) + b;
                        s16[h][t] =
                            add16(s16[h][t], _mm256_maddubs_epi16(lo, bcast4(p->qs + 4 * j)));
                        s16[h][t] =
                            add16(s16[h][t], _mm256_maddubs_epi16(hi, bcast4(p->qs + 16 + 4 * j)));
                    }
                }
            }
            _Pragma("GCC unroll 2") for (int h = 0; h < NH; h++)
                _Pragma("GCC unroll 6") for (int t = 0; t < NT; t++) {
                const blk_q8a *p = (const blk_q8a *)(x + (size_t)t * xs) + b;
                isum[h][t] = _mm256_add_epi32(_mm256_madd_epi16(s16[h][t], one16),
                                              _mm256_slli_epi32(_mm256_set1_epi32(p->nsum), 3));
            }
        }
        _Pragma("GCC unroll 2") for (int h = 0; h < NH; h++) {
            const __m256 dw =
                _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(rec + 16 * (h0 + h))));
            _Pragma("GCC unroll 6") for (int t = 0; t < NT; t++) {
                const blk_q8a *p = (const blk_q8a *)(x + (size_t)t * xs) + b;
                acc[h][t] =
                    _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[h][t]),
                                    _mm256_mul_ps(dw, _mm256_broadcast_ss(&p->d)), acc[h][t]);
            }
        }
    }
    _Pragma("GCC unroll 2") for (int h = 0; h < NH; h++)
        _Pragma("GCC unroll 6") for (int t = 0; t < NT; t++)
            _mm256_storeu_ps(y + (int64_t)t * ys + 8 * (h0 + h), acc[h][t]);
}

/* One group for tn tokens: both halves together for up to 3 tokens, else half by half. */
AI void group(const int Q8, int tn, const uint8_t *g, int64_t nb, const uint8_t *x, size_t xs,
              float *y, int64_t ys) {
    switch (tn) {
    case 1:
        tile(Q8, 2, 1, g, 0, nb, x, xs, y, ys);
        break;
    case 2:
        tile(Q8, 2, 2, g, 0, nb, x, xs, y, ys);
        break;
    case 3:
        tile(Q8, 2, 3, g, 0, nb, x, xs, y, ys);
        break;
    case 4:
        for (int h = 0; h < 2; h++) tile(Q8, 1, 4, g, h, nb, x, xs, y, ys);
        break;
    case 5:
        for (int h = 0; h < 2; h++) tile(Q8, 1, 5, g, h, nb, x, xs, y, ys);
        break;
    default:
        for (int h = 0; h < 2; h++) tile(Q8, 1, 6, g, h, nb, x, xs, y, ys);
        break;
    }
}

AI void mm_any(const int Q8, int64_t n_cols, const uint8_t *wp, int n_groups, const uint8_t *x,
               size_t xs, int nt, float *y, int64_t ys) {
    const int64_t nb = n_cols / QK;
    const size_t gb = Q8 ? gb_q8_0(n_cols) : gb_q4_0(n_cols);
    for (int t = 0; t < nt;) {
        /* tiles of 6; a remainder of 7 to 9 is split so no tile is left with one token; 4 or
         * 5 tokens (a speculative verification step) go as 2 + 2 or 2 + 3 with both halves
         * at once: 24 packed 5632 x 2048 Q4_0 matrices, 1 thread, Zen 5 at UVLLM_ISA=avx2,
         * 5 tokens 3.43x -> 2.33x the time of 1 token (4 tokens 2.53x -> 2.20x), medians of
         * 3 interleaved runs of 15 rounds: one half at a time read and unpacked the group
         * twice and ran one s16 chain per token */
        const int left = nt - t;
        const int tn = left <= 3 || left == 6 ? left : left <= 5 ? 2 : left < 10 ? 4 : 6;
        for (int gi = 0; gi < n_groups; gi++)
            group(Q8, tn, wp + (size_t)gi * gb, nb, x + (size_t)t * xs, xs,
                  y + (int64_t)gi * UL_PACK_ROWS + (int64_t)t * ys, ys);
        t += tn;
    }
}

UL_PACK_Q4_0_Q8_0_TABLES(avx2);
