/* ul_cpu_matmul_id (matmul_id.h): one conversion phase for all activation rows, one barrier,
 * then (group, chunk of 64 weight rows) items handed out like ul_cpu_matmul's chunks:
 * thread i owns a contiguous segment of the item list and takes it front to back (one
 * sequential stream per matrix), then helps the others from their segments' fronts. */
#include <string.h>

#include "cpu/kernels_impl.h"
#include "cpu/matmul_id.h"
#include "cpu/matmul_impl.h"

#define MAX_GROUPS 1024

size_t ul_cpu_matmul_id_scratch(int type, int64_t n_cols, int n_rows, int n_src) {
    return ul_cpu_xrow_bytes(ul_cpu_xfmt(type), n_cols) * ((size_t)n_rows + (size_t)n_src);
}

typedef struct {
    ul_mm_group_t g[MAX_GROUPS];   /* the groups with rows */
    const uint8_t *xg[MAX_GROUPS]; /* each one's first converted activation row */
    int32_t first[MAX_GROUPS];     /* its first item */
    int ng;
    int64_t n_items;
    ul_mm_fn mm;
    size_t xs;
    float *const *y; /* ul_cpu_matmul_id */
    float *h, *u;    /* ul_cpu_matmul_id_glu */
    int64_t n_ff;
    ul_glu_fn act;
} items_t;

/* The groups with rows, and the first item of each (items over all of a mat's rows, or
 * with glu over its first part's). */
static void list_groups(items_t *k, const ul_mm_group_t *g, int n_groups, int glu) {
    UL_ASSERT(n_groups <= MAX_GROUPS);
    k->ng = 0;
    k->n_items = 0;
    for (int i = 0; i < n_groups; i++) {
        if (!g[i].n) continue;
        const int64_t rows = glu ? g[i].w->part_rows[0] : g[i].w->n_rows;
        k->g[k->ng] = g[i];
        k->first[k->ng++] = (int32_t)k->n_items;
        k->n_items += (rows + UL_MM_CHUNK_ROWS - 1) / UL_MM_CHUNK_ROWS;
    }
}

/* Converts the activations into scratch and points each group at its rows; the threads
 * meet at a barrier (two when rows are gathered), after which every ticket is reset. */
static void convert(ul_pool_t *p, items_t *k, const float *x, const int32_t *idx, int n_src,
                    int n_rows, uint8_t *scratch, int ith, int nth) {
    const ul_cpu_mat_t *m0 = k->g[0].w;
    const ul_xfmt_t f = ul_cpu_xfmt(m0->type);
    const size_t xs = k->xs = ul_cpu_xrow_bytes(f, m0->n_cols);
    k->mm = ul_cpu_mm_fn(m0->type, ul_cpu_isa());
    if (p && nth > 1) atomic_store_explicit(ul_pool_ticket(p, ith), 0, memory_order_relaxed);
    if (!idx) {
        ul_cpu_quant_rows(f, x, NULL, m0->n_cols, n_rows, scratch, xs, ith, nth);
        ul_pool_barrier(p);
        for (int i = 0; i < k->ng; i++) k->xg[i] = scratch + (size_t)k->g[i].row0 * xs;
        return;
    }
    uint8_t *src = scratch + (size_t)n_rows * xs;
    ul_cpu_quant_rows(f, x, NULL, m0->n_cols, n_src, src, xs, ith, nth);
    ul_pool_barrier(p);
    int gather = 0;
    for (int i = 0; i < k->ng; i++) gather |= k->g[i].n > 1;
    if (!gather) { /* one row per group: read it where it was converted */
        for (int i = 0; i < k->ng; i++) k->xg[i] = src + (size_t)idx[k->g[i].row0] * xs;
        return;
    }
    for (int r = n_rows * ith / nth; r < n_rows * (ith + 1) / nth; r++)
        memcpy(scratch + (size_t)r * xs, src + (size_t)idx[r] * xs, xs);
    ul_pool_barrier(p);
    for (int i = 0; i < k->ng; i++) k->xg[i] = scratch + (size_t)k->g[i].row0 * xs;
}

