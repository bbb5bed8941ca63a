/* Speculative decoding through the scheduler (sched/spec.c, engine/spec_backend.c, the
 * backends' verification): the tokens and logprobs a sequence gets are those of plain
 * decoding, with n-gram proposals and with a draft model, when every proposal is right,
 * when none is, and in between; a stop asked by on_token ends the sequence at that token
 * even when the step gave more; the KV pages (target's and draft's) all come back after
 * rejections and cancels, and a sequence never holds more pages between steps than plain
 * decoding would. Run on the null backend (position-hashed tokens: a draft with the same
 * salt is always right, another salt almost never) and on the CPU backend with every
 * shared golden model, the draft being the model itself. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/kv.h"
#include "engine/sampling.h"
#include "model/model.h"
#include "sched/sched.h"
#include "uvllm/err.h"

#include "cpu_fixture.h"

#include "seqbase.h"

#define PS 4
#define POOL 96
#define MAXOUT 48
#define NSEQ 3

typedef struct {
    ul_seq_t seq;
    int32_t out[MAXOUT];
    float lp[MAXOUT];
    int32_t top0[MAXOUT]; /* the first top candidate */
    int n_out;
    int stop_at; /* on_token asks to stop at this many tokens (0: never) */
    int finished;
    ul_finish_t reason;
} sseq_t;

static int on_token(ul_seq_t *q, int32_t tok, const ul_token_lp_t *lp) {
    sseq_t *c = (sseq_t *)q;
    cr_assert_eq(c->finished, 0, "a token after the finish");
    cr_assert_lt(c->n_out, MAXOUT);
    c->lp[c->n_out] = lp->logprob;
    c->top0[c->n_out] = lp->n_top > 0 ? lp->top_ids[0] : -1;
    c->out[c->n_out++] = tok;
    return c->stop_at && c->n_out == c->stop_at;
}

static void on_finish(ul_seq_t *q, ul_finish_t reason, int status) {
    sseq_t *c = (sseq_t *)q;
    seq_base_finish(&c->finished, &c->reason, reason, status);
}

/* ---- backends ------------------------------------------------------------------------ */

/* Null: a step costs 1 ms of virtual time plus token_us a token (1: proposals look cheap
 * to the planner; 300: a proposal must be right more often than not to pay). */
static ul_backend_t *null_cfg(uint64_t salt, int32_t n_vocab, int64_t token_us) {
    ul_null_config_t cfg = {.n_vocab = n_vocab,
                            .n_ctx = 128,
                            .page_size = PS,
                            .n_pages = POOL,
                            .delay_us = 1000,
                            .token_us = token_us,
                            .prefill_us = token_us,
                            .virtual_time = 1,
                            .salt = salt};
    ul_backend_t *b;
    cr_assert_eq(ul_null_backend_create(&cfg, &b), 0);
    return b;
}

/* 6 ids: n-gram proposals from the prompt are right about one time in six. */
static ul_backend_t *null_be(uint64_t salt) { return null_cfg(salt, 6, 1); }

/* 1000 ids: a draft with another salt is right one time in a thousand. */
static ul_backend_t *null_with_draft(uint64_t draft_salt, int64_t token_us) {
    ul_backend_t *sb;
    cr_assert_eq(ul_spec_backend_create(null_cfg(0, 1000, token_us),
                                        null_cfg(draft_salt, 1000, token_us), &sb),
                 0);
    return sb;
}

static ul_cpu_config_t cpu_cfg(void) {
    const ul_hparams_t *hp = &g_model->hp;
    ul_cpu_config_t cfg = {.n_threads = 2,
                           .kv_type = UL_TYPE_F32,
                           .page_size = PS,
                           .max_batch_tokens = 64,
                           .n_ctx = 128};
    cfg.kv_bytes =
        POOL * (int64_t)ul_kv_page_bytes(UL_TYPE_F32, hp->n_layer, hp->n_head_kv, hp->head_dim, PS);
    return cfg;
}

static ul_backend_t *cpu_be(void) {
    ul_cpu_config_t cfg = cpu_cfg();
    ul_backend_t *b;
    cr_assert_eq(ul_cpu_backend_create(g_model, &cfg, &b), 0);
    return b;
}

/* The model drafting for itself, on its target's threads. */
static ul_backend_t *cpu_self_draft(void) {
    ul_backend_t *t = cpu_be(), *d, *sb;
    ul_cpu_config_t cfg = cpu_cfg();
    cr_assert_eq(ul_cpu_backend_create_beside(g_model, &cfg, t, &d), 0);
    cr_assert_eq(ul_spec_backend_create(t, d, &sb), 0);
    return sb;
}

/* ---- driving ------------------------------------------------------------------------- */

typedef struct {
    int ngram;        /* cfg.spec_ngram */
    float temp;       /* sampling temperature */
    int n_logprobs;   /* per token */
    int stop_at;      /* sequence 1 stops itself at this many tokens */
    int cancel_after; /* steps after which sequence 0 is cancelled (0: never) */
    int eager;        /* cfg.spec_eager: proposals whatever the step-time model says */
} run_opts_t;

