/* ul_cpu_matmul_id (matmul_id.h): one conversion phase for all activation rows, one barrier,
 * then (group, chunk of 64 weight rows) items handed out like ul_cpu_matmul's chunks:
 * thread i owns a contiguous segment of the item list and takes it front to back (one
 * sequential stream per matrix), then helps the others from their segments' fronts. */

#include "cpu/kernels_impl.h"
#include "cpu/matmul_id.h"
#include "cpu/matmul_impl.h"

#define MAX_GROUPS 1024

size_t ul_cpu_matmul_id_scratch(int type, int64_t n_cols, int n_rows) {
    return ul_cpu_xrow_bytes(ul_cpu_xfmt(type), n_cols) * (size_t)n_rows;
}

typedef struct {
    const ul_mm_group_t *g; /* the groups with rows */
    const int32_t *first;   /* the first item of each */
    int ng;
    ul_mm_fn mm;
    const uint8_t *xq;
    size_t xs;
    float *const *y;
} items_t;

/* Item c of the list: its group (binary search in the groups' first items) and rows. */
static void item(void *ctx, int64_t c) {
    const items_t *k = ctx;
    const int32_t *first = k->first;
    int lo = 0, hi = k->ng - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (first[mid] <= c)
            lo = mid;
        else
            hi = mid - 1;
    }
    const ul_mm_group_t *e = &k->g[lo];
    const ul_cpu_mat_t *m = e->w;
    const int64_t r0 = (c - first[lo]) * UL_MM_CHUNK_ROWS;
    const int64_t r1 = r0 + UL_MM_CHUNK_ROWS < m->n_rows ? r0 + UL_MM_CHUNK_ROWS : m->n_rows;
    float *yg[UL_MAT_PARTS];
    for (int i = 0; i < m->n_parts; i++) yg[i] = k->y[i] + (size_t)e->row0 * m->part_rows[i];
    ul_cpu_mat_rows(m, k->mm, k->xq + (size_t)e->row0 * k->xs, k->xs, e->n, yg, r0, r1);
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
        n_items += (g[i].w->n_rows + UL_MM_CHUNK_ROWS - 1) / UL_MM_CHUNK_ROWS;
    }
    if (!na) return; /* every thread sees the same: no barrier needed */
    const ul_cpu_mat_t *m0 = act[0].w;
    const ul_xfmt_t f = ul_cpu_xfmt(m0->type);
    const size_t xs = ul_cpu_xrow_bytes(f, m0->n_cols);
    if (p && nth > 1) atomic_store_explicit(ul_pool_ticket(p, ith), 0, memory_order_relaxed);
    ul_cpu_quant_rows(f, x, idx, m0->n_cols, n_rows, scratch, xs, ith, nth);
    ul_pool_barrier(p); /* the activations are ready and the tickets reset */
    items_t k = {act, first, na, ul_cpu_mm_fn(m0->type, ul_cpu_isa()), scratch, xs, y};
    if (p && nth > 1)
        ul_cpu_for_chunks(p, n_items, ith, nth, item, &k);
    else
        for (int64_t c = n_items * ith / nth; c < n_items * (ith + 1) / nth; c++) item(&k, c);
    ul_pool_barrier(p);
}