/* The group of item c (binary search in the groups' first items). */
static int group_of(const items_t *k, int64_t c) {
    int lo = 0, hi = k->ng - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (k->first[mid] <= c)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

static void item(void *ctx, int64_t c) {
    const items_t *k = ctx;
    const int gi = group_of(k, c);
    const ul_mm_group_t *e = &k->g[gi];
    const ul_cpu_mat_t *m = e->w;
    const int64_t r0 = (c - k->first[gi]) * UL_MM_CHUNK_ROWS;
    const int64_t r1 = r0 + UL_MM_CHUNK_ROWS < m->n_rows ? r0 + UL_MM_CHUNK_ROWS : m->n_rows;
    float *yg[UL_MAT_PARTS];
    for (int i = 0; i < m->n_parts; i++) yg[i] = k->y[i] + (size_t)e->row0 * m->part_rows[i];
    ul_cpu_mat_rows(m, k->mm, k->xg[gi], k->xs, e->n, yg, r0, r1);
}

/* Rows [r0, r1) of the gate part and the same rows of the up part, then act on them. */
static void item_glu(void *ctx, int64_t c) {
    const items_t *k = ctx;
    const int gi = group_of(k, c);
    const ul_mm_group_t *e = &k->g[gi];
    const int64_t n_ff = k->n_ff, r0 = (c - k->first[gi]) * UL_MM_CHUNK_ROWS;
    const int64_t r1 = r0 + UL_MM_CHUNK_ROWS < n_ff ? r0 + UL_MM_CHUNK_ROWS : n_ff;
    float *h = k->h + (size_t)e->row0 * (size_t)n_ff, *u = k->u + (size_t)e->row0 * (size_t)n_ff;
    float *yg[UL_MAT_PARTS] = {h, u, NULL};
    ul_cpu_mat_rows(e->w, k->mm, k->xg[gi], k->xs, e->n, yg, r0, r1);
    ul_cpu_mat_rows(e->w, k->mm, k->xg[gi], k->xs, e->n, yg, n_ff + r0, n_ff + r1);
    for (int32_t t = 0; t < e->n; t++)
        k->act(h + (size_t)t * (size_t)n_ff + r0, u + (size_t)t * (size_t)n_ff + r0,
               (size_t)(r1 - r0));
}

static void run_items(ul_pool_t *p, items_t *k, void (*fn)(void *, int64_t), int ith, int nth) {
    if (p && nth > 1)
        ul_cpu_for_chunks(p, k->n_items, ith, nth, fn, k);
    else
        for (int64_t c = k->n_items * ith / nth; c < k->n_items * (ith + 1) / nth; c++) fn(k, c);
    ul_pool_barrier(p);
}

void ul_cpu_matmul_id(ul_pool_t *p, const ul_mm_group_t *g, int n_groups, const float *x,
                      const int32_t *idx, int n_src, int n_rows, float *const *y, void *scratch,
                      int ith, int nth) {
    items_t k; /* every thread builds its own copy */
    list_groups(&k, g, n_groups, 0);
    if (!k.ng) return; /* every thread sees the same: no barrier needed */
    k.y = y;
    convert(p, &k, x, idx, n_src, n_rows, scratch, ith, nth);
    run_items(p, &k, item, ith, nth);
}

void ul_cpu_matmul_id_glu(ul_pool_t *p, const ul_mm_group_t *g, int n_groups, const float *x,
                          const int32_t *idx, int n_src, int n_rows, float *h, float *u,
                          ul_glu_fn act, void *scratch, int ith, int nth) {
    items_t k;
    list_groups(&k, g, n_groups, 1);
    if (!k.ng) return;
    const int64_t n_ff = k.g[0].w->part_rows[0];
    UL_ASSERT(k.g[0].w->n_parts == 2 && k.g[0].w->part_rows[1] == n_ff);
    k.h = h, k.u = u, k.n_ff = n_ff, k.act = act;
    convert(p, &k, x, idx, n_src, n_rows, scratch, ith, nth);
    run_items(p, &k, item_glu, ith, nth);
}
