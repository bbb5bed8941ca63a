/* n choices of one prompt sharing its KV pages (ul_sched_add_shared): the choices produce
 * exactly the tokens of independent sequences, hold the prompt's full pages once, survive
 * the cancel of the sequence they share from and preemption in a tiny pool, and give every
 * page back. Run on the null backend (whose KV bookkeeping fails a step that reads a page
 * holding the wrong tokens) and on the CPU backend with aidreams260K (a wrong or missing
 * shared page changes the logits, so the tokens). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sampling.h"
#include "model/model.h"
#include "sched/driver.h"
#include "sched/sched.h"
#include "uvllm/err.h"

#include "cpu_fixture.h"
#include "steps.h"

#include "seqbase.h"

#define PS 4       /* tokens per page */
#define NP 10      /* prompt: 2 full pages before its last token are shareable */
#define MAXTOK 12  /* each choice alone: 22 tokens, 6 pages */
#define NCH 3      /* choices */
#define BIGPOOL 64 /* no pressure */

typedef struct {
    ul_seq_t seq;
    int32_t out[64];
    int n_out;
    int finished;
    ul_finish_t reason;
    int shared_seen; /* on_token ran while it held shared pages */
} cseq_t;

static int on_token(ul_seq_t *q, int32_t tok, const ul_token_lp_t *lp) {
    cseq_t *c = (cseq_t *)q;
    (void)lp;
    cr_assert_eq(c->finished, 0);
    cr_assert_lt(c->n_out, 64);
    c->out[c->n_out++] = tok;
    c->shared_seen |= q->n_shared > 0;
    return 0;
}

static void on_finish(ul_seq_t *q, ul_finish_t reason, int status) {
    cseq_t *c = (cseq_t *)q;
    seq_base_finish(&c->finished, &c->reason, reason, status);
}

/* ---- backends ---------------------------------------------------------------------- */

static ul_backend_t *null_backend(int32_t n_pages) {
    ul_backend_t *b;
    ul_null_config_t cfg = {.n_vocab = 1000, .n_ctx = 64, .page_size = PS, .n_pages = n_pages};
    cr_assert_eq(ul_null_backend_create(&cfg, &b), 0);
    return b;
}

static ul_backend_t *cpu_backend(int32_t n_pages) { return aidreams_backend(n_pages, PS, 64); }

typedef ul_backend_t *(*mk_backend_t)(int32_t n_pages);

/* 64: the cpu scratch's size. No latency target: the steps below are asserted token by
 * token, and on the cpu backend the target's chunk sizes and first-token hold follow the
 * machine's speed (test_budget.c tests them). */
static const ul_sched_config_t g_cfg = {.max_batch_tokens = 64, .itl_target_ms = -1};

/* ---- driving --------------------------------------------------------------------------- */

static void prompt(int32_t *p) {
    p[0] = 1;
    for (int k = 1; k < NP; k++) p[k] = 2 + (k * 37) % 300;
}

/* Choice i: its own seed; temperature 0 (greedy) or 0.9 (seeded draws). */
static void init_choices(cseq_t *c, float temperature) {
    for (int i = 0; i < NCH; i++) {
        seq_base_init(&c[i].seq, sizeof c[i], MAXTOK, on_token, on_finish);
        c[i].seq.sampling.temperature = temperature;
        c[i].seq.sampling.seed = 11 + (uint64_t)i;
        c[i].seq.ignore_eos = 1; /* every choice runs to MAXTOK, eos or not */
    }
}

static void add_choices(ul_sched_t *s, cseq_t *c, int shared) {
    int32_t p[NP];
    prompt(p);
    for (int i = 0; i < NCH; i++)
        cr_assert_eq(ul_sched_add_shared(s, &c[i].seq, p, NP, shared && i ? &c[0].seq : NULL), 0);
}

/* The scheduler (g_cfg) on backend b, stepped by hand; returns b. */
static ul_backend_t *open_sched(ul_sched_t *s, ul_backend_t *b) {
    cr_assert_eq(ul_sched_init(s, b, &g_cfg), 0);
    return b;
}

/* Every page is back in the pool; frees the scheduler and the backend. */
static void close_sched(ul_sched_t *s, ul_backend_t *b) {
    cr_assert_eq(s->pool.n_free, s->pool.n_pages, "every page back");
    ul_sched_free(s);
    ul_backend_destroy(b);
}

/* The tokens of NCH independent sequences with the same prompt and seeds. */
static void reference(mk_backend_t mk, float temperature, cseq_t *ref) {
    ul_sched_t s;
    ul_backend_t *b = open_sched(&s, mk(BIGPOOL));
    init_choices(ref, temperature);
    add_choices(&s, ref, 0);
    run_all(&s);
    for (int i = 0; i < NCH; i++) cr_assert_eq(ref[i].n_out, MAXTOK);
    close_sched(&s, b);
}

