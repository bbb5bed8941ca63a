/* AArch64 kernels shared by the NEON, dotprod and i8mm tables (kernels_neon*.c): the
 * activation converters (NEON is baseline, so every table uses the same ones) and the
 * row x token loop around a per-type dot product. */
#ifndef UL_CPU_KERNELS_NEON_H
#define UL_CPU_KERNELS_NEON_H

#include "cpu/kernels_impl.h"

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

#endif
