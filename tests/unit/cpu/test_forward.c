/* Batching through page tables: a step mixing several sequences (a prefill chunk, a
 * prompt's continuation, a decode token), with pages scattered and interleaved across the
 * pool, must give every token the logits it gets when its sequence runs alone; the
 * sampled tokens must be those logits' argmax; malformed steps are refused. Uses
 * mini-f16 (GQA: 4 query heads over 2 KV heads, 32000-token vocabulary). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/forward.h"
#include "engine/sampling.h"
#include "model/model.h"
#include "uvllm/err.h"

#include "../shared_model.h"
#include "cpu_cfg.h"

static ul_model_t *g_m;

static void load_model(void) { g_m = shared_model("mini-f16"); }
static void free_model(void) { ul_model_free(g_m); }

static ul_fwd_t *make_fwd(int kv_type) {
    ul_cpu_config_t cfg = tc_cpu_cfg(g_m, kv_type, 4, 16, 32);
    ul_fwd_t *f;
    cr_assert_eq(ul_fwd_create(g_m, &cfg, &f), 0);
    cr_assert_eq(f->kv.n_pages, 16);
    return f;
}

#define NA 11
#define NB 7 /* 6 prompt + 1 decode */
#define NC 5
static const int32_t A[NA] = {1, 450, 4996, 17354, 1701, 432, 17204, 975, 278, 17366, 11203};
static const int32_t B[NB] = {1, 9038, 2501, 263, 931, 29892, 727};
static const int32_t C[NC] = {1, 306, 763, 22037, 7849};

/* Logits of every token of seq run alone (one step per chunk boundary in cuts). */
static float *alone(ul_fwd_t *f, const int32_t *toks, int n, const int *cuts, int n_cuts) {
    const int32_t V = f->hp.n_vocab;
    float *out = malloc((size_t)n * V * sizeof *out);
    int32_t pages[16];
    for (int i = 0; i < 16; i++) pages[i] = i;
    int from = 0;
    for (int c = 0; c <= n_cuts; c++) {
        int to = c < n_cuts ? cuts[c] : n;
        ul_step_seq_t s = {.n_tokens = to - from, .pos0 = from, .pages = pages, .n_pages = 16};
        ul_step_t st = {
            .n_tokens = to - from, .tokens = (int32_t *)toks + from, .n_seqs = 1, .seqs = &s};
        cr_assert_eq(ul_fwd_step(f, &st, out + (size_t)from * V), 0);
        from = to;
    }
    return out;
}

static int32_t argmax(const float *l, int32_t n) {
    int32_t b = 0;
    for (int32_t i = 1; i < n; i++)
        if (l[i] > l[b]) b = i;
    return b;
}

static double maxdiff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

