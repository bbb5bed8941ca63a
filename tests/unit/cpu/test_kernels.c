/* Every kernel path (scalar, AVX2, AVX-512 as far as this CPU goes) against a float64
 * product of the dequantised operands, for every weight type, on odd and even row and
 * token counts and several row lengths; plus ul_cpu_matmul through a real pool. */
#include <criterion/criterion.h>
#include <stdio.h>

#include "../tsan_skip.h"
#include "kern_testutil.h"

static const int k_types[] = {UL_TYPE_F32,   UL_TYPE_F16,  UL_TYPE_BF16, UL_TYPE_Q8_0,
                              UL_TYPE_Q4_0,  UL_TYPE_Q4_1, UL_TYPE_Q5_0, UL_TYPE_Q5_1,
                              UL_TYPE_Q4_K,  UL_TYPE_Q5_K, UL_TYPE_Q6_K, UL_TYPE_IQ4_NL,
                              UL_TYPE_IQ4_XS};
#define N_TYPES (int)(sizeof(k_types) / sizeof(k_types[0]))

/* Q4_1 / Q5_1 x Q8A1 add each block's min m as m * s (llama.cpp's Q8_1 s: the sum of the
 * quants times the unrounded scale, rounded to f16) where the decoded activations give
 * m * d * sum(q): the difference, to add to the reference (and m * s to *mag). */
static double q8a1_min_fix(int type, const uint8_t *wrow, const uint8_t *xq, int64_t n_cols,
                           double *mag) {
    const blk_q8a1 *xb = (const blk_q8a1 *)xq;
    const size_t bs = ul_type_block_bytes(type);
    double fix = 0;
    for (int64_t b = 0; b < n_cols / QK; b++) {
        uint16_t mh; /* d, m lead both blk_q4_1 and blk_q5_1 */
        memcpy(&mh, wrow + (size_t)b * bs + 2, 2);
        const double m = ul_fp16_to_fp32(mh);
        int32_t sq = 0;
        for (int j = 0; j < QK; j++) sq += xb[b].qs[j];
        fix += m * ((double)xb[b].s - (double)xb[b].d * sq);
        *mag += fabs(m * xb[b].s);
    }
    return fix;
}

/* Checks mm for one (type, isa, shape); returns the worst error / bound ratio. The bound:
 * any float summation order of n products is within (n + c) * 2^-24 * sum|w_k x_k| of
 * the exact sum (c covers the per-block scale products); we allow 2^-22 per term, so a
 * misread nibble, scale or sign (errors of the order of the terms) fails while a
 * different summation order passes. */
static double check_mm(int type, ul_isa_t isa, int n_rows, int64_t n_cols, int n_tok,
                       uint64_t seed) {
    ul_xfmt_t f = ul_cpu_xfmt(type);
    size_t xs = ul_cpu_xrow_bytes(f, n_cols), ws = ul_type_row_bytes(type, n_cols);
    uint8_t *w = tk_weights(type, n_rows, n_cols, seed);
    float *x = malloc(sizeof(float) * (size_t)(n_cols * n_tok));
    uint8_t *xq = malloc(xs * (size_t)n_tok);
    float *xd = malloc(sizeof(float) * (size_t)(n_cols * n_tok));
    float *wd = malloc(sizeof(float) * (size_t)n_cols);
    float *y = malloc(sizeof(float) * (size_t)(n_rows * n_tok));
    uint64_t s = seed + 77;
    for (int64_t i = 0; i < n_cols * n_tok; i++) x[i] = tk_unif(&s) * 3;
    for (int t = 0; t < n_tok; t++) {
        ul_cpu_quant_x(f, x + t * n_cols, xq + xs * t, n_cols);
        tk_decode_x(f, xq + xs * t, xd + t * n_cols, n_cols);
    }
    for (size_t i = 0; i < (size_t)(n_rows * n_tok); i++) y[i] = NAN;
    ul_cpu_mm_fn(type, isa)(n_cols, w, ws, n_rows, xq, xs, n_tok, y, n_rows);
    double worst = 0;
    for (int r = 0; r < n_rows; r++) {
        ul_cpu_dequant_row(type, w + ws * r, wd, n_cols);
        for (int t = 0; t < n_tok; t++) {
            double mag, ref = tk_dot_ref(wd, xd + t * n_cols, n_cols, &mag);
            if (f == XF_Q8A1) ref += q8a1_min_fix(type, w + ws * r, xq + xs * t, n_cols, &mag);
            double bound = (double)n_cols * 0x1p-22 * mag + 1e-30;
            double err = fabs(y[t * n_rows + r] - ref);
            if (!(err <= bound)) {
                cr_log_error("%s/%s rows=%d cols=%ld tok=%d: y[%d][%d]=%g ref=%g err=%g > %g",
                             ul_type_name(type), ul_cpu_isa_name(isa), n_rows, (long)n_cols, n_tok,
                             t, r, y[t * n_rows + r], ref, err, bound);
                worst = INFINITY;
            } else if (err / bound > worst) {
                worst = err / bound;
            }
        }
    }
    free(w), free(x), free(xq), free(xd), free(wd), free(y);
    return worst;
}