static void same_as(const cseq_t *c, const cseq_t *ref, int from) {
    for (int i = from; i < NCH; i++) {
        cr_assert(c[i].finished);
        cr_assert_eq(c[i].reason, UL_FINISH_LENGTH);
        cr_assert_eq(c[i].n_out, ref[i].n_out, "choice %d: %d tokens", i, c[i].n_out);
        cr_assert_arr_eq(c[i].out, ref[i].out, sizeof(int32_t) * (size_t)ref[i].n_out,
                         "choice %d differs from its independent twin", i);
    }
}

static int32_t pages_used(const ul_sched_t *s) { return s->pool.n_pages - s->pool.n_free; }

/* ---- the scenarios ------------------------------------------------------------------- */

/* The reference tokens of NCH choices, then the scheduler on mk(n_pages) with the NCH
 * choices added sharing the first one's prompt. */
static ul_backend_t *start_shared(mk_backend_t mk, float temperature, int32_t n_pages, cseq_t *ref,
                                  cseq_t *c, ul_sched_t *s) {
    reference(mk, temperature, ref);
    ul_backend_t *b = open_sched(s, mk(n_pages));
    init_choices(c, temperature);
    add_choices(s, c, 1);
    return b;
}

/* Runs them to the end: the same tokens as the reference (from choice `from` on), every
 * page back. */
static void end_shared(ul_sched_t *s, ul_backend_t *b, const cseq_t *c, const cseq_t *ref,
                       int from) {
    run_all(s);
    same_as(c, ref, from);
    close_sched(s, b);
}

/* The choices wait for the first to compute the prompt, then take its 2 full pages and
 * prefill only their last 2 tokens; while all run the pool holds the prompt pages once. */
static void shares_and_matches(mk_backend_t mk, float temperature) {
    cseq_t ref[NCH], c[NCH];
    ul_sched_t s;
    ul_backend_t *b = start_shared(mk, temperature, BIGPOOL, ref, c, &s);
    cr_assert_eq(one_step(&s), 1, "the sharers wait for the prompt");
    cr_assert_eq(s.step->n_tokens, NP);
    cr_assert_eq(one_step(&s), 3);
    for (int i = 1; i < NCH; i++) {
        const ul_step_seq_t *ss = &s.step->seqs[i];
        cr_assert_eq(ss->seq_id, c[i].seq.id);
        cr_assert_eq(ss->pos0, 2 * PS, "choice %d recomputed the shared prompt", i);
        cr_assert_eq(ss->n_tokens, NP - 2 * PS);
        cr_assert_eq(c[i].seq.n_shared, 2);
        cr_assert_eq(c[i].seq.pages[0], c[0].seq.pages[0]);
        cr_assert_eq(c[i].seq.pages[1], c[0].seq.pages[1]);
        cr_assert_neq(c[i].seq.pages[2], c[0].seq.pages[2]);
    }
    cr_assert_eq(s.pool.refs[c[0].seq.pages[0]], NCH);
    for (int k = 0; k < 5; k++) {
        cr_assert_eq(one_step(&s), NCH);
        int32_t tails = 0;
        for (int i = 0; i < NCH; i++) tails += c[i].seq.n_pages - 2;
        cr_assert_eq(pages_used(&s), 2 + tails, "prompt pages once plus each choice's tail");
    }
    end_shared(&s, b, c, ref, 0);
}

/* The sequence shared from goes away while the others decode: its references go, the
 * shared pages stay for the others, and everything is free at the end. */
static void cancel_the_first(mk_backend_t mk) {
    cseq_t ref[NCH], c[NCH];
    ul_sched_t s;
    ul_backend_t *b = start_shared(mk, 0.9f, BIGPOOL, ref, c, &s);
    for (int k = 0; k < 3; k++) one_step(&s);
    int32_t shared0 = c[1].seq.pages[0];
    cr_assert_eq(s.pool.refs[shared0], NCH);
    int32_t used = pages_used(&s), own0 = c[0].seq.n_pages - 2;
    ul_sched_cancel(&s, &c[0].seq);
    cr_assert_eq(one_step(&s), NCH - 1);
    cr_assert(c[0].finished);
    cr_assert_eq(c[0].reason, UL_FINISH_CANCELLED);
    cr_assert_eq(s.pool.refs[shared0], NCH - 1);
    cr_assert_leq(pages_used(&s), used - own0 + NCH - 1, "only the first's own pages freed");
    end_shared(&s, b, c, ref, 1);
}

/* 7 pages for choices that need 6 each alone: preemption, recompute, same tokens. */
static void tiny_pool(mk_backend_t mk) {
    cseq_t ref[NCH], c[NCH];
    ul_sched_t s;
    ul_backend_t *b = start_shared(mk, 0.9f, 7, ref, c, &s);
    run_all(&s);
    cr_assert_gt(s.stats.preemptions, 0, "7 pages for 3 x 6 must preempt");
    end_shared(&s, b, c, ref, 0);
}

