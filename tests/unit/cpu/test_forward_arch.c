/* gemma3 and phi3 forward pieces beyond the goldens (test_golden.c), on the tiny models in
 * tests/models:
 *  - the sliding window matters for the golden prompts: with every layer made global, the
 *    logits leave llama.cpp's by far more than the golden tolerance, so the golden test
 *    would catch an ignored window;
 *  - decoding one token per step, each step's logits equal those of the whole prompt in one
 *    step, bit for bit, with pages scattered and smaller than the window (page 4, window 8:
 *    a window starts inside a page, spans pages and drops whole pages);
 *  - the GeGLU table: gelu(0) = 0, the +-10 cut-offs, and values of the tanh formula. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/forward.h"
#include "kern_testutil.h"
#include "model/model.h"

static ul_model_t *load(const char *name) {
    char path[1200], err[256];
    snprintf(path, sizeof path, "%s/tests/models/%s.gguf", UVLLM_SOURCE_DIR, name);
    ul_model_t *m = NULL;
    int rc = ul_model_load(path, 0, &m, err, sizeof err);
    cr_assert_eq(rc, 0, "cannot load %s: %s", path, err);
    return m;
}

/* n_ctx 4096: phi3-tiny's training context, above its original 2048, so the long RoPE
 * factors apply as in the llama.cpp run of the goldens */
static ul_fwd_t *make_fwd(const ul_model_t *m, int32_t page_size) {
    ul_cpu_config_t cfg = {.n_threads = 2,
                           .kv_type = UL_TYPE_F16,
                           .page_size = page_size,
                           .max_batch_tokens = 128,
                           .n_ctx = 4096};
    ul_fwd_t *f;
    cr_assert_eq(ul_fwd_create(m, &cfg, &f), 0);
    return f;
}

/* The first line of the golden file: its prompt tokens and prompt_top. */
static cJSON *golden_line(const char *name) {
    char path[1200];
    snprintf(path, sizeof path, "%s/tests/golden/%s.jsonl", UVLLM_SOURCE_DIR, name);
    FILE *fp = fopen(path, "rb");
    cr_assert(fp, "cannot open %s", path);
    static char buf[1 << 18];
    cr_assert(fgets(buf, sizeof buf, fp));
    fclose(fp);
    cJSON *j = cJSON_Parse(buf);
    cr_assert(j);
    return j;
}

static int32_t *tokens_of(const cJSON *j, int *n) {
    const cJSON *a = cJSON_GetObjectItem(j, "prompt_tokens");
    *n = cJSON_GetArraySize(a);
    int32_t *t = malloc((size_t)*n * sizeof *t);
    for (int i = 0; i < *n; i++) t[i] = cJSON_GetArrayItem(a, i)->valueint;
    return t;
}

/* Teacher-forced logits of toks [n][V], one step, pages in reverse order. */
static float *all_logits(ul_fwd_t *f, const int32_t *toks, int n) {
    const int32_t V = f->hp.n_vocab, ps = f->kv.page_size, np = (n + ps - 1) / ps;
    int32_t *pages = malloc((size_t)np * sizeof *pages);
    for (int i = 0; i < np; i++) pages[i] = np - 1 - i;
    ul_step_seq_t s = {.n_tokens = n, .pages = pages, .n_pages = np};
    ul_step_t st = {.n_tokens = n, .tokens = (int32_t *)toks, .n_seqs = 1, .seqs = &s};
    float *l = malloc((size_t)n * V * sizeof *l);
    cr_assert_eq(ul_fwd_step(f, &st, l), 0);
    free(pages);
    return l;
}

/* Largest |ours - llama.cpp| over the top-20 of every position of one golden line. */
static double golden_diff(const float *l, int32_t V, const cJSON *j) {
    const cJSON *top = cJSON_GetObjectItem(j, "prompt_top");
    double worst = 0;
    for (int i = 0; i < cJSON_GetArraySize(top); i++) {
        const cJSON *row = cJSON_GetArrayItem(top, i);
        for (int k = 0; k < cJSON_GetArraySize(row); k++) {
            const cJSON *p = cJSON_GetArrayItem(row, k);
            double d = fabs(l[(size_t)i * V + cJSON_GetArrayItem(p, 0)->valueint] -
                            cJSON_GetArrayItem(p, 1)->valuedouble);
            worst = d > worst ? d : worst;
        }
    }
    return worst;
}