static void batched_equals_alone(int kv_type) {
    ul_fwd_t *f = make_fwd(kv_type);
    const int32_t V = f->hp.n_vocab;
    int cut_b = 6;
    float *la = alone(f, A, NA, NULL, 0), *lb = alone(f, B, NB, &cut_b, 1),
          *lc = alone(f, C, NC, NULL, 0);
    ul_fwd_free(f);

    f = make_fwd(kv_type);
    /* interleaved, out of order, never contiguous */
    const int32_t pa[] = {9, 2, 14}, pb[] = {5, 11}, pc[] = {0, 7};
    ul_sampling_t greedy;
    ul_sampling_default(&greedy);
    greedy.temperature = 0;
    /* step 1: A's first 7 tokens (no sampling), B's prompt (samples), C's first 3 */
    int32_t t1[7 + 6 + 3];
    memcpy(t1, A, 7 * 4), memcpy(t1 + 7, B, 6 * 4), memcpy(t1 + 13, C, 3 * 4);
    ul_step_seq_t s1[3] = {
        {.seq_id = 1, .tok_offset = 0, .n_tokens = 7, .pos0 = 0, .pages = pa, .n_pages = 3},
        {.seq_id = 2,
         .tok_offset = 7,
         .n_tokens = 6,
         .pos0 = 0,
         .pages = pb,
         .n_pages = 2,
         .sample = 1,
         .sampling = greedy},
        {.seq_id = 3, .tok_offset = 13, .n_tokens = 3, .pos0 = 0, .pages = pc, .n_pages = 2}};
    ul_step_t st1 = {.n_tokens = 16, .tokens = t1, .n_seqs = 3, .seqs = s1};
    float *l1 = malloc(16 * (size_t)V * sizeof *l1);
    cr_assert_eq(ul_fwd_step(f, &st1, l1), 0);
    /* step 2: B's decode token first, then A's remaining 4, then C's last 2 */
    int32_t t2[1 + 4 + 2] = {B[6], A[7], A[8], A[9], A[10], C[3], C[4]};
    ul_step_seq_t s2[3] = {{.seq_id = 2,
                            .tok_offset = 0,
                            .n_tokens = 1,
                            .pos0 = 6,
                            .pages = pb,
                            .n_pages = 2,
                            .sample = 1,
                            .sampling = greedy},
                           {.seq_id = 1,
                            .tok_offset = 1,
                            .n_tokens = 4,
                            .pos0 = 7,
                            .pages = pa,
                            .n_pages = 3,
                            .sample = 1,
                            .sampling = greedy},
                           {.seq_id = 3,
                            .tok_offset = 5,
                            .n_tokens = 2,
                            .pos0 = 3,
                            .pages = pc,
                            .n_pages = 2,
                            .sample = 1,
                            .sampling = greedy}};
    ul_step_t st2 = {.n_tokens = 7, .tokens = t2, .n_seqs = 3, .seqs = s2};
    float *l2 = malloc(7 * (size_t)V * sizeof *l2);
    cr_assert_eq(ul_fwd_step(f, &st2, l2), 0);

    const size_t r = (size_t)V;
    double d[] = {maxdiff(l1, la, 7 * r),          maxdiff(l2 + r, la + 7 * r, 4 * r),
                  maxdiff(l1 + 7 * r, lb, 6 * r),  maxdiff(l2, lb + 6 * r, r),
                  maxdiff(l1 + 13 * r, lc, 3 * r), maxdiff(l2 + 5 * r, lc + 3 * r, 2 * r)};
    double worst = 0;
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) worst = fmax(worst, d[i]);
    fprintf(stderr, "batched vs alone (kv %s): largest |logit diff| %g\n",
            kv_type == UL_TYPE_F16 ? "f16" : "f32", worst);
    /* Same arithmetic per row; only the matmul's token tiling differs, which may reorder a
     * float sum (~1e-6 relative on logits of magnitude ~5). */
    cr_assert_leq(worst, 1e-4, "batched logits differ from sequences run alone by %g", worst);
    cr_assert_eq(s1[1].out_token, argmax(lb + 5 * r, V));
    cr_assert_eq(s2[0].out_token, argmax(lb + 6 * r, V));
    cr_assert_eq(s2[1].out_token, argmax(la + 10 * r, V));
    cr_assert_eq(s2[2].out_token, argmax(lc + 4 * r, V));
    free(la), free(lb), free(lc), free(l1), free(l2);
    ul_fwd_free(f);
}

TestSuite(forward, .init = load_model, .fini = free_model);

Test(forward, batched_mixed_step_equals_each_sequence_alone_f16) {
    batched_equals_alone(UL_TYPE_F16);
}
Test(forward, batched_mixed_step_equals_each_sequence_alone_f32) {
    batched_equals_alone(UL_TYPE_F32);
}

Test(forward, sampling_without_logits_all_matches_teacher_forcing) {
    /* the usual path (logits only for sampled rows, in the chunked buffer) picks the same
     * token as the argmax of the full logits */
    ul_fwd_t *f = make_fwd(UL_TYPE_F16);
    float *la = alone(f, A, NA, NULL, 0);
    int32_t pages[3] = {3, 8, 1};
    ul_sampling_t greedy;
    ul_sampling_default(&greedy);
    greedy.temperature = 0;
    ul_step_seq_t s = {
        .n_tokens = NA, .pages = pages, .n_pages = 3, .sample = 1, .sampling = greedy};
    ul_step_t st = {.n_tokens = NA, .tokens = (int32_t *)A, .n_seqs = 1, .seqs = &s};
    cr_assert_eq(ul_fwd_step(f, &st, NULL), 0);
    cr_assert_eq(s.out_token, argmax(la + (size_t)(NA - 1) * f->hp.n_vocab, f->hp.n_vocab));
    free(la);
    ul_fwd_free(f);
}

/* The logprobs the backend reports with a sampled token are the log-softmax of the model's
 * logits for that row (the raw distribution, whatever temperature did to the draw), and the
 * top candidates are the largest of them, most likely first. */
