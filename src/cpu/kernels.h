/* CPU compute primitives shared by the forward pass: a spinning thread pool, matrix
 * products over every supported weight type, and row dequantisation. The SIMD variant
 * (AVX-512 VNNI/BF16, AVX2, scalar) is picked once at start-up from the CPU's features;
 * the scalar path is the reference the others are tested against. */
#ifndef UL_CPU_KERNELS_H
#define UL_CPU_KERNELS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "model/gguf.h"

/* ---- thread pool: workers spin between jobs of one step, sleep when idle ---- */
typedef struct ul_pool_s ul_pool_t;
/* fn runs on every thread (ith in [0, nth)), the caller's thread being ith 0; returns when
 * all have finished. */
typedef void (*ul_pool_fn)(void *ctx, int ith, int nth);
int ul_pool_create(int n_threads, ul_pool_t **out);
void ul_pool_run(ul_pool_t *p, ul_pool_fn fn, void *ctx);
int ul_pool_n_threads(const ul_pool_t *p);
/* Work counter i (0 <= i < n threads, each on its own cache line) for dynamic load
 * balancing within one job: thread i stores 0 into counter i, a barrier follows, then
 * threads take items with atomic_fetch_add. Needs a barrier before the next reset. */
atomic_int *ul_pool_ticket(ul_pool_t *p, int i);
/* Workers park (futex/condvar) until the next run; call between steps when idle. */
void ul_pool_sleep(ul_pool_t *p);
void ul_pool_free(ul_pool_t *p);

/* ---- kernels ---- */
/* Two families above scalar, each ordered (a higher one implies the lower ones of its
 * family): x86 AVX2 < AVX-512; AArch64 NEON < dotprod (sdot) < i8mm (smmla). */
typedef enum {
    UL_ISA_SCALAR = 0,
    UL_ISA_AVX2 = 1,
    UL_ISA_AVX512 = 2,
    UL_ISA_NEON = 3,
    UL_ISA_DOTPROD = 4,
    UL_ISA_I8MM = 5,
} ul_isa_t;
ul_isa_t ul_cpu_isa(void);         /* the best the CPU supports (or UVLLM_ISA env) */
void ul_cpu_set_isa(ul_isa_t isa); /* tests force a path; ul_cpu_isa_within(isa, detected) */
const char *ul_cpu_isa_name(ul_isa_t isa);
/* 1 when a CPU at ISA `have` can run code for `need`: scalar, or the same family and not
 * above it (AVX2 within AVX-512; NEON within i8mm; never AVX2 within NEON). */
int ul_cpu_isa_within(ul_isa_t need, ul_isa_t have);
int ul_cpu_has_avx512f(void); /* the CPU has AVX-512F (maybe not the rest of UL_ISA_AVX512) */

/* 1 if matmul supports weights of this type. */
int ul_cpu_type_supported(int type);

/* Y[t][r] = sum_k W[r][k] * X[t][k] for t < n_tok, r < n_rows = w->ne[1], k < n_cols = w->ne[0].
 * W in its GGUF layout (row-major, rows of blocks), X f32 [n_tok][n_cols], Y f32
 * [n_tok][n_rows]. Activations are quantised into `scratch` as the type's dot product
 * needs (ul_cpu_matmul_scratch bytes, shared by the threads). Called by every pool
 * thread with the same arguments inside one ul_pool_run job: the threads quantise X
 * together, meet at a barrier, split the rows over (ith, nth), and meet at a barrier
 * again, so Y is complete on return in every thread. */
size_t ul_cpu_matmul_scratch(int type, int64_t n_cols, int n_tok);
void ul_cpu_matmul(ul_pool_t *p, const ul_gguf_tensor_t *w, const float *x, int n_tok, float *y,
                   void *scratch, int ith, int nth);
/* A weight matrix as the forward pass multiplies it: one or more GGUF tensors of the same
 * type and row length stacked as one (wq|wk|wv, gate|up), so one product quantises the
 * activations once and splits all rows evenly over the threads; each part's output rows
 * go to their own buffer. Where the ISA has a packed layout for the type (pack.h) and
 * every part has a multiple of 16 rows, the rows are copied once into that layout (owned
 * here); so are the whole 16-row groups of a single part of other row counts, whose last
 * rows are read in place; otherwise the parts' rows are read in place (the model's mmap). */
#define UL_MAT_PARTS 3
typedef struct {
    int type;
    int64_t n_cols, n_rows; /* n_rows: the parts' rows together */
    int n_parts;
    int64_t part_rows[UL_MAT_PARTS];
    const uint8_t *data[UL_MAT_PARTS]; /* each part's rows, GGUF layout */
    const void *pk;                    /* packed kernels (ul_pack_kern_t) or NULL */
    uint8_t *packed;                   /* all rows packed, when pk */
    size_t packed_bytes;
    int owned; /* packed was allocated by ul_cpu_mat_init (not ul_cpu_mat_init_in) */
} ul_cpu_mat_t;

/* pack: 0 keeps the row layout (tests, A/B); the UVLLM_PACK=0 environment variable also
 * does. Returns 0, UL_EINVAL (parts disagree on type or columns) or UL_ENOMEM. */
