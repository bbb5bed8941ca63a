/* Device sampling's arithmetic (twin.h's ul_tw_sample_row, run by sample.cu on one thread
 * per row) against the CPU sampler, ul_sample, on its portable path: for the same logits,
 * parameters and RNG state, over thousands of random cases covering every parameter alone
 * and mixed, the twin must pick the same token with the same logprob, report the same top
 * candidates and leave the RNG where ul_sample leaves it. The parameters go through
 * ul_gpu_sample_pack / _unpack, the host side the CUDA backend uses. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sampling.h"
#include "gpu/support.h"
#include "gpu/twin.h"

static uint64_t rng_next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}
static float unif(uint64_t *s) { return (float)(rng_next(s) >> 40) / 16777216.0f; }

enum { P_TEMP, P_TOPK, P_TOPP, P_MINP, P_REP, P_FREQ, P_PRES, P_BIAS, P_LOGPROBS, P_MIX, P_N };
static const char *const pname[] = {"temperature", "top_k",     "top_p",    "min_p",
                                    "repeat",      "frequency", "presence", "logit_bias",
                                    "logprobs",    "all mixed"};

typedef struct {
    int n_cases, n_same_token, n_draws;
} tally_t;

/* One random case exercising parameter p (P_MIX: all at once). */
static void one_case(uint64_t *s, int p, int32_t n_vocab, float *logits, int32_t *history,
                     ul_logit_bias_t *bias, tally_t *t) {
    /* logits: a spread with plateaus, so ties and near-ties occur */
    float scale = 0.5f + 8.0f * unif(s);
    for (int32_t i = 0; i < n_vocab; i++) {
        float v = (unif(s) - 0.5f) * scale;
        logits[i] = rng_next(s) % 5 == 0 ? roundf(v * 4) / 4 : v;
    }
    ul_step_seq_t seq;
    memset(&seq, 0, sizeof seq);
    ul_sampling_default(&seq.sampling);
    ul_sampling_t *sp = &seq.sampling;
    int mix = p == P_MIX;
    sp->temperature = rng_next(s) % 8 == 0 ? 0.0f : 0.1f + 2.0f * unif(s);
    if (p == P_TEMP) sp->temperature = rng_next(s) % 6 == 0 ? 0.0f : 0.05f + 3.0f * unif(s);
    if (p == P_TOPK || (mix && rng_next(s) % 2))
        sp->top_k = (int32_t)(rng_next(s) % 3 == 0 ? rng_next(s) % (uint64_t)(n_vocab + 10)
                                                   : 1 + rng_next(s) % 50);
    if (p == P_TOPP || (mix && rng_next(s) % 2)) sp->top_p = unif(s);
    if (p == P_MINP || (mix && rng_next(s) % 2)) sp->min_p = unif(s) * 0.5f;
    int32_t nh = (int32_t)(rng_next(s) % 300);
    for (int32_t i = 0; i < nh; i++) /* repeats: a small set of ids, some out of range */
        history[i] = rng_next(s) % 50 == 0 ? n_vocab + 3 : (int32_t)(rng_next(s) % 64);
    seq.history = history;
    seq.n_history = nh;
    int pen = p == P_REP || p == P_FREQ || p == P_PRES || (mix && rng_next(s) % 2);
    if (pen) {
        sp->repeat_last_n = rng_next(s) % 4 == 0 ? -1 : (int32_t)(rng_next(s) % 128);
        if (p == P_REP || mix) sp->repeat_penalty = 0.5f + 1.5f * unif(s);
        if (p == P_FREQ || mix) sp->frequency_penalty = (unif(s) - 0.3f) * 2;
        if (p == P_PRES || mix) sp->presence_penalty = (unif(s) - 0.3f) * 2;
    }
    if (p == P_BIAS || (mix && rng_next(s) % 2)) {
        sp->n_logit_bias = 1 + (int32_t)(rng_next(s) % 16);
        for (int32_t i = 0; i < sp->n_logit_bias; i++) {
            bias[i].id = (int32_t)(rng_next(s) % (uint64_t)(n_vocab + 4)) - 2;
            bias[i].bias = rng_next(s) % 4 == 0 ? -100.0f : (unif(s) - 0.5f) * 10;
        }
        sp->logit_bias = bias;
    }
    if (p == P_LOGPROBS || (mix && rng_next(s) % 2))
        sp->n_logprobs = (int32_t)(rng_next(s) % (UL_MAX_LOGPROBS + 3));
    if (rng_next(s) % 10) /* else never seeded: both seed from 0 */
        ul_sampling_rng_seed(rng_next(s), seq.rng);

    /* the twin, through the backend's packing */
    ul_tw_sample_t ts;
    int32_t hist[400], bias_ids[32], n_hist = 0, n_bias = 0;
    float bias_vals[32];
    cr_assert_eq(
        ul_gpu_sample_pack(&seq, 0, &ts, hist, 400, &n_hist, bias_ids, bias_vals, 32, &n_bias), 0);
    float *pl = malloc((size_t)n_vocab * sizeof *pl);
    int32_t *counts = calloc((size_t)n_vocab, sizeof *counts);
    ul_tw_cand_t *cand = malloc((size_t)n_vocab * sizeof *cand);
    memcpy(pl, logits, (size_t)n_vocab * sizeof *pl);
    ul_tw_sample_row(&ts, logits, pl, n_vocab, hist, bias_ids, bias_vals, counts, cand);
    for (int32_t i = 0; i < n_vocab; i++) cr_assert_eq(counts[i], 0, "counts not left zero");
    ul_step_seq_t tw = seq;
    ul_gpu_sample_unpack(&ts, &tw);

    /* the CPU sampler */
    ul_step_seq_t cpu = seq;
    void *scratch = calloc(1, ul_sample_scratch_size(n_vocab)); /* laid out per vocabulary */
    int32_t tok = ul_sample(&cpu, logits, n_vocab, scratch);
    free(scratch);

    t->n_cases++;
    t->n_draws += sp->temperature > 0.0f;
    t->n_same_token += tw.out_token == tok;
    cr_assert_eq(tw.out_token, tok,
                 "%s, vocab %d: twin %d, cpu %d (T %g top_k %d top_p %g min_p %g rep %g/%d "
                 "freq %g pres %g bias %d)",
                 pname[p], n_vocab, tw.out_token, tok, sp->temperature, sp->top_k, sp->top_p,
                 sp->min_p, sp->repeat_penalty, sp->repeat_last_n, sp->frequency_penalty,
                 sp->presence_penalty, sp->n_logit_bias);
    cr_assert(!memcmp(&tw.out_logprob, &cpu.out_logprob, sizeof(float)), "logprob %g vs %g",
              tw.out_logprob, cpu.out_logprob);
    cr_assert_eq(tw.rng[0], cpu.rng[0], "rng state differs after the draw");
    cr_assert_eq(tw.rng[1], cpu.rng[1]);
    cr_assert_eq(tw.out_n_top, cpu.out_n_top);
    for (int32_t i = 0; i < cpu.out_n_top; i++) {
        cr_assert_eq(tw.out_top_ids[i], cpu.out_top_ids[i]);
        cr_assert(!memcmp(&tw.out_top_logprobs[i], &cpu.out_top_logprobs[i], sizeof(float)));
    }
    free(pl);
    free(counts);
    free(cand);
}