static void check_isa(ul_isa_t isa) {
    UL_SKIP_UNDER_TSAN(); /* one thread: 20-57 s per ISA under TSan */
    if (!ul_cpu_isa_within(isa, ul_cpu_isa())) {
        cr_log_warn("%s not supported here; tested up to %s", ul_cpu_isa_name(isa),
                    ul_cpu_isa_name(ul_cpu_isa()));
    }
    static const int rows[] = {1, 4, 7, 16, 37};
    for (int ti = 0; ti < N_TYPES; ti++) {
        int type = k_types[ti];
        int blk = ul_type_block_elems(type) < 32 ? 32 : ul_type_block_elems(type);
        /* float types have 1-element blocks: also rows that end inside a SIMD vector */
        int64_t cols[] = {blk, 3 * blk, 2048, ul_type_block_elems(type) == 1 ? 37 : 5 * blk};
        double worst = 0;
        for (int ci = 0; ci < 4; ci++)
            for (int ri = 0; ri < 5; ri++)
                for (int nt = 1; nt <= 17; nt += (ri == 3 ? 1 : 4)) {
                    double e = check_mm(type, isa, rows[ri], cols[ci], nt,
                                        (uint64_t)(ti * 131 + ci * 17 + ri * 5 + nt));
                    worst = e > worst ? e : worst;
                }
        cr_expect(worst <= 1.0, "%s on %s exceeds the summation bound", ul_type_name(type),
                  ul_cpu_isa_name(isa));
        cr_log_info("%s/%s: worst error %.3g of the bound", ul_type_name(type),
                    ul_cpu_isa_name(isa), worst);
    }
}

Test(kernels, scalar_matches_f64_reference) { check_isa(UL_ISA_SCALAR); }
Test(kernels, avx2_matches_f64_reference) {
    UL_TEST_REQUIRE_ISA(UL_ISA_AVX2);
    check_isa(UL_ISA_AVX2);
}
Test(kernels, avx512_matches_f64_reference) {
    UL_TEST_REQUIRE_ISA(UL_ISA_AVX512);
    check_isa(UL_ISA_AVX512);
}

/* AArch64 (make test-arm64 runs these under qemu with a CPU model per ISA) */
Test(kernels, neon_matches_f64_reference) {
    UL_TEST_REQUIRE_ISA(UL_ISA_NEON);
    check_isa(UL_ISA_NEON);
}
Test(kernels, dotprod_matches_f64_reference) {
    UL_TEST_REQUIRE_ISA(UL_ISA_DOTPROD);
    check_isa(UL_ISA_DOTPROD);
}
Test(kernels, i8mm_matches_f64_reference) {
    UL_TEST_REQUIRE_ISA(UL_ISA_I8MM);
    check_isa(UL_ISA_I8MM);
}

/* The AVX-512 Q4_0/Q8_0 prefill path (16+ tokens) transposes 16 rows at a time in chunks
 * of 64 blocks and sums the chunks in y: rows beyond the last full 16 take the older
 * kernel, and rows of 69 and 129 blocks cross one and two chunk boundaries. */
