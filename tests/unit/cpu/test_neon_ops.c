/* The AArch64 NEON entries of the ops table besides norms and RoPE (kernels_neon_expf.c,
 * kernels_neon_geglu.c, kernels_neon_topk.c, kernels_neon_attn.c), against the C library and the
 * scalar kernels, under each CPU model of tests/arm64/run.sh. Skipped off AArch64.
 *  - expf, 8 lanes: glibc's expf bit for bit, on the values test_expf.c holds the x86
 *    kernels to (every 61st float bit pattern of both signs, about 70 million), the special
 *    values and partial vectors of every length and offset that leave the rest of y
 *    untouched;
 *  - SwiGLU: the scalar expression g / (1 + expf(-g)) * u bit for bit;
 *  - GeGLU: ul_fwd_geglu's scalar results bit for bit (every f16 gate, the +-10 cut-offs);
 *  - the MoE router's top-k: the scalar rule's picks (ties to the lower index) and refusals;
 *  - the tiled attention's kernels against the scalar ones on one tile: probabilities,
 *    running max and the rescaled output bit for bit (the same expf), the two products
 *    within a summation-order bound. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu/forward.h"
#include "cpu/kernels.h"
#include "ops_check.h"

#if defined(__aarch64__)
#include "cpu/kernels_neon_attn.h"

Test(kernels_arm, expf8_neon_equals_libm_expf_bitwise) {
    UL_TEST_REQUIRE_ISA(UL_ISA_NEON);
    tk_expf_all_patterns(ul_expf8_neon, 8);
}

Test(kernels_arm, expf8_neon_special_values_and_partial_vectors) {
    UL_TEST_REQUIRE_ISA(UL_ISA_NEON);
    tk_expf_special_and_partial(ul_expf8_neon, 8);
}

/* odd lengths (the scalar tail), gates over the range where expf over- and underflows */
Test(kernels_arm, swiglu_neon_equals_scalar_expression) {
    UL_TEST_REQUIRE_ISA(UL_ISA_NEON);
    tk_swiglu_check(ul_swiglu_neon);
    cr_expect(ul_cpu_ops(ul_cpu_isa())->swiglu == ul_swiglu_neon, "the AArch64 table's SwiGLU");
    cr_expect(ul_cpu_ops(ul_cpu_isa())->expf8 == ul_expf8_neon, "the AArch64 table's expf");
}

/* One tile of the tiled path through both kernel sets: nq query rows, hd dimensions, n
 * valid keys (the rest masked to -inf, as forward_attn_tiled.c masks them), the running
 * state from an earlier tile so the rescale is exercised. */