/* Prompt i: a short phrase repeated, so n-gram lookup finds continuations. */
static int32_t prompt(int i, int32_t *p, int32_t vocab) {
    static const int32_t phrase[] = {1, 2, 3, 4, 5, 2, 3};
    int32_t n = 0;
    p[n++] = 1;
    for (int r = 0; r < 3; r++)
        for (size_t k = 0; k < sizeof phrase / sizeof *phrase; k++)
            p[n++] = (phrase[k] + i + r * (k == 6)) % (vocab - 1);
    return n;
}

/* Between steps a sequence holds the pages of its tokens, no more (rejected positions'
 * pages went back), and its draft pages cover only what the draft holds plus the pages
 * handed out for the last proposals. */
static void check_pages(const ul_sched_t *s, const sseq_t *c) {
    for (int i = 0; i < NSEQ; i++) {
        const ul_seq_t *q = &c[i].seq;
        if (c[i].finished || q->state != UL_SEQ_RUNNING) continue;
        cr_assert_leq(q->n_pages, ul_kv_pages_for(&s->pool, q->n_tokens),
                      "seq %d holds %d pages for %d tokens", i, q->n_pages, q->n_tokens);
    }
}

/* Runs NSEQ sequences to the end; returns the scheduler's stats. */
static ul_sched_stats_t run(ul_backend_t *b, const run_opts_t *o, sseq_t *c, int32_t max_tokens) {
    ul_sched_t s;
    ul_sched_config_t cfg = {.max_batch_tokens = 64,
                             .itl_target_ms = -1,
                             .spec_ngram = o->ngram,
                             .spec_eager = o->eager};
    cr_assert_eq(ul_sched_init(&s, b, &cfg), 0);
    for (int i = 0; i < NSEQ; i++) {
        seq_base_init(&c[i].seq, sizeof c[i], max_tokens, on_token, on_finish);
        c[i].seq.sampling.temperature = o->temp;
        c[i].seq.sampling.seed = 7 + (uint64_t)i;
        c[i].seq.sampling.n_logprobs = o->n_logprobs;
        c[i].seq.ignore_eos = 1;
        c[i].stop_at = i == 1 ? o->stop_at : 0;
        int32_t p[64];
        int32_t n = prompt(i, p, b->n_vocab);
        cr_assert_eq(ul_sched_add(&s, &c[i].seq, p, n), 0);
    }
    for (int steps = 1;; steps++) {
        cr_assert_lt(steps, 10000, "scheduler does not converge");
        if (o->cancel_after && steps == o->cancel_after) ul_sched_cancel(&s, &c[0].seq);
        if (ul_sched_step_build(&s) == 0) break;
        int rc = ul_backend_run(s.backend, s.step);
        cr_assert_eq(rc, 0, "backend rejected step %d: %s", steps, ul_strerror(rc));
        s.now_ns += (uint64_t)(s.step->compute_us * 1e3);
        ul_sched_step_complete(&s);
        check_pages(&s, c);
    }
    for (int i = 0; i < NSEQ; i++) cr_assert(c[i].finished, "seq %d unfinished", i);
    cr_assert_eq(s.pool.n_free, s.pool.n_pages, "target pages not all back");
    cr_assert_eq(s.dpool.n_free, s.dpool.n_pages, "draft pages not all back");
    ul_sched_stats_t st = s.stats;
    ul_sched_free(&s);
    ul_backend_destroy(b);
    return st;
}

static void same_tokens(const sseq_t *c, const sseq_t *ref, int from, float lp_tol) {
    for (int i = from; i < NSEQ; i++) {
        cr_assert_eq(c[i].reason, ref[i].reason, "seq %d: finish %d, plain %d", i, c[i].reason,
                     ref[i].reason);
        cr_assert_eq(c[i].n_out, ref[i].n_out, "seq %d: %d tokens, plain %d", i, c[i].n_out,
                     ref[i].n_out);
        for (int k = 0; k < ref[i].n_out; k++) {
            cr_assert_eq(c[i].out[k], ref[i].out[k], "seq %d token %d: %d, plain %d", i, k,
                         c[i].out[k], ref[i].out[k]);
            cr_assert_eq(c[i].top0[k], ref[i].top0[k], "seq %d token %d: top candidate", i, k);
            cr_assert(fabsf(c[i].lp[k] - ref[i].lp[k]) <= lp_tol,
                      "seq %d token %d: logprob %g, plain %g", i, k, c[i].lp[k], ref[i].lp[k]);
        }
    }
}

/* ---- null backend -------------------------------------------------------------------- */

/* n-gram proposals, right one time in six: plain decoding's tokens, some accepted. */
Test(spec, null_ngram_same_tokens) {
    sseq_t ref[NSEQ], c[NSEQ];
    run_opts_t plain = {.n_logprobs = 2}, o = {.ngram = 3, .n_logprobs = 2};
    run(null_be(0), &plain, ref, 40);
    ul_sched_stats_t st = run(null_be(0), &o, c, 40);
    same_tokens(c, ref, 0, 0);
    cr_assert_gt(st.spec_verifications, 0, "nothing was proposed");
    cr_assert_gt(st.spec_accepted, 0);
    cr_assert_lt(st.spec_accepted, st.spec_proposed);
}

