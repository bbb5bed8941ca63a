/* Quantise/dequantise round trips and half-precision conversions at their edges. */
#include <criterion/criterion.h>
#include <stdio.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "kern_testutil.h"

Test(fp16, edge_cases) {
    cr_expect_eq(ul_fp32_to_fp16(INFINITY), 0x7c00);
    cr_expect_eq(ul_fp32_to_fp16(-INFINITY), 0xfc00);
    cr_expect(isnan(ul_fp16_to_fp32(ul_fp32_to_fp16(NAN))));
    cr_expect_eq(ul_fp32_to_fp16(65504.f), 0x7bff);
    cr_expect_eq(ul_fp32_to_fp16(65519.f), 0x7bff);    /* below the midpoint to inf */
    cr_expect_eq(ul_fp32_to_fp16(65520.f), 0x7c00);    /* tie rounds to even = inf */
    cr_expect_eq(ul_fp32_to_fp16(0x1p-24f), 0x0001);   /* smallest denormal */
    cr_expect_eq(ul_fp32_to_fp16(0x1p-25f), 0x0000);   /* tie to even: zero */
    cr_expect_eq(ul_fp32_to_fp16(0x1.8p-24f), 0x0002); /* 1.5 ulp: tie to even 2 */
    cr_expect_eq(ul_fp32_to_fp16(-0.0f), 0x8000);
    cr_expect_eq(ul_fp32_to_fp16(1.0f + 0x1p-11f), 0x3c00);   /* tie to even (down) */
    cr_expect_eq(ul_fp32_to_fp16(1.0f + 0x1.8p-10f), 0x3c02); /* tie to even (up) */
    cr_expect_eq(ul_fp16_to_fp32(0x0001), 0x1p-24f);
    cr_expect_eq(ul_fp16_to_fp32(0x03ff), 0x3ffp-24f);
    cr_expect_eq(ul_fp16_to_fp32(0xfbff), -65504.f);
    cr_expect(isinf(ul_fp16_to_fp32(0x7c00)));
}

/* Against the hardware conversion (what llama.cpp uses: F16C on x86, FCVT on AArch64) over
 * a stride through all f32 bit patterns and all 65536 halves. */
#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("f16c"))) static uint16_t hw_to_h(float f) {
    return (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
}
__attribute__((target("f16c"))) static float hw_to_f(uint16_t h) { return _cvtsh_ss(h); }
#define HAS_HW_F16() __builtin_cpu_supports("f16c")
#elif defined(__aarch64__)
static uint16_t hw_to_h(float f) {
    const __fp16 h = (__fp16)f;
    uint16_t u;
    memcpy(&u, &h, 2);
    return u;
}
static float hw_to_f(uint16_t u) {
    __fp16 h;
    memcpy(&h, &u, 2);
    return (float)h;
}
#define HAS_HW_F16() 1
#endif

#ifdef HAS_HW_F16
Test(fp16, matches_f16c) {
    cr_assert(HAS_HW_F16(), "no F16C on this CPU to compare with");
    int bad = 0;
    for (uint64_t u = 0; u < (1ull << 32); u += 4099) {
        float f = ul_f32_from_bits((uint32_t)u);
        uint16_t a = ul_fp32_to_fp16(f), b = hw_to_h(f);
        if (a != b && bad++ < 5) cr_log_error("f32 %08x -> %04x, F16C %04x", (unsigned)u, a, b);
    }
    for (uint32_t h = 0; h < 65536; h++) {
        float a = ul_fp16_to_fp32((uint16_t)h), b = hw_to_f((uint16_t)h);
        if (ul_f32_bits(a) != ul_f32_bits(b) && bad++ < 10)
            cr_log_error("f16 %04x -> %08x, F16C %08x", h, ul_f32_bits(a), ul_f32_bits(b));
    }
    cr_expect_eq(bad, 0);
}
#endif

