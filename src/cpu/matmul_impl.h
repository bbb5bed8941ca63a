/* Private to matmul.c and matmul_id.c: the pieces both products are made of (activation
 * conversion, a row range of a mat, the chunk hand-out of a parallel phase). */
#ifndef UL_CPU_MATMUL_IMPL_H
#define UL_CPU_MATMUL_IMPL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "cpu/kernels_impl.h"

/* Rows per dynamically handed-out chunk (a multiple of UL_PACK_ROWS and of matmul.c's
 * ROW_ALIGN): 64 rows of a 2048-wide Q4_0 matrix are 72 KiB, enough to amortise the
 * atomic, small enough to balance. */
#define UL_MM_CHUNK_ROWS 64

/* Converts n_rows activation rows into format f, row r of dst (xs bytes apart) from
 * x + (idx ? idx[r] : r) * n_cols. Each of the nth threads converts an equal share of all
 * (row, block) units, so a single decode token is not converted by thread 0 alone; every
 * format is per block (or per element), so any split gives the same bytes. */
void ul_cpu_quant_rows(ul_xfmt_t f, const float *x, const int32_t *idx, int64_t n_cols, int n_rows,
                       uint8_t *dst, size_t xs, int ith, int nth);

/* Weight rows [r0, r1) of the stacked parts of m for n activation rows (xq, xs bytes
 * apart): y[i][t * part_rows[i] + j] for part i. mm: the row kernel (for unpacked rows:
 * all of them, or the last part_rows % 16 of a packed single part; packed parts start on a
 * group, so r0 and r1 are multiples of UL_PACK_ROWS or the end). */
void ul_cpu_mat_rows(const ul_cpu_mat_t *m, ul_mm_fn mm, const uint8_t *xq, size_t xs, int n,
                     float *const *y, int64_t r0, int64_t r1);

/* Calls fn(ctx, c) for every chunk c < n_chunks across the nth threads of a pool job
 * (nth > 1): thread i owns segment i of the chunks and takes them front to back, so its
 * rows are one sequential stream (the hardware prefetcher never restarts); a thread whose
 * segment is done takes chunks from the others' fronts, so one slowed down by another
 * process on its core is helped instead of waited for. Every thread must have set its own
 * ticket (ul_pool_ticket(p, ith)) to 0 before the barrier that precedes this call. Inlined
 * so fn is a direct call. */
static inline __attribute__((always_inline)) void ul_cpu_for_chunks(ul_pool_t *p, int64_t n_chunks,
                                                                    int ith, int nth,
                                                                    void (*fn)(void *, int64_t),
                                                                    void *ctx) {
    for (int s = 0; s < nth; s++) {
        const int j = (ith + s) % nth;
        const int64_t lo = n_chunks * j / nth, hi = n_chunks * (j + 1) / nth;
        atomic_int *ticket = ul_pool_ticket(p, j);
        for (;;) {
            const int64_t c = lo + atomic_fetch_add_explicit(ticket, 1, memory_order_relaxed);
            if (c >= hi) break;
            fn(ctx, c);
        }
    }
}

#endif
