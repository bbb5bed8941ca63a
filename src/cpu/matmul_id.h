/* Grouped matrix products for mixtures of experts (ggml's mul_mat_id): several matrices of
 * one type and shape, each multiplied by its own group of activation rows, in ONE parallel
 * phase: the threads convert every source row once, then take (matrix, row chunk) items
 * from a shared list, so a decode token's 8 experts cost two barriers instead of two each,
 * and each matrix's rows are read once for all the rows of its group. */
#ifndef UL_CPU_MATMUL_ID_H
#define UL_CPU_MATMUL_ID_H

#include <stddef.h>
#include <stdint.h>

#include "cpu/kernels.h"

typedef struct {
    const ul_cpu_mat_t *w; /* the group's matrix: every group's has the same type, n_cols,
                            * n_parts and part_rows */
    int32_t row0, n;       /* its activation rows [row0, row0 + n) of the stack */
} ul_mm_group_t;

/* Bytes of scratch for a stack of n_rows activation rows of a type's matrices with n_cols
 * columns, gathered (idx) from n_src source rows (0 without idx). */
size_t ul_cpu_matmul_id_scratch(int type, int64_t n_cols, int n_rows, int n_src);

/* For every group g and part i: y[i][r][j] = dot(row j of part i of g.w, activation row r)
 * for r in [g.row0, g.row0 + g.n), j < part_rows[i]. Activation row r of the stack is
 * x + (idx ? idx[r] : r) * n_cols: with idx, the n_src rows of x are converted once however
 * many stack rows read them (a token's rows for its 8 experts), then gathered into the
 * stack's order (a barrier more; none when every group has at most one row, as in decode).
 * n_rows: the stack's rows (the groups cover [0, n_rows)). Groups with n == 0 are skipped.
 * Called by every pool thread with the same arguments inside one job; returns after a
 * barrier with y complete in every thread. Rows are computed by the same tile kernels as
 * ul_cpu_matmul, so a row's outputs equal those of an ul_cpu_matmul_mat over its group
 * alone. */
void ul_cpu_matmul_id(ul_pool_t *p, const ul_mm_group_t *g, int n_groups, const float *x,
                      const int32_t *idx, int n_src, int n_rows, float *const *y, void *scratch,
                      int ith, int nth);

/* g[i] = act(g[i]) * u[i] for i < n (SwiGLU, GeGLU). */
typedef void (*ul_glu_fn)(float *g, const float *u, size_t n);

/* The gated FFN's first product, gate and up fused per expert: every group's matrix has
 * two parts of equal rows n_ff (gate, then up). h[r][j] = act(gate row j . x_r) * (up row
 * j . x_r) for the group rows r, j < n_ff; u receives the up products (scratch of h's size).
 * An item computes the same 64 rows of gate and of up and applies act to them while they
 * are in cache, so no separate activation phase (nor its barrier) follows. Arguments and
 * threading as ul_cpu_matmul_id; h and u are [n_rows][n_ff]; results equal
 * ul_cpu_matmul_id into (h, u) followed by act over every row. */
void ul_cpu_matmul_id_glu(ul_pool_t *p, const ul_mm_group_t *g, int n_groups, const float *x,
                          const int32_t *idx, int n_src, int n_rows, float *h, float *u,
                          ul_glu_fn act, void *scratch, int ith, int nth);

#endif
