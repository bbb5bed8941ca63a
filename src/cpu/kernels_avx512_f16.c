/* AVX-512 packed F16 weights (pack.h): 16 rows per group, lane r = row r.
 *
 * Layout of a group: for every column k, the 16 halves of rows 0..15 (32 bytes), k
 * ascending; the column count is padded to an even number with zero halves so a group is
 * a multiple of 64 bytes. Any n_cols works (no multiple-of-16 condition).
 *
 * Decode (one token) streams 4 groups side by side: per k and group one 32-byte load, one
 * vcvtph2ps and one FMA with x[k] broadcast; the 4 groups' accumulator chains are
 * independent, so the FMA latency does not limit the stream. No software prefetch: the
 * hardware prefetcher follows the 4 sequential streams, and prefetching 1 KiB ahead made
 * whole-model decode 5% slower (6 of 6 interleaved runs, weights on huge pages).
 *
 * Several tokens use a register tile of 3 groups (48 rows) x up to 8 tokens: 24 zmm
 * accumulators, per k 3 weight loads + converts, 8 broadcasts of x[t][k] and 24 FMAs
 * (against 2 groups x 12 tokens: nomic-embed's stacked gate/up matrix, 6144 x 768 at 1008
 * tokens, 86.5 -> 90.1 GMAC/s, its QKV 2304 x 768 +1-2%, the others equal; one thread,
 * EPYC Zen 5, best of 5, two runs). The tokens go in blocks whose activations fit L2
 * (token_block); within a block, K is cut into chunks of KC columns so the 3-group weight
 * panel (KC x 96 B = 24 KiB) stays in L1 while every token tile of the block passes over
 * it; the first chunk stores y, later ones add to it. Every path sums each output over k
 * in order in one f32 accumulator, so a token's results are bit-identical whether it runs
 * alone or batched with others (the forward tests compare exactly that), and deterministic. */
#include <immintrin.h>
#include <string.h>

#include "cpu/kernels_impl.h"
#include "cpu/pack.h"

#define AI static inline __attribute__((always_inline))

/* columns per K chunk (see above) and the token tile */
#define KC 256
#define TT 8
#define TG 3 /* groups per tile */

/* Tokens per block: a block's activations (block x n_cols f32) stay in L2 while every
 * 2-group panel of the matrix passes over them. Without blocks, a batch of 1024 tokens of
 * 768 columns (3 MiB) streamed from L3 once per panel: nomic-embed's matrices at 1024
 * tokens ran 10-20% slower than at 96 (bench micro-runs, 1 thread, AVX-512, 3 rounds each;
 * blocks of 384 KiB beat 256 and 768). */
#define XBLOCK_BYTES (384 << 10)
static int token_block(int64_t n_cols) {
    const int tb = (int)(XBLOCK_BYTES / (4 * n_cols)) / TT * TT;
    return tb < 2 * TT ? 2 * TT : tb;
}

static size_t gb_f16(int64_t n_cols) { return (size_t)((n_cols + 1) & ~(int64_t)1) * 32; }

AI __m512 wload(const uint16_t *p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}

/* NG groups (up to 4, gs halves apart), one token, all of K: one accumulator per group
 * summing k in order, exactly like tile() below, so a token's outputs do not depend on how
 * many tokens share the call (the groups' chains are independent; the stream, not the FMA
 * latency, is the limit). */
AI void dec(const int NG, int64_t n_cols, const uint16_t *g, size_t gs, const float *x, float *y) {
    __m512 a[4];
    _Pragma("GCC unroll 4") for (int i = 0; i < NG; i++) a[i] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 2 <= n_cols; k += 2) {
        const __m512 x0 = _mm512_set1_ps(x[k]), x1 = _mm512_set1_ps(x[k + 1]);
        _Pragma("GCC unroll 4") for (int i = 0; i < NG; i++) {
            const uint16_t *p = g + (size_t)i * gs + k * 16;
            a[i] = _mm512_fmadd_ps(wload(p), x0, a[i]);
            a[i] = _mm512_fmadd_ps(wload(p + 16), x1, a[i]);
        }
    }
    if (k < n_cols) {
        _Pragma("GCC unroll 4") for (int i = 0; i < NG; i++) a[i] =
            _mm512_fmadd_ps(wload(g + (size_t)i * gs + k * 16), _mm512_set1_ps(x[k]), a[i]);
    }
    _Pragma("GCC unroll 4") for (int i = 0; i < NG; i++) _mm512_storeu_ps(y + 16 * i, a[i]);
}