Test(bf16, edge_cases) {
    cr_expect_eq(ul_fp32_to_bf16(1.0f), 0x3f80);
    cr_expect_eq(ul_fp32_to_bf16(1.0f + 0x1p-8f), 0x3f80);   /* tie to even: down */
    cr_expect_eq(ul_fp32_to_bf16(1.0f + 0x1.8p-7f), 0x3f82); /* tie to even: up */
    cr_expect_eq(ul_fp32_to_bf16(1.0f + 0x1.2p-8f), 0x3f81); /* above the tie */
    cr_expect_eq(ul_fp32_to_bf16(INFINITY), 0x7f80);
    cr_expect_eq(ul_fp32_to_bf16(ul_f32_from_bits(0x7f800001)) & 0x7fc0,
                 0x7fc0);                                                /* snan -> quiet nan */
    cr_expect_eq(ul_fp32_to_bf16(ul_f32_from_bits(0x00010000)), 0x0001); /* denormals kept */
    cr_expect_eq(ul_fp32_to_bf16(ul_f32_from_bits(0x7f7fffff)),
                 0x7f80); /* max float rounds to inf */
    cr_expect_eq(ul_bf16_to_fp32(0xc040), -3.0f);
}

/* Round trip: Q8_0 error <= d/2 from rounding plus 127*d*2^-11 from storing d as f16,
 * d = amax/127. Q4_0: d = amax/8; rounding error d/2, except the positive extreme
 * (16 clamps to 15) which is off by at most d; plus 15*d*2^-11 for d's f16 storage. */
Test(quant, round_trip_bounds) {
    uint64_t s = 3;
    float x[1024], y[1024];
    uint8_t buf[2048];
    for (int rep = 0; rep < 50; rep++) {
        float scale = rep < 25 ? 1.0f : 1e-3f * (float)rep;
        for (int i = 0; i < 1024; i++) x[i] = tk_unif(&s) * scale;
        cr_assert_eq(ul_cpu_quant_row(UL_TYPE_Q8_0, x, buf, 1024), 32u * 34);
        ul_cpu_dequant_row(UL_TYPE_Q8_0, buf, y, 1024);
        for (int b = 0; b < 32; b++) {
            float amax = 0;
            for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[b * 32 + j]));
            float d = amax / 127, lim = d * (0.5f + 127 * 0x1p-11f) * 1.0001f;
            for (int j = 0; j < 32; j++)
                cr_assert(fabsf(x[b * 32 + j] - y[b * 32 + j]) <= lim, "q8_0 %g -> %g (d=%g)",
                          x[b * 32 + j], y[b * 32 + j], d);
        }
        cr_assert_eq(ul_cpu_quant_row(UL_TYPE_Q4_0, x, buf, 1024), 32u * 18);
        ul_cpu_dequant_row(UL_TYPE_Q4_0, buf, y, 1024);
        for (int b = 0; b < 32; b++) {
            float amax = 0;
            for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[b * 32 + j]));
            float d = amax / 8;
            for (int j = 0; j < 32; j++) {
                float v = x[b * 32 + j], lim = d * (0.5f + 15 * 0x1p-11f) * 1.0001f;
                if (fabsf(v) >= amax * 0.9375f) lim = d * (1 + 15 * 0x1p-11f) * 1.0001f;
                cr_assert(fabsf(v - y[b * 32 + j]) <= lim, "q4_0 %g -> %g (d=%g)", v, y[b * 32 + j],
                          d);
            }
        }
    }
    /* an all-zero block must not produce NaN */
    memset(x, 0, sizeof(x));
    ul_cpu_quant_row(UL_TYPE_Q4_0, x, buf, 32);
    ul_cpu_dequant_row(UL_TYPE_Q4_0, buf, y, 32);
    for (int j = 0; j < 32; j++) cr_expect_eq(y[j], 0.0f);
}

/* Round trip of the types with a min or a fifth bit. Q4_1 / Q5_1: d = (max - min) / 15
 * (31), rounding error d/2 plus the f16 storage of d (15 or 31 steps of it) and of the min.
 * Q5_0: d = amax / 16, error d/2 except the clamped positive extreme (d); allow d
 * everywhere. A misplaced nibble or fifth bit is off by several d. */
