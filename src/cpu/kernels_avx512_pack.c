/* AVX-512 packed Q4_0 and Q8_0 weights (pack.h): 16 rows per group, lane r = row r.
 *
 * Layout of a group: blocks in pairs, each pair 64-byte aligned:
 *   [16 f16 scales of block 2i][16 f16 scales of block 2i+1][quants 2i][quants 2i+1]
 * Quants of one block are QV vectors of 64 bytes; in vector j, lane r holds 4 bytes of
 * row r:
 *  - Q4_0 (QV 4): bytes 4j..4j+3 of the block as stored, so the low nibbles are weights
 *    k = 4j..4j+3 and the high nibbles k = 16+4j..16+4j+3, both unsigned 0..15;
 *  - Q8_0 (QV 8): weights k = 4j..4j+3 plus 128 (sign bit flipped), unsigned.
 * An odd last block leaves its pair's second half zero (never read).
 *
 * Products use vpdpbusd with the activation's 4-byte groups broadcast from memory (the
 * Q8A format of kernels_impl.h). The weights' offset (8, or 128) times minus the
 * activation block sum starts each block's accumulator, so a block costs QV (Q4_0: plus
 * 2 x 4 unpacking ops) and 8 vpdpbusd, one convert, one multiply and one FMA for 16 rows
 * and one token, with no horizontal sums. */
#include <immintrin.h>
#include <string.h>

#include "cpu/kernels_impl.h"
#include "cpu/pack.h"

#include "cpu/kernels_tile.h"

#define PAIR_BYTES(QV) (64 + 2 * 64 * (QV))

static size_t gb_q4_0(int64_t n_cols) { return (size_t)((n_cols / QK + 1) / 2) * PAIR_BYTES(4); }
static size_t gb_q8_0(int64_t n_cols) { return (size_t)((n_cols / QK + 1) / 2) * PAIR_BYTES(8); }

static void pack_rows(int q8, const uint8_t *rows, size_t rs, int64_t n_cols, uint8_t *dst) {
    const int64_t nb = n_cols / QK;
    const int qv = q8 ? 8 : 4;
    memset(dst, 0, q8 ? gb_q8_0(n_cols) : gb_q4_0(n_cols));
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *pair = dst + (size_t)(b / 2) * PAIR_BYTES(qv);
        uint16_t *d = (uint16_t *)(pair + 32 * (b % 2));
        uint8_t *q = pair + 64 + (size_t)(b % 2) * 64 * qv;
        for (int r = 0; r < UL_PACK_ROWS; r++) {
            const uint8_t *row = rows + (size_t)r * rs;
            if (q8) {
                const blk_q8_0 *s = (const blk_q8_0 *)row + b;
                d[r] = s->d;
                for (int j = 0; j < 8; j++)
                    for (int c = 0; c < 4; c++)
                        q[64 * j + 4 * r + c] = (uint8_t)s->qs[4 * j + c] ^ 0x80;
            } else {
                const blk_q4_0 *s = (const blk_q4_0 *)row + b;
                d[r] = s->d;
                for (int j = 0; j < 4; j++) memcpy(q + 64 * j + 4 * r, s->qs + 4 * j, 4);
            }
        }
    }
}

AI __m512i bcast4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

/* The 8 unsigned weight vectors of block b (vector j pairs with activation bytes 4j..). */
AI void load_w(const int Q8, const uint8_t *pair, int half, __m512i W[8]) {
    const uint8_t *q = pair + 64 + (size_t)half * 64 * (Q8 ? 8 : 4);
    if (Q8) {
        _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) W[j] =
            _mm512_load_si512((const void *)(q + 64 * j));
    } else {
        const __m512i m4 = _mm512_set1_epi8(0x0F);
        _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
            __m512i v = _mm512_load_si512((const void *)(q + 64 * j));
            W[j] = _mm512_and_si512(v, m4);
            W[j + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
        }
    }
}

AI __m512 load_d(const uint8_t *pair, int half) {
    return _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(pair + 32 * half)));
}

/* acc + dpbusd(w, the 4 activation bytes at p broadcast to every lane). Written in asm so
 * that the broadcast is the instruction's {1to16} memory operand: compilers emit a separate
 * vpbroadcastd per product instead, one more vector uop for every vpdpbusd. */
AI __m512i dpbusd_bcst(__m512i acc, __m512i w, const int8_t *p) {
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*(const int32_t *)p));
    return acc;
}

/* One block's integer dot product for 16 rows and one token: two chains of 4. */
AI __m512i dot_blk(const int SH, const __m512i W[8], const blk_q8a *p) {
    __m512i s0 = _mm512_set1_epi32(p->nsum * (1 << SH)), s1 = _mm512_setzero_si512();
    _Pragma("GCC unroll 4") for (int j = 0; j < 8; j += 2) {
        s0 = dpbusd_bcst(s0, W[j], p->qs + 4 * j);
        s1 = dpbusd_bcst(s1, W[j + 1], p->qs + 4 * j + 4);
    }
    return _mm512_add_epi32(s0, s1);
}

