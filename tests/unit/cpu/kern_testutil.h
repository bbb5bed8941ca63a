/* Helpers shared by the kernel tests: random weights of every type and a float64
 * reference product computed from the dequantised operands. */
#ifndef UL_TEST_KERN_UTIL_H
#define UL_TEST_KERN_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/kernels_impl.h"
#include "cpu/pack.h"

/* A test of an ISA path runs only where the active ISA (the CPU's, capped by UVLLM_ISA)
 * has it; elsewhere it is reported as skipped with the reason, never failed: the same
 * suite passes on AVX2-only and AVX-512 machines. Needs <criterion/criterion.h>. */
#define UL_TEST_REQUIRE_ISA(isa)                                                                   \
    do {                                                                                           \
        if (!ul_cpu_isa_within((isa), ul_cpu_isa()))                                               \
            cr_skip_test("needs %s; this CPU (or UVLLM_ISA) gives %s", ul_cpu_isa_name(isa),       \
                         ul_cpu_isa_name(ul_cpu_isa()));                                           \
    } while (0)

/* aligned_alloc(64, n) with n rounded up to a multiple of 64, as C11 requires (glibc lets it
 * pass; the sanitizers refuse it) */
static inline void *tk_alloc64(size_t n) { return aligned_alloc(64, (n + 63) & ~(size_t)63); }

static inline uint64_t tk_rng(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}
static inline float tk_unif(uint64_t *s) { /* [-1, 1) */
    return (float)((tk_rng(s) >> 40) * 0x1p-24 * 2.0 - 1.0);
}

/* The bitwise-exact kernels' equality: the same bits, or both NaN, whatever their payload. */
static inline int tk_same(float a, float b) {
    return ul_f32_bits(a) == ul_f32_bits(b) || (isnan(a) && isnan(b));
}

/* The MoE router's top-k rule, written as a sort so that it shares nothing with the kernels
 * it checks: the indices of p[0..n) ordered by value, largest first, equal values (+0 and
 * -0 too) by index; sel gets the first k. n <= 256. */
static inline void tk_topk_ref(const float *p, int n, int k, int32_t *sel) {
    int32_t idx[256];
    for (int i = 0; i < n; i++) {
        int j = i;
        for (; j > 0 && p[idx[j - 1]] < p[i]; j--) idx[j] = idx[j - 1]; /* stable: ties stay */
        idx[j] = i;
    }
    memcpy(sel, idx, sizeof(int32_t) * (size_t)k);
}

/* One ul_cpu_matmul_mat call as a pool job (what the forward pass runs on its threads). */
typedef struct {
    ul_pool_t *p;
    const ul_cpu_mat_t *m;
    const float *x;
    int nt;
    float *const *y;
    void *scratch;
} tk_mat_job_t;

static inline void tk_mat_job(void *ctx, int ith, int nth) {
    tk_mat_job_t *j = ctx;
    ul_cpu_matmul_mat(j->p, j->m, j->x, j->nt, j->y, j->scratch, ith, nth);
}

/* n_rows rows of a type; K-quants and IQ4 get random bytes (every pattern is a valid
 * block) with small positive scales, the others quantise random floats. Caller frees. */
static inline uint8_t *tk_weights(int type, int n_rows, int64_t n_cols, uint64_t seed) {
    size_t rb = ul_type_row_bytes(type, n_cols);
    uint8_t *w = malloc(rb * (size_t)n_rows);
    float *tmp = malloc(sizeof(float) * (size_t)n_cols);
    uint64_t s = seed * 2654435761u + 1;
    for (int r = 0; r < n_rows; r++) {
        uint8_t *row = w + rb * (size_t)r;
        if (type == UL_TYPE_IQ4_NL || type == UL_TYPE_IQ4_XS) {
            for (size_t i = 0; i < rb; i++) row[i] = (uint8_t)tk_rng(&s);
            const int bs = ul_type_block_bytes(type), be = ul_type_block_elems(type);
            for (int64_t b = 0; b < n_cols / be; b++) {
                uint16_t d = ul_fp32_to_fp16(0.0005f + 0.005f * fabsf(tk_unif(&s)));
                memcpy(row + (size_t)b * (size_t)bs, &d, 2);
            }
        } else if (type == UL_TYPE_Q4_K || type == UL_TYPE_Q5_K || type == UL_TYPE_Q6_K) {
            for (size_t i = 0; i < rb; i++) row[i] = (uint8_t)tk_rng(&s);
            for (int64_t b = 0; b < n_cols / 256; b++) {
                uint16_t d = ul_fp32_to_fp16(0.001f + 0.01f * fabsf(tk_unif(&s)));
                uint16_t dm = ul_fp32_to_fp16(0.001f + 0.01f * fabsf(tk_unif(&s)));
                if (type == UL_TYPE_Q4_K) {
                    blk_q4_K *k = (blk_q4_K *)row + b;
                    k->d = d, k->dmin = dm;
                } else if (type == UL_TYPE_Q5_K) {
                    blk_q5_K *k = (blk_q5_K *)row + b;
                    k->d = d, k->dmin = dm;
                } else {
                    ((blk_q6_K *)row + b)->d = d;
                }
            }
        } else {
            for (int64_t i = 0; i < n_cols; i++) tmp[i] = tk_unif(&s);
            ul_cpu_quant_row(type, tmp, row, n_cols);
        }
    }
    free(tmp);
    return w;
}