static void one_tile(int nq, int hd, int n, uint64_t seed) {
    enum { T = UL_ATTN_TILE };
    const ul_attn_tile_kern_t *ks[2] = {&ul_attn_tile_scalar, &ul_attn_tile_neon};
    float *q = malloc(sizeof(float) * (size_t)(nq * hd));
    float *kt = malloc(sizeof(float) * (size_t)(hd * T)), *v = malloc(sizeof(float) * T * hd);
    uint16_t *kh = malloc(sizeof(uint16_t) * (size_t)(hd * T));
    float *kq[2], *o[2], M[2][T], S[2][T];
    uint64_t s = seed;
    for (int i = 0; i < nq * hd; i++) q[i] = tk_unif(&s);
    for (int i = 0; i < hd * T; i++) kh[i] = ul_fp32_to_fp16(tk_unif(&s) * 2);
    for (int i = 0; i < T * hd; i++) v[i] = tk_unif(&s);
    const float scale = 1.0f / sqrtf((float)hd);
    for (int w = 0; w < 2; w++) {
        kq[w] = malloc(sizeof(float) * (size_t)(nq * T));
        o[w] = malloc(sizeof(float) * (size_t)(nq * hd));
        for (int i = 0; i < nq * hd; i++) o[w][i] = 0.25f;
        for (int r = 0; r < nq; r++) M[w][r] = r % 3 == 0 ? -INFINITY : 0.1f, S[w][r] = 2.0f;
        ks[w]->cvt(kt, kh, hd * T, 1);
        ks[w]->qk(q, nq, hd, kt, scale, kq[w]);
        for (int r = 0; r < nq; r++)
            for (int j = 0; j < T; j++)
                if (j >= n || (r == 1 && j % 5 == 0)) kq[w][(size_t)r * T + j] = -INFINITY;
    }
    double worst = 0;
    for (int i = 0; i < nq * T; i++)
        if (isfinite(kq[0][i])) worst = fmax(worst, fabs((double)kq[0][i] - kq[1][i]));
    cr_expect_leq(worst, 1e-5, "nq=%d hd=%d: scores differ by %g", nq, hd, worst);
    memcpy(kq[1], kq[0], sizeof(float) * (size_t)(nq * T)); /* the same scores into softmax */
    int bad = 0;
    for (int w = 0; w < 2; w++) ks[w]->softmax(kq[w], nq, o[w], hd, M[w], S[w]);
    for (int i = 0; i < nq * T; i++) bad += !tk_same(kq[0][i], kq[1][i]);
    for (int i = 0; i < nq * hd; i++) bad += !tk_same(o[0][i], o[1][i]);
    for (int r = 0; r < nq; r++) bad += !tk_same(M[0][r], M[1][r]);
    cr_expect_eq(bad, 0, "nq=%d hd=%d n=%d: probabilities, rescale or max differ", nq, hd, n);
    for (int r = 0; r < nq; r++)
        cr_expect_leq(fabs(S[0][r] - S[1][r]), 1e-5 * S[0][r], "row %d: sum %a vs %a", r,
                      (double)S[0][r], (double)S[1][r]);
    for (int w = 0; w < 2; w++) ks[w]->pv(kq[0], nq, v, n, hd, o[w]);
    worst = 0;
    for (int i = 0; i < nq * hd; i++) worst = fmax(worst, fabs((double)o[0][i] - o[1][i]));
    cr_expect_leq(worst, 1e-4, "nq=%d hd=%d n=%d: outputs differ by %g", nq, hd, n, worst);
    free(q), free(kt), free(v), free(kh);
    for (int w = 0; w < 2; w++) free(kq[w]), free(o[w]);
}

Test(kernels_arm, attn_tile_neon_tracks_scalar) {
    UL_TEST_REQUIRE_ISA(UL_ISA_NEON);
    cr_expect(ul_cpu_ops(ul_cpu_isa())->attn_tile == &ul_attn_tile_neon, "the AArch64 table's");
    /* row counts around the 4-row register tile, hd of 16-column tiles and 4-column rests */
    static const int shapes[][3] = {{64, 64, 64}, {7, 128, 40}, {1, 36, 64}, {5, 80, 1}, {3, 4, 9}};
    for (int i = 0; i < 5; i++) one_tile(shapes[i][0], shapes[i][1], shapes[i][2], 11 + i);
}

/* GeGLU: the ops table's entry is the NEON one, and it gives ul_fwd_geglu's scalar bits on
 * every f16 gate (nudged off it, so the rounding to f16 is exercised), the +-10 cut-offs
 * and their neighbours with ups of both signs (a gate <= -10 gives +0 whatever up is), and
 * an odd tail; NaN gates stay NaN. */
