/* The attention's 16-wide expf must equal the C library's expf bit for bit (it replaces
 * expf calls whose results feed llama.cpp-identical roundings): every 61st float bit
 * pattern over the whole range of both signs (about 140 million values, covering every
 * exponent, the fast path and the special cases), infinities and NaN, and partial
 * vectors (n < 16) leaving the rest of y untouched. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu/kernels.h"
#include "kern_testutil.h"

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

Test(expf16, equals_libm_expf_bitwise) {
    UL_TEST_REQUIRE_ISA(UL_ISA_AVX512);
    float x[16], y[16];
    long bad = 0, n = 0;
    uint32_t u = 0;
    for (;;) {
        int k = 0;
        for (; k < 16 && u <= 0xFFFFFFFFu - 61; k++, u += 61) x[k] = from_bits(u);
        if (k < 16) break;
        ul_expf16_avx512(x, y, 16);
        for (int i = 0; i < 16; i++, n++) {
            float r = expf(x[i]);
            if (bits(r) != bits(y[i]) && !(isnan(r) && isnan(y[i])) && bad++ < 5)
                cr_log_error("expf(%a) = %a, ours %a", (double)x[i], (double)r, (double)y[i]);
        }
    }
    cr_expect_eq(bad, 0, "%ld of %ld values differ from expf", bad, n);
    cr_log_info("%ld values compared", n);
}

Test(expf16, special_values_and_partial_vectors) {
    UL_TEST_REQUIRE_ISA(UL_ISA_AVX512);
    float x[16] = {-INFINITY, INFINITY, NAN,   0.0f,  -0.0f,   -80.0f, -79.99999f, -87.5f,
                   -103.9f,   -104.0f,  89.0f, 88.7f, -1e-30f, 1.0f,   -1.0f,      -0.5f};
    float y[16];
    ul_expf16_avx512(x, y, 16);
    for (int i = 0; i < 16; i++) {
        float r = expf(x[i]);
        cr_expect(bits(r) == bits(y[i]) || (isnan(r) && isnan(y[i])), "expf(%a): %a vs %a",
                  (double)x[i], (double)r, (double)y[i]);
    }
    for (int n = 0; n < 16; n++) {
        float z[16];
        for (int i = 0; i < 16; i++) z[i] = 42.0f;
        ul_expf16_avx512(x + 3, z, n > 13 ? 13 : n);
        for (int i = 0; i < 16; i++)
            cr_expect(i < (n > 13 ? 13 : n) ? bits(z[i]) == bits(expf(x[3 + i])) : z[i] == 42.0f,
                      "n=%d lane %d", n, i);
    }
}
