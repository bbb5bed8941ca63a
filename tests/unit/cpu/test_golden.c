/* Golden tests against llama.cpp (../shared/golden, README there): the goldens'
 * prompt_tokens are fed directly (the tokenizer has its own tests), with an f16 KV cache
 * like the reference runs.
 *  - every file: teacher-forced over the prompt, at every position our top-1 id equals
 *    llama.cpp's and our logits of llama.cpp's top-20 ids lie within a per-type tolerance
 *    (table below, with the reason for each);
 *  - aidreams260K (F32, F16): the greedy continuation equals llama.cpp's token for token,
 *    produced through the backend vtable (run) one decode step at a time;
 *  - the random-weight files (mini-*, tiny-bpe, qwen2/qwen3-tiny): the first greedy token
 *    through the backend equals llama.cpp's, or is a near-tie as below. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/forward.h"
#include "engine/sampling.h"
#include "model/model.h"
#include "uvllm/backend.h"

/* Largest |ours - llama.cpp| accepted on a top-20 logit, per weight file. Attention
 * reproduces llama.cpp's f16 flash-attention roundings and the matmuls quantise
 * activations as llama.cpp does, so most positions agree to ~1e-5 (the goldens print 6
 * digits). What remains, measured with this test on the scalar / AVX2 / AVX-512 kernels
 * (UVLLM_ISA=...; largest |diff| in brackets):
 *  - F32 aidreams [0.0017 / 0.0008 / 0.0004]: summation order in the matmuls; a last-bit
 *    difference in a score can flip one f16 rounding of the V accumulator, which later
 *    positions inherit.
 *  - F16 weights [aidreams 0.0062 / 0.0039 / 0.0032, mini 0.0020 / 0.0014 / 0.0008,
 *    tiny-bpe 0.0005 / 0.0004 / 0.0002]: the same, plus llama.cpp's f16 rounding of the
 *    activations where our kernel keeps f32.
 *  - BF16 [0.0088 / 0.0089 / 0.000005]: llama.cpp rounds activations to bf16 (8-bit
 *    mantissa); only our AVX-512 BF16 path does too.
 *  - Q8_0 [0.025 / 0.036 / 0.023], Q4_0 [0.042 / 0.046 / 0.046], Q4_K_M [0.025 / 0.025 /
 *    0.020]: the integer block sums are exact, but the float sum over blocks runs in a
 *    different order; at a few positions that flips the 8-bit rounding of one activation
 *    in a later layer, a discrete step of amax/127 that moves logits by a few 1e-2 (most
 *    positions still agree to 1e-5).
 *  - Q5_K_M [0.045 / 0.045 / 0.055]: the same flips (8 of 39 positions beyond 5e-4 on
 *    AVX-512, 10 on AVX2, where Q4_K_M has 3; the rest agree to 5e-4).
 * Tolerances are ~2x the worst measurement; a real defect (RoPE, norm, mask, GQA mapping)
 * moves logits by > 0.3 and fails all of them.
 *
 * Top-1: must equal llama.cpp's id, except where llama.cpp's own top-1 and our top-1 are
 * within the tolerance of each other in ITS logits (a near-tie the tolerance cannot
 * order); such positions are counted and printed. The same rule applies to the first
 * generated token (measured: one near-tie, mini-q8_0 on AVX2 and scalar). */
typedef struct {
    const char *name; /* golden and model basename */
    float tol;
    int greedy; /* tokens must match exactly */
    int first;  /* the first generated token must match (random-weight files) */
} golden_case_t;

static const golden_case_t g_cases[] = {
    {"aidreams260K", 0.004f, 1, 0},
    {"aidreams260K-f16", 0.012f, 1, 0},
    {"mini-f16", 0.004f, 0, 1},
    {"mini-bf16", 0.02f, 0, 1},
    {"mini-q8_0", 0.07f, 0, 1},
    {"mini-q4_0", 0.09f, 0, 1},
    {"mini-q4_k_m", 0.05f, 0, 1},
    {"tiny-bpe-f16", 0.002f, 0, 1},
    /* qwen2/qwen3 (gpt2 BPE vocabulary, tied output, NEOX RoPE; biases / q-k norms): F16
     * like tiny-bpe, the same shape */
    {"qwen2-tiny-f16", 0.002f, 0, 1},
    {"qwen3-tiny-f16", 0.002f, 0, 1},
    {"mini-q5_k_m", 0.1f, 0, 1},
};