int ul_cpu_mat_init(ul_cpu_mat_t *m, const ul_gguf_tensor_t *const *parts, int n_parts, int pack);
/* The bytes of the packed copy ul_cpu_mat_init would make for (parts, pack); 0 when the
 * rows stay in place (no packed layout, bad parts). */
size_t ul_cpu_mat_packed_bytes(const ul_gguf_tensor_t *const *parts, int n_parts, int pack);
/* ul_cpu_mat_init packing into dst, which the caller owns: 64-byte aligned, at least
 * ul_cpu_mat_packed_bytes long, alive until ul_cpu_mat_free (which leaves it alone). Lets
 * the forward pass keep every packed weight in one allocation. */
int ul_cpu_mat_init_in(ul_cpu_mat_t *m, const ul_gguf_tensor_t *const *parts, int n_parts, int pack,
                       uint8_t *dst);
void ul_cpu_mat_free(ul_cpu_mat_t *m);
/* Memory for packed weights: 2 MiB aligned and advised for transparent huge pages (unless
 * UVLLM_THP=0, for A/B runs); release with free(). NULL when out of memory. */
void *ul_cpu_alloc_weights(size_t bytes);
/* ul_cpu_matmul over a mat: y[i] receives part i, [n_tok][part_rows[i]]. Same threading
 * contract as ul_cpu_matmul. */
void ul_cpu_matmul_mat(ul_pool_t *p, const ul_cpu_mat_t *m, const float *x, int n_tok,
                       float *const *y, void *scratch, int ith, int nth);

/* Barrier for the threads inside one ul_pool_run job. */
void ul_pool_barrier(ul_pool_t *p);

/* dst[0..n) = row as f32 (n a multiple of the type's block). */
void ul_cpu_dequant_row(int type, const void *row, float *dst, int64_t n);
/* Quantises n floats into a row of type (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1,
 * Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS) as llama.cpp does without an importance matrix; returns
 * bytes (0 for other types). */
size_t ul_cpu_quant_row(int type, const float *src, void *dst, int64_t n);

/* y[i] = expf(x[i]) for i < n <= 16, bit-identical to glibc's expf; AVX-512 only (the
 * caller checks ul_cpu_isa()). */
void ul_expf16_avx512(const float *x, float *y, int n);
/* g[i] = g[i] / (1 + expf(-g[i])) * u[i] for i < n, bit-identical to that C expression with
 * glibc's expf; AVX-512 only. */
void ul_swiglu_avx512(float *g, const float *u, size_t n);
/* The same two on AVX2 + FMA (kernels_avx2_expf.c): y[i] = expf(x[i]) for i < n <= 8, and
 * SwiGLU, bit-identical to glibc's expf. */
void ul_expf8_avx2(const float *x, float *y, int n);
void ul_swiglu_avx2(float *g, const float *u, size_t n);

/* RMSNorm and RoPE (adjacent pairs; NEOX) on AVX2 (kernels_avx2_norm.c), with the scalar
 * code's results (forward.c, forward_arch.c). */
void ul_rmsnorm_avx2(float *dst, const float *x, const float *w, int n, float eps);
void ul_rope_norm_avx2(float *x, const float *cs, int n_rot);
void ul_rope_neox_avx2(float *x, const float *cs, int n_rot);

/* AArch64 NEON (kernels_neon_norm.c): RMSNorm (within one ulp), RoPE and the f16
 * roundings (bit for bit) of the scalar code. */
void ul_rmsnorm_neon(float *dst, const float *x, const float *w, int n, float eps);
void ul_rope_norm_neon(float *x, const float *cs, int n_rot);
void ul_rope_neox_neon(float *x, const float *cs, int n_rot);
void ul_round_f16_neon(float *dst, const float *src, int n);
void ul_to_f16_neon(uint16_t *dst, size_t stride, const float *src, int n);
/* AArch64 NEON (kernels_neon_expf.c): y[i] = expf(x[i]) for i < n <= 8, and SwiGLU, bit-identical
 * to glibc's AArch64 expf. */
void ul_expf8_neon(const float *x, float *y, int n);
void ul_swiglu_neon(float *g, const float *u, size_t n);
/* AArch64 NEON GeGLU (kernels_neon_geglu.c): ul_fwd_geglu's scalar results bit for bit. */
void ul_geglu_neon(float *g, const float *u, size_t n);

/* The k largest of p[0..n) in descending order, ties to the lower index: sel[j] their
 * indices, val[j] their values; the picks are set to -inf in p. Returns 0, or -1 with p
 * unchanged when n is not a multiple of 8, k > n or a value is not above -inf (the caller
 * then takes the scalar path). AVX2 only (the caller checks ul_cpu_isa()). */
int ul_topk_avx2(float *p, int n, int k, int32_t *sel, float *val);
/* The same on AArch64 NEON (kernels_neon_topk.c), with the same refusals. */
int ul_topk_neon(float *p, int n, int k, int32_t *sel, float *val);

/* half <-> float */
float ul_fp16_to_fp32(uint16_t h);
uint16_t ul_fp32_to_fp16(float f);
float ul_bf16_to_fp32(uint16_t h);
uint16_t ul_fp32_to_bf16(float f);

#endif