/* NG groups (1 to TG, gs halves apart) x NT tokens over columns [k0, k1): y (+)= products. */
AI void tile(const int NG, const int NT, const uint16_t *g, size_t gs, int64_t k0, int64_t k1,
             const float *x, size_t xsf, float *y, int64_t ys, int add) {
    __m512 acc[TG][TT];
    _Pragma("GCC unroll 8") for (int t = 0; t < NT; t++) {
        _Pragma("GCC unroll 3") for (int i = 0; i < NG; i++) acc[i][t] =
            add ? _mm512_loadu_ps(y + (int64_t)t * ys + 16 * i) : _mm512_setzero_ps();
    }
    for (int64_t k = k0; k < k1; k++) {
        __m512 w[TG];
        _Pragma("GCC unroll 3") for (int i = 0; i < NG; i++) w[i] =
            wload(g + (size_t)i * gs + k * 16);
        _Pragma("GCC unroll 8") for (int t = 0; t < NT; t++) {
            const __m512 xb = _mm512_set1_ps(x[(size_t)t * xsf + (size_t)k]);
            _Pragma("GCC unroll 3") for (int i = 0; i < NG; i++) acc[i][t] =
                _mm512_fmadd_ps(w[i], xb, acc[i][t]);
        }
    }
    _Pragma("GCC unroll 8") for (int t = 0; t < NT; t++) {
        _Pragma("GCC unroll 3") for (int i = 0; i < NG; i++)
            _mm512_storeu_ps(y + (int64_t)t * ys + 16 * i, acc[i][t]);
    }
}

/* nt (1..TT) and ng (1..TG) as compile-time counts: each case is its own unrolled tile */
static void tile_n(const int ng, int nt, const uint16_t *g, size_t gs, int64_t k0, int64_t k1,
                   const float *x, size_t xsf, float *y, int64_t ys, int add) {
#define TILE_CASE(N)                                                                               \
    case N:                                                                                        \
        if (ng == 3)                                                                               \
            tile(3, N, g, gs, k0, k1, x, xsf, y, ys, add);                                         \
        else if (ng == 2)                                                                          \
            tile(2, N, g, gs, k0, k1, x, xsf, y, ys, add);                                         \
        else                                                                                       \
            tile(1, N, g, gs, k0, k1, x, xsf, y, ys, add);                                         \
        break;
    switch (nt) {
        TILE_CASE(1);
        TILE_CASE(2);
        TILE_CASE(3);
        TILE_CASE(4);
        TILE_CASE(5);
        TILE_CASE(6);
        TILE_CASE(7);
        TILE_CASE(8);
    default:
        break;
    }
#undef TILE_CASE
}

static void mm_f16(int64_t n_cols, const uint8_t *wp, int n_groups, const uint8_t *xb, size_t xs,
                   int nt, float *y, int64_t ys) {
    const size_t gs = gb_f16(n_cols) / 2; /* halves per group */
    const uint16_t *w = (const uint16_t *)wp;
    const float *x = (const float *)xb;
    const size_t xsf = xs / sizeof(float);
    if (nt == 1) {
        UL_PACK_DEC_GROUPS4(dec, n_cols, w, gs, n_groups, x, y);
        return;
    }
    const int tb = token_block(n_cols);
    for (int b0 = 0; b0 < nt; b0 += tb) {
        const int b1 = nt - b0 < tb ? nt : b0 + tb;
        for (int gi = 0; gi < n_groups; gi += TG) {
            const int ng = n_groups - gi >= TG ? TG : n_groups - gi;
            const uint16_t *g = w + (size_t)gi * gs;
            float *yg = y + (int64_t)gi * UL_PACK_ROWS;
            for (int64_t k0 = 0; k0 < n_cols; k0 += KC) {
                const int64_t k1 = n_cols - k0 < KC ? n_cols : k0 + KC;
                for (int t = b0; t < b1; t += TT) {
                    const int n = b1 - t < TT ? b1 - t : TT;
                    tile_n(ng, n, g, gs, k0, k1, x + (size_t)t * xsf, xsf, yg + (int64_t)t * ys, ys,
                           k0 > 0);
                }
            }
        }
    }
}

/* Any n_cols packs (odd counts are padded inside the group); the wiring's only condition
 * is the common one of 16-row groups. */
const ul_pack_kern_t ul_pack_f16_avx512 = {gb_f16, ul_pack_f16_rows, mm_f16};