/* Models in tests/models and goldens in tests/golden (this repository; regenerate both with
 * scripts/golden_arch.sh): gemma3 and phi3 tiny F16 models from `uvllm synth --shape
 * gemma3-tiny|phi3-tiny --vocab aidreams260K.gguf`, prompts of 31-55 tokens (under the 64 at
 * which llama.cpp's CPU flash attention switches to its tiled f32 path for a batch).
 * gemma3: 5 sliding-window layers (window 8) and 1 global, GeGLU, post norms, q/k norms,
 * head_dim 32 x 4 heads over n_embd 64, softcap 4. phi3: fused qkv and gate|up, GQA,
 * partial NEOX RoPE (24 of 32) with LongRoPE long factors and attn_factor.
 * Largest |diff| measured (AVX-512 / AVX2 / scalar): gemma3 0.0044 / 0.0037 / 0.0042,
 * phi3 0.0029 / 0.0042 / 0.0029, over 218 positions each (qwen2/qwen3: 30 positions of
 * at most 5 tokens of context). Position 0 agrees to 1e-5 on gemma3 (the GeGLU table
 * equals ggml's on every finite entry); the rest is summation order (llama.cpp's tinyBLAS
 * sums 16 lanes, we sum in order) flipping f16 roundings of the matmul inputs, the GeGLU
 * lookup and the f16 V accumulator, which longer contexts and 6 layers reach more often:
 * the same models in F32 measure 0.0010 / 0.0019 / 0.0023 and 0.0004 / 0.0009 / 0.0014.
 * Tolerance ~2x the worst; ignoring the sliding window moves logits by far more
 * (test_forward_arch.c). */
static const golden_case_t g_local_cases[] = {
    {"gemma3-tiny-f16", 0.01f, 0, 1},
    {"phi3-tiny-f16", 0.01f, 0, 1},
};

static const char *shared_dir(void) {
    static char buf[1024];
    const char *e = getenv("UVLLM_SHARED");
    if (e && *e) return e;
    snprintf(buf, sizeof buf, "%s/../shared", UVLLM_SOURCE_DIR);
    return buf;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s (set UVLLM_SHARED to the shared test data directory)", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    cr_assert(s && fread(s, 1, (size_t)n, f) == (size_t)n);
    s[n] = 0;
    fclose(f);
    return s;
}

static ul_model_t *load(const char *name, int local) {
    char path[1200], err[256];
    if (local)
        snprintf(path, sizeof path, "%s/tests/models/%s.gguf", UVLLM_SOURCE_DIR, name);
    else
        snprintf(path, sizeof path, "%s/models/%s.gguf", shared_dir(), name);
    ul_model_t *m = NULL;
    int rc = ul_model_load(path, 0, &m, err, sizeof err);
    cr_assert_eq(rc, 0, "cannot load %s: %s", path, err);
    return m;
}

static int32_t *int_array(const cJSON *a, int *n) {
    *n = cJSON_GetArraySize(a);
    int32_t *v = malloc(((size_t)*n + 1) * sizeof *v);
    for (int i = 0; i < *n; i++) v[i] = cJSON_GetArrayItem(a, i)->valueint;
    return v;
}

/* llama.cpp's logit of its top-1 minus that of id, from one prompt_top row (INFINITY when
 * id is not among its top 20). */
static double ref_gap(const cJSON *row, int32_t id) {
    const cJSON *ref0 = cJSON_GetArrayItem(row, 0);
    for (int k = 1; k < cJSON_GetArraySize(row); k++) {
        const cJSON *pair = cJSON_GetArrayItem(row, k);
        if (cJSON_GetArrayItem(pair, 0)->valueint == id)
            return cJSON_GetArrayItem(ref0, 1)->valuedouble -
                   cJSON_GetArrayItem(pair, 1)->valuedouble;
    }
    return INFINITY;
}