Test(forward, logprobs_are_the_log_softmax_of_the_logits) {
    ul_fwd_t *f = make_fwd(UL_TYPE_F16);
    const int32_t V = f->hp.n_vocab;
    float *la = alone(f, A, NA, NULL, 0);
    const float *row = la + (size_t)(NA - 1) * V;
    double mx = row[argmax(row, V)], z = 0;
    for (int32_t i = 0; i < V; i++) z += exp((double)row[i] - mx);
    const double lse = mx + log(z);
    int32_t pages[3] = {3, 8, 1};
    ul_sampling_t sp;
    ul_sampling_default(&sp);
    sp.temperature = 1.5f;
    sp.n_logprobs = 5;
    ul_step_seq_t s = {.n_tokens = NA, .pages = pages, .n_pages = 3, .sample = 1, .sampling = sp};
    ul_sampling_rng_seed(7, s.rng);
    ul_step_t st = {.n_tokens = NA, .tokens = (int32_t *)A, .n_seqs = 1, .seqs = &s};
    cr_assert_eq(ul_fwd_step(f, &st, NULL), 0);
    cr_assert_float_eq(s.out_logprob, row[s.out_token] - lse, 1e-3, "token %d: %g vs %g",
                       s.out_token, s.out_logprob, row[s.out_token] - lse);
    cr_assert_eq(s.out_n_top, 5);
    cr_assert_eq(s.out_top_ids[0], argmax(row, V));
    for (int k = 0; k < 5; k++) {
        cr_assert_float_eq(s.out_top_logprobs[k], row[s.out_top_ids[k]] - lse, 1e-3);
        if (k) cr_assert_geq(s.out_top_logprobs[k - 1], s.out_top_logprobs[k]);
    }
    double p = 0; /* the top 5 of a 32000-token vocabulary cannot hold more than all of it */
    for (int k = 0; k < 5; k++) p += exp(s.out_top_logprobs[k]);
    cr_assert_leq(p, 1.0 + 1e-4);
    free(la);
    ul_fwd_free(f);
}

/* Logit bias on the real model: -100 on the greedy token moves greedy to the second best
 * logit; +100 on an unlikely token forces it. */
Test(forward, logit_bias_changes_the_greedy_choice) {
    ul_fwd_t *f = make_fwd(UL_TYPE_F16);
    const int32_t V = f->hp.n_vocab;
    float *la = alone(f, A, NA, NULL, 0);
    float *row = la + (size_t)(NA - 1) * V;
    const int32_t best = argmax(row, V);
    const float keep = row[best];
    row[best] = -INFINITY;
    const int32_t second = argmax(row, V);
    row[best] = keep;
    int32_t pages[3] = {3, 8, 1};
    ul_logit_bias_t bias[2] = {{best, -100.0f}, {0, 0.0f}};
    ul_sampling_t sp;
    ul_sampling_default(&sp);
    sp.temperature = 0;
    sp.logit_bias = bias;
    sp.n_logit_bias = 1;
    ul_step_seq_t s = {.n_tokens = NA, .pages = pages, .n_pages = 3, .sample = 1, .sampling = sp};
    ul_step_t st = {.n_tokens = NA, .tokens = (int32_t *)A, .n_seqs = 1, .seqs = &s};
    cr_assert_eq(ul_fwd_step(f, &st, NULL), 0);
    cr_assert_neq(best, second);
    cr_assert_eq(s.out_token, second, "banned %d: got %d, second best %d", best, s.out_token,
                 second);
    bias[1] = (ul_logit_bias_t){1234, 100.0f};
    s.sampling.n_logit_bias = 2;
    cr_assert_eq(ul_fwd_step(f, &st, NULL), 0);
    cr_assert_eq(s.out_token, 1234);
    free(la);
    ul_fwd_free(f);
}

Test(forward, malformed_steps_are_refused) {
    ul_fwd_t *f = make_fwd(UL_TYPE_F16);
    int32_t toks[4] = {1, 2, 3, 4}, pages[2] = {0, 1};
    ul_step_seq_t s = {.n_tokens = 4, .pages = pages, .n_pages = 2};
    ul_step_t st = {.n_tokens = 4, .tokens = toks, .n_seqs = 1, .seqs = &s};
    cr_assert_eq(ul_fwd_step(f, &st, NULL), 0);
    toks[2] = f->hp.n_vocab; /* token id out of range */
    cr_assert_eq(ul_fwd_step(f, &st, NULL), UL_EINVAL);
    toks[2] = 3;
    pages[0] = 16; /* page outside the pool */
    cr_assert_eq(ul_fwd_step(f, &st, NULL), UL_EINVAL);
    pages[0] = 0;
    s.pos0 = 2; /* positions 2..5 need 2 pages of 4: ok; 5..8 need 3 */
    cr_assert_eq(ul_fwd_step(f, &st, NULL), 0);
    s.pos0 = 5;
    cr_assert_eq(ul_fwd_step(f, &st, NULL), UL_EINVAL);
    s.pos0 = 0;
    s.n_tokens = 3; /* token 3 belongs to no sequence */
    cr_assert_eq(ul_fwd_step(f, &st, NULL), UL_EINVAL);
    s.n_tokens = 4;
    st.n_tokens = 33; /* larger than max_batch_tokens */
    cr_assert_eq(ul_fwd_step(f, &st, NULL), UL_EINVAL);
    ul_fwd_free(f);
}
