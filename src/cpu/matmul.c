/* ul_cpu_matmul: the threads of one pool job convert the activations once into the
 * format the weight type's dot product consumes (shared scratch), then each computes a
 * contiguous chunk of weight rows for every token with the active ISA's tile kernel, or
 * with the packed kernel when the matrix was packed at load (ul_cpu_mat_t). */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "cpu/kernels_impl.h"
#include "cpu/matmul_impl.h"
#include "cpu/pack.h"
#include "uvllm/err.h"

/* Row chunks are multiples of this so SIMD kernels that take rows 4 or 8 at a time
 * see full groups except in the last chunk. */
#define ROW_ALIGN 16

size_t ul_cpu_matmul_scratch(int type, int64_t n_cols, int n_tok) {
    ul_xfmt_t f = ul_cpu_xfmt(type);
    if (f == XF_F32) return 0;
    return ul_cpu_xrow_bytes(f, n_cols) * (size_t)n_tok;
}

void ul_cpu_quant_rows(ul_xfmt_t f, const float *x, const int32_t *idx, int64_t n_cols, int n_rows,
                       uint8_t *dst, size_t xs, int ith, int nth) {
    const int64_t blk = f == XF_Q8K ? QKK : f == XF_Q8A || f == XF_Q8A1 ? QK : 1;
    const int64_t per_row = n_cols / blk, units = per_row * n_rows;
    int64_t u0 = units * ith / nth, u1 = units * (ith + 1) / nth;
    while (u0 < u1) {
        const int64_t r = u0 / per_row, b0 = u0 % per_row;
        const int64_t b1 = per_row < b0 + (u1 - u0) ? per_row : b0 + (u1 - u0);
        ul_cpu_quant_x(f, x + (idx ? idx[r] : r) * n_cols + b0 * blk,
                       dst + (size_t)r * xs + ul_cpu_xrow_bytes(f, b0 * blk), (b1 - b0) * blk);
        u0 += b1 - b0;
    }
}

static void rows_of(int64_t n_rows, int ith, int nth, int64_t *r0, int64_t *r1) {
    int64_t per = (n_rows + nth - 1) / nth;
    per = (per + ROW_ALIGN - 1) / ROW_ALIGN * ROW_ALIGN;
    *r0 = per * ith < n_rows ? per * ith : n_rows;
    *r1 = *r0 + per < n_rows ? *r0 + per : n_rows;
}

/* Fills m for (parts, pack) without allocating; returns the packed kernels or NULL (rows
 * read in place), or sets *rc on bad parts. */
static const ul_pack_kern_t *plan(ul_cpu_mat_t *m, const ul_gguf_tensor_t *const *parts,
                                  int n_parts, int pack, int *rc) {
    memset(m, 0, sizeof *m);
    *rc = 0;
    if (n_parts < 1 || n_parts > UL_MAT_PARTS) {
        *rc = UL_EINVAL;
        return NULL;
    }
    m->type = (int)parts[0]->type;
    m->n_cols = parts[0]->ne[0];
    m->n_parts = n_parts;
    int all16 = 1;
    for (int i = 0; i < n_parts; i++) {
        if ((int)parts[i]->type != m->type || parts[i]->ne[0] != m->n_cols) {
            *rc = UL_EINVAL;
            return NULL;
        }
        m->part_rows[i] = parts[i]->ne[1];
        m->data[i] = parts[i]->data;
        m->n_rows += parts[i]->ne[1];
        all16 &= parts[i]->ne[1] % UL_PACK_ROWS == 0;
    }
    const char *env = pack ? getenv("UVLLM_PACK") : NULL;
    if (env && !strcmp(env, "0")) pack = 0;
    /* one part (an output matrix of 50257 rows): whole groups packed, the last rows in place */
    all16 |= n_parts == 1 && m->n_rows >= UL_PACK_ROWS;
    const ul_pack_kern_t *pk = pack && all16 ? ul_cpu_pack_kern(m->type, ul_cpu_isa()) : NULL;
    if (pk) m->packed_bytes = pk->group_bytes(m->n_cols) * (size_t)(m->n_rows / UL_PACK_ROWS);
    return pk;
}

static void pack_into(ul_cpu_mat_t *m, const ul_pack_kern_t *pk, uint8_t *dst) {
    const size_t gb = pk->group_bytes(m->n_cols), ws = ul_type_row_bytes(m->type, m->n_cols);
    m->packed = dst;
    for (int i = 0; i < m->n_parts; i++)
        for (int64_t r = 0; r + UL_PACK_ROWS <= m->part_rows[i]; r += UL_PACK_ROWS, dst += gb)
            pk->pack(m->data[i] + (size_t)r * ws, ws, m->n_cols, dst);
    m->pk = pk;
}

int ul_cpu_mat_init(ul_cpu_mat_t *m, const ul_gguf_tensor_t *const *parts, int n_parts, int pack) {
    int rc;
    const ul_pack_kern_t *pk = plan(m, parts, n_parts, pack, &rc);
    if (!pk) return rc;
    uint8_t *dst = aligned_alloc(64, (m->packed_bytes + 63) & ~(size_t)63);
    if (!dst) return UL_ENOMEM;
    pack_into(m, pk, dst);
    m->owned = 1;
    return 0;
}

size_t ul_cpu_mat_packed_bytes(const ul_gguf_tensor_t *const *parts, int n_parts, int pack) {
    ul_cpu_mat_t m;
    int rc;
    return plan(&m, parts, n_parts, pack, &rc) ? m.packed_bytes : 0;
}

