/* Sampling: greedy ties, llama.cpp repetition penalty, OpenAI frequency/presence
 * penalties and their window, top-k/top-p/min-p truncation, seeded reproducibility, the
 * empirical distribution of the draw, and the reported logprobs. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "engine/sampling.h"

#define NV 8

static void *g_scratch;

static void setup(void) { g_scratch = calloc(1, ul_sample_scratch_size(NV)); }
static void teardown(void) { free(g_scratch); }

static ul_step_seq_t seq_with(float temperature) {
    ul_step_seq_t s = {0};
    ul_sampling_default(&s.sampling);
    s.sampling.temperature = temperature;
    ul_sampling_rng_seed(1234, s.rng);
    return s;
}

TestSuite(sampling, .init = setup, .fini = teardown);

Test(sampling, greedy_argmax_ties_to_lowest_id) {
    float l[NV] = {0.5f, 3.0f, -1.0f, 3.0f, 2.9f, 0, 0, 0};
    ul_step_seq_t s = seq_with(0);
    cr_assert_eq(ul_sample(&s, l, NV, g_scratch), 1);
    cr_assert_eq(s.out_token, 1);
}

Test(sampling, repeat_penalty_divides_positive_and_multiplies_negative) {
    /* token 0 (2.0, repeated) / 1.5 = 1.33 < token 1 (1.5): greedy moves to 1 */
    float l[NV] = {2.0f, 1.5f, -0.5f, -9, -9, -9, -9, -9};
    int32_t hist[] = {0, 2};
    ul_step_seq_t s = seq_with(0);
    s.sampling.repeat_penalty = 1.5f;
    s.history = hist;
    s.n_history = 2;
    cr_assert_eq(ul_sample(&s, l, NV, g_scratch), 1);
    /* a negative logit gets more negative: with only token 2 allowed high, it must lose */
    float l2[NV] = {-9, -9, -0.5f, -0.6f, -9, -9, -9, -9};
    cr_assert_eq(ul_sample(&s, l2, NV, g_scratch), 3); /* -0.75 < -0.6 */
    /* the scratch counts were reset: without history the original argmax returns */
    s.n_history = 0;
    cr_assert_eq(ul_sample(&s, l, NV, g_scratch), 0);
}

Test(sampling, frequency_and_presence_penalties) {
    float l[NV] = {2.0f, 1.5f, 1.0f, -9, -9, -9, -9, -9};
    int32_t hist[] = {0, 1, 0, 0};
    ul_step_seq_t s = seq_with(0);
    s.history = hist;
    s.n_history = 4;
    s.sampling.frequency_penalty = 0.3f; /* 0: 2 - 0.9 = 1.1; 1: 1.5 - 0.3 = 1.2 */
    cr_assert_eq(ul_sample(&s, l, NV, g_scratch), 1);
    s.sampling.presence_penalty = 0.6f; /* 0: 0.5; 1: 0.6; 2: 1.0 */
    cr_assert_eq(ul_sample(&s, l, NV, g_scratch), 2);
    s.sampling.repeat_last_n = 1; /* only the last 0 counts: 0: 2 - 0.3 - 0.6 = 1.1 */
    cr_assert_eq(ul_sample(&s, l, NV, g_scratch), 1);
    s.sampling.repeat_last_n = 0; /* off */
    cr_assert_eq(ul_sample(&s, l, NV, g_scratch), 0);
}

static float draw_freq(ul_step_seq_t *s, const float *l, int tok, int n) {
    int hits = 0;
    for (int i = 0; i < n; i++) hits += ul_sample(s, l, NV, g_scratch) == tok;
    return (float)hits / (float)n;
}

Test(sampling, temperature_one_follows_the_softmax) {
    float l[NV] = {logf(0.6f), logf(0.3f), logf(0.1f), -INFINITY,
                   -INFINITY,  -INFINITY,  -INFINITY,  -INFINITY};
    ul_step_seq_t s = seq_with(1.0f);
    const int n = 20000; /* binomial sd of a frequency ~0.0035: 0.02 is > 5 sd */
    cr_assert_float_eq(draw_freq(&s, l, 0, n), 0.6f, 0.02f);
    cr_assert_float_eq(draw_freq(&s, l, 1, n), 0.3f, 0.02f);
    cr_assert_float_eq(draw_freq(&s, l, 2, n), 0.1f, 0.02f);
    /* a low temperature sharpens: token 0 dominates */
    s.sampling.temperature = 0.25f; /* 0.6^4 : 0.3^4 : 0.1^4 -> 0.94 */
    cr_assert_gt(draw_freq(&s, l, 0, 5000), 0.9f);
}

