/* The AVX2 RMSNorm and RoPE (kernels_avx2_norm.c) against the scalar expressions of the
 * forward pass, written here in C compiled without FMA contraction as forward.c is: RoPE
 * must match bit for bit in both modes (adjacent pairs, NEOX) for rotary widths with and
 * without a whole vector (phi3 rotates 24 of 32), RMSNorm to within one ulp (its double sum
 * of squares runs in another order) and exactly in place. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "cpu/forward.h"
#include "ops_check.h"

/* x86 kernels only: the AVX2 RMSNorm and RoPE */
#if defined(__x86_64__) || defined(__i386__)

static void rope_ref(float *x, const float *cs, int n_rot, int neox) {
    const int half = n_rot / 2;
    for (int i = 0; i < half; i++) {
        const int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
        const float x0 = x[a], x1 = x[b], c = cs[2 * i], s = cs[2 * i + 1];
        x[a] = x0 * c - x1 * s;
        x[b] = x0 * s + x1 * c;
    }
}

static void rope_ref_norm(float *x, const float *cs, int n_rot) { rope_ref(x, cs, n_rot, 0); }
static void rope_ref_neox(float *x, const float *cs, int n_rot) { rope_ref(x, cs, n_rot, 1); }

static void rmsnorm_ref(float *dst, const float *x, const float *w, int n, float eps) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (double)(x[i] * x[i]);
    const float scale = 1.0f / sqrtf((float)(ss / n) + eps);
    for (int i = 0; i < n; i++) dst[i] = (x[i] * scale) * w[i];
}

Test(norm_avx2, rope_equals_scalar_bitwise) {
    UL_TEST_REQUIRE_ISA(UL_ISA_AVX2);
    tk_rope_check(rope_ref_norm, rope_ref_neox, ul_rope_norm_avx2, ul_rope_neox_avx2, "avx2");
}

Test(norm_avx2, rmsnorm_within_one_ulp_of_scalar) {
    UL_TEST_REQUIRE_ISA(UL_ISA_AVX2);
    tk_rmsnorm_check(rmsnorm_ref, ul_rmsnorm_avx2, "avx2");
}
#endif
