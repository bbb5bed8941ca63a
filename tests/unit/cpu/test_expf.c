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
#include "ops_check.h"

/* x86 kernels only: the AVX2 / AVX-512 expf and SwiGLU */
#if defined(__x86_64__) || defined(__i386__)

Test(expf16, equals_libm_expf_bitwise) {
    UL_SKIP_UNDER_SANITIZERS();
    UL_TEST_REQUIRE_ISA(UL_ISA_AVX512);
    tk_expf_all_patterns(ul_expf16_avx512, 16);
}

Test(expf16, special_values_and_partial_vectors) {
    UL_TEST_REQUIRE_ISA(UL_ISA_AVX512);
    tk_expf_special_and_partial(ul_expf16_avx512, 16);
}

Test(expf8, equals_libm_expf_bitwise) {
    UL_SKIP_UNDER_SANITIZERS();
    UL_TEST_REQUIRE_ISA(UL_ISA_AVX2);
    tk_expf_all_patterns(ul_expf8_avx2, 8);
}

Test(expf8, special_values_and_partial_vectors) {
    UL_TEST_REQUIRE_ISA(UL_ISA_AVX2);
    tk_expf_special_and_partial(ul_expf8_avx2, 8);
}

/* SwiGLU on AVX2 equals g / (1 + expf(-g)) * u in C, bit for bit, for odd lengths (the
 * scalar tail), gates over the range where expf over- and underflows, infinite and NaN gates. */
Test(expf8, swiglu_equals_scalar_expression) {
    UL_TEST_REQUIRE_ISA(UL_ISA_AVX2);
    tk_swiglu_check(ul_swiglu_avx2);
}
#endif