Test(sampling, truncation_top_k_top_p_min_p) {
    float l[NV] = {logf(0.5f), logf(0.3f), logf(0.15f), logf(0.05f),
                   -INFINITY,  -INFINITY,  -INFINITY,   -INFINITY};
    ul_step_seq_t s = seq_with(1.0f);
    s.sampling.top_k = 1;
    cr_assert_eq(draw_freq(&s, l, 0, 2000), 1.0f);
    s.sampling.top_k = 2;
    float f0 = draw_freq(&s, l, 0, 4000);
    cr_assert(f0 > 0.55f && f0 < 0.7f, "top-2 renormalised: 0.5/0.8 = 0.625, got %f", f0);
    s.sampling.top_k = 0;
    s.sampling.top_p = 0.75f; /* 0.5 then 0.8 >= 0.75: tokens 0 and 1 only */
    cr_assert_eq(draw_freq(&s, l, 2, 4000) + draw_freq(&s, l, 3, 4000), 0.0f);
    cr_assert_gt(draw_freq(&s, l, 1, 4000), 0.3f);
    s.sampling.top_p = 1.0f;
    s.sampling.min_p = 0.2f; /* threshold 0.1: drops 0.05 only */
    cr_assert_eq(draw_freq(&s, l, 3, 4000), 0.0f);
    cr_assert_gt(draw_freq(&s, l, 2, 4000), 0.1f);
}

Test(sampling, seeded_streams_repeat_and_differ) {
    float l[NV] = {0, 0, 0, 0, 0, 0, 0, 0};
    ul_step_seq_t a = seq_with(1.0f), b = seq_with(1.0f), c = seq_with(1.0f);
    ul_sampling_rng_seed(99, c.rng);
    int same_ab = 1, same_ac = 1;
    for (int i = 0; i < 64; i++) {
        int32_t x = ul_sample(&a, l, NV, g_scratch), y = ul_sample(&b, l, NV, g_scratch);
        int32_t z = ul_sample(&c, l, NV, g_scratch);
        same_ab &= x == y;
        same_ac &= x == z;
    }
    cr_assert(same_ab, "same seed must give the same tokens");
    cr_assert(!same_ac, "different seeds gave 64 identical tokens");
}

Test(sampling, logprobs_are_the_raw_log_softmax) {
    float l[NV] = {logf(0.5f), logf(0.25f), logf(0.125f), logf(0.125f),
                   -INFINITY,  -INFINITY,   -INFINITY,    -INFINITY};
    ul_step_seq_t s = seq_with(0);
    s.sampling.n_logprobs = 3;
    s.sampling.repeat_penalty = 3.0f; /* penalties change the choice, not the logprobs */
    int32_t hist[] = {0};
    s.history = hist;
    s.n_history = 1;
    cr_assert_eq(ul_sample(&s, l, NV, g_scratch), 1);
    cr_assert_float_eq(s.out_logprob, logf(0.25f), 1e-5);
    cr_assert_eq(s.out_n_top, 3);
    cr_assert_eq(s.out_top_ids[0], 0);
    cr_assert_eq(s.out_top_ids[1], 1);
    cr_assert_eq(s.out_top_ids[2], 2); /* tie 2/3: lower id first */
    cr_assert_float_eq(s.out_top_logprobs[0], logf(0.5f), 1e-5);
    cr_assert_float_eq(s.out_top_logprobs[2], logf(0.125f), 1e-5);
}

/* OpenAI's logit_bias: -100 bans (greedy moves to the second best, a draw never picks it),
 * +100 forces (the least likely token wins, greedy or drawn); ids outside the vocabulary
 * are ignored; the logprobs stay the model's own. */
