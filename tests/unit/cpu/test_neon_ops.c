/* The AArch64 NEON entries of the ops table besides norms and RoPE (kernels_neon_expf.c),
 * against the C library and the scalar expression, under each CPU model of
 * tests/arm64/run.sh. Skipped off AArch64.
 *  - expf, 8 lanes: glibc's expf bit for bit, on the values test_expf.c holds the x86
 *    kernels to (every 61st float bit pattern of both signs, about 70 million), the special
 *    values and partial vectors of every length and offset that leave the rest of y
 *    untouched;
 *  - SwiGLU: the scalar expression g / (1 + expf(-g)) * u bit for bit. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu/forward.h"
#include "cpu/kernels.h"
#include "kern_testutil.h"

#if defined(__aarch64__)

#define NEED_NEON()                                                                                \
    do {                                                                                           \
        if (!ul_cpu_isa_within(UL_ISA_NEON, ul_cpu_isa()))                                         \
            cr_skip_test("needs NEON; this CPU (or UVLLM_ISA) gives %s",                           \
                         ul_cpu_isa_name(ul_cpu_isa()));                                           \
    } while (0)

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint32_t bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static int same(float a, float b) { return bits(a) == bits(b) || (isnan(a) && isnan(b)); }

Test(kernels_arm, expf8_neon_equals_libm_expf_bitwise) {
    NEED_NEON();
    float x[8], y[8];
    long bad = 0, n = 0;
    for (uint32_t u = 0;;) {
        int k = 0;
        for (; k < 8 && u <= 0xFFFFFFFFu - 61; k++, u += 61) x[k] = from_bits(u);
        if (k < 8) break;
        ul_expf8_neon(x, y, 8);
        for (int i = 0; i < 8; i++, n++) {
            const float r = expf(x[i]);
            if (!same(r, y[i]) && bad++ < 5)
                cr_log_error("expf(%a) = %a, ours %a", (double)x[i], (double)r, (double)y[i]);
        }
    }
    cr_expect_eq(bad, 0, "%ld of %ld values differ from expf", bad, n);
    cr_expect_gt(n, 70000000);
}

Test(kernels_arm, expf8_neon_special_values_and_partial_vectors) {
    NEED_NEON();
    const float x[16] = {-INFINITY, INFINITY, NAN,   0.0f,  -0.0f,   -80.0f, -79.99999f, -87.5f,
                         -103.9f,   -104.0f,  89.0f, 88.7f, -1e-30f, 1.0f,   -1.0f,      -0.5f};
    float y[16];
    ul_expf8_neon(x, y, 8);
    ul_expf8_neon(x + 8, y + 8, 8);
    for (int i = 0; i < 16; i++)
        cr_expect(same(expf(x[i]), y[i]), "expf(%a): %a vs %a", (double)x[i], (double)expf(x[i]),
                  (double)y[i]);
    for (int n = 0; n <= 8; n++)
        for (int off = 0; off < 8; off++) {
            float z[16];
            for (int i = 0; i < 16; i++) z[i] = 42.0f;
            ul_expf8_neon(x + off, z, n);
            for (int i = 0; i < 16; i++)
                cr_expect(i < n ? same(z[i], expf(x[off + i])) : z[i] == 42.0f,
                          "n=%d from %d: lane %d", n, off, i);
        }
}

/* odd lengths (the scalar tail), gates over the range where expf over- and underflows */
Test(kernels_arm, swiglu_neon_equals_scalar_expression) {
    NEED_NEON();
    enum { N = 1000 + 7 };
    static float g[N], u[N], ref[N];
    uint64_t s = 5;
    for (int i = 0; i < N; i++) {
        g[i] = tk_unif(&s) * (i % 7 == 0 ? 120.0f : 8.0f);
        u[i] = tk_unif(&s);
        ref[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
    }
    g[3] = INFINITY, g[10] = -INFINITY, g[17] = NAN;
    ref[3] = g[3] / (1.0f + expf(-g[3])) * u[3];
    ref[10] = g[10] / (1.0f + expf(-g[10])) * u[10];
    ref[17] = g[17];
    ul_swiglu_neon(g, u, N);
    int bad = 0;
    for (int i = 0; i < N; i++) bad += !same(g[i], ref[i]);
    cr_expect_eq(bad, 0, "%d of %d SwiGLU outputs differ from the scalar expression", bad, N);
    cr_expect(ul_cpu_ops(ul_cpu_isa())->swiglu == ul_swiglu_neon, "the AArch64 table's SwiGLU");
    cr_expect(ul_cpu_ops(ul_cpu_isa())->expf8 == ul_expf8_neon, "the AArch64 table's expf");
}
#endif
