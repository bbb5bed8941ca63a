/* The active ISA's ops table (ops.c) against the scalar table, entry by entry, on any
 * architecture: RoPE and the f16 roundings bit for bit, RMSNorm within one ulp (its sum
 * of squares is taken in another order). On x86 test_norm_avx2.c also tests the AVX2
 * functions directly; on AArch64 this is what covers the NEON table. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "cpu/forward.h"
#include "ops_check.h"

static const ul_cpu_ops_t *active(void) {
    if (ul_cpu_isa() == UL_ISA_SCALAR) cr_skip_test("scalar ISA: nothing to compare");
    return ul_cpu_ops(ul_cpu_isa());
}

static int n_diff(const float *a, const float *b, int n) {
    int bad = 0;
    for (int i = 0; i < n; i++) bad += memcmp(a + i, b + i, 4) != 0;
    return bad;
}

Test(ops_isa, rope_equals_scalar_bitwise) {
    const ul_cpu_ops_t *o = active(), *sc = ul_cpu_ops(UL_ISA_SCALAR);
    tk_rope_check(sc->rope_norm, sc->rope_neox, o->rope_norm, o->rope_neox,
                  ul_cpu_isa_name(ul_cpu_isa()));
}

Test(ops_isa, rmsnorm_within_one_ulp_of_scalar) {
    const ul_cpu_ops_t *o = active(), *sc = ul_cpu_ops(UL_ISA_SCALAR);
    tk_rmsnorm_check(sc->rmsnorm, o->rmsnorm, ul_cpu_isa_name(ul_cpu_isa()));
}

/* values around f16's range and precision: ties, denormals, overflow to inf */
Test(ops_isa, f16_roundings_equal_scalar_bitwise) {
    const ul_cpu_ops_t *o = active(), *sc = ul_cpu_ops(UL_ISA_SCALAR);
    enum { N = 1003 };
    static float x[N], a[N], b[N];
    static uint16_t ha[3 * N], hb[3 * N];
    uint64_t s = 5;
    for (int i = 0; i < N; i++) {
        const float m = i % 7 == 0 ? 70000.0f : i % 5 == 0 ? 1e-6f : 3.0f;
        x[i] = tk_unif(&s) * m;
    }
    x[1] = 1.0f + 0x1p-11f, x[2] = 65520.0f, x[3] = 0x1p-25f, x[4] = -0.0f;
    sc->round_f16(a, x, N);
    o->round_f16(b, x, N);
    cr_expect_eq(n_diff(a, b, N), 0, "round_f16");
    for (size_t stride = 1; stride <= 3; stride += 2) {
        memset(ha, 0x55, sizeof ha);
        memset(hb, 0x55, sizeof hb);
        sc->to_f16(ha, stride, x, N);
        o->to_f16(hb, stride, x, N);
        cr_expect_eq(memcmp(ha, hb, sizeof ha), 0, "to_f16 stride %zu", stride);
    }
}
