/* The golden check shared by test_golden.c, test_golden_own.c and test_moe.c (see
 * golden_check.h); compiled into unit_cpu with them. */
#include "golden_check.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../test_data.h"
#include "engine/sampling.h"

const ul_cpu_config_t golden_cfg = {
    .n_threads = 2, .kv_type = UL_TYPE_F16, .page_size = 16, .max_batch_tokens = 256};

char *golden_slurp(const char *path) { return ut_slurp(path, NULL); }

ul_model_t *golden_load(const char *path) {
    char err[256];
    ul_model_t *m = NULL;
    int rc = ul_model_load(path, 0, &m, err, sizeof err);
    cr_assert_eq(rc, 0, "cannot load %s: %s", path, err);
    return m;
}

int32_t *golden_int_array(const cJSON *a, int *n) {
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

int golden_ubatch = 0;

float *golden_prompt_logits(ul_fwd_t *f, const int32_t *toks, int n) {
    const int32_t V = f->hp.n_vocab, ps = f->kv.page_size;
    int32_t n_pages = (n + ps - 1) / ps, *pages = malloc((size_t)n_pages * sizeof *pages);
    for (int i = 0; i < n_pages; i++) pages[i] = n_pages - 1 - i; /* reversed: not contiguous */
    float *logits = malloc((size_t)n * V * sizeof *logits);
    const int ub = golden_ubatch > 0 ? golden_ubatch : n;
    for (int from = 0; from < n; from += ub) {
        const int cnt = n - from < ub ? n - from : ub;
        ul_step_seq_t s = {.n_tokens = cnt, .pos0 = from, .pages = pages, .n_pages = n_pages};
        ul_step_t st = {.n_tokens = cnt, .tokens = (int32_t *)toks + from, .n_seqs = 1, .seqs = &s};
        cr_assert_eq(ul_fwd_step(f, &st, logits + (size_t)from * V), 0);
    }
    free(pages);
    return logits;
}

/* Top-1 and the top-20 logits of one position against its prompt_top row; returns the
 * largest |diff|. */
static double check_position(const float *l, int32_t V, const cJSON *row, const char *name,
                             float tol, int li, int i, golden_stats_t *st) {
    int32_t best = 0;
    for (int32_t j = 1; j < V; j++)
        if (l[j] > l[best]) best = j;
    int32_t ref_best = cJSON_GetArrayItem(cJSON_GetArrayItem(row, 0), 0)->valueint;
    if (best != ref_best) {
        cr_expect_leq(ref_gap(row, best), tol,
                      "%s line %d pos %d: top-1 %d (%.5f), llama.cpp %d (ours %.5f)", name, li, i,
                      best, l[best], ref_best, l[ref_best]);
        st->n_ties++;
    }
    double row_worst = 0;
    for (int k = 0; k < cJSON_GetArraySize(row); k++) {
        const cJSON *pair = cJSON_GetArrayItem(row, k);
        int32_t id = cJSON_GetArrayItem(pair, 0)->valueint;
        double ref = cJSON_GetArrayItem(pair, 1)->valuedouble, d = fabs(l[id] - ref);
        row_worst = d > row_worst ? d : row_worst;
        cr_expect_leq(d, tol, "%s line %d pos %d id %d: ours %.5f llama.cpp %.5f", name, li, i, id,
                      l[id], ref);
        st->n_checked++;
    }
    return row_worst;
}

/* Teacher-forced logits of every prompt position against prompt_top. */
static void check_prompt(ul_fwd_t *f, const char *name, float tol, const cJSON *line, int li,
                         golden_stats_t *st) {
    int n;
    int32_t *toks = golden_int_array(cJSON_GetObjectItem(line, "prompt_tokens"), &n);
    const cJSON *top = cJSON_GetObjectItem(line, "prompt_top");
    cr_assert_eq(cJSON_GetArraySize(top), n, "%s line %d: prompt_top length", name, li);
    const int32_t V = f->hp.n_vocab;
    float *logits = golden_prompt_logits(f, toks, n);
    for (int i = 0; i < n; i++) {
        double w = check_position(logits + (size_t)i * V, V, cJSON_GetArrayItem(top, i), name, tol,
                                  li, i, st);
        if (w > st->worst) st->worst = w, st->worst_line = li, st->worst_pos = i;
        st->n_pos++;
        st->n_off += w > GOLDEN_OFF_LIMIT;
        if (getenv("UVLLM_GOLDEN_POSITIONS"))
            fprintf(stderr, "%s line %d pos %d: largest |diff| %.6f\n", name, li, i, w);
    }
    free(logits), free(toks);
}

/* Greedy continuation through the backend, one decode step per token. GOLDEN_FIRST: only
 * the first token, sampled from the last prompt position's logits, which the backend
 * computes for that row alone (other kernels, other summation order than check_prompt's
 * run): it may differ only where llama.cpp's own logits make it a near-tie, as top-1 may. */
static void check_greedy(ul_backend_t *be, const char *name, float tol, int mode, const cJSON *line,
                         int li, golden_stats_t *st) {
    int n_p, n_g;
    int32_t *prompt = golden_int_array(cJSON_GetObjectItem(line, "prompt_tokens"), &n_p);
    int32_t *want = golden_int_array(cJSON_GetObjectItem(line, "tokens"), &n_g);
    cr_assert_gt(n_g, 0, "%s line %d: no generated tokens", name, li);
    const int first = mode == GOLDEN_FIRST;
    if (first) n_g = 1;
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
    ul_step_t step = {.n_seqs = 1, .seqs = &s};
    int32_t n = n_p, from = 0;
    for (int g = 0; g < n_g; g++) {
        step.tokens = toks + from;
        step.n_tokens = s.n_tokens = n - from;
        s.pos0 = from;
        s.history = toks;
        s.n_history = n;
        cr_assert_eq(ul_backend_run(be, &step), 0);
        if (first && s.out_token != want[g]) {
            const cJSON *top = cJSON_GetObjectItem(line, "prompt_top");
            cr_expect_leq(ref_gap(cJSON_GetArrayItem(top, n_p - 1), s.out_token), tol,
                          "%s line %d: first token %d, llama.cpp %d (not a near-tie)", name, li,
                          s.out_token, want[g]);
            st->n_first_ties++;
            break;
        }
        cr_assert_eq(s.out_token, want[g], "%s line %d: generated token %d is %d, llama.cpp %d",
                     name, li, g, s.out_token, want[g]);
        toks[n] = s.out_token;
        from = n++;
    }
    free(prompt), free(want), free(toks), free(pages);
}

void golden_check_file(const char *path, const char *name, float tol, ul_fwd_t *f, ul_backend_t *be,
                       int mode, golden_line_fn each, void *ctx, golden_stats_t *st) {
    memset(st, 0, sizeof *st);
    char *text = golden_slurp(path);
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *j = cJSON_Parse(line);
        int li = st->n_lines + 1;
        cr_assert(j, "%s: line %d is not JSON", path, li);
        if (each) each(j, li, ctx);
        check_prompt(f, name, tol, j, li, st);
        if (be) check_greedy(be, name, tol, mode, j, li, st);
        cJSON_Delete(j);
        st->n_lines++;
    }
    cr_assert_gt(st->n_lines, 0, "%s has no lines", path);
    free(text);
}
