/* The attention's vector expf (16-wide on AVX-512, 8-wide on AVX2) must equal the C
 * library's expf bit for bit (it replaces expf calls whose results feed llama.cpp-identical
 * roundings): every 61st float bit pattern over the whole range of both signs (about 70
 * million values, covering every exponent, the fast path and the special cases),
 * infinities and NaN, and partial vectors leaving the rest of y untouched; SwiGLU built on
 * it equals the scalar expression. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu/kernels.h"
#include "../tsan_skip.h"
#include "kern_testutil.h"

/* x86 kernels only: the AVX2 / AVX-512 expf and SwiGLU */
#if defined(__x86_64__) || defined(__i386__)

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

typedef void (*vexp_fn)(const float *x, float *y, int n);

static void all_patterns(vexp_fn fn, int w) {
    float x[16], y[16];
    long bad = 0, n = 0;
    uint32_t u = 0;
    for (;;) {
        int k = 0;
        for (; k < w && u <= 0xFFFFFFFFu - 61; k++, u += 61) x[k] = from_bits(u);
        if (k < w) break;
        fn(x, y, w);
        for (int i = 0; i < w; i++, n++) {
            float r = expf(x[i]);
            if (bits(r) != bits(y[i]) && !(isnan(r) && isnan(y[i])) && bad++ < 5)
                cr_log_error("expf(%a) = %a, ours %a", (double)x[i], (double)r, (double)y[i]);
        }
    }
    cr_expect_eq(bad, 0, "%ld of %ld values differ from expf", bad, n);
    cr_log_info("%ld values compared", n);
}

/* Special values 16 at a time (w lanes per call), then partial calls of n < w lanes. */
static void special_and_partial(vexp_fn fn, int w) {
    float x[16] = {-INFINITY, INFINITY, NAN,   0.0f,  -0.0f,   -80.0f, -79.99999f, -87.5f,
                   -103.9f,   -104.0f,  89.0f, 88.7f, -1e-30f, 1.0f,   -1.0f,      -0.5f};
    float y[16];
    for (int i = 0; i < 16; i += w) fn(x + i, y + i, w);
    for (int i = 0; i < 16; i++) {
        float r = expf(x[i]);
        cr_expect(bits(r) == bits(y[i]) || (isnan(r) && isnan(y[i])), "expf(%a): %a vs %a",
                  (double)x[i], (double)r, (double)y[i]);
    }
    /* the partial calls start at lane 3 of the values twice over, so up to w - 1 lanes from
     * there stay inside the array (x alone ends 3 lanes early for w = 16) */
    float xx[32];
    for (int i = 0; i < 32; i++) xx[i] = x[i % 16];
    for (int n = 0; n < w; n++) {
        float z[16];
        for (int i = 0; i < 16; i++) z[i] = 42.0f;
        fn(xx + 3, z, n);
        for (int i = 0; i < 16; i++)
            cr_expect(i < n ? bits(z[i]) == bits(expf(xx[3 + i])) : z[i] == 42.0f, "n=%d lane %d",
                      n, i);
    }
}

Test(expf16, equals_libm_expf_bitwise) {
    UL_SKIP_UNDER_SANITIZERS();
    UL_TEST_REQUIRE_ISA(UL_ISA_AVX512);
    all_patterns(ul_expf16_avx512, 16);
}

Test(expf16, special_values_and_partial_vectors) {
    UL_TEST_REQUIRE_ISA(UL_ISA_AVX512);
    special_and_partial(ul_expf16_avx512, 16);
}

Test(expf8, equals_libm_expf_bitwise) {
    UL_SKIP_UNDER_SANITIZERS();
    UL_TEST_REQUIRE_ISA(UL_ISA_AVX2);
    all_patterns(ul_expf8_avx2, 8);
}

Test(expf8, special_values_and_partial_vectors) {
    UL_TEST_REQUIRE_ISA(UL_ISA_AVX2);
    special_and_partial(ul_expf8_avx2, 8);
}

/* SwiGLU on AVX2 equals g / (1 + expf(-g)) * u in C, bit for bit, for odd lengths (the
 * scalar tail) and gates over the range where expf over- and underflows. */
Test(expf8, swiglu_equals_scalar_expression) {
    UL_TEST_REQUIRE_ISA(UL_ISA_AVX2);
    enum { N = 1000 + 7 };
    static float g[N], u[N], ref[N];
    uint64_t s = 5;
    for (int i = 0; i < N; i++) {
        g[i] = tk_unif(&s) * (i % 7 == 0 ? 120.0f : 8.0f);
        u[i] = tk_unif(&s);
        ref[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
    }
    ul_swiglu_avx2(g, u, N);
    int bad = 0;
    for (int i = 0; i < N; i++) bad += bits(g[i]) != bits(ref[i]);
    cr_expect_eq(bad, 0, "%d of %d SwiGLU outputs differ from the scalar expression", bad, N);
}
#endif