/* Teacher-forced logits of every prompt position compared with prompt_top. */
static double check_prompt(ul_fwd_t *f, const golden_case_t *gc, const cJSON *line, int li,
                           int *n_checked, int *n_ties) {
    int n;
    int32_t *toks = int_array(cJSON_GetObjectItem(line, "prompt_tokens"), &n);
    const cJSON *top = cJSON_GetObjectItem(line, "prompt_top");
    cr_assert_eq(cJSON_GetArraySize(top), n, "%s line %d: prompt_top length", gc->name, li);
    const int32_t V = f->hp.n_vocab, ps = f->kv.page_size;
    int32_t n_pages = (n + ps - 1) / ps, *pages = malloc((size_t)n_pages * sizeof *pages);
    for (int i = 0; i < n_pages; i++) pages[i] = n_pages - 1 - i; /* reversed: not contiguous */
    ul_step_seq_t s = {.n_tokens = n, .pages = pages, .n_pages = n_pages};
    ul_step_t st = {.n_tokens = n, .tokens = toks, .n_seqs = 1, .seqs = &s};
    float *logits = malloc((size_t)n * V * sizeof *logits);
    cr_assert_eq(ul_fwd_step(f, &st, logits), 0);
    double worst = 0;
    for (int i = 0; i < n; i++) {
        const cJSON *row = cJSON_GetArrayItem(top, i);
        const float *l = logits + (size_t)i * V;
        int32_t best = 0;
        for (int32_t j = 1; j < V; j++)
            if (l[j] > l[best]) best = j;
        const cJSON *ref0 = cJSON_GetArrayItem(row, 0);
        int32_t ref_best = cJSON_GetArrayItem(ref0, 0)->valueint;
        if (best != ref_best) {
            cr_expect_leq(ref_gap(row, best), gc->tol,
                          "%s line %d pos %d: top-1 %d (%.5f), llama.cpp %d (ours %.5f)", gc->name,
                          li, i, best, l[best], ref_best, l[ref_best]);
            (*n_ties)++;
        }
        for (int k = 0; k < cJSON_GetArraySize(row); k++) {
            const cJSON *pair = cJSON_GetArrayItem(row, k);
            int32_t id = cJSON_GetArrayItem(pair, 0)->valueint;
            double ref = cJSON_GetArrayItem(pair, 1)->valuedouble, d = fabs(l[id] - ref);
            worst = d > worst ? d : worst;
            cr_expect_leq(d, gc->tol, "%s line %d pos %d id %d: ours %.5f llama.cpp %.5f", gc->name,
                          li, i, id, l[id], ref);
            (*n_checked)++;
        }
    }
    free(logits), free(pages), free(toks);
    return worst;
}

/* Greedy continuation through the backend, one decode step per token. With gc->first only
 * the first token, sampled from the last prompt position's logits, which the backend
 * computes for that row alone (other kernels, other summation order than check_prompt's
 * run): it may differ only where llama.cpp's own logits make it a near-tie, as top-1 may. */
static void check_greedy(ul_backend_t *be, const golden_case_t *gc, const cJSON *line, int li,
                         int *n_ties) {
    int n_p, n_g;
    int32_t *prompt = int_array(cJSON_GetObjectItem(line, "prompt_tokens"), &n_p);
    int32_t *want = int_array(cJSON_GetObjectItem(line, "tokens"), &n_g);
    if (gc->first && n_g > 1) n_g = 1;
    int32_t total = n_p + n_g, *toks = malloc((size_t)total * sizeof *toks);
    memcpy(toks, prompt, (size_t)n_p * sizeof *toks);
    int32_t n_pages = (total + be->page_size - 1) / be->page_size;
    int32_t *pages = malloc((size_t)n_pages * sizeof *pages);
    cr_assert_leq(2 * n_pages, be->n_pages);
    for (int i = 0; i < n_pages; i++) pages[i] = 2 * i + 1; /* every other page of the pool */
    ul_step_seq_t s = {.pages = pages, .n_pages = n_pages, .sample = 1};
    ul_sampling_default(&s.sampling);
    s.sampling.temperature = 0;
    s.sampling.repeat_penalty = 1.0f;
    ul_step_t st = {.n_seqs = 1, .seqs = &s};
    int32_t n = n_p, from = 0;
    for (int g = 0; g < n_g; g++) {
        st.tokens = toks + from;
        st.n_tokens = s.n_tokens = n - from;
        s.pos0 = from;
        s.history = toks;
        s.n_history = n;
        cr_assert_eq(ul_backend_run(be, &st), 0);
        if (gc->first && s.out_token != want[g]) {
            const cJSON *top = cJSON_GetObjectItem(line, "prompt_top");
            cr_expect_leq(ref_gap(cJSON_GetArrayItem(top, n_p - 1), s.out_token), gc->tol,
                          "%s line %d: first token %d, llama.cpp %d (not a near-tie)", gc->name, li,
                          s.out_token, want[g]);
            (*n_ties)++;
            break;
        }
        cr_assert_eq(s.out_token, want[g], "%s line %d: generated token %d is %d, llama.cpp %d",
                     gc->name, li, g, s.out_token, want[g]);
        toks[n] = s.out_token;
        from = n++;
    }
    free(prompt), free(want), free(toks), free(pages);
}