/* The float64 reference product of w[0..n) and x[0..n), and in *mag the sum of |w x| (what
 * the float32 rounding error of a kernel scales with). */
static inline double tk_dot_ref(const float *w, const float *x, int64_t n, double *mag) {
    double ref = 0, m = 0;
    for (int64_t k = 0; k < n; k++) {
        ref += (double)w[k] * x[k];
        m += fabs((double)w[k] * x[k]);
    }
    *mag = m;
    return ref;
}

/* Activation row as the dot product sees it, back in f32. */
static inline void tk_decode_x(ul_xfmt_t f, const void *xq, float *out, int64_t n) {
    if (f == XF_F32 || f == XF_F16R) {
        memcpy(out, xq, (size_t)n * 4);
    } else if (f == XF_BF16) {
        for (int64_t i = 0; i < n; i++) out[i] = ul_bf16_to_fp32(((const uint16_t *)xq)[i]);
    } else if (f == XF_Q8A) {
        const blk_q8a *b = xq;
        for (int64_t i = 0; i < n; i++) out[i] = b[i / 32].d * b[i / 32].qs[i % 32];
    } else if (f == XF_Q8A1) {
        const blk_q8a1 *b = xq;
        for (int64_t i = 0; i < n; i++) out[i] = b[i / 32].d * b[i / 32].qs[i % 32];
    } else {
        const blk_q8K *b = xq;
        for (int64_t i = 0; i < n; i++) out[i] = b[i / 256].d * b[i / 256].qs[i % 256];
    }
}

/* How many of nt tokens a packed kernel gives other bits alone (one token a call: the decode
 * path) than inside one batch of nt (the tiled path): ng groups of rows of n columns of type
 * (weights from wseed), activations in format f (from xseed). */
static inline int tk_pack_alone_vs_batched(const ul_pack_kern_t *pk, int type, ul_xfmt_t f,
                                           int64_t n, int ng, int nt, uint64_t wseed,
                                           uint64_t xseed) {
    const int nr = ng * UL_PACK_ROWS;
    const size_t ws = ul_type_row_bytes(type, n), gb = pk->group_bytes(n);
    const size_t xs = ul_cpu_xrow_bytes(f, n);
    uint8_t *w = tk_weights(type, nr, n, wseed), *wp = tk_alloc64(gb * ng);
    for (int g = 0; g < ng; g++) pk->pack(w + (size_t)g * UL_PACK_ROWS * ws, ws, n, wp + gb * g);
    float *xr = malloc(sizeof(float) * (size_t)n), *yb = malloc(sizeof(float) * nr * nt),
          *y1 = malloc(sizeof(float) * nr);
    uint8_t *x = malloc(xs * nt);
    uint64_t s = xseed;
    for (int t = 0; t < nt; t++) {
        for (int64_t k = 0; k < n; k++) xr[k] = tk_unif(&s);
        ul_cpu_quant_x(f, xr, x + xs * t, n);
    }
    pk->mm(n, wp, ng, x, xs, nt, yb, nr);
    int diff = 0;
    for (int t = 0; t < nt; t++) {
        pk->mm(n, wp, ng, x + xs * t, xs, 1, y1, nr);
        diff += memcmp(y1, yb + nr * t, sizeof(float) * nr) != 0;
    }
    free(w), free(wp), free(xr), free(yb), free(y1), free(x);
    return diff;
}

#endif
