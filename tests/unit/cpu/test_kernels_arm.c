/* The AArch64 quantised products (kernels_neon*.c) sum integers exactly and add each
 * block's float product in the scalar kernels' order: their outputs are the scalar
 * kernels' bits, on every ISA of the family this CPU has (stricter than test_kernels.c's
 * summation bound, which F32/F16 only meet). Skipped off AArch64. */
#include <criterion/criterion.h>

#include "cpu/pack.h"
#include "kern_testutil.h"

static int n_diff_bits(int type, ul_isa_t isa, int nr, int64_t nc, int nt, uint64_t seed) {
    const ul_xfmt_t f = ul_cpu_xfmt(type);
    const size_t xs = ul_cpu_xrow_bytes(f, nc), ws = ul_type_row_bytes(type, nc);
    uint8_t *w = tk_weights(type, nr, nc, seed), *xq = malloc(xs * (size_t)nt);
    float *x = malloc(sizeof(float) * (size_t)(nc * nt));
    float *a = malloc(sizeof(float) * (size_t)(nr * nt)),
          *b = malloc(sizeof(float) * (size_t)(nr * nt));
    uint64_t s = seed + 1;
    for (int64_t i = 0; i < nc * nt; i++) x[i] = tk_unif(&s) * 3;
    for (int t = 0; t < nt; t++) ul_cpu_quant_x_isa(f, UL_ISA_SCALAR, x + t * nc, xq + xs * t, nc);
    ul_cpu_mm_fn(type, UL_ISA_SCALAR)(nc, w, ws, nr, xq, xs, nt, a, nr);
    ul_cpu_mm_fn(type, isa)(nc, w, ws, nr, xq, xs, nt, b, nr);
    int bad = 0;
    for (int i = 0; i < nr * nt; i++) bad += memcmp(a + i, b + i, sizeof *a) != 0;
    free(w), free(xq), free(x), free(a), free(b);
    return bad;
}

Test(kernels_arm, quantised_products_equal_scalar_bitwise) {
    if (!ul_cpu_isa_within(UL_ISA_NEON, ul_cpu_isa()))
        cr_skip_test("no AArch64 ISA here (%s)", ul_cpu_isa_name(ul_cpu_isa()));
    static const int types[] = {UL_TYPE_Q8_0,   UL_TYPE_Q4_0, UL_TYPE_Q4_K, UL_TYPE_Q6_K,
                                UL_TYPE_Q4_1,   UL_TYPE_Q5_0, UL_TYPE_Q5_1, UL_TYPE_IQ4_NL,
                                UL_TYPE_IQ4_XS, UL_TYPE_Q5_K};
    for (int isa = UL_ISA_NEON; isa <= UL_ISA_I8MM; isa++) {
        if (!ul_cpu_isa_within((ul_isa_t)isa, ul_cpu_isa())) continue;
        for (int ti = 0; ti < (int)(sizeof types / sizeof types[0]); ti++) {
            const int64_t blk = ul_type_block_elems(types[ti]);
            const int64_t nc = blk < 256 ? 2048 + 5 * blk : 2048 + 2 * blk;
            cr_expect_eq(n_diff_bits(types[ti], (ul_isa_t)isa, 7, nc, 3, 40 + (uint64_t)ti), 0,
                         "%s on %s differs from the scalar kernel", ul_type_name(types[ti]),
                         ul_cpu_isa_name((ul_isa_t)isa));
        }
    }
}

/* The packed Q8_0 / Q4_0 kernels (kernels_neon_pack_mull.c, kernels_neon_dotprod_pack.c,
 * kernels_neon_i8mm_pack.c) against the row kernel of the same ISA, bit for bit: every
 * token count 1..9 (the 2-token tiles and a lone last token), one block, an odd block count
 * and 69 blocks; a misplaced byte, nibble, scale, lane or a reordered float sum changes
 * bits. */
static int n_diff_packed(const ul_pack_kern_t *pk, int type, ul_isa_t isa, int64_t nc, int nt,
                         uint64_t seed) {
    const int ng = 3, nr = ng * UL_PACK_ROWS;
    const size_t ws = ul_type_row_bytes(type, nc), gb = pk->group_bytes(nc);
    const size_t xs = ul_cpu_xrow_bytes(XF_Q8A, nc);
    uint8_t *w = tk_weights(type, nr, nc, seed), *wp = tk_alloc64(gb * ng), *x = malloc(xs * nt);
    float *xr = malloc(sizeof(float) * nc), *a = malloc(sizeof(float) * nr * nt),
          *b = malloc(sizeof(float) * nr * nt);
    for (int g = 0; g < ng; g++) pk->pack(w + (size_t)g * UL_PACK_ROWS * ws, ws, nc, wp + gb * g);
    uint64_t s = seed + 3;
    for (int t = 0; t < nt; t++) {
        for (int64_t k = 0; k < nc; k++) xr[k] = tk_unif(&s) * 3;
        ul_cpu_quant_x_isa(XF_Q8A, isa, xr, x + xs * t, nc);
    }
    ul_cpu_mm_fn(type, isa)(nc, w, ws, nr, x, xs, nt, a, nr);
    pk->mm(nc, wp, ng, x, xs, nt, b, nr);
    int bad = 0;
    for (int i = 0; i < nr * nt; i++) bad += memcmp(a + i, b + i, sizeof *a) != 0;
    free(w), free(wp), free(x), free(xr), free(a), free(b);
    return bad;
}