Test(kernels, avx512_q4_0_q8_0_prefill_path_matches_f64_reference) {
    UL_TEST_REQUIRE_ISA(UL_ISA_AVX512);
    static const int types[] = {UL_TYPE_Q4_0, UL_TYPE_Q8_0}, rows[] = {16, 40, 64},
                     toks[] = {16, 19};
    static const int64_t cols[] = {69 * 32, 129 * 32};
    for (int ti = 0; ti < 2; ti++) {
        double worst = 0;
        for (int ci = 0; ci < 2; ci++)
            for (int ri = 0; ri < 3; ri++)
                for (int k = 0; k < 2; k++) {
                    double e = check_mm(types[ti], UL_ISA_AVX512, rows[ri], cols[ci], toks[k],
                                        (uint64_t)(ti * 1000 + ci * 100 + ri * 10 + k));
                    worst = e > worst ? e : worst;
                }
        cr_expect(worst <= 1.0, "%s prefill path exceeds the summation bound",
                  ul_type_name(types[ti]));
        cr_log_info("%s/avx512 prefill path: worst error %.3g of the bound",
                    ul_type_name(types[ti]), worst);
    }
}

/* The AVX-512 Q4_0/Q8_0 decode path (one token) takes 8 rows per pass: row counts that
 * are whole passes, leave 1 or 7 rows to the older kernel, and odd block counts (the last
 * pair holds one block). */
Test(kernels, avx512_q4_0_q8_0_decode_path_matches_f64_reference) {
    UL_TEST_REQUIRE_ISA(UL_ISA_AVX512);
    static const int types[] = {UL_TYPE_Q4_0, UL_TYPE_Q8_0}, rows[] = {8, 9, 15, 64};
    static const int64_t cols[] = {32, 7 * 32, 64 * 32};
    for (int ti = 0; ti < 2; ti++) {
        double worst = 0;
        for (int ci = 0; ci < 3; ci++)
            for (int ri = 0; ri < 4; ri++) {
                double e = check_mm(types[ti], UL_ISA_AVX512, rows[ri], cols[ci], 1,
                                    (uint64_t)(5000 + ti * 100 + ci * 10 + ri));
                worst = e > worst ? e : worst;
            }
        cr_expect(worst <= 1.0, "%s decode path exceeds the summation bound",
                  ul_type_name(types[ti]));
        cr_log_info("%s/avx512 decode path: worst error %.3g of the bound", ul_type_name(types[ti]),
                    worst);
    }
}

Test(kernels, type_support) {
    for (int i = 0; i < N_TYPES; i++) cr_expect(ul_cpu_type_supported(k_types[i]));
    cr_expect(!ul_cpu_type_supported(UL_TYPE_Q2_K));
    cr_expect(!ul_cpu_type_supported(-1));
    cr_expect(!ul_cpu_type_supported(UL_TYPE_COUNT));
}

/* ---- ul_cpu_matmul through a pool: the user-visible product ---- */
typedef struct {
    ul_gguf_tensor_t *w;
    const float *x;
    int n_tok;
    float *y;
    void *scratch;
    ul_pool_t *p;
} mm_job_t;

static void mm_job(void *ctx, int ith, int nth) {
    mm_job_t *j = ctx;
    ul_cpu_matmul(j->p, j->w, j->x, j->n_tok, j->y, j->scratch, ith, nth);
}

/* The product through quantised activations stays close to the f32 product of the
 * dequantised weights with the raw activations. Q8 activations carry a relative error of
 * at most 1/254 of the block max each, so the result is within
 * sum_k |w_k| * amax_block(x)/254 (+ the f16/bf16 rounding of x: 2^-9 relative). */
