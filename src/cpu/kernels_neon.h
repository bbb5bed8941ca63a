/* AArch64 kernels shared by the NEON, dotprod and i8mm tables (kernels_neon*.c): the
 * activation converters (NEON is baseline, so every table uses the same ones) and the
 * row x token loop around a per-type dot product. */
#ifndef UL_CPU_KERNELS_NEON_H
#define UL_CPU_KERNELS_NEON_H

#include <string.h>

#include "cpu/kernels_impl.h"
#include "cpu/pack.h"

void ul_neon_xq_f16r(const float *x, void *dst, int64_t n);
void ul_neon_xq_q8a(const float *x, void *dst, int64_t n);
void ul_neon_xq_q8a1(const float *x, void *dst, int64_t n);
void ul_neon_xq_q8k(const float *x, void *dst, int64_t n);

typedef float (*ul_neon_dot_fn)(int64_t n, const void *w, const void *x);

/* y[t * ys + r] = dot(row r, token t); static inline so each file's dot is inlined */
static inline void ul_neon_mm(ul_neon_dot_fn dot, int64_t n_cols, const uint8_t *w, size_t ws,
                              int nr, const uint8_t *x, size_t xs, int nt, float *y, int64_t ys) {
    for (int r = 0; r < nr; r++)
        for (int t = 0; t < nt; t++) y[t * ys + r] = dot(n_cols, w + r * ws, x + t * xs);
}

#define UL_NEON_MM(name, dot)                                                                      \
    static void name(int64_t n_cols, const uint8_t *w, size_t ws, int nr, const uint8_t *x,        \
                     size_t xs, int nt, float *y, int64_t ys) {                                    \
        ul_neon_mm(dot, n_cols, w, ws, nr, x, xs, nt, y, ys);                                      \
    }

/* AArch64's packed Q8_0 and Q4_0 records (pack.h; kernels_neon_quads.h, w 4: quads of 4 rows
 * for SDOT and widening multiplies; kernels_neon_i8mm_pack.c, w 8: row pairs for SMMLA): one
 * record per block of 32 columns, [16 f16 scales, rows 0..15] then the 16 rows' quant bytes
 * in chunks of w bytes, chunk j of row r at 32 + 16 w j + w r: 544 bytes (Q8_0) or 288
 * (Q4_0) per record, the rows' GGUF bytes rearranged, no padding. */
static inline size_t ul_neon_pack_rec(int q8) { return 32 + 16 * (q8 ? 32 : 16); }

static inline void ul_neon_pack_chunks(int q8, int w, const uint8_t *rows, size_t rs,
                                       int64_t n_cols, uint8_t *dst) {
    const int64_t nb = n_cols / QK;
    const int n_chunks = (q8 ? 32 : 16) / w;
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *rec = dst + (size_t)b * ul_neon_pack_rec(q8);
        for (int r = 0; r < UL_PACK_ROWS; r++) {
            const uint8_t *row = rows + (size_t)r * rs, *d, *qs;
            if (q8) {
                d = (const uint8_t *)&((const blk_q8_0 *)row)[b].d;
                qs = (const uint8_t *)((const blk_q8_0 *)row)[b].qs;
            } else {
                d = (const uint8_t *)&((const blk_q4_0 *)row)[b].d;
                qs = ((const blk_q4_0 *)row)[b].qs;
            }
            memcpy(rec + 2 * r, d, 2);
            for (int j = 0; j < n_chunks; j++) memcpy(rec + 32 + 16 * w * j + w * r, qs + w * j, w);
        }
    }
}

#endif