/* Two or more tokens per tile: a block is then several times one token's work, so the
 * out-of-order window spans few blocks and keeps few of the stream's DRAM misses in
 * flight; the hardware prefetcher alone did not cover them, and the loads of the packed
 * quants took most of the kernel's samples (perf annotate). Asking for the pair PF_BYTES
 * ahead, line by line, once per pair: TinyLlama Q4_0, one sequence verifying 4 proposals
 * (5 tokens) at context 16, 2 threads, Zen 5, process CPU time of the step against a
 * 1-token step, 30 interleaved steps per run: 1.78-1.96x -> 1.16-1.20x (3 runs each; 1152
 * B ahead 1.60-1.65x, 2304 1.43-1.48x, 4608 1.26-1.28x, 13824 1.22-1.27x). One token is
 * left as it was: its 1-token steps showed no difference outside the noise. */
#define PF_BYTES 9216

AI void prefetch_pair(const int Q8, const int NT, const uint8_t *pair) {
    if (NT < 2) return;
    for (int o = 0; o < PAIR_BYTES(Q8 ? 8 : 4); o += 64)
        _mm_prefetch((const char *)pair + PF_BYTES + o, _MM_HINT_T0);
}

/* One group, NT tokens, blocks [b0, b1): y[t*ys + 0..16) (+)= the products. */
AI void tile(const int Q8, const int NT, const uint8_t *g, int64_t b0, int64_t b1, const uint8_t *x,
             size_t xs, float *y, int64_t ys, int add) {
    const int SH = Q8 ? 7 : 3;
    __m512 acc[6];
    _Pragma("GCC unroll 6") for (int t = 0; t < NT; t++) acc[t] =
        add ? _mm512_loadu_ps(y + (int64_t)t * ys) : _mm512_setzero_ps();
    for (int64_t b = b0; b < b1; b++) {
        const uint8_t *pair = g + (size_t)(b / 2) * PAIR_BYTES(Q8 ? 8 : 4);
        const int half = (int)(b & 1);
        if (half == 0) prefetch_pair(Q8, NT, pair);
        __m512i W[8];
        load_w(Q8, pair, half, W);
        const __m512 dw = load_d(pair, half);
        _Pragma("GCC unroll 6") for (int t = 0; t < NT; t++) {
            const blk_q8a *p = (const blk_q8a *)(x + (size_t)t * xs) + b;
            __m512i s = dot_blk(SH, W, p);
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, _mm512_set1_ps(p->d)),
                                     acc[t]);
        }
    }
    _Pragma("GCC unroll 6") for (int t = 0; t < NT; t++)
        _mm512_storeu_ps(y + (int64_t)t * ys, acc[t]);
}

/* Tokens in tiles of 4 (their activations, 4 x 40 B per block, stay in L1 over the whole
 * row), each tile over every group of the call (a 64-row chunk: its packed rows stay in L2
 * for the next tile) with the accumulators in registers for the whole row. Measured on
 * a 5632 x 2048 Q4_0 matrix, one thread: 16 tokens 134 -> 158 GMAC/s over blocking the
 * row into L1-sized chunks that every token tile revisits (16 tokens' activations do not
 * fit L1, so each group re-read them from L2).
 * Up to 6 tokens left are one tile: a speculative verification step of 5 tokens then
 * reads and unpacks every block once instead of twice (4 + 1). 24 packed 5632 x 2048 Q4_0
 * matrices, 1 thread, Zen 5: 5 tokens 2.19x -> 1.94x the time of 1 token, medians of 3
 * interleaved runs of 15 rounds (8 tokens as one tile of 8 was slower than 4 + 4). */
AI void tile_n(const int Q8, int tn, const uint8_t *g, int64_t nb, const uint8_t *x, size_t xs,
               float *y, int64_t ys) {
#define TILE_Q8(NT, ...) tile(Q8, NT, __VA_ARGS__)
    DISPATCH_NT6(TILE_Q8, tn, g, 0, nb, x, xs, y, ys, 0);
#undef TILE_Q8
}

AI void mm_any(const int Q8, int64_t n_cols, const uint8_t *wp, int n_groups, const uint8_t *x,
               size_t xs, int nt, float *y, int64_t ys) {
    const int64_t nb = n_cols / QK;
    const size_t gb = Q8 ? gb_q8_0(n_cols) : gb_q4_0(n_cols);
    for (int t = 0; t < nt;) {
        const int tn = nt - t <= 6 ? nt - t : 4;
        const uint8_t *xt = x + (size_t)t * xs;
        for (int gi = 0; gi < n_groups; gi++)
            tile_n(Q8, tn, wp + (size_t)gi * gb, nb, xt, xs,
                   y + (int64_t)gi * UL_PACK_ROWS + (int64_t)t * ys, ys);
        t += tn;
    }
}

UL_PACK_Q4_0_Q8_0_TABLES(avx512);
