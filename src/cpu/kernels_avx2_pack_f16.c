/* AVX2 packed F16 weights (pack.h): the AVX-512 layout (kernels_avx512_f16.c; for every
 * column k the 16 rows' halves, ul_pack_f16_rows), read as two vectors of 8 rows.
 *
 * Decode (one token) streams up to 4 groups (8 vectors) side by side: per k one 16-byte
 * load and vcvtph2ps per vector, x[k] broadcast once, 8 independent FMA chains.
 *
 * Several tokens use a register tile of one group (2 vectors, 16 rows) x up to 6 tokens:
 * 12 accumulators, per k 2 converts, 6 broadcasts of x[t][k] and 12 FMAs. K is cut into
 * chunks of KC columns so the group's panel (KC x 32 B = 8 KiB) stays in L1 while every
 * token tile passes over it; the first chunk stores y, later ones add to it. Every output
 * sums its k in order in one f32 accumulator, so a token's results are the same bits
 * alone or in a batch of any size (as on AVX-512). */
#include <immintrin.h>
#include <string.h>

#include "cpu/kernels_impl.h"
#include "cpu/kernels_tile.h"
#include "cpu/pack.h"

#define AI static inline __attribute__((always_inline))

#define KC 256
#define TT 6

static size_t gb_f16(int64_t n_cols) { return (size_t)((n_cols + 1) & ~(int64_t)1) * 32; }

AI __m256 wload(const uint16_t *p) { return _mm256_cvtph_ps(_mm_load_si128((const __m128i *)p)); }

/* NG groups (up to 4, gs halves apart), one token, all of K. */
AI void dec(const int NG, int64_t n_cols, const uint16_t *g, size_t gs, const float *x, float *y) {
    __m256 a[4][2];
    _Pragma("GCC unroll 4") for (int i = 0; i < NG; i++) a[i][0] = a[i][1] = _mm256_setzero_ps();
    for (int64_t k = 0; k < n_cols; k++) {
        const __m256 xb = _mm256_broadcast_ss(x + k);
        _Pragma("GCC unroll 4") for (int i = 0; i < NG; i++) {
            const uint16_t *p = g + (size_t)i * gs + k * 16;
            a[i][0] = _mm256_fmadd_ps(wload(p), xb, a[i][0]);
            a[i][1] = _mm256_fmadd_ps(wload(p + 8), xb, a[i][1]);
        }
    }
    _Pragma("GCC unroll 4") for (int i = 0; i < NG; i++) {
        _mm256_storeu_ps(y + 16 * i, a[i][0]);
        _mm256_storeu_ps(y + 16 * i + 8, a[i][1]);
    }
}

/* One group x NT tokens over columns [k0, k1): y (+)= products. */
AI void tile(const int NT, const uint16_t *g, int64_t k0, int64_t k1, const float *x, size_t xsf,
             float *y, int64_t ys, int add) {
    __m256 acc[TT][2];
    _Pragma("GCC unroll 6") for (int t = 0; t < NT; t++) {
        acc[t][0] = add ? _mm256_loadu_ps(y + (int64_t)t * ys) : _mm256_setzero_ps();
        acc[t][1] = add ? _mm256_loadu_ps(y + (int64_t)t * ys + 8) : _mm256_setzero_ps();
    }
    for (int64_t k = k0; k < k1; k++) {
        const __m256 w0 = wload(g + k * 16), w1 = wload(g + k * 16 + 8);
        _Pragma("GCC unroll 6") for (int t = 0; t < NT; t++) {
            const __m256 xb = _mm256_broadcast_ss(x + (size_t)t * xsf + (size_t)k);
            acc[t][0] = _mm256_fmadd_ps(w0, xb, acc[t][0]);
            acc[t][1] = _mm256_fmadd_ps(w1, xb, acc[t][1]);
        }
    }
    _Pragma("GCC unroll 6") for (int t = 0; t < NT; t++) {
        _mm256_storeu_ps(y + (int64_t)t * ys, acc[t][0]);
        _mm256_storeu_ps(y + (int64_t)t * ys + 8, acc[t][1]);
    }
}

static void tile_n(int nt, const uint16_t *g, int64_t k0, int64_t k1, const float *x, size_t xsf,
                   float *y, int64_t ys, int add) {
    DISPATCH_NT6(tile, nt, g, k0, k1, x, xsf, y, ys, add);
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
    /* K chunks outermost: a chunk's token tiles (L1) meet every group of the call in turn
     * and the groups' chunk panels (n_groups x KC x 32 B, L2) every token tile, so the
     * activations stream from memory once per chunk instead of once per group */
    for (int64_t k0 = 0; k0 < n_cols; k0 += KC) {
        const int64_t k1 = n_cols - k0 < KC ? n_cols : k0 + KC;
        for (int t = 0; t < nt;) {
            /* tiles of 6; a remainder of 7..9 is split so no tile is left with one token */
            const int n = nt - t <= TT ? nt - t : nt - t < 10 ? 4 : TT;
            const float *xt = x + (size_t)t * xsf;
            for (int gi = 0; gi < n_groups; gi++)
                tile_n(n, w + (size_t)gi * gs, k0, k1, xt, xsf,
                       y + (int64_t)gi * UL_PACK_ROWS + (int64_t)t * ys, ys, k0 > 0);
            t += n;
        }
    }
}

const ul_pack_kern_t ul_pack_f16_avx2 = {gb_f16, ul_pack_f16_rows, mm_f16};
