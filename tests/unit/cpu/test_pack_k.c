/* The AVX2 packed layouts of Q4_K, Q5_K, Q6_K, IQ4_XS and IQ4_NL (kernels_avx2_pack_*.c),
 * called directly (pack 16 rows at a time, then mm over the groups): every output against
 * a float64 product of the dequantised weights and the decoded activations (the scalar
 * reference), with test_kernels.c's summation bound, on odd and even block counts, 1 to 4
 * groups, 1 to 17 and 33 tokens (every token-tile remainder), an output stride wider than
 * the rows, and a row long enough to need two passes of the Q4_K/Q5_K helper bytes. Also
 * weights and activations at their extremes, where adding one more vpmaddubsw output in
 * int16 than the layout allows saturates. Skipped where the CPU lacks AVX2. */
#include <criterion/criterion.h>

#include "cpu/pack.h"
#include "kern_testutil.h"

static const int k_types[] = {UL_TYPE_Q4_K, UL_TYPE_Q5_K, UL_TYPE_Q6_K, UL_TYPE_IQ4_XS,
                              UL_TYPE_IQ4_NL};
#define N_TYPES (int)(sizeof k_types / sizeof k_types[0])

/* Weights at the largest magnitudes each type can hold (every row alike). */
static uint8_t *extreme_weights(int type, int n_rows, int64_t n_cols) {
    const size_t rb = ul_type_row_bytes(type, n_cols);
    uint8_t *w = malloc(rb * (size_t)n_rows);
    const int be = ul_type_block_elems(type), bs = ul_type_block_bytes(type);
    /* all-ones bits: nibbles 15, fifth/high bits set, Q4_K scales and mins 63 */
    memset(w, type == UL_TYPE_IQ4_NL || type == UL_TYPE_IQ4_XS ? 0x00 : 0xFF, rb * n_rows);
    for (int r = 0; r < n_rows; r++)
        for (int64_t b = 0; b < n_cols / be; b++) {
            uint8_t *blk = w + rb * r + (size_t)b * bs;
            const uint16_t d = ul_fp32_to_fp16(0.01f);
            if (type == UL_TYPE_Q4_K || type == UL_TYPE_Q5_K) {
                memcpy(blk, &d, 2);
                memcpy(blk + 2, &d, 2);
            } else if (type == UL_TYPE_Q6_K) {
                blk_q6_K *k = (blk_q6_K *)blk;
                memset(k->scales, 0x7F, sizeof k->scales);
                k->d = d;
            } else if (type == UL_TYPE_IQ4_XS) { /* nibbles 0: level -127; scale 31 */
                blk_iq4_xs *k = (blk_iq4_xs *)blk;
                k->d = d;
                k->scales_h = 0xFFFF;
                memset(k->scales_l, 0xFF, sizeof k->scales_l);
            } else {
                memcpy(blk, &d, 2);
            }
        }
    return w;
}

/* Packs n_groups groups of w and runs mm for nt tokens; returns the outputs outside the
 * bound (logging the first few). */