static void check_matmul(int type, int n_threads, int n_rows, int64_t n_cols, int n_tok) {
    ul_pool_t *p;
    cr_assert_eq(ul_pool_create(n_threads, &p), 0);
    uint8_t *wb = tk_weights(type, n_rows, n_cols, 99 + (uint64_t)type);
    ul_gguf_tensor_t w = {
        .n_dims = 2, .ne = {n_cols, n_rows, 1, 1}, .type = (uint32_t)type, .data = wb};
    float *x = malloc(sizeof(float) * (size_t)(n_cols * n_tok));
    float *y = malloc(sizeof(float) * (size_t)(n_rows * n_tok));
    float *wd = malloc(sizeof(float) * (size_t)n_cols);
    void *scratch = malloc(ul_cpu_matmul_scratch(type, n_cols, n_tok) + 1);
    uint64_t s = 5;
    for (int64_t i = 0; i < n_cols * n_tok; i++) x[i] = tk_unif(&s);
    for (int64_t i = 0; i < (int64_t)n_rows * n_tok; i++) y[i] = NAN; /* a row left out fails */
    mm_job_t job = {&w, x, n_tok, y, scratch, p};
    ul_pool_run(p, mm_job, &job);
    size_t ws = ul_type_row_bytes(type, n_cols);
    int bad = 0;
    for (int r = 0; r < n_rows; r++) {
        ul_cpu_dequant_row(type, wb + ws * r, wd, n_cols);
        for (int t = 0; t < n_tok; t++) {
            double ref = 0, tol = 0;
            for (int64_t k = 0; k < n_cols; k++) {
                ref += (double)wd[k] * x[t * n_cols + k];
                tol += fabs(wd[k]) * (1.0 / 254 + 0x1p-9);
            }
            tol += 1e-6;
            if (!(fabs(y[t * n_rows + r] - ref) <= tol) && bad++ < 5)
                cr_log_error("%s thr=%d y[%d][%d]=%g ref=%g tol=%g", ul_type_name(type), n_threads,
                             t, r, y[t * n_rows + r], ref, tol);
        }
    }
    cr_expect_eq(bad, 0, "%s: %d outputs off", ul_type_name(type), bad);
    ul_pool_free(p);
    free(wb), free(x), free(y), free(wd), free(scratch);
}

Test(kernels, matmul_pool_all_types) {
    for (int i = 0; i < N_TYPES; i++) {
        check_matmul(k_types[i], 1, 45, 512, 3);
        check_matmul(k_types[i], 3, 67, 768, 5);
        check_matmul(k_types[i], 2, 64, 256, 1);
        check_matmul(k_types[i], 2, 19, 1024, 2);
        /* 11 chunks of rows, the last one short, over 3 threads' segments */
        check_matmul(k_types[i], 3, 700, 256, 2);
    }
}

/* SIMD activation converters must write exactly the scalar bytes (the kernels are tested
 * against the scalar formats): random rows with an all-zero block, values that round to
 * a tie at some scales, f32 denormals and infinities for the f16/bf16 conversions. */
Test(kernels, activation_conversion_matches_scalar) {
    const int64_t n = 768 + 17; /* f16/bf16 rows need not be block multiples */
    float x[785];
    uint8_t a[785 * 4 + 64], b[785 * 4 + 64];
    uint64_t s = 11;
    for (int rep = 0; rep < 40; rep++) {
        for (int64_t i = 0; i < n; i++) x[i] = tk_unif(&s) * (rep % 3 ? 1.0f : 1e-39f);
        for (int i = 32; i < 64; i++) x[i] = 0; /* a zero Q8A block */
        if (rep == 5)
            for (int i = 256; i < 512; i++) x[i] = 0; /* a zero Q8K block */
        if (rep == 7) x[3] = INFINITY, x[700] = -INFINITY, x[701] = 0x1p-130f;
        x[100] = -x[101]; /* equal magnitudes: the first one sets the Q8K sign */
        for (int isa = UL_ISA_AVX2; isa <= UL_ISA_I8MM; isa++) {
            if (!ul_cpu_isa_within((ul_isa_t)isa, ul_cpu_isa())) continue;
            for (int f = XF_F16R; f <= XF_Q8K; f++) {
                const int blocked = f == XF_Q8A || f == XF_Q8A1 || f == XF_Q8K;
                int64_t m = blocked ? 768 : n;
                if (rep == 7 && blocked) continue; /* inf has no scale */
                size_t nb = ul_cpu_xrow_bytes((ul_xfmt_t)f, m);
                memset(a, 0x55, sizeof(a));
                memset(b, 0x55, sizeof(b));
                ul_cpu_quant_x_isa((ul_xfmt_t)f, UL_ISA_SCALAR, x, a, m);
                ul_cpu_quant_x_isa((ul_xfmt_t)f, (ul_isa_t)isa, x, b, m);
                size_t k = 0;
                while (k < nb && a[k] == b[k]) k++;
                cr_expect(k == nb, "format %d on %s differs at byte %zu of %zu (rep %d)", f,
                          ul_cpu_isa_name((ul_isa_t)isa), k, nb, rep);
            }
        }
    }
}
