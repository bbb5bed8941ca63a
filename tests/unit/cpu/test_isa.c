/* The ISA values: families (x86, AArch64) never mix, each falls back through its own lower
 * ISAs to scalar, names round-trip through UVLLM_ISA, and (make test-arm64 sets
 * UVLLM_WANT_ISA per qemu CPU model) the hardware detection finds the model's ISA. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "kern_testutil.h"

Test(isa, families_do_not_mix) {
    cr_expect(ul_cpu_isa_within(UL_ISA_SCALAR, UL_ISA_I8MM));
    cr_expect(ul_cpu_isa_within(UL_ISA_SCALAR, UL_ISA_AVX2));
    cr_expect(ul_cpu_isa_within(UL_ISA_AVX2, UL_ISA_AVX512));
    cr_expect(!ul_cpu_isa_within(UL_ISA_AVX512, UL_ISA_AVX2));
    cr_expect(ul_cpu_isa_within(UL_ISA_NEON, UL_ISA_DOTPROD));
    cr_expect(ul_cpu_isa_within(UL_ISA_DOTPROD, UL_ISA_I8MM));
    cr_expect(!ul_cpu_isa_within(UL_ISA_I8MM, UL_ISA_DOTPROD));
    cr_expect(!ul_cpu_isa_within(UL_ISA_AVX2, UL_ISA_I8MM), "AVX2 is not below i8mm");
    cr_expect(!ul_cpu_isa_within(UL_ISA_NEON, UL_ISA_AVX512));
    cr_expect(!ul_cpu_isa_within(UL_ISA_NEON, UL_ISA_SCALAR));
}

Test(isa, parents_end_in_scalar_within_the_family) {
    cr_expect_eq(ul_cpu_isa_parent(UL_ISA_AVX512), UL_ISA_AVX2);
    cr_expect_eq(ul_cpu_isa_parent(UL_ISA_AVX2), UL_ISA_SCALAR);
    cr_expect_eq(ul_cpu_isa_parent(UL_ISA_I8MM), UL_ISA_DOTPROD);
    cr_expect_eq(ul_cpu_isa_parent(UL_ISA_DOTPROD), UL_ISA_NEON);
    cr_expect_eq(ul_cpu_isa_parent(UL_ISA_NEON), UL_ISA_SCALAR);
    cr_expect_eq(ul_cpu_isa_parent(UL_ISA_SCALAR), UL_ISA_SCALAR);
}

/* every type the scalar table has resolves to a kernel on every ISA of this CPU */
Test(isa, every_type_has_a_kernel_on_every_isa_here) {
    for (int isa = UL_ISA_SCALAR; isa <= UL_ISA_I8MM; isa++) {
        if (!ul_cpu_isa_within((ul_isa_t)isa, ul_cpu_isa())) continue;
        for (int t = 0; t < UL_TYPE_COUNT; t++)
            if (ul_cpu_type_supported(t))
                cr_expect(ul_cpu_mm_fn(t, (ul_isa_t)isa) != NULL, "%s on %s", ul_type_name(t),
                          ul_cpu_isa_name((ul_isa_t)isa));
    }
}

Test(isa, names_are_distinct) {
    for (int a = UL_ISA_SCALAR; a <= UL_ISA_I8MM; a++)
        for (int b = a + 1; b <= UL_ISA_I8MM; b++)
            cr_expect(strcmp(ul_cpu_isa_name((ul_isa_t)a), ul_cpu_isa_name((ul_isa_t)b)));
    cr_expect_str_eq(ul_cpu_isa_name(UL_ISA_DOTPROD), "dotprod");
}

/* UVLLM_WANT_ISA (tests/arm64/run.sh, from the qemu CPU model): the detected ISA */
Test(isa, detection_finds_the_expected_isa) {
    const char *want = getenv("UVLLM_WANT_ISA");
    if (!want || !*want) cr_skip_test("UVLLM_WANT_ISA not set (make test-arm64 sets it)");
    if (getenv("UVLLM_ISA")) cr_skip_test("UVLLM_ISA caps the ISA");
    cr_expect_str_eq(ul_cpu_isa_name(ul_cpu_isa()), want);
}
