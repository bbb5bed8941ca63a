/* Speculative sampling keeps the target distribution (engine/spec_verify.c): a proposal d
 * drawn from a draft distribution q, accepted with probability min(1, p(d)/q(d)), else a
 * draw from the residual max(0, p - q), must come out distributed as p. A chi-square test
 * over a 5-id vocabulary with a fixed seed set; the same test on a deliberately wrong rule
 * (accepting every proposal) shows that it can fail. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/mix.h"
#include "engine/grammar.h"
#include "engine/sampling.h"
#include "engine/spec.h"
#include "tvocab.h"

#define NV 5
#define TRIALS 60000
#define CHI2_CRIT 18.47 /* 4 degrees of freedom, p = 0.001 */

static const float g_logits[NV] = {1.0f, 0.2f, -0.5f, 0.7f, 0.0f};
static const float g_q[NV] = {0.05f, 0.5f, 0.1f, 0.25f, 0.1f}; /* far from p on purpose */

/* p computed here, independently of the sampling chain: softmax(l / T) over the top_k. */
static void target_p(float temp, int top_k, double *p) {
    int keep[NV];
    for (int i = 0; i < NV; i++) {
        int rank = 0;
        for (int j = 0; j < NV; j++) rank += g_logits[j] > g_logits[i];
        keep[i] = top_k <= 0 || rank < top_k;
    }
    double z = 0;
    for (int i = 0; i < NV; i++) z += p[i] = keep[i] ? exp(g_logits[i] / temp) : 0;
    for (int i = 0; i < NV; i++) p[i] /= z;
}

/* d ~ q from the test's own stream. */
static int32_t draw_q(uint64_t *st) {
    double u = (double)(ul_mix64((*st)++) >> 11) * 0x1.0p-53, acc = 0;
    for (int32_t i = 0; i < NV; i++)
        if (u < (acc += g_q[i])) return i;
    return NV - 1;
}

typedef int32_t (*row_fn)(ul_step_seq_t *seq, int32_t d, void *scratch);

static int32_t right_rule(ul_step_seq_t *seq, int32_t d, void *scratch) {
    return ul_spec_sample_row(seq, g_logits, NV, d, g_q, scratch);
}

static int32_t accept_all(ul_step_seq_t *seq, int32_t d, void *scratch) {
    (void)seq;
    (void)scratch;
    return d;
}

/* Chi-square of TRIALS rows against p, over seeds 1..TRIALS (one sequence each). */
static double chi2(row_fn row, float temp, int top_k) {
    double p[NV];
    target_p(temp, top_k, p);
    void *scratch = calloc(1, ul_sample_scratch_size(NV));
    long count[NV] = {0};
    uint64_t qs = 12345;
    for (int t = 0; t < TRIALS; t++) {
        ul_step_seq_t seq;
        memset(&seq, 0, sizeof seq);
        ul_sampling_default(&seq.sampling);
        seq.sampling.temperature = temp;
        seq.sampling.top_k = top_k;
        ul_sampling_rng_seed(1 + (uint64_t)t, seq.rng);
        int32_t tok = row(&seq, draw_q(&qs), scratch);
        cr_assert(tok >= 0 && tok < NV);
        count[tok]++;
    }
    free(scratch);
    double x = 0;
    for (int i = 0; i < NV; i++) {
        double e = p[i] * TRIALS;
        if (e > 0)
            x += (count[i] - e) * (count[i] - e) / e;
        else
            cr_assert_eq(count[i], 0, "id %d outside the top-k was produced", i);
    }
    return x;
}

Test(spec_sample, keeps_the_distribution) {
    double x = chi2(right_rule, 1.0f, 0);
    cr_log_info("chi2 %.2f (critical %.2f)", x, CHI2_CRIT);
    cr_assert_lt(x, CHI2_CRIT, "speculative sampling changed the distribution: chi2 %.1f", x);
}

Test(spec_sample, keeps_the_distribution_with_temperature_and_top_k) {
    double x = chi2(right_rule, 0.7f, 3);
    cr_assert_lt(x, CHI2_CRIT, "chi2 %.1f", x);
}

/* The check has power: accepting every proposal gives q, not p. */
Test(spec_sample, a_wrong_rule_fails_the_check) {
    double x = chi2(accept_all, 1.0f, 0);
    cr_assert_gt(x, CHI2_CRIT, "the test cannot tell q from p: chi2 %.1f", x);
}

/* A certain proposal (q NULL) is accepted with probability p(d): the token is still p. */
static int32_t certain_rule(ul_step_seq_t *seq, int32_t d, void *scratch) {
    return ul_spec_sample_row(seq, g_logits, NV, d, NULL, scratch);
}

Test(spec_sample, certain_proposals_keep_the_distribution) {
    double x = chi2(certain_rule, 1.0f, 0);
    cr_assert_lt(x, CHI2_CRIT, "chi2 %.1f", x);
}

/* Seeds reproduce: the same seed and proposal give the same token. */
Test(spec_sample, reproducible) {
    void *scratch = calloc(1, ul_sample_scratch_size(NV));
    for (int t = 0; t < 200; t++) {
        int32_t tok[2];
        for (int r = 0; r < 2; r++) {
            ul_step_seq_t seq;
            memset(&seq, 0, sizeof seq);
            ul_sampling_default(&seq.sampling);
            seq.sampling.temperature = 1.0f;
            ul_sampling_rng_seed(100 + (uint64_t)t, seq.rng);
            tok[r] = right_rule(&seq, t % NV, scratch);
        }
        cr_assert_eq(tok[0], tok[1]);
    }
    free(scratch);
}

/* Constrained decoding: the grammar filter's prefix says how many proposals it would take
 * in turn, and leaves its own state as it was (the proposals are not accepted yet). */
static const char *const g_toks[] = {"{", "\"a\"", ":", "1", "}", "x", "<e>"};

static tvocab_t g_tv = {g_toks, 7, 6};

Test(spec_sample, grammar_prefix_cuts_refused_proposals) {
    ul_gvocab_t *v = tv_vocab(&g_tv);
    const char *src = "root ::= \"{\" \"\\\"a\\\"\" \":\" \"1\" \"}\"\n";
    ul_grammar_t *g = NULL;
    char err[128];
    cr_assert_eq(ul_grammar_compile(v, src, strlen(src), &g, err, sizeof err), 0, "%s", err);
    ul_gfilter_t f;
    cr_assert_eq(ul_gfilter_init(&f, g), 0);
    ul_token_filter_t *b = &f.base;
    cr_assert(b->prefix);
    const int32_t good[] = {0, 1, 2, 3, 4}, bad[] = {0, 1, 5, 3};
    cr_assert_eq(b->prefix(b, good, 5), 5);
    cr_assert_eq(b->prefix(b, bad, 4), 2, "\"x\" is outside the grammar");
    cr_assert(b->allows(b, 0) && !b->allows(b, 1), "prefix moved the filter's own state");
    b->accept(b, 0);
    cr_assert_eq(b->prefix(b, good + 1, 4), 4);
    cr_assert_eq(b->prefix(b, good, 1), 0, "a second \"{\"");
    ul_gfilter_free(&f);
    ul_grammar_unref(g);
    ul_gvocab_free(v);
}