Test(forward_arch, gemma3_golden_needs_the_sliding_window) {
    ul_model_t *m = load("gemma3-tiny-f16");
    cJSON *j = golden_line("gemma3-tiny-f16");
    int n;
    int32_t *toks = tokens_of(j, &n);
    cr_assert_gt(n, 2 * m->hp.n_swa, "the prompt must be longer than the window");
    int n_swa_layers = 0;
    for (int il = 0; il < m->hp.n_layer; il++) n_swa_layers += m->layers[il].swa;
    cr_assert_eq(n_swa_layers, 5, "llama.cpp's default pattern: 5 sliding layers of 6");
    ul_fwd_t *f = make_fwd(m, 16);
    float *with = all_logits(f, toks, n);
    double d_with = golden_diff(with, m->hp.n_vocab, j);
    ul_fwd_free(f);
    for (int il = 0; il < m->hp.n_layer; il++) m->layers[il].swa = 0; /* window ignored */
    f = make_fwd(m, 16);
    float *without = all_logits(f, toks, n);
    double d_without = golden_diff(without, m->hp.n_vocab, j);
    fprintf(stderr,
            "gemma3-tiny line 1: largest |diff| to llama.cpp %.5f with the window, %.3f without\n",
            d_with, d_without);
    cr_expect_lt(d_with, 0.01);
    cr_expect_gt(d_without, 0.1, "ignoring the window should move the logits far beyond 0.01");
    ul_fwd_free(f);
    free(with), free(without), free(toks);
    cJSON_Delete(j);
    ul_model_free(m);
}

/* One token per step through scattered pages equals the one-step teacher-forced logits. */
static void decode_equals_prefill(const char *name) {
    ul_model_t *m = load(name);
    cJSON *j = golden_line(name);
    int n;
    int32_t *toks = tokens_of(j, &n);
    ul_fwd_t *f = make_fwd(m, 4);
    const int32_t V = m->hp.n_vocab, ps = f->kv.page_size, np = (n + ps - 1) / ps;
    float *ref = all_logits(f, toks, n);
    int32_t *pages = malloc((size_t)np * sizeof *pages);
    for (int i = 0; i < np; i++) pages[i] = (i * 7 + 3) % f->kv.n_pages; /* scattered */
    for (int i = 0; i < np; i++)
        for (int k = 0; k < i; k++) cr_assert_neq(pages[i], pages[k]);
    float *l = malloc((size_t)V * sizeof *l);
    double worst = 0;
    for (int t = 0; t < n; t++) {
        ul_step_seq_t s = {.n_tokens = 1, .pos0 = t, .pages = pages, .n_pages = np};
        ul_step_t st = {.n_tokens = 1, .tokens = toks + t, .n_seqs = 1, .seqs = &s};
        cr_assert_eq(ul_fwd_step(f, &st, l), 0);
        for (int32_t v = 0; v < V; v++) {
            double d = fabs(l[v] - ref[(size_t)t * V + v]);
            worst = d > worst ? d : worst;
        }
    }
    cr_expect_eq(worst, 0.0, "%s: token-by-token logits differ from one step by %g", name, worst);
    free(l), free(pages), free(ref), free(toks);
    ul_fwd_free(f);
    cJSON_Delete(j);
    ul_model_free(m);
}

Test(forward_arch, gemma3_decode_equals_prefill_across_window_pages) {
    decode_equals_prefill("gemma3-tiny-f16");
}
Test(forward_arch, phi3_decode_equals_prefill) { decode_equals_prefill("phi3-tiny-f16"); }

Test(forward_arch, geglu_follows_the_tanh_formula_through_f16) {
    ul_fwd_gemma3_init();
    const float xs[] = {0.0f, 1.0f, -1.0f, 2.5f, -3.0f, 9.99f, 10.0f, -10.0f, 12.0f, -12.0f};
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        float g = xs[i], u = 2.0f;
        ul_fwd_geglu(&g, &u, 1, 0);
        const double x = xs[i];
        const double want =
            x <= -10  ? 0
            : x >= 10 ? x * 2
                      : 0.5 * x * (1 + tanh(0.7978845608 * x * (1 + 0.044715 * x * x))) * 2;
        /* the gate and the result go through f16: relative 2^-10 */
        cr_expect_leq(fabs(g - want), 2e-3 * fabs(want) + 1e-6, "gelu(%g) * 2 = %g, want %g", x, g,
                      want);
    }
    float cap[] = {0.0f, 2.0f, 100.0f, -100.0f};
    ul_fwd_softcap(cap, 4, 4.0f);
    cr_expect_eq(cap[0], 0.0f);
    cr_expect_float_eq(cap[1], 4.0f * tanhf(0.5f), 1e-6f);
    cr_expect_float_eq(cap[2], 4.0f, 1e-6f);
    cr_expect_float_eq(cap[3], -4.0f, 1e-6f);
}

