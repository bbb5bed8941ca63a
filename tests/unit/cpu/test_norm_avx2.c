/* The AVX2 RMSNorm and RoPE (kernels_avx2_norm.c) against the scalar expressions of the
 * forward pass, written here in C compiled without FMA contraction as forward.c is: RoPE
 * must match bit for bit in both modes (adjacent pairs, NEOX) for rotary widths with and
 * without a whole vector (phi3 rotates 24 of 32), RMSNorm to within one ulp (its double sum
 * of squares runs in another order) and exactly in place. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "cpu/forward.h"
#include "kern_testutil.h"

/* x86 kernels only: the AVX2 RMSNorm and RoPE */
#if defined(__x86_64__) || defined(__i386__)

static uint32_t bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static void rope_ref(float *x, const float *cs, int n_rot, int neox) {
    const int half = n_rot / 2;
    for (int i = 0; i < half; i++) {
        const int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
        const float x0 = x[a], x1 = x[b], c = cs[2 * i], s = cs[2 * i + 1];
        x[a] = x0 * c - x1 * s;
        x[b] = x0 * s + x1 * c;
    }
}

Test(norm_avx2, rope_equals_scalar_bitwise) {
    UL_TEST_REQUIRE_ISA(UL_ISA_AVX2);
    static const int widths[] = {2, 10, 16, 24, 64, 80, 128};
    uint64_t s = 3;
    for (int neox = 0; neox < 2; neox++)
        for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++) {
            const int n = widths[wi];
            float x[160], y[160], cs[160];
            for (int i = 0; i < 160; i++) x[i] = y[i] = tk_unif(&s) * 3, cs[i] = tk_unif(&s);
            rope_ref(x, cs, n, neox);
            (neox ? ul_rope_neox_avx2 : ul_rope_norm_avx2)(y, cs, n);
            int bad = 0;
            for (int i = 0; i < 160; i++) bad += bits(x[i]) != bits(y[i]);
            cr_expect_eq(bad, 0, "%s n_rot=%d: %d values differ", neox ? "neox" : "norm", n, bad);
        }
}

Test(norm_avx2, rmsnorm_within_one_ulp_of_scalar) {
    UL_TEST_REQUIRE_ISA(UL_ISA_AVX2);
    static const int sizes[] = {7, 64, 2048, 2048 + 5, 5632};
    static float x[6000], w[6000], a[6000], b[6000];
    uint64_t s = 9;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        const int n = sizes[k];
        for (int i = 0; i < n; i++)
            x[i] = tk_unif(&s) * (i % 13 ? 1.0f : 40.0f), w[i] = tk_unif(&s);
        double ss = 0;
        for (int i = 0; i < n; i++) ss += (double)(x[i] * x[i]);
        const float scale = 1.0f / sqrtf((float)(ss / n) + 1e-5f);
        for (int i = 0; i < n; i++) a[i] = (x[i] * scale) * w[i];
        ul_rmsnorm_avx2(b, x, w, n, 1e-5f);
        int bad = 0;
        for (int i = 0; i < n; i++) bad += fabsf(a[i] - b[i]) > fabsf(a[i]) * 0x1p-23f;
        cr_expect_eq(bad, 0, "n=%d: %d outputs beyond one ulp", n, bad);
        memcpy(a, x, sizeof(float) * n);
        ul_rmsnorm_avx2(a, a, w, n, 1e-5f); /* in place, as gemma3's post norms */
        cr_expect_eq(memcmp(a, b, sizeof(float) * n), 0, "n=%d: in place differs", n);
    }
}
#endif