Test(kernels_arm, geglu_neon_equals_scalar_on_every_f16_gate) {
    UL_TEST_REQUIRE_ISA(UL_ISA_NEON);
    ul_fwd_gemma3_init();
    cr_expect(ul_cpu_ops(ul_cpu_isa())->geglu == ul_geglu_neon, "the AArch64 table's");
    static const float edges[] = {10.0f,         -10.0f,         0x1.3ffffep3f, -0x1.3ffffep3f,
                                  0x1.400002p3f, -0x1.400002p3f, 0.0f,          -0.0f,
                                  65504.0f,      1e30f,          -1e30f,        INFINITY,
                                  -INFINITY,     0x1p-25f,       -0x1p-20f,     0x1.ffep15f};
    const size_t ne = sizeof edges / sizeof edges[0], nf = 1 << 16, n = nf + 2 * ne + 7;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *u = malloc(n * sizeof *u);
    for (size_t i = 0; i < n; i++) {
        a[i] = i < nf            ? ul_fp16_to_fp32((uint16_t)i) * (1.0f + 0x1p-13f)
               : i < nf + 2 * ne ? edges[(i - nf) % ne]
                                 : (float)i - (float)nf;
        u[i] = (i % 2 ? -0.5f : 0.5f) + (float)(i % 7);
    }
    memcpy(b, a, n * sizeof *a);
    ul_fwd_geglu(a, u, n, 0);
    ul_cpu_ops(ul_cpu_isa())->geglu(b, u, n);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        if (!tk_same(a[i], b[i]) && bad++ < 5)
            cr_log_error("gate %zu: scalar %a, neon %a", i, (double)a[i], (double)b[i]);
    cr_expect_eq(bad, 0, "%zu of %zu results differ", bad, n);
    free(a), free(b), free(u);
}

/* The router's top-k: the ops table's entry against the rule (the k largest, descending,
 * ties to the lower index) on rows with many ties, +0 / -0 ties and every k up to 8; rows
 * it refuses (a length not a multiple of 8, a NaN, no value above -inf left) are left
 * exactly as they were, and the caller's scalar fallback answers them. */
Test(kernels_arm, topk_neon_equals_scalar_rule) {
    UL_TEST_REQUIRE_ISA(UL_ISA_NEON);
    const ul_cpu_ops_t *ops = ul_cpu_ops(ul_cpu_isa());
    cr_expect(ops->topk == ul_topk_neon, "the AArch64 table's");
    static const int ns[] = {8, 16, 64, 128, 256};
    uint32_t s = 12345;
    for (int ni = 0; ni < 5; ni++)
        for (int k = 1; k <= 8 && k <= ns[ni]; k++)
            for (int rep = 0; rep < 30; rep++) {
                const int n = ns[ni];
                float p[256], q[256], val[8];
                int32_t sel[8], ref[8];
                for (int i = 0; i < n; i++) { /* few distinct values: ties everywhere */
                    s = s * 1664525u + 1013904223u;
                    p[i] = rep % 3 == 0   ? (float)(s >> 29) * 0.125f
                           : rep % 3 == 1 ? (float)(s >> 8) * 0x1p-24f
                                          : ((s >> 20) & 1 ? 0.0f : -0.0f) - (float)(s >> 30);
                }
                tk_topk_ref(p, n, k, ref);
                memcpy(q, p, sizeof(float) * (size_t)n);
                cr_assert_eq(ops->topk(q, n, k, sel, val), 0);
                for (int j = 0; j < k; j++) {
                    cr_assert_eq(sel[j], ref[j], "n %d k %d pick %d: %d, rule %d", n, k, j, sel[j],
                                 ref[j]);
                    cr_assert(tk_same(val[j], p[ref[j]]));
                    cr_assert(q[sel[j]] == -INFINITY);
                }
            }
    float p[24], q[24], val[8];
    int32_t sel[8];
    for (int i = 0; i < 24; i++) p[i] = q[i] = (float)(i % 5);
    cr_expect_eq(ul_topk_neon(q, 20, 4, sel, val), -1, "20 is not a multiple of 8");
    cr_expect(!memcmp(p, q, sizeof p), "a refused row is left as it was");
    p[13] = q[13] = NAN;
    cr_expect_eq(ul_topk_neon(q, 16, 2, sel, val), -1, "a NaN row goes to the scalar rule");
    cr_expect(!memcmp(p, q, sizeof p), "a NaN row is left as it was");
    for (int i = 2; i < 8; i++) p[i] = q[i] = -INFINITY; /* two picks, then none above -inf */
    cr_expect_eq(ul_topk_neon(q, 8, 4, sel, val), -1);
    cr_expect(!memcmp(p, q, sizeof p), "a row refused after two picks is restored");
}
#endif