static void run_case_at(const golden_case_t *gc, int local) {
    char path[1200];
    if (local)
        snprintf(path, sizeof path, "%s/tests/golden/%s.jsonl", UVLLM_SOURCE_DIR, gc->name);
    else
        snprintf(path, sizeof path, "%s/golden/%s.public.jsonl", shared_dir(), gc->name);
    char *text = slurp(path);
    ul_model_t *m = load(gc->name, local);
    ul_cpu_config_t cfg = {
        .n_threads = 2, .kv_type = UL_TYPE_F16, .page_size = 16, .max_batch_tokens = 256};
    ul_fwd_t *f;
    cr_assert_eq(ul_fwd_create(m, &cfg, &f), 0);
    ul_backend_t *be = NULL;
    if (gc->greedy || gc->first) cr_assert_eq(ul_cpu_backend_create(m, &cfg, &be), 0);
    double worst = 0;
    int n_lines = 0, n_checked = 0, n_ties = 0, n_first_ties = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *j = cJSON_Parse(line);
        cr_assert(j, "%s: line %d is not JSON", path, n_lines + 1);
        double w = check_prompt(f, gc, j, n_lines + 1, &n_checked, &n_ties);
        worst = w > worst ? w : worst;
        if (be) check_greedy(be, gc, j, n_lines + 1, &n_first_ties);
        cJSON_Delete(j);
        n_lines++;
    }
    cr_assert_gt(n_lines, 0, "%s has no lines", path);
    char tail[64] = "";
    if (gc->greedy)
        snprintf(tail, sizeof tail, ", greedy tokens equal");
    else if (gc->first && n_first_ties)
        snprintf(tail, sizeof tail, ", first tokens equal but %d near-tie", n_first_ties);
    else if (gc->first)
        snprintf(tail, sizeof tail, ", first tokens equal");
    fprintf(stderr,
            "golden %-18s %2d prompts, %5d logits: largest |diff| %.6f (tolerance %g), %d near-tie "
            "top-1 swaps%s\n",
            gc->name, n_lines, n_checked, worst, gc->tol, n_ties, tail);
    if (be) ul_backend_destroy(be);
    ul_fwd_free(f);
    ul_model_free(m);
    free(text);
}

static void run_case(const golden_case_t *gc) { run_case_at(gc, 0); }

Test(golden, aidreams260K_f32) { run_case(&g_cases[0]); }
Test(golden, aidreams260K_f16) { run_case(&g_cases[1]); }
Test(golden, mini_f16) { run_case(&g_cases[2]); }
Test(golden, mini_bf16) { run_case(&g_cases[3]); }
Test(golden, mini_q8_0) { run_case(&g_cases[4]); }
Test(golden, mini_q4_0) { run_case(&g_cases[5]); }
Test(golden, mini_q4_k_m) { run_case(&g_cases[6]); }
Test(golden, tiny_bpe_f16) { run_case(&g_cases[7]); }
Test(golden, qwen2_tiny_f16) { run_case(&g_cases[8]); }
Test(golden, qwen3_tiny_f16) { run_case(&g_cases[9]); }
Test(golden, mini_q5_k_m) { run_case(&g_cases[10]); }
Test(golden, gemma3_tiny_f16) { run_case_at(&g_local_cases[0], 1); }
Test(golden, phi3_tiny_f16) { run_case_at(&g_local_cases[1], 1); }