int ul_cpu_mat_init_in(ul_cpu_mat_t *m, const ul_gguf_tensor_t *const *parts, int n_parts, int pack,
                       uint8_t *dst) {
    int rc;
    const ul_pack_kern_t *pk = plan(m, parts, n_parts, pack, &rc);
    if (pk) pack_into(m, pk, dst);
    return rc;
}

void ul_cpu_mat_free(ul_cpu_mat_t *m) {
    if (m->owned) free(m->packed);
    memset(m, 0, sizeof *m);
}

/* Decode streams every weight byte from DRAM once per token: with 4 KiB pages that is a
 * TLB miss and a page walk every 4 KiB of the stream; 2 MiB pages remove nearly all of
 * them (TinyLlama Q4_0 decode faster in each of 6 interleaved runs, median +29%; Q8_0
 * +9%; F16 within the noise). madvise, not MAP_HUGETLB: it needs no
 * reserved pool and is a no-op where transparent huge pages are off. */
void *ul_cpu_alloc_weights(size_t bytes) {
    const size_t huge = (size_t)2 << 20, n = (bytes + huge - 1) / huge * huge;
    void *p = aligned_alloc(huge, n ? n : huge);
    const char *env = getenv("UVLLM_THP");
    if (p && !(env && !strcmp(env, "0"))) (void)madvise(p, n, MADV_HUGEPAGE);
    return p;
}

void ul_cpu_mat_rows(const ul_cpu_mat_t *m, ul_mm_fn mm, const uint8_t *xq, size_t xs, int n,
                     float *const *y, int64_t r0, int64_t r1) {
    const ul_pack_kern_t *pk = m->pk;
    const size_t ws = ul_type_row_bytes(m->type, m->n_cols),
                 gb = pk ? pk->group_bytes(m->n_cols) : 0;
    int64_t base = 0;
    for (int i = 0; i < m->n_parts && r0 < r1; base += m->part_rows[i++]) {
        const int64_t end = base + m->part_rows[i];
        if (r0 >= end) continue;
        int64_t a = r0 - base;
        const int64_t b = (r1 < end ? r1 : end) - base;
        const int64_t pe = pk ? m->part_rows[i] / UL_PACK_ROWS * UL_PACK_ROWS : 0;
        if (a < pe) {
            const int64_t e = b < pe ? b : pe;
            pk->mm(m->n_cols, m->packed + (size_t)((base + a) / UL_PACK_ROWS) * gb,
                   (int)((e - a) / UL_PACK_ROWS), xq, xs, n, y[i] + a, m->part_rows[i]);
            a = e;
        }
        if (a < b) /* unpacked, or a packed part's last rows */
            mm(m->n_cols, m->data[i] + (size_t)a * ws, ws, (int)(b - a), xq, xs, n, y[i] + a,
               m->part_rows[i]);
        r0 = base + b;
    }
}

typedef struct {
    const ul_cpu_mat_t *m;
    ul_mm_fn mm;
    const uint8_t *xq;
    size_t xs;
    int n_tok;
    float *const *y;
} chunk_ctx_t;

static void chunk(void *ctx, int64_t c) {
    const chunk_ctx_t *k = ctx;
    const int64_t r0 = c * UL_MM_CHUNK_ROWS;
    const int64_t r1 = r0 + UL_MM_CHUNK_ROWS < k->m->n_rows ? r0 + UL_MM_CHUNK_ROWS : k->m->n_rows;
    ul_cpu_mat_rows(k->m, k->mm, k->xq, k->xs, k->n_tok, k->y, r0, r1);
}

void ul_cpu_matmul_mat(ul_pool_t *p, const ul_cpu_mat_t *m, const float *x, int n_tok,
                       float *const *y, void *scratch, int ith, int nth) {
    const int type = m->type;
    const int64_t n_cols = m->n_cols;
    UL_ASSERT(ul_cpu_type_supported(type));
    ul_xfmt_t f = ul_cpu_xfmt(type);
    const uint8_t *xq = (const uint8_t *)x;
    size_t xs = ul_cpu_xrow_bytes(f, n_cols);
    if (p && nth > 1) atomic_store_explicit(ul_pool_ticket(p, ith), 0, memory_order_relaxed);
    if (f != XF_F32) {
        UL_ASSERT(scratch != NULL);
        ul_cpu_quant_rows(f, x, NULL, n_cols, n_tok, (uint8_t *)scratch, xs, ith, nth);
        xq = scratch;
    }
    ul_pool_barrier(p); /* the activations are ready and the ticket is reset */
    ul_mm_fn mm = ul_cpu_mm_fn(type, ul_cpu_isa());
    if (p && nth > 1) {
        chunk_ctx_t k = {m, mm, xq, xs, n_tok, y};
        ul_cpu_for_chunks(p, (m->n_rows + UL_MM_CHUNK_ROWS - 1) / UL_MM_CHUNK_ROWS, ith, nth, chunk,
                          &k);
    } else {
        int64_t r0, r1;
        rows_of(m->n_rows, ith, nth, &r0, &r1);
        ul_cpu_mat_rows(m, mm, xq, xs, n_tok, y, r0, r1);
    }
    ul_pool_barrier(p);
}

void ul_cpu_matmul(ul_pool_t *p, const ul_gguf_tensor_t *w, const float *x, int n_tok, float *y,
                   void *scratch, int ith, int nth) {
    ul_cpu_mat_t m;
    const ul_gguf_tensor_t *parts[1] = {w};
    ul_cpu_mat_init(&m, parts, 1, 0); /* one part, row layout: allocates nothing */
    ul_cpu_matmul_mat(p, &m, x, n_tok, &y, scratch, ith, nth);
}
