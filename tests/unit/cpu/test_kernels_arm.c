/* The AArch64 quantised products (kernels_neon*.c) sum integers exactly and add each
 * block's float product in the scalar kernels' order: their outputs are the scalar
 * kernels' bits, on every ISA of the family this CPU has (stricter than test_kernels.c's
 * summation bound, which F32/F16 only meet). Skipped off AArch64. */
#include <criterion/criterion.h>

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
