/* The packed F16 layout of AVX-512 (kernels_avx512_f16.c) and AVX2 (kernels_avx2_pack_f16.c),
 * the same bytes, each ISA's kernels called directly: pack 16-row
 * groups, run mm on f16-rounded activations, and compare every output with a float64
 * product of the same operands (tolerance of test_pack.c: a different summation order
 * passes, a misplaced row, column, token or K chunk fails). Shapes cover odd and even
 * n_cols, columns crossing the kernel's K chunks, 1..3 groups (an odd group count runs the
 * single-group tile) and token counts around the 12-token tile. */
#include <criterion/criterion.h>

#include "cpu/pack.h"
#include "kern_testutil.h"

/* x86 kernels only: the AVX2 / AVX-512 packed F16 layout */
#if defined(__x86_64__) || defined(__i386__)

/* Packs n_groups x 16 random rows, runs mm into NaN-filled y (so an unwritten output
 * fails) twice, and returns the number of outputs outside the bound; *same says whether
 * both runs gave the same bits. */
static int check(const ul_pack_kern_t *pk, int64_t n_cols, int n_groups, int nt, int *same) {
    const int n_rows = n_groups * UL_PACK_ROWS;
    const size_t ws = ul_type_row_bytes(UL_TYPE_F16, n_cols), gb = pk->group_bytes(n_cols);
    cr_assert_eq(gb % 64, 0, "group bytes %zu not a multiple of 64", gb);
    uint8_t *w = tk_weights(UL_TYPE_F16, n_rows, n_cols, (uint64_t)(n_cols * 31 + nt));
    uint8_t *wp = tk_alloc64(gb * (size_t)n_groups);
    for (int g = 0; g < n_groups; g++)
        pk->pack(w + (size_t)g * UL_PACK_ROWS * ws, ws, n_cols, wp + (size_t)g * gb);
    /* activation rows padded past n_cols, so a kernel reading the wrong stride fails */
    const size_t xs = ul_cpu_xrow_bytes(XF_F16R, n_cols) + 64;
    float *xr = malloc(sizeof(float) * (size_t)n_cols);
    uint8_t *x = malloc(xs * (size_t)nt);
    uint64_t s = (uint64_t)(n_cols + 7 * nt);
    for (int t = 0; t < nt; t++) {
        for (int64_t k = 0; k < n_cols; k++) xr[k] = tk_unif(&s) * 3;
        ul_cpu_quant_x(XF_F16R, xr, x + (size_t)t * xs, n_cols);
        for (size_t b = ul_cpu_xrow_bytes(XF_F16R, n_cols); b < xs; b += 4)
            memcpy(x + (size_t)t * xs + b, &(float){1e30f}, 4);
    }
    const int64_t ys = n_rows + 5;
    float *y = malloc(sizeof(float) * (size_t)(ys * nt)),
          *y2 = malloc(sizeof(float) * (size_t)(ys * nt));
    for (int64_t i = 0; i < ys * nt; i++) y[i] = y2[i] = NAN;
    pk->mm(n_cols, wp, n_groups, x, xs, nt, y, ys);
    pk->mm(n_cols, wp, n_groups, x, xs, nt, y2, ys);
    *same = 1;
    for (int t = 0; t < nt; t++)
        if (memcmp(y + t * ys, y2 + t * ys, sizeof(float) * (size_t)n_rows)) *same = 0;
    float *wd = malloc(sizeof(float) * (size_t)n_cols);
    int bad = 0;
    for (int r = 0; r < n_rows; r++) {
        ul_cpu_dequant_row(UL_TYPE_F16, w + ws * r, wd, n_cols);
        for (int t = 0; t < nt; t++) {
            const float *xt = (const float *)(x + (size_t)t * xs);
            double mag, ref = tk_dot_ref(wd, xt, n_cols, &mag);
            double err = fabs(y[t * ys + r] - ref);
            if (!(err <= (double)n_cols * 0x1p-22 * mag + 1e-30) && bad++ < 5)
                cr_log_error("cols=%ld groups=%d nt=%d y[%d][%d]=%g ref=%g", (long)n_cols, n_groups,
                             nt, t, r, y[t * ys + r], ref);
        }
    }
    free(w), free(wp), free(xr), free(x), free(y), free(y2), free(wd);
    return bad;
}

static void products_match(ul_isa_t isa, const ul_pack_kern_t *want) {
    const ul_pack_kern_t *pk = ul_cpu_pack_kern(UL_TYPE_F16, isa);
    cr_assert(pk != NULL, "F16 has no packed layout on %s", ul_cpu_isa_name(isa));
    cr_assert_eq(pk, want);
    /* odd and even; 257 and 2064 cross the 256-column K chunks */
    static const int64_t cols[] = {1, 16, 17, 48, 255, 257, 2048 + 16, 2048 + 17};
    static const int toks[] = {1, 2, 3, 5, 11, 12, 13, 24, 25, 40};
    for (size_t ci = 0; ci < sizeof cols / sizeof cols[0]; ci++)
        for (int g = 1; g <= 3; g++)
            for (size_t ti = 0; ti < sizeof toks / sizeof toks[0]; ti++) {
                int same;
                int bad = check(pk, cols[ci], g, toks[ti], &same);
                cr_expect_eq(bad, 0, "cols=%ld groups=%d nt=%d: %d bad outputs", (long)cols[ci], g,
                             toks[ti], bad);
                cr_expect(same, "cols=%ld groups=%d nt=%d: two runs differ", (long)cols[ci], g,
                          toks[ti]);
            }
}

Test(pack_f16, packed_products_match_f64_reference) {
    UL_TEST_REQUIRE_ISA(UL_ISA_AVX512);
    products_match(UL_ISA_AVX512, &ul_pack_f16_avx512);
}

Test(pack_f16, avx2_packed_products_match_f64_reference) {
    UL_TEST_REQUIRE_ISA(UL_ISA_AVX2);
    products_match(UL_ISA_AVX2, &ul_pack_f16_avx2);
}

/* A token's outputs are the same bits whether it runs alone (the decode path) or inside a
 * batch of any size (the tiled path): batched and single-sequence steps must agree. */
static void alone_equals_batched(const ul_pack_kern_t *pk) {
    static const int64_t cols[] = {17, 257, 2048 + 16};
    for (size_t ci = 0; ci < 3; ci++) {
        const int64_t n = cols[ci];
        const int nt = 13;
        const int diff =
            tk_pack_alone_vs_batched(pk, UL_TYPE_F16, XF_F16R, n, 5, nt, 3 + ci, 77 + ci);
        cr_expect_eq(diff, 0, "cols=%ld: %d of %d tokens differ alone vs batched", (long)n, diff,
                     nt);
    }
}

Test(pack_f16, token_alone_equals_token_in_batch) {
    UL_TEST_REQUIRE_ISA(UL_ISA_AVX512);
    alone_equals_batched(&ul_pack_f16_avx512);
}

Test(pack_f16, avx2_token_alone_equals_token_in_batch) {
    UL_TEST_REQUIRE_ISA(UL_ISA_AVX2);
    alone_equals_batched(&ul_pack_f16_avx2);
}
#endif