Test(kernels_arm, packed_q8_0_q4_0_equal_row_kernels_bitwise) {
    if (!ul_cpu_isa_within(UL_ISA_NEON, ul_cpu_isa()))
        cr_skip_test("no AArch64 ISA here (%s)", ul_cpu_isa_name(ul_cpu_isa()));
    static const int types[] = {UL_TYPE_Q8_0, UL_TYPE_Q4_0};
    static const int64_t cols[] = {32, 5 * 32, 69 * 32};
#if defined(__aarch64__) /* the tables exist only there; the test is skipped elsewhere */
    /* each ISA its own kernels, not another's tested twice */
    cr_expect(ul_cpu_pack_kern(UL_TYPE_Q8_0, UL_ISA_NEON) == &ul_pack_q8_0_neon);
    cr_expect(ul_cpu_pack_kern(UL_TYPE_Q4_0, UL_ISA_NEON) == &ul_pack_q4_0_neon);
    cr_expect(ul_cpu_pack_kern(UL_TYPE_Q8_0, UL_ISA_I8MM) == &ul_pack_q8_0_i8mm);
    cr_expect(ul_cpu_pack_kern(UL_TYPE_Q4_0, UL_ISA_I8MM) == &ul_pack_q4_0_i8mm);
#endif
    for (int isa = UL_ISA_NEON; isa <= UL_ISA_I8MM; isa++) {
        if (!ul_cpu_isa_within((ul_isa_t)isa, ul_cpu_isa())) continue;
        for (int ti = 0; ti < 2; ti++) {
            const ul_pack_kern_t *pk = ul_cpu_pack_kern(types[ti], (ul_isa_t)isa);
            cr_assert(pk != NULL, "%s has no packed layout on %s", ul_type_name(types[ti]),
                      ul_cpu_isa_name((ul_isa_t)isa));
            for (int ci = 0; ci < 3; ci++)
                for (int nt = 1; nt <= 9; nt++) {
                    int bad = n_diff_packed(pk, types[ti], (ul_isa_t)isa, cols[ci], nt,
                                            (uint64_t)(100 * ti + 10 * ci + nt));
                    cr_expect_eq(bad, 0, "%s packed on %s, %ld cols, %d tokens: %d outputs differ",
                                 ul_type_name(types[ti]), ul_cpu_isa_name((ul_isa_t)isa),
                                 (long)cols[ci], nt, bad);
                }
        }
    }
}

/* What the forward pass runs: a stacked matrix (three parts of 16-multiples, all packed)
 * and one of 83 rows (5 packed groups, 3 rows read in place), on a 2-thread pool, gives
 * the row layout's outputs bit for bit, for a decode step and small batches. */
Test(kernels_arm, packed_matrices_equal_row_layout_bitwise) {
    if (!ul_cpu_isa_within(UL_ISA_NEON, ul_cpu_isa()))
        cr_skip_test("no AArch64 ISA here (%s)", ul_cpu_isa_name(ul_cpu_isa()));
    static const int rows_a[] = {64, 16, 48}, rows_b[] = {83};
    static const int *stacks[] = {rows_a, rows_b};
    static const int n_parts[] = {3, 1};
    static const int types[] = {UL_TYPE_Q8_0, UL_TYPE_Q4_0};
    static const int toks[] = {1, 3, 6};
    const int64_t nc = 37 * 32;
    ul_pool_t *p;
    cr_assert_eq(ul_pool_create(2, &p), 0);
    for (int ti = 0; ti < 2; ti++)
        for (int si = 0; si < 2; si++)
            for (int k = 0; k < 3; k++) {
                const int type = types[ti], np = n_parts[si], nt = toks[k];
                ul_gguf_tensor_t t[3];
                const ul_gguf_tensor_t *parts[3];
                uint8_t *w[3];
                float *y[2][3];
                for (int i = 0; i < np; i++) {
                    const int nr = stacks[si][i];
                    w[i] = tk_weights(type, nr, nc, (uint64_t)(nr + 7 * i + nt));
                    t[i] = (ul_gguf_tensor_t){
                        .n_dims = 2, .ne = {nc, nr, 1, 1}, .type = (uint32_t)type, .data = w[i]};
                    parts[i] = &t[i];
                    for (int l = 0; l < 2; l++) y[l][i] = calloc((size_t)(nr * nt), sizeof(float));
                }
                float *x = malloc(sizeof(float) * (size_t)(nc * nt));
                uint64_t s = (uint64_t)(nt + 17);
                for (int64_t i = 0; i < nc * nt; i++) x[i] = tk_unif(&s) * 3;
                void *scratch = malloc(ul_cpu_matmul_scratch(type, nc, nt) + 64);
                for (int l = 0; l < 2; l++) {
                    ul_cpu_mat_t m;
                    cr_assert_eq(ul_cpu_mat_init(&m, parts, np, l), 0);
                    cr_expect_eq(m.pk != NULL, l, "%s: packed=%d with pack=%d", ul_type_name(type),
                                 m.pk != NULL, l);
                    tk_mat_job_t j = {p, &m, x, nt, y[l], scratch};
                    ul_pool_run(p, tk_mat_job, &j);
                    ul_cpu_mat_free(&m);
                }
                int bad = 0;
                for (int i = 0; i < np; i++) {
                    const int nr = stacks[si][i];
                    for (int e = 0; e < nr * nt; e++)
                        bad += memcmp(y[0][i] + e, y[1][i] + e, sizeof(float)) != 0;
                    free(w[i]), free(y[0][i]), free(y[1][i]);
                }
                cr_expect_eq(bad, 0, "%s, %d parts, %d tokens: %d outputs differ packed vs rows",
                             ul_type_name(type), np, nt, bad);
                free(x), free(scratch);
            }
    ul_pool_free(p);
}