/* A draft that is always right: every proposal accepted, fewer steps, same tokens. */
Test(spec, null_draft_always_right) {
    sseq_t ref[NSEQ], c[NSEQ];
    run_opts_t o = {.n_logprobs = 1};
    ul_sched_stats_t st0 = run(null_cfg(0, 1000, 1), &o, ref, 40);
    ul_sched_stats_t st = run(null_with_draft(0, 1), &o, c, 40);
    same_tokens(c, ref, 0, 0);
    cr_assert_gt(st.spec_proposed, 0);
    cr_assert_eq(st.spec_accepted, st.spec_proposed, "a right draft was rejected");
    cr_assert_eq(st.spec_accept_hist[UL_SPEC_HIST_N - 1], st.spec_verifications);
    cr_assert_lt(st.steps * 2, st0.steps, "%llu steps, plain %llu", (unsigned long long)st.steps,
                 (unsigned long long)st0.steps);
}

/* A draft that is (almost) never right, where a verified token costs a third of a step:
 * same tokens, and the sequences back off to probes. */
Test(spec, null_draft_never_right_backs_off) {
    sseq_t ref[NSEQ], c[NSEQ];
    run_opts_t o = {0};
    run(null_cfg(0, 1000, 300), &o, ref, 48);
    ul_sched_stats_t st = run(null_with_draft(99, 300), &o, c, 48);
    same_tokens(c, ref, 0, 0);
    cr_assert_gt(st.spec_proposed, 0);
    /* from the prior's 6 a step down to probes of one every 16 decode steps */
    cr_assert_lt(st.spec_proposed, 3 * 48, "no back-off: %llu proposals",
                 (unsigned long long)st.spec_proposed);
}

/* A stop asked at the 5th token, and a cancel, in the middle of multi-token steps. */
Test(spec, null_stop_and_cancel_mid_step) {
    sseq_t ref[NSEQ], c[NSEQ];
    run_opts_t o = {.stop_at = 5, .cancel_after = 6, .eager = 1};
    run(null_cfg(0, 1000, 1), &o, ref, 40);
    ul_sched_stats_t st = run(null_with_draft(0, 1), &o, c, 40);
    cr_assert_eq(c[0].reason, UL_FINISH_CANCELLED);
    cr_assert_eq(c[1].reason, UL_FINISH_STOP);
    cr_assert_eq(c[1].n_out, 5, "tokens after the stop were delivered");
    same_tokens(c, ref, 1, 0);
    cr_assert_gt(st.spec_accepted, 0);
}

/* Sampling with a draft that is always right (q one-hot at the target's token): seeded
 * draws reproduce, and every proposal is accepted. */
Test(spec, null_sampled_reproducible) {
    sseq_t a[NSEQ], c[NSEQ];
    run_opts_t o = {.temp = 0.8f};
    ul_sched_stats_t st = run(null_with_draft(0, 1), &o, a, 40);
    run(null_with_draft(0, 1), &o, c, 40);
    same_tokens(c, a, 0, 0);
    cr_assert_eq(st.spec_accepted, st.spec_proposed);
}

/* ---- cpu backend, every shared golden model ------------------------------------------ */

static const char *const g_models[] = {"aidreams260K", "aidreams260K-f16", "mini-f16",
                                       "mini-q4_0",    "mini-q8_0",        "mini-q4_k_m",
                                       "tiny-bpe-f16", "qwen2-tiny-f16",   "qwen3-tiny-f16"};

/* Greedy, with logprobs: plain, n-gram and self-draft give the same tokens and top
 * candidates (logprobs to rounding: verification computes several rows of a sequence in
 * one matrix product, plain decoding one). Eager: on real time the planner's choices
 * follow the host's speed; here every decoder proposes whenever it can. */
static void cpu_case(const char *name) {
    load_model(name);
    sseq_t ref[NSEQ], c[NSEQ];
    run_opts_t plain = {.n_logprobs = 2, .stop_at = 9, .eager = 1}, ng = plain, dr = plain;
    ng.ngram = 3;
    run(cpu_be(), &plain, ref, 24);
    ul_sched_stats_t st = run(cpu_be(), &ng, c, 24);
    same_tokens(c, ref, 0, 1e-3f);
    cr_assert_gt(st.spec_verifications, 0, "%s: nothing proposed by n-gram", name);
    st = run(cpu_self_draft(), &dr, c, 24);
    same_tokens(c, ref, 0, 1e-3f);
    cr_assert_gt(st.spec_proposed, 0, "%s: nothing drafted", name);
    cr_assert_gt(st.spec_accepted, 0, "%s: the model refused its own proposals", name);
    cr_log_info("%s: self-draft accepted %llu of %llu", name, (unsigned long long)st.spec_accepted,
                (unsigned long long)st.spec_proposed);
    free_model();
}

Test(spec, cpu_greedy_same_tokens_every_golden_model, .fini = free_model, .timeout = 600) {
    for (size_t i = 0; i < sizeof g_models / sizeof *g_models; i++) cpu_case(g_models[i]);
}
