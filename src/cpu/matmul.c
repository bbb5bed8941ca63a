/* ul_cpu_matmul: the threads of one pool job convert the activations once into the
 * format the weight type's dot product consumes (shared scratch), then each computes a
 * contiguous chunk of weight rows for every token with the active ISA's tile kernel. */
#include "cpu/kernels_impl.h"

/* Row chunks are multiples of this so SIMD kernels that take rows 4 or 8 at a time
 * see full groups except in the last chunk. */
#define ROW_ALIGN 16

size_t ul_cpu_matmul_scratch(int type, int64_t n_cols, int n_tok) {
    ul_xfmt_t f = ul_cpu_xfmt(type);
    if (f == XF_F32) return 0;
    return ul_cpu_xrow_bytes(f, n_cols) * (size_t)n_tok;
}

/* Each thread converts an equal share of all (token, block) units, so a single decode
 * token is not converted by thread 0 alone while the others wait at the barrier. Every
 * format is per block (or per element), so any split gives the same bytes. */
static void quant_x_part(ul_xfmt_t f, const float *x, int64_t n_cols, int n_tok, uint8_t *dst,
                         size_t xs, int ith, int nth) {
    const int64_t blk = f == XF_Q8K ? QKK : f == XF_Q8A ? QK : 1;
    const int64_t per_tok = n_cols / blk, units = per_tok * n_tok;
    int64_t u0 = units * ith / nth, u1 = units * (ith + 1) / nth;
    while (u0 < u1) {
        int64_t t = u0 / per_tok, b0 = u0 % per_tok;
        int64_t b1 = per_tok < b0 + (u1 - u0) ? per_tok : b0 + (u1 - u0);
        ul_cpu_quant_x(f, x + t * n_cols + b0 * blk,
                       dst + (size_t)t * xs + ul_cpu_xrow_bytes(f, b0 * blk), (b1 - b0) * blk);
        u0 += b1 - b0;
    }
}

static void rows_of(int64_t n_rows, int ith, int nth, int64_t *r0, int64_t *r1) {
    int64_t per = (n_rows + nth - 1) / nth;
    per = (per + ROW_ALIGN - 1) / ROW_ALIGN * ROW_ALIGN;
    *r0 = per * ith < n_rows ? per * ith : n_rows;
    *r1 = *r0 + per < n_rows ? *r0 + per : n_rows;
}

void ul_cpu_matmul(ul_pool_t *p, const ul_gguf_tensor_t *w, const float *x, int n_tok, float *y,
                   void *scratch, int ith, int nth) {
    int type = (int)w->type;
    int64_t n_cols = w->ne[0], n_rows = w->ne[1];
    UL_ASSERT(ul_cpu_type_supported(type));
    ul_xfmt_t f = ul_cpu_xfmt(type);
    const uint8_t *xq = (const uint8_t *)x;
    size_t xs = ul_cpu_xrow_bytes(f, n_cols);
    if (f != XF_F32) {
        UL_ASSERT(scratch != NULL);
        quant_x_part(f, x, n_cols, n_tok, (uint8_t *)scratch, xs, ith, nth);
        ul_pool_barrier(p);
        xq = scratch;
    }
    int64_t r0, r1;
    rows_of(n_rows, ith, nth, &r0, &r1);
    if (r1 > r0) {
        size_t ws = ul_type_row_bytes(type, n_cols);
        ul_mm_fn mm = ul_cpu_mm_fn(type, ul_cpu_isa());
        mm(n_cols, (const uint8_t *)w->data + (size_t)r0 * ws, ws, (int)(r1 - r0), xq, xs, n_tok,
           y + r0, n_rows);
    }
    ul_pool_barrier(p);
}
