/* Checks every ISA's ops (AVX2, AVX-512, NEON) pass against a reference: RoPE bit for bit,
 * RMSNorm within one ulp and exactly in place; the vector expf against the C library's expf bit for
 * bit over every 61st float bit pattern of both signs (about 70 million values), the special
 * values, partial vectors of every length and offset leaving the rest of y untouched; SwiGLU equal
 * to g / (1 + expf(-g)) * u bit for bit. Needs <criterion/criterion.h> before it. */
#ifndef UL_TEST_OPS_CHECK_H
#define UL_TEST_OPS_CHECK_H

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "kern_testutil.h"

typedef void (*tk_rope_fn)(float *x, const float *cs, int n_rot);
typedef void (*tk_rmsnorm_fn)(float *dst, const float *x, const float *w, int n, float eps);
typedef void (*tk_vexp_fn)(const float *x, float *y, int n);
typedef void (*tk_swiglu_fn)(float *g, const float *u, size_t n);

/* Both modes (adjacent pairs, NEOX) for rotary widths with and without a whole vector (phi3
 * rotates 24 of 32); which names the one checked. */
static inline void tk_rope_check(tk_rope_fn ref_norm, tk_rope_fn ref_neox, tk_rope_fn norm,
                                 tk_rope_fn neox, const char *which) {
    static const int widths[] = {2, 6, 10, 16, 24, 64, 80, 128};
    uint64_t s = 3;
    for (int nx = 0; nx < 2; nx++)
        for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++) {
            const int n = widths[wi];
            float x[160], y[160], cs[160];
            for (int i = 0; i < 160; i++) x[i] = y[i] = tk_unif(&s) * 3, cs[i] = tk_unif(&s);
            (nx ? ref_neox : ref_norm)(x, cs, n);
            (nx ? neox : norm)(y, cs, n);
            int bad = 0;
            for (int i = 0; i < 160; i++) bad += ul_f32_bits(x[i]) != ul_f32_bits(y[i]);
            cr_expect_eq(bad, 0, "%s %s n_rot=%d: %d values differ", which, nx ? "neox" : "norm", n,
                         bad);
        }
}

/* Within one ulp (the double sum of squares may run in another order), and in place (as
 * gemma3's post norms run) exactly what it gave out of place; odd and large sizes. */
static inline void tk_rmsnorm_check(tk_rmsnorm_fn ref, tk_rmsnorm_fn fn, const char *which) {
    static const int sizes[] = {3, 7, 64, 2048, 2048 + 5, 5632};
    static float x[6000], w[6000], a[6000], b[6000];
    uint64_t s = 9;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        const int n = sizes[k];
        for (int i = 0; i < n; i++)
            x[i] = tk_unif(&s) * (i % 13 ? 1.0f : 40.0f), w[i] = tk_unif(&s);
        ref(a, x, w, n, 1e-5f);
        fn(b, x, w, n, 1e-5f);
        int bad = 0;
        for (int i = 0; i < n; i++) bad += fabsf(a[i] - b[i]) > fabsf(a[i]) * 0x1p-23f;
        cr_expect_eq(bad, 0, "%s n=%d: %d outputs beyond one ulp", which, n, bad);
        memcpy(a, x, sizeof(float) * (size_t)n);
        fn(a, a, w, n, 1e-5f);
        cr_expect_eq(memcmp(a, b, sizeof(float) * (size_t)n), 0, "%s n=%d: in place differs", which,
                     n);
    }
}

/* w lanes per call, w <= 16 */
static inline void tk_expf_all_patterns(tk_vexp_fn fn, int w) {
    float x[16], y[16];
    long bad = 0, n = 0;
    uint32_t u = 0;
    for (;;) {
        int k = 0;
        for (; k < w && u <= 0xFFFFFFFFu - 61; k++, u += 61) x[k] = ul_f32_from_bits(u);
        if (k < w) break;
        fn(x, y, w);
        for (int i = 0; i < w; i++, n++) {
            float r = expf(x[i]);
            if (!tk_same(r, y[i]) && bad++ < 5)
                cr_log_error("expf(%a) = %a, ours %a", (double)x[i], (double)r, (double)y[i]);
        }
    }
    cr_expect_eq(bad, 0, "%ld of %ld values differ from expf", bad, n);
    cr_expect_gt(n, 70000000);
    cr_log_info("%ld values compared", n);
}

/* Special values w at a time, then calls of 0..w lanes from every offset 0..w-1 of the
 * values twice over (so up to w lanes from there stay inside the array). */
static inline void tk_expf_special_and_partial(tk_vexp_fn fn, int w) {
    const float x[16] = {-INFINITY, INFINITY, NAN,   0.0f,  -0.0f,   -80.0f, -79.99999f, -87.5f,
                         -103.9f,   -104.0f,  89.0f, 88.7f, -1e-30f, 1.0f,   -1.0f,      -0.5f};
    float y[16];
    for (int i = 0; i < 16; i += w) fn(x + i, y + i, w);
    for (int i = 0; i < 16; i++)
        cr_expect(tk_same(expf(x[i]), y[i]), "expf(%a): %a vs %a", (double)x[i], (double)expf(x[i]),
                  (double)y[i]);
    float xx[32];
    for (int i = 0; i < 32; i++) xx[i] = x[i % 16];
    for (int n = 0; n <= w; n++)
        for (int off = 0; off < w; off++) {
            float z[16];
            for (int i = 0; i < 16; i++) z[i] = 42.0f;
            fn(xx + off, z, n);
            for (int i = 0; i < 16; i++)
                cr_expect(i < n ? tk_same(z[i], expf(xx[off + i])) : z[i] == 42.0f,
                          "n=%d from %d: lane %d", n, off, i);
        }
}

/* Odd lengths (the scalar tail), gates over the range where expf over- and underflows, and
 * the infinite and NaN gates. */
static inline void tk_swiglu_check(tk_swiglu_fn fn) {
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
    fn(g, u, N);
    int bad = 0;
    for (int i = 0; i < N; i++) bad += !tk_same(g[i], ref[i]);
    cr_expect_eq(bad, 0, "%d of %d SwiGLU outputs differ from the scalar expression", bad, N);
}

#endif