Test(share, null_choices_match_independent_sequences) { shares_and_matches(null_backend, 0); }
Test(share, null_cancel_the_first_while_others_run) { cancel_the_first(null_backend); }
Test(share, null_tiny_pool_preempts_and_completes) { tiny_pool(null_backend); }

Test(share, cpu_greedy_choices_match_independent_sequences, .fini = free_model) {
    shares_and_matches(cpu_backend, 0);
}
Test(share, cpu_sampled_choices_match_independent_sequences, .fini = free_model) {
    shares_and_matches(cpu_backend, 0.9f);
}
Test(share, cpu_cancel_the_first_while_others_run, .fini = free_model) {
    cancel_the_first(cpu_backend);
}
Test(share, cpu_tiny_pool_preempts_and_completes, .fini = free_model) { tiny_pool(cpu_backend); }

/* share_with gone before the prompt was computed: the choice computes it on its own. */
Test(share, first_cancelled_before_its_prompt_the_others_go_alone) {
    cseq_t ref[NCH], c[NCH];
    reference(null_backend, 0, ref);
    ul_sched_t s;
    ul_backend_t *b = open_sched(&s, null_backend(BIGPOOL));
    init_choices(c, 0);
    add_choices(&s, c, 1);
    cr_assert_eq(c[0].seq.n_sharers, NCH - 1);
    ul_sched_cancel(&s, &c[0].seq);
    cr_assert_eq(one_step(&s), NCH - 1);
    cr_assert_eq(s.step->seqs[0].n_tokens, NP, "computes the whole prompt");
    cr_assert_null(c[1].seq.share_with);
    end_shared(&s, b, c, ref, 1);
}

/* A prompt shorter than two pages has no full page before its last token: nothing to
 * wait for, nothing shared. */
Test(share, short_prompt_shares_nothing) {
    ul_sched_t s;
    ul_backend_t *b = open_sched(&s, null_backend(BIGPOOL));
    cseq_t c[NCH];
    init_choices(c, 0);
    int32_t p[PS] = {1, 2, 3, 4};
    cr_assert_eq(ul_sched_add(&s, &c[0].seq, p, PS), 0);
    cr_assert_eq(ul_sched_add_shared(&s, &c[1].seq, p, PS, &c[0].seq), 0);
    cr_assert_eq(one_step(&s), 2, "no page to wait for");
    cr_assert_eq(c[1].seq.n_shared, 0);
    run_all(&s);
    close_sched(&s, b);
}

Test(share, add_shared_validates) {
    ul_sched_t s;
    ul_backend_t *b = open_sched(&s, null_backend(BIGPOOL));
    cseq_t c[NCH];
    init_choices(c, 0);
    int32_t p[NP];
    prompt(p);
    cr_assert_eq(ul_sched_add_shared(&s, &c[1].seq, p, NP, &c[0].seq), UL_EINVAL, "never added");
    cr_assert_eq(ul_sched_add(&s, &c[0].seq, p, NP), 0);
    cr_assert_eq(ul_sched_add_shared(&s, &c[0].seq, p, NP, &c[0].seq), UL_EINVAL);
    cr_assert_eq(ul_sched_add_shared(&s, &c[1].seq, p, NP - 1, &c[0].seq), UL_EINVAL);
    p[3]++;
    cr_assert_eq(ul_sched_add_shared(&s, &c[1].seq, p, NP, &c[0].seq), UL_EINVAL, "other prompt");
    p[3]--;
    cr_assert_eq(ul_sched_add_shared(&s, &c[1].seq, p, NP, &c[0].seq), 0);
    run_all(&s);
    cr_assert(c[0].finished && c[1].finished);
    close_sched(&s, b);
}

/* Through the loop driver (double buffered, asynchronous null backend): same tokens. */
static int g_left;
static void finish_and_count(ul_seq_t *q, ul_finish_t reason, int status) {
    on_finish(q, reason, status);
    g_left--;
}
static void on_closed(ul_driver_t *d) { *(int *)d->data = 1; }