Test(twin_sample, same_token_as_ul_sample_for_every_parameter) {
    ul_sampling_init(0); /* the portable path: the device's exponentials are expf's */
    static const int32_t vocabs[] = {7, 64, 300, 1000, 5000};
    const int32_t vmax = 5000;
    float *logits = malloc(vmax * sizeof *logits);
    int32_t *history = malloc(512 * sizeof *history);
    ul_logit_bias_t bias[16];
    uint64_t s = 0x5eed5eedull;
    for (int p = 0; p < P_N; p++) {
        tally_t t = {0};
        for (int i = 0; i < 400; i++) {
            int32_t nv = vocabs[rng_next(&s) % (sizeof vocabs / sizeof *vocabs)];
            one_case(&s, p, nv, logits, history, bias, &t);
        }
        printf("twin sampler %-11s: %d of %d cases the same token as ul_sample (%d drawn)\n",
               pname[p], t.n_same_token, t.n_cases, t.n_draws);
    }
    free(history);
    free(logits);
}

/* A large vocabulary where top-p has to widen past its first 256 sorted candidates. */
Test(twin_sample, wide_top_p_on_a_flat_large_vocabulary) {
    ul_sampling_init(0);
    const int32_t n = 50000;
    float *logits = malloc(n * sizeof *logits);
    void *scratch = calloc(1, ul_sample_scratch_size(n));
    uint64_t s = 77;
    int same = 0;
    for (int c = 0; c < 20; c++) {
        for (int32_t i = 0; i < n; i++) logits[i] = unif(&s) * 0.01f;
        ul_step_seq_t seq;
        memset(&seq, 0, sizeof seq);
        ul_sampling_default(&seq.sampling);
        seq.sampling.temperature = 1.0f;
        seq.sampling.top_p = 0.9f;
        seq.sampling.top_k = c % 2 ? 0 : 20000;
        ul_sampling_rng_seed((uint64_t)c, seq.rng);
        ul_tw_sample_t ts;
        int32_t nh = 0, nb = 0;
        cr_assert_eq(ul_gpu_sample_pack(&seq, 0, &ts, NULL, 0, &nh, NULL, NULL, 0, &nb), 0);
        float *pl = malloc(n * sizeof *pl);
        int32_t *counts = calloc(n, sizeof *counts);
        ul_tw_cand_t *cand = malloc(n * sizeof *cand);
        memcpy(pl, logits, n * sizeof *pl);
        ul_tw_sample_row(&ts, logits, pl, n, NULL, NULL, NULL, counts, cand);
        int32_t tok = ul_sample(&seq, logits, n, scratch);
        cr_assert_eq(ts.token, tok, "case %d: twin %d, cpu %d", c, ts.token, tok);
        same++;
        free(pl), free(counts), free(cand);
    }
    printf("twin sampler wide top-p: %d of 20 the same token\n", same);
    free(scratch);
    free(logits);
}