Test(forward_arch, geglu_avx512_equals_scalar_on_every_f16_gate) {
    UL_TEST_REQUIRE_ISA(UL_ISA_AVX512);
    ul_fwd_gemma3_init();
    const size_t n = (1 << 16) + 7; /* every f16 bit pattern, an odd tail */
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *u = malloc(n * sizeof *u);
    for (size_t i = 0; i < n; i++) {
        /* the f16 values, nudged off them so the rounding to f16 is exercised too */
        a[i] =
            i < (1 << 16) ? ul_fp16_to_fp32((uint16_t)i) * (1.0f + 0x1p-13f) : (float)i - 65540.0f;
        u[i] = 0.5f + (float)(i % 7);
    }
    memcpy(b, a, n * sizeof *a);
    ul_fwd_geglu(a, u, n, 0);
    ul_fwd_geglu(b, u, n, 1);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += memcmp(&a[i], &b[i], 4) != 0 && !(isnan(a[i]) && isnan(b[i]));
    cr_expect_eq(bad, 0, "%zu of %zu results differ", bad, n);
    free(a), free(b), free(u);
}

/* bert's GELU (ul_fwd_gelu): the AVX2 and AVX-512 paths give the scalar table's bits on
 * every f16 input, nudged off it, the +-10 cut-offs and an odd tail */
static void gelu_equals_scalar(int level) {
    ul_fwd_gemma3_init();
    const float tail[] = {-10.0f, 10.0f, -12.0f, 12.0f, 0.0f, 1.0f, -1.0f}; /* the cut-offs */
    const size_t n = (1 << 16) + 7;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    for (size_t i = 0; i < n; i++)
        a[i] = i < (1 << 16) ? ul_fp16_to_fp32((uint16_t)i) * (1.0f + 0x1p-13f) : tail[i - 65536];
    memcpy(b, a, n * sizeof *a);
    ul_fwd_gelu(a, n, 0);
    ul_fwd_gelu(b, n, level);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += memcmp(&a[i], &b[i], 4) != 0 && !(isnan(a[i]) && isnan(b[i]));
    cr_expect_eq(bad, 0, "level %d: %zu of %zu results differ", level, bad, n);
    free(a), free(b);
}

Test(forward_arch, gelu_avx2_equals_scalar_on_every_f16_input) {
    UL_TEST_REQUIRE_ISA(UL_ISA_AVX2);
    gelu_equals_scalar(1);
}

Test(forward_arch, gelu_avx512_equals_scalar_on_every_f16_input) {
    UL_TEST_REQUIRE_ISA(UL_ISA_AVX512);
    gelu_equals_scalar(2);
}

/* The phi3 golden runs with the long RoPE factors (context 4096 > original 2048) and
 * attn_factor 1.044: the short factors (what a context up to 2048 takes), or no
 * attn_factor, leave it by far more than its tolerance. */
static double phi3_variant(int short_factors, int no_attn_factor) {
    ul_model_t *m = load("phi3-tiny-f16");
    if (short_factors) m->rope_long = m->rope_short;
    if (no_attn_factor) m->hp.rope_attn_factor = 1.0f;
    cJSON *j = golden_line("phi3-tiny-f16");
    int n;
    int32_t *toks = tokens_of(j, &n);
    ul_fwd_t *f = make_fwd(m, 16);
    float *l = all_logits(f, toks, n);
    double d = golden_diff(l, m->hp.n_vocab, j);
    ul_fwd_free(f);
    free(l), free(toks);
    cJSON_Delete(j);
    ul_model_free(m);
    return d;
}

Test(forward_arch, phi3_golden_needs_longrope) {
    double d = phi3_variant(0, 0), ds = phi3_variant(1, 0), da = phi3_variant(0, 1);
    fprintf(stderr,
            "phi3-tiny line 1: largest |diff| to llama.cpp %.5f; short factors %.3f; "
            "no attn_factor %.3f\n",
            d, ds, da);
    cr_expect_lt(d, 0.01);
    cr_expect_gt(ds, 0.1);
    cr_expect_gt(da, 0.1);
}