Test(quant, round_trip_q4_1_q5) {
    uint64_t s = 5;
    float x[1024], y[1024];
    uint8_t buf[1024];
    const int types[] = {UL_TYPE_Q4_1, UL_TYPE_Q5_0, UL_TYPE_Q5_1}, steps[] = {15, 16, 31};
    for (int rep = 0; rep < 30; rep++) {
        float scale = rep < 15 ? 1.0f : 1e-3f * (float)rep, shift = rep % 3 ? 0.3f * scale : 0;
        for (int i = 0; i < 1024; i++) x[i] = tk_unif(&s) * scale + shift;
        for (int ti = 0; ti < 3; ti++) {
            cr_assert_eq(ul_cpu_quant_row(types[ti], x, buf, 1024),
                         ul_type_row_bytes(types[ti], 1024));
            ul_cpu_dequant_row(types[ti], buf, y, 1024);
            for (int b = 0; b < 32; b++) {
                float mn = x[b * 32], mx = x[b * 32], amax = 0;
                for (int j = 0; j < 32; j++) {
                    float v = x[b * 32 + j];
                    mn = fminf(mn, v), mx = fmaxf(mx, v), amax = fmaxf(amax, fabsf(v));
                }
                float lim;
                if (types[ti] == UL_TYPE_Q5_0) {
                    float d = amax / 16;
                    lim = d * (1 + 31 * 0x1p-11f) * 1.0001f;
                } else {
                    float d = (mx - mn) / steps[ti];
                    lim = (d * (0.5f + steps[ti] * 0x1p-11f) + fabsf(mn) * 0x1p-11f) * 1.0001f;
                }
                for (int j = 0; j < 32; j++)
                    cr_assert(fabsf(x[b * 32 + j] - y[b * 32 + j]) <= lim, "%s %g -> %g (lim %g)",
                              ul_type_name(types[ti]), x[b * 32 + j], y[b * 32 + j], lim);
            }
        }
    }
}

/* Layout check against llama.cpp-quantised files: the same tensor of the f16 model and
 * the q4_k_m / q8_0 / q4_0 models must dequantise to nearly the same values. A wrong
 * nibble order, scale unpacking or field offset gives errors of the order of the weights
 * themselves (relative RMS ~1); quantisation noise of these types stays far below 0.2. */
#include "model/gguf.h"

static const char *shared_dir(void) {
    const char *s = getenv("UVLLM_SHARED");
    return s && *s ? s : UVLLM_SOURCE_DIR "/../shared";
}

static double rel_rms(const ul_gguf_tensor_t *a, const ul_gguf_tensor_t *b) {
    int64_t n = a->ne[0], rows = a->ne[1] < 64 ? a->ne[1] : 64;
    size_t ra = ul_type_row_bytes((int)a->type, n), rb = ul_type_row_bytes((int)b->type, n);
    float *x = malloc(sizeof(float) * (size_t)n), *y = malloc(sizeof(float) * (size_t)n);
    double e = 0, m = 0;
    for (int64_t r = 0; r < rows; r++) {
        ul_cpu_dequant_row((int)a->type, (const uint8_t *)a->data + ra * r, x, n);
        ul_cpu_dequant_row((int)b->type, (const uint8_t *)b->data + rb * r, y, n);
        for (int64_t i = 0; i < n; i++) e += (x[i] - y[i]) * (x[i] - y[i]), m += x[i] * x[i];
    }
    free(x), free(y);
    return sqrt(e / m);
}

