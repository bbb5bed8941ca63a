/* Embedding entries of a CPU step (backend.h "Embeddings") on the shared qwen3-tiny-f16, a
 * decoder: the pooled vector is the output-normed hidden state, so with causal attention
 *  - cls of t0..tn is last of t0 alone, and mean of t0..tn is the mean of last(t0..tk) over
 *    k (row k of a causal model sees only t0..tk);
 *  - an entry batched beside a prefill and a decode gives the vector it gets alone, and the
 *    others sample what they sample without it;
 *  - an entry that does not hold its whole sequence, or samples, is refused.
 * The vectors against llama.cpp's llama-embedding are test_embed_golden.c's. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/forward.h"
#include "model/model.h"
#include "uvllm/err.h"

#include "../shared_model.h"
#include "cpu_cfg.h"

static ul_model_t *g_m;
static ul_fwd_t *g_f;

static void setup(void) {
    g_m = shared_model("qwen3-tiny-f16");
    ul_cpu_config_t cfg = tc_cpu_cfg(g_m, UL_TYPE_F32, 4, 32, 64);
    cr_assert_eq(ul_fwd_create(g_m, &cfg, &g_f), 0);
}

static void teardown(void) {
    ul_fwd_free(g_f);
    ul_model_free(g_m);
}

TestSuite(cpu_embed, .init = setup, .fini = teardown);

static int32_t g_pages[32] = {31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16,
                              15, 14, 13, 12, 11, 10, 9,  8,  7,  6,  5,  4,  3,  2,  1,  0};

static void embed(const int32_t *toks, int n, int32_t pooling, float *out) {
    ul_step_seq_t s = {
        .n_tokens = n, .pages = g_pages, .n_pages = 32, .out_embd = out, .pooling = pooling};
    ul_step_t st = {.n_tokens = n, .tokens = (int32_t *)toks, .n_seqs = 1, .seqs = &s};
    cr_assert_eq(ul_fwd_step(g_f, &st, NULL), 0);
}

static double maxdiff(const float *a, const float *b, int n) {
    double m = 0;
    for (int i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

static const int32_t T[] = {785, 3974, 13876, 38835, 34208, 916, 279, 15678, 5562, 13};
#define NT ((int)(sizeof T / sizeof T[0]))

Test(cpu_embed, pooling_of_a_causal_model) {
    const int E = g_m->hp.n_embd;
    float *mean = calloc((size_t)E, sizeof *mean), *cls = calloc((size_t)E, sizeof *cls);
    float *last = calloc((size_t)E, sizeof *last), *acc = calloc((size_t)E, sizeof *acc);
    embed(T, NT, UL_POOL_MEAN, mean);
    embed(T, NT, UL_POOL_CLS, cls);
    embed(T, 1, UL_POOL_LAST, last);
    /* the same rows computed in steps of other sizes: matmul tiles differ, so not bit for bit */
    cr_assert_lt(maxdiff(cls, last, E), 1e-4, "cls is the first row: %g", maxdiff(cls, last, E));
    for (int k = 1; k <= NT; k++) {
        embed(T, k, UL_POOL_LAST, last);
        for (int i = 0; i < E; i++) acc[i] += last[i] / NT;
    }
    double d = maxdiff(mean, acc, E), norm = 0;
    for (int i = 0; i < E; i++) norm += (double)mean[i] * mean[i];
    cr_assert_gt(norm, 1e-6, "a vector was written");
    cr_assert_lt(d, 1e-4, "mean pooling: largest difference %g", d);
    free(mean), free(cls), free(last), free(acc);
}

Test(cpu_embed, batched_beside_prefill_and_decode) {
    const int E = g_m->hp.n_embd;
    float *alone = calloc((size_t)E, sizeof *alone), *mixed = calloc((size_t)E, sizeof *mixed);
    embed(T, NT, UL_POOL_LAST, alone);
    /* a sequence A of 5 tokens prefilled alone first (pages 0..1), then one step with: A's
     * decode token, the embedding (pages 8..11), and a prefill B (pages 4..5) */
    int32_t pa[] = {0, 1, 2}, pe[] = {8, 9, 10}, pb[] = {4, 5};
    int32_t toks[32];
    memcpy(toks, T, 5 * sizeof *toks);
    ul_step_seq_t a0 = {.n_tokens = 5, .pages = pa, .n_pages = 2, .sample = 1};
    ul_sampling_default(&a0.sampling);
    a0.sampling.temperature = 0;
    ul_step_t st0 = {.n_tokens = 5, .tokens = toks, .n_seqs = 1, .seqs = &a0};
    cr_assert_eq(ul_fwd_step(g_f, &st0, NULL), 0);
    const int32_t next = a0.out_token;
    ul_step_seq_t seqs[3] = {{.seq_id = 1,
                              .tok_offset = 0,
                              .n_tokens = 1,
                              .pos0 = 5,
                              .pages = pa,
                              .n_pages = 2,
                              .sample = 1,
                              .sampling = a0.sampling},
                             {.seq_id = 2,
                              .tok_offset = 1,
                              .n_tokens = NT,
                              .pages = pe,
                              .n_pages = 3,
                              .out_embd = mixed,
                              .pooling = UL_POOL_LAST},
                             {.seq_id = 3,
                              .tok_offset = 1 + NT,
                              .n_tokens = 6,
                              .pages = pb,
                              .n_pages = 2,
                              .sample = 1,
                              .sampling = a0.sampling}};
    toks[0] = next;
    memcpy(toks + 1, T, NT * sizeof *toks);
    memcpy(toks + 1 + NT, T + 2, 6 * sizeof *toks);
    ul_step_t st = {.n_tokens = 7 + NT, .tokens = toks, .n_seqs = 3, .seqs = seqs};
    cr_assert_eq(ul_fwd_step(g_f, &st, NULL), 0);
    double d = maxdiff(alone, mixed, E);
    cr_assert_lt(d, 1e-4, "batched vs alone: largest difference %g", d);
    /* the samplers are untouched: the same tokens as without the embedding */
    int32_t got_a = seqs[0].out_token, got_b = seqs[2].out_token;
    ul_step_seq_t only[2] = {seqs[0], seqs[2]};
    only[1].tok_offset = 1;
    int32_t t2[7];
    t2[0] = next;
    memcpy(t2 + 1, T + 2, 6 * sizeof *t2);
    ul_step_t st2 = {.n_tokens = 7, .tokens = t2, .n_seqs = 2, .seqs = only};
    cr_assert_eq(ul_fwd_step(g_f, &st2, NULL), 0);
    cr_assert_eq(only[0].out_token, got_a);
    cr_assert_eq(only[1].out_token, got_b);
    free(alone), free(mixed);
}

Test(cpu_embed, refuses_partial_or_sampling_entries) {
    float v[4096];
    cr_assert_geq(4096, g_m->hp.n_embd);
    ul_step_seq_t s = {
        .n_tokens = 3, .pos0 = 2, .pages = g_pages, .n_pages = 32, .out_embd = v, .pooling = 1};
    ul_step_t st = {.n_tokens = 3, .tokens = (int32_t *)T, .n_seqs = 1, .seqs = &s};
    cr_assert_eq(ul_fwd_step(g_f, &st, NULL), UL_EINVAL, "pos0 > 0");
    s.pos0 = 0;
    s.sample = 1;
    cr_assert_eq(ul_fwd_step(g_f, &st, NULL), UL_EINVAL, "samples too");
    s.sample = 0;
    s.pooling = UL_POOL_NONE;
    cr_assert_eq(ul_fwd_step(g_f, &st, NULL), UL_EINVAL, "no pooling");
}