Test(sampling, logit_bias_bans_and_forces) {
    float l[NV] = {1.0f, 3.0f, 2.5f, -2.0f, 0.0f, 0.5f, -1.0f, 0.2f};
    ul_logit_bias_t ban[] = {{1, -100.0f}, {NV + 3, 50.0f}, {-1, 50.0f}};
    ul_step_seq_t s = seq_with(0);
    s.sampling.n_logprobs = 2;
    cr_assert_eq(ul_sample(&s, l, NV, g_scratch), 1);
    s.sampling.logit_bias = ban;
    s.sampling.n_logit_bias = 3;
    cr_assert_eq(ul_sample(&s, l, NV, g_scratch), 2, "greedy moves to the second best");
    cr_assert_eq(s.out_top_ids[0], 1, "the top list is the model's, unbiased");
    ul_logit_bias_t force = {3, 100.0f};
    s.sampling.logit_bias = &force;
    s.sampling.n_logit_bias = 1;
    cr_assert_eq(ul_sample(&s, l, NV, g_scratch), 3, "+100 forces the least likely token");
    double z = 0;
    for (int i = 0; i < NV; i++) z += exp(l[i]);
    cr_assert_float_eq(s.out_logprob, -2.0 - log(z), 1e-4, "raw logprob of the forced token");
    cr_assert_eq(l[1], 3.0f, "the caller's logits are not modified");

    ul_step_seq_t d = seq_with(1.0f);
    d.sampling.logit_bias = ban;
    d.sampling.n_logit_bias = 3;
    cr_assert_eq(draw_freq(&d, l, 1, 4000), 0.0f, "a banned token is drawn");
    cr_assert_gt(draw_freq(&d, l, 2, 4000), 0.3f);
    d.sampling.top_k = 3; /* the truncating path sees the biased logits too */
    cr_assert_eq(draw_freq(&d, l, 1, 4000), 0.0f);
    d.sampling.logit_bias = &force;
    d.sampling.n_logit_bias = 1;
    d.sampling.top_k = 0;
    cr_assert_eq(draw_freq(&d, l, 3, 2000), 1.0f, "+100 forces a draw");
}

/* A realistic vocabulary size exercises the vectorised reductions and the widening top-p
 * search (the nucleus here needs more than the first 256 candidates). */
static void large_vocabulary(void);

Test(sampling, large_vocabulary_top_p_and_logprobs_match_a_full_sort) {
    ul_sampling_init(0);
    large_vocabulary();
    /* the AVX-512 reductions, where the CPU has them: the backend makes the same call */
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    ul_sampling_init(__builtin_cpu_supports("avx512f"));
#endif
    large_vocabulary();
    ul_sampling_init(0);
}

static void large_vocabulary(void) {
    const int32_t V = 5000;
    float *l = malloc((size_t)V * sizeof *l);
    uint64_t r[2];
    ul_sampling_rng_seed(5, r);
    for (int32_t i = 0; i < V; i++) l[i] = 4.0f * ul_sampling_rng_uniform(r);
    void *sc = calloc(1, ul_sample_scratch_size(V));
    /* reference: the nucleus by a full sort in double precision */
    double mx = -1e30, z = 0;
    /* not fmax(): Debian's aarch64 gcc 12 dies vectorising that reduction (an ICE) */
    for (int32_t i = 0; i < V; i++) mx = l[i] > mx ? l[i] : mx;
    for (int32_t i = 0; i < V; i++) z += exp(l[i] - mx);
    int32_t *ord = malloc((size_t)V * sizeof *ord);
    for (int32_t i = 0; i < V; i++) ord[i] = i;
    for (int32_t i = 1; i < V; i++) /* insertion sort by logit, descending */
        for (int32_t j = i; j > 0 && l[ord[j]] > l[ord[j - 1]]; j--) {
            int32_t t = ord[j];
            ord[j] = ord[j - 1];
            ord[j - 1] = t;
        }
    char *in = calloc((size_t)V, 1);
    double cum = 0;
    int32_t n_in = 0;
    for (int32_t i = 0; i < V && cum < 0.5; i++, n_in++) {
        cum += exp(l[ord[i]] - mx) / z;
        in[ord[i]] = 1;
    }
    cr_assert_gt(n_in, 256, "the nucleus must exceed the first search window (%d)", n_in);
    ul_step_seq_t s = seq_with(1.0f);
    s.sampling.top_p = 0.5f;
    s.sampling.n_logprobs = 1;
    for (int k = 0; k < 300; k++) {
        int32_t t = ul_sample(&s, l, V, sc);
        cr_assert(in[t], "token %d outside the top-p nucleus", t);
        double want = l[t] - mx - log(z);
        cr_assert_float_eq(s.out_logprob, want, 1e-4, "logprob %f, want %f", s.out_logprob, want);
        cr_assert_eq(s.out_top_ids[0], ord[0]);
    }
    free(l), free(sc), free(ord), free(in);
}