static int check(int type, int n_groups, int64_t n_cols, int nt, int extreme, uint64_t seed) {
    const ul_pack_kern_t *pk = ul_cpu_pack_kern(type, UL_ISA_AVX2);
    cr_assert(pk != NULL, "%s has no AVX2 packed layout", ul_type_name(type));
    const int n_rows = n_groups * UL_PACK_ROWS, ys = n_rows + 5;
    const ul_xfmt_t f = ul_cpu_xfmt(type);
    const size_t ws = ul_type_row_bytes(type, n_cols), xs = ul_cpu_xrow_bytes(f, n_cols);
    const size_t gb = pk->group_bytes(n_cols);
    uint8_t *w =
        extreme ? extreme_weights(type, n_rows, n_cols) : tk_weights(type, n_rows, n_cols, seed);
    uint8_t *wp = tk_alloc64(gb * (size_t)n_groups);
    for (int g = 0; g < n_groups; g++)
        pk->pack(w + (size_t)g * UL_PACK_ROWS * ws, ws, n_cols, wp + (size_t)g * gb);
    float *x = malloc(sizeof(float) * (size_t)(n_cols * nt));
    float *xd = malloc(sizeof(float) * (size_t)(n_cols * nt));
    float *wd = malloc(sizeof(float) * (size_t)n_cols);
    uint8_t *xq = malloc(xs * (size_t)nt);
    float *y = malloc(sizeof(float) * (size_t)(ys * nt));
    uint64_t s = seed * 31 + 7;
    for (int64_t i = 0; i < n_cols * nt; i++) x[i] = extreme ? 2.5f : tk_unif(&s) * 3;
    for (int t = 0; t < nt; t++) {
        ul_cpu_quant_x(f, x + t * n_cols, xq + xs * t, n_cols);
        tk_decode_x(f, xq + xs * t, xd + t * n_cols, n_cols);
    }
    for (int i = 0; i < ys * nt; i++) y[i] = NAN;
    pk->mm(n_cols, wp, n_groups, xq, xs, nt, y, ys);
    int bad = 0;
    for (int r = 0; r < n_rows; r++) {
        ul_cpu_dequant_row(type, w + ws * r, wd, n_cols);
        for (int t = 0; t < nt; t++) {
            double mag, ref = tk_dot_ref(wd, xd + t * n_cols, n_cols, &mag);
            const double err = fabs(y[t * ys + r] - ref);
            if (!(err <= (double)n_cols * 0x1p-22 * mag + 1e-30) && bad++ < 4)
                cr_log_error("%s%s groups=%d cols=%ld nt=%d: y[%d][%d]=%.9g ref=%.9g",
                             ul_type_name(type), extreme ? " (extreme)" : "", n_groups,
                             (long)n_cols, nt, t, r, y[t * ys + r], ref);
        }
        for (int t = 0; t < nt; t++) /* the stride's gap is never written */
            for (int r2 = n_rows; r2 < ys && r == 0; r2++)
                if (!isnan(y[t * ys + r2]) && bad++ < 4)
                    cr_log_error("%s: y[%d][%d] written beyond the rows", ul_type_name(type), t,
                                 r2);
    }
    free(w), free(wp), free(x), free(xd), free(wd), free(xq), free(y);
    return bad;
}

Test(pack_k, avx2_layouts_exist) {
    UL_TEST_REQUIRE_ISA(UL_ISA_AVX2);
    for (int i = 0; i < N_TYPES; i++)
        cr_expect(ul_cpu_pack_kern(k_types[i], UL_ISA_AVX2) != NULL, "%s",
                  ul_type_name(k_types[i]));
}

Test(pack_k, avx2_matches_f64_reference) {
    UL_TEST_REQUIRE_ISA(UL_ISA_AVX2);
    static const int groups[] = {1, 2, 3};
    for (int ti = 0; ti < N_TYPES; ti++) {
        const int type = k_types[ti], be = ul_type_block_elems(type);
        /* block counts: 1, 2, 3, 5 and 8; IQ4_NL also 7 (an odd last pair) */
        const int64_t cols[] = {be, 2 * be, 3 * be, 5 * be,
                                type == UL_TYPE_IQ4_NL ? 7 * be : 8 * be};
        int bad = 0;
        for (int ci = 0; ci < 5; ci++)
            for (int gi = 0; gi < 3; gi++)
                for (int nt = 1; nt <= 17; nt += gi == 1 ? 1 : 3)
                    bad += check(type, groups[gi], cols[ci], nt, 0,
                                 (uint64_t)(ti * 1000 + ci * 100 + gi * 20 + nt));
        bad += check(type, 4, 3 * be, 33, 0, (uint64_t)ti + 5);
        cr_expect_eq(bad, 0, "%s: %d outputs outside the bound", ul_type_name(type), bad);
    }
}

/* 65 super-blocks: the Q4_K/Q5_K tiles take the activations' bsum pairs in passes of 64. */
Test(pack_k, avx2_long_rows) {
    UL_TEST_REQUIRE_ISA(UL_ISA_AVX2);
    for (int ti = 0; ti < N_TYPES; ti++) {
        const int type = k_types[ti];
        const int bad = check(type, 1, 65 * 256, 5, 0, (uint64_t)ti + 99);
        cr_expect_eq(bad, 0, "%s: %d outputs outside the bound", ul_type_name(type), bad);
    }
}

Test(pack_k, avx2_extreme_values_do_not_saturate) {
    UL_TEST_REQUIRE_ISA(UL_ISA_AVX2);
    for (int ti = 0; ti < N_TYPES; ti++) {
        const int type = k_types[ti];
        const int bad = check(type, 2, 3 * ul_type_block_elems(type), 6, 1, 1);
        cr_expect_eq(bad, 0, "%s: %d outputs outside the bound", ul_type_name(type), bad);
    }
}
