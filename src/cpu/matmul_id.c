/* ul_cpu_matmul_id (matmul_id.h): one conversion phase for all activation rows, one barrier,
 * then (group, chunk of 64 weight rows) items handed out like ul_cpu_matmul's chunks:
 * thread i owns a contiguous segment of the item list and takes it front to back (one
 * sequential stream per matrix), then helps the others from their segments' fronts. */
#include <string.h>

#include "cpu/kernels_impl.h"
#include "cpu/matmul_id.h"
#include "cpu/pack.h"

#define CHUNK_ROWS 64 /* a multiple of UL_PACK_ROWS, as matmul.c's */
#define MAX_GROUPS 1024

size_t ul_cpu_matmul_id_scratch(int type, int64_t n_cols, int n_rows) {
    return ul_cpu_xrow_bytes(ul_cpu_xfmt(type), n_cols) * (size_t)n_rows;
}

/* Every thread converts an equal share of the (row, block) units. */
static void convert(ul_xfmt_t f, const float *x, const int32_t *idx, int64_t n_cols, int n_rows,
                    uint8_t *dst, size_t xs, int ith, int nth) {
    const int64_t blk = f == XF_Q8K ? QKK : f == XF_Q8A ? QK : n_cols;
    const int64_t per_row = n_cols / blk, units = per_row * n_rows;
    int64_t u0 = units * ith / nth, u1 = units * (ith + 1) / nth;
    while (u0 < u1) {
        const int64_t r = u0 / per_row, b0 = u0 % per_row;
        const int64_t b1 = per_row < b0 + (u1 - u0) ? per_row : b0 + (u1 - u0);
        const float *src = x + (idx ? idx[r] : r) * n_cols + b0 * blk;
        ul_cpu_quant_x(f, src, dst + (size_t)r * xs + ul_cpu_xrow_bytes(f, b0 * blk),
                       (b1 - b0) * blk);
        u0 += b1 - b0;
    }
}

/* Weight rows [r0, r1) of mat m (its parts stacked) for the group's n activation rows. */
static void rows(const ul_cpu_mat_t *m, ul_mm_fn mm, const uint8_t *xq, size_t xs, int n,
                 float *const *y, int64_t r0, int64_t r1) {
    const ul_pack_kern_t *pk = m->pk;
    const size_t ws = ul_type_row_bytes(m->type, m->n_cols),
                 gb = pk ? pk->group_bytes(m->n_cols) : 0;
    int64_t base = 0;
    for (int i = 0; i < m->n_parts && r0 < r1; base += m->part_rows[i++]) {
        const int64_t end = base + m->part_rows[i];
        if (r0 >= end) continue;
        const int64_t a = r0 - base, b = (r1 < end ? r1 : end) - base;
        if (pk)
            pk->mm(m->n_cols, m->packed + (size_t)((base + a) / UL_PACK_ROWS) * gb,
                   (int)((b - a) / UL_PACK_ROWS), xq, xs, n, y[i] + a, m->part_rows[i]);
        else
            mm(m->n_cols, m->data[i] + (size_t)a * ws, ws, (int)(b - a), xq, xs, n, y[i] + a,
               m->part_rows[i]);
        r0 = base + b;
    }
}

/* Item c of the list: its group (binary search in the groups' first items) and rows. */
static void item(const ul_mm_group_t *g, const int32_t *first, int ng, int64_t c, ul_mm_fn mm,
                 const uint8_t *xq, size_t xs, float *const *y) {
    int lo = 0, hi = ng - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (first[mid] <= c)
            lo = mid;
        else
            hi = mid - 1;
    }
    const ul_mm_group_t *e = &g[lo];
    const ul_cpu_mat_t *m = e->w;
    const int64_t r0 = (c - first[lo]) * CHUNK_ROWS;
    const int64_t r1 = r0 + CHUNK_ROWS < m->n_rows ? r0 + CHUNK_ROWS : m->n_rows;
    float *yg[UL_MAT_PARTS];
    for (int i = 0; i < m->n_parts; i++) yg[i] = y[i] + (size_t)e->row0 * m->part_rows[i];
    rows(m, mm, xq + (size_t)e->row0 * xs, xs, e->n, yg, r0, r1);
}

void ul_cpu_matmul_id(ul_pool_t *p, const ul_mm_group_t *g, int n_groups, const float *x,
                      const int32_t *idx, int n_rows, float *const *y, void *scratch, int ith,
                      int nth) {
    UL_ASSERT(n_groups <= MAX_GROUPS);
    /* the groups with rows, and the first item of each (every thread builds its own copy) */
    ul_mm_group_t act[MAX_GROUPS];
    int32_t first[MAX_GROUPS];
    int na = 0;
    int64_t n_items = 0;
    for (int i = 0; i < n_groups; i++) {
        if (!g[i].n) continue;
        act[na] = g[i];
        first[na++] = (int32_t)n_items;
        n_items += (g[i].w->n_rows + CHUNK_ROWS - 1) / CHUNK_ROWS;
    }
    if (!na) return; /* every thread sees the same: no barrier needed */
    const ul_cpu_mat_t *m0 = act[0].w;
    const ul_xfmt_t f = ul_cpu_xfmt(m0->type);
    const size_t xs = ul_cpu_xrow_bytes(f, m0->n_cols);
    if (p && nth > 1) atomic_store_explicit(ul_pool_ticket(p, ith), 0, memory_order_relaxed);
    convert(f, x, idx, m0->n_cols, n_rows, scratch, xs, ith, nth);
    ul_pool_barrier(p); /* the activations are ready and the tickets reset */
    const ul_mm_fn mm = ul_cpu_mm_fn(m0->type, ul_cpu_isa());
    const uint8_t *xq = scratch;
    if (p && nth > 1) {
        for (int s = 0; s < nth; s++) {
            const int j = (ith + s) % nth;
            const int64_t lo = n_items * j / nth, hi = n_items * (j + 1) / nth;
            atomic_int *ticket = ul_pool_ticket(p, j);
            for (;;) {
                const int64_t c = lo + atomic_fetch_add_explicit(ticket, 1, memory_order_relaxed);
                if (c >= hi) break;
                item(act, first, na, c, mm, xq, xs, y);
            }
        }
    } else {
        for (int64_t c = n_items * ith / nth; c < n_items * (ith + 1) / nth; c++)
            item(act, first, na, c, mm, xq, xs, y);
    }
    ul_pool_barrier(p);
}