/* A filter allowing the ids of one parity, recording what was accepted. */
typedef struct {
    ul_token_filter_t base;
    int parity;
    int n_accepted;
    int32_t last;
} parity_filter_t;

static int parity_allows(const ul_token_filter_t *f, int32_t id) {
    return (id & 1) == ((const parity_filter_t *)f)->parity;
}
static void parity_accept(ul_token_filter_t *f, int32_t id) {
    parity_filter_t *p = (parity_filter_t *)f;
    p->n_accepted++;
    p->last = id;
}

Test(sampling, a_filter_chooses_among_allowed_ids_and_sees_the_choice) {
    float l[NV] = {0.5f, 3.0f, -1.0f, 2.0f, 2.9f, 0, 0, 0};
    parity_filter_t f = {{parity_allows, parity_accept, NULL, NULL}, 0, 0, -1};
    ul_step_seq_t s = seq_with(0);
    s.sampling.filter = &f.base;
    cr_assert_eq(ul_sample(&s, l, NV, g_scratch), 4, "greedy: the best even id");
    cr_assert_eq(f.n_accepted, 1);
    cr_assert_eq(f.last, 4);
    f.parity = 1;
    cr_assert_eq(ul_sample(&s, l, NV, g_scratch), 1, "allowed anyway: unchanged");
    /* Drawn, with and without truncation: never a refused id; the allowed ones keep their
     * relative odds (ids 1 and 3: e^3 : e^2 at temperature 1). */
    for (int trunc = 0; trunc < 2; trunc++) {
        ul_step_seq_t d = seq_with(1.0f);
        d.sampling.filter = &f.base;
        if (trunc) d.sampling.top_k = 6;
        int count[NV] = {0};
        for (int i = 0; i < 4000; i++) count[ul_sample(&d, l, NV, g_scratch)]++;
        for (int i = 0; i < NV; i += 2) cr_assert_eq(count[i], 0, "even id %d drawn", i);
        double ratio = (double)count[1] / (count[3] ? count[3] : 1);
        cr_assert(ratio > 2.2 && ratio < 3.3, "odds of 1:3 = %.2f, expected e = 2.72", ratio);
    }
    cr_assert_eq(f.n_accepted, 2 + 8000);
}

/* The same filter with a mask: the sampler asks allows() about its own choice only, and
 * takes the refused ids from fill_mask (a vocabulary-sized loop of allows() calls would
 * walk the grammar once per token). */
static int g_allows_calls;
static int counting_allows(const ul_token_filter_t *f, int32_t id) {
    g_allows_calls++;
    return parity_allows(f, id);
}
static void parity_mask(ul_token_filter_t *f, uint32_t *bits) {
    int par = ((parity_filter_t *)f)->parity;
    bits[0] = par ? 0xaaaaaaaau : 0x55555555u;
}

Test(sampling, a_filter_mask_replaces_per_token_checks) {
    float l[NV] = {0.5f, 3.0f, -1.0f, 2.0f, 2.9f, 0, 0, 0};
    parity_filter_t f = {{counting_allows, parity_accept, parity_mask, NULL}, 0, 0, -1};
    ul_step_seq_t s = seq_with(0);
    s.sampling.filter = &f.base;
    g_allows_calls = 0;
    cr_assert_eq(ul_sample(&s, l, NV, g_scratch), 4, "greedy: the best even id");
    cr_assert_eq(g_allows_calls, 1, "allows() asked once, then the mask");
    ul_step_seq_t d = seq_with(1.0f);
    d.sampling.filter = &f.base;
    for (int i = 0; i < 500; i++) cr_assert_eq(ul_sample(&d, l, NV, g_scratch) & 1, 0);
}