Test(share, loop_driver_choices_match_independent_sequences) {
    cseq_t ref[NCH], c[NCH];
    reference(null_backend, 0, ref);
    uv_loop_t loop;
    cr_assert_eq(uv_loop_init(&loop), 0);
    ul_backend_t *b;
    ul_null_config_t cfg = {
        .delay_us = 500, .n_vocab = 1000, .n_ctx = 64, .page_size = PS, .n_pages = BIGPOOL};
    cr_assert_eq(ul_null_backend_create(&cfg, &b), 0);
    ul_sched_t s;
    cr_assert_eq(ul_sched_init(&s, b, &g_cfg), 0);
    ul_driver_t d;
    cr_assert_eq(ul_driver_init(&loop, &d, &s), 0);
    init_choices(c, 0);
    for (int i = 0; i < NCH; i++) c[i].seq.on_finish = finish_and_count;
    g_left = NCH;
    add_choices(&s, c, 1);
    while (g_left > 0) uv_run(&loop, UV_RUN_ONCE);
    same_as(c, ref, 0);
    cr_assert_eq(c[1].seq.n_pages, 0);
    cr_assert_eq(s.pool.n_free, BIGPOOL);
    int closed = 0;
    d.data = &closed;
    ul_driver_close(&d, on_closed);
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_assert(closed);
    ul_sched_free(&s);
    ul_backend_destroy(b);
    cr_assert_eq(uv_loop_close(&loop), 0);
}

/* Many requests of 1..3 choices, prompts of 1..20 tokens, a pool far too small, cancels
 * from callbacks, the driver's order (absorb, build, deliver): every sequence finishes
 * once, every delivered token is the one its independent twin gets, every page comes
 * back. The scheduler's own asserts (one holder per written page, no double release)
 * watch throughout. */
#define NREQ 12
static ul_sched_t *g_s;
static int cancel_some(ul_seq_t *q, int32_t tok, const ul_token_lp_t *lp) {
    on_token(q, tok, lp);
    if (q->id % 5 == 0 && ((cseq_t *)q)->n_out == 3) ul_sched_cancel(g_s, q);
    return 0;
}

static void add_requests(ul_sched_t *s, cseq_t *c, int shared, int with_cancels) {
    uint64_t r[2];
    ul_sampling_rng_seed(3, r);
    int k = 0;
    for (int i = 0; i < NREQ; i++) {
        int n = 1 + (int)(ul_sampling_rng_uniform(r) * 3),
            np = 1 + (int)(ul_sampling_rng_uniform(r) * 20);
        int32_t p[32];
        for (int j = 0; j < np; j++) p[j] = 1 + (i * 31 + j * 7) % 900;
        for (int j = 0; j < n; j++, k++) {
            seq_base_init(&c[k].seq, sizeof c[k], 4 + (k % 9),
                          with_cancels ? cancel_some : on_token, on_finish);
            ul_seq_t *w = shared && j ? &c[k - j].seq : NULL;
            cr_assert_eq(ul_sched_add_shared(s, &c[k].seq, p, np, w), 0);
        }
    }
    c[k].seq.max_tokens = 0; /* end mark */
}

static void run_overlapped(ul_sched_t *s) {
    int steps = 0, n = ul_sched_step_build(s);
    while (n > 0) {
        cr_assert_lt(++steps, 100000, "scheduler does not converge");
        cr_assert_eq(ul_backend_run(s->backend, s->step), 0, "backend rejected the step");
        ul_sched_step_absorb(s);
        n = ul_sched_step_build(s);
        ul_sched_step_deliver(s);
        if (n == 0) n = ul_sched_step_build(s);
    }
}

Test(share, mixed_requests_tiny_pool_cancels_overlapped) {
    static cseq_t ref[3 * NREQ + 1], c[3 * NREQ + 1];
    ul_sched_t s;
    ul_backend_t *b = open_sched(&s, null_backend(BIGPOOL));
    add_requests(&s, ref, 0, 0);
    run_all(&s);
    ul_sched_free(&s);
    ul_backend_destroy(b);

    b = null_backend(9); /* a 20-token prompt and 12 tokens need 8 pages alone */
    cr_assert_eq(ul_sched_init(&s, b, &(ul_sched_config_t){.max_batch_tokens = 16}), 0);
    g_s = &s;
    add_requests(&s, c, 1, 1);
    run_overlapped(&s);
    int n_shared = 0;
    for (int k = 0; c[k].seq.max_tokens; k++) {
        cr_assert(c[k].finished, "seq %d", k);
        n_shared += c[k].shared_seen;
        cr_assert_leq(c[k].n_out, ref[k].n_out);
        cr_assert_arr_eq(c[k].out, ref[k].out, sizeof(int32_t) * (size_t)c[k].n_out, "seq %d", k);
        if (c[k].seq.id % 5 == 0 && ref[k].n_out > 3)
            cr_assert_eq(c[k].reason, UL_FINISH_CANCELLED);
        else
            cr_assert_eq(c[k].n_out, ref[k].n_out, "seq %d", k);
    }
    cr_assert_gt(n_shared, 0, "some choices shared their prompt");
    cr_assert_gt(s.stats.preemptions, 0);
    cr_assert_eq(s.pool.n_free, 9, "every page back");
    ul_sched_free(&s);
    ul_backend_destroy(b);
}