Test(quant, dequant_matches_llama_cpp_files) {
    char path[1024];
    ul_gguf_t ref;
    snprintf(path, sizeof(path), "%s/models/mini-f16.gguf", shared_dir());
    cr_assert_eq(ul_gguf_open(&ref, path), 0, "cannot open %s (set UVLLM_SHARED)", path);
    const char *names[] = {"mini-q4_k_m.gguf", "mini-q8_0.gguf", "mini-q4_0.gguf", "mini-bf16.gguf",
                           "mini-q5_k_m.gguf"};
    int seen[UL_TYPE_COUNT] = {0};
    for (int f = 0; f < 5; f++) {
        ul_gguf_t g;
        snprintf(path, sizeof(path), "%s/models/%s", shared_dir(), names[f]);
        cr_assert_eq(ul_gguf_open(&g, path), 0, "cannot open %s", path);
        for (uint64_t i = 0; i < g.n_tensors; i++) {
            const ul_gguf_tensor_t *t = &g.tensors[i];
            char nm[256];
            snprintf(nm, sizeof(nm), "%.*s", (int)t->name.len, t->name.ptr);
            const ul_gguf_tensor_t *r = ul_gguf_find_tensor(&ref, nm);
            if (!r || r->type != UL_TYPE_F16 || t->type == UL_TYPE_F32 ||
                !ul_cpu_type_supported((int)t->type))
                continue;
            double e = rel_rms(r, t);
            seen[t->type]++;
            cr_expect(e < 0.2, "%s %s (%s): relative rms %.3f", names[f], nm,
                      ul_type_name((int)t->type), e);
            /* 5 bits: a misplaced fifth bit (an error of 16 steps) would be far above this */
            if (t->type == UL_TYPE_Q5_K)
                cr_expect(e < 0.05, "%s %s: q5_k relative rms %.3f", names[f], nm, e);
        }
        ul_gguf_free(&g);
    }
    ul_gguf_free(&ref);
    cr_expect(seen[UL_TYPE_Q4_K] > 0 && seen[UL_TYPE_Q6_K] > 0 && seen[UL_TYPE_Q8_0] > 0 &&
                  seen[UL_TYPE_Q4_0] > 0 && seen[UL_TYPE_BF16] > 0 && seen[UL_TYPE_Q5_K] > 0,
              "the shared models no longer cover every type");
}

/* The quantisers llama-quantize runs for the K-quants and IQ4 (no importance matrix): on
 * normal weights the relative RMS round-trip error of each type stays under its bound
 * (worst of 7 rows, measured: q4_k 0.073, q5_k 0.038, q6_k 0.020, iq4_nl 0.078, iq4_xs
 * 0.082; the bounds leave 10-20%), each bit more halving it, so a misplaced nibble,
 * fifth/sixth bit or scale (errors of whole steps) fails. All-zero blocks stay zero. Row
 * scales span 1e-3..1e3 (at 1e-4 the f16 super-block scales of Q6_K / IQ4_XS go subnormal
 * and the error grows, in llama.cpp's format as in ours). */
Test(quant, round_trip_k_quants_iq4) {
    static const int types[] = {UL_TYPE_Q4_K, UL_TYPE_Q5_K, UL_TYPE_Q6_K, UL_TYPE_IQ4_NL,
                                UL_TYPE_IQ4_XS};
    static const double bound[] = {0.085, 0.045, 0.023, 0.09, 0.095};
    enum { N = 4096 };
    float *x = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N);
    uint8_t *buf = malloc(N * 2);
    uint64_t s = 17;
    for (int ti = 0; ti < 5; ti++) {
        double worst = 0;
        for (int rep = 1; rep < 8; rep++) {
            const float scale = powf(10.f, (float)rep - 4); /* 1e-3 .. 1e3 */
            for (int i = 0; i < N; i += 2) {                /* Box-Muller normals */
                double u1 = (tk_rng(&s) >> 11) * 0x1p-53 + 0x1p-60,
                       u2 = (tk_rng(&s) >> 11) * 0x1p-53;
                double m = sqrt(-2 * log(u1)) * scale;
                x[i] = (float)(m * cos(2 * M_PI * u2)), x[i + 1] = (float)(m * sin(2 * M_PI * u2));
            }
            for (int i = 512; i < 768; i++) x[i] = 0; /* a zero super-block */
            cr_assert_eq(ul_cpu_quant_row(types[ti], x, buf, N), ul_type_row_bytes(types[ti], N));
            ul_cpu_dequant_row(types[ti], buf, y, N);
            double e = 0, m = 0;
            for (int i = 0; i < N; i++) e += (x[i] - y[i]) * (x[i] - y[i]), m += x[i] * x[i];
            for (int i = 512; i < 768; i++) cr_expect_eq(y[i], 0.0f, "%s", ul_type_name(types[ti]));
            worst = fmax(worst, sqrt(e / m));
        }
        cr_log_info("%s: relative rms %.4f", ul_type_name(types[ti]), worst);
        cr_expect(worst < bound[ti], "%s: relative rms %.4f >= %.3f", ul_type_name(types[ti]),
                  worst, bound[ti]);
    }
    free(x), free(y), free(buf);
}
