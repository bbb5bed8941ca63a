/* Double buffering: step N's callbacks run after step N+1 was built and submitted. These
 * tests drive the scheduler the way the loop driver does (absorb N, build N+1, deliver N,
 * then compute N+1) with the null backend's synchronous run(), and check what a client
 * would notice: the same tokens as one step at a time, no token after a stop or a cancel,
 * on_finish exactly once, every KV page back; and on a real loop (the driver), that
 * callbacks do run while the next step is in flight (an order, not a time: the same on a
 * loaded host). Output pacing is the api's (tests/unit/api/test_pace.c). */
#include <criterion/criterion.h>
#include <string.h>

#include "sched/driver.h"
#include "sched/sched.h"
#include "uvllm/err.h"

typedef struct {
    ul_seq_t seq;
    ul_sched_t *s;
    int32_t out[256];
    int n_out;
    int finished;
    ul_finish_t reason;
    int stop_after;        /* on_token returns 1 at this many tokens (0 = never) */
    int cancel_after;      /* on_token cancels the sequence at this many tokens */
    int pause_after;       /* on_token pauses the sequence at this many tokens */
    int in_step_at_stop;   /* the sequence was in the step in flight when it asked to stop */
    int busy_at[256];      /* a step in flight when on_token ran for each token */
    int tokens_at_finish;  /* n_out when on_finish ran */
    ul_token_lp_t lp[256]; /* what on_token was given with each token */
} oseq_t;

static int on_token(ul_seq_t *q, int32_t tok, const ul_token_lp_t *lp) {
    oseq_t *t = (oseq_t *)q;
    cr_assert_eq(t->finished, 0, "on_token after on_finish");
    cr_assert_lt(t->n_out, 256);
    cr_assert_not_null(lp);
    t->lp[t->n_out] = *lp;
    t->busy_at[t->n_out] = ul_sched_in_flight(t->s) > 0;
    t->out[t->n_out++] = tok;
    if (t->cancel_after && t->n_out == t->cancel_after) ul_sched_cancel(t->s, q);
    if (t->pause_after && t->n_out == t->pause_after) ul_sched_set_paused(t->s, q, 1);
    if (t->stop_after && t->n_out == t->stop_after) {
        t->in_step_at_stop = q->in_step;
        return 1;
    }
    return 0;
}

static void on_finish(ul_seq_t *q, ul_finish_t reason, int status) {
    oseq_t *t = (oseq_t *)q;
    cr_assert_eq(t->finished, 0, "on_finish twice");
    cr_assert_eq(status, 0);
    t->finished = 1;
    t->reason = reason;
    t->tokens_at_finish = t->n_out;
}

static void oseq_init(oseq_t *t, ul_sched_t *s, int32_t max_tokens) {
    memset(t, 0, sizeof *t);
    t->s = s;
    t->seq.max_tokens = max_tokens;
    ul_sampling_default(&t->seq.sampling);
    t->seq.on_token = on_token;
    t->seq.on_finish = on_finish;
}

static void add(ul_sched_t *s, oseq_t *t, int32_t n_prompt) {
    int32_t p[64];
    for (int32_t i = 0; i < n_prompt; i++) p[i] = 7 + i;
    cr_assert_eq(ul_sched_add(s, &t->seq, p, n_prompt), 0);
}

static ul_backend_t *null_backend(int32_t n_pages, int32_t eos_every) {
    ul_backend_t *b;
    ul_null_config_t cfg = {
        .n_vocab = 1000, .n_ctx = 256, .page_size = 4, .n_pages = n_pages, .eos_every = eos_every};
    cr_assert_eq(ul_null_backend_create(&cfg, &b), 0);
    return b;
}

/* Computes the built step (in flight from its build to its absorb, as in the driver). */
static void compute(ul_sched_t *s) {
    cr_assert_eq(ul_backend_run(s->backend, s->step), 0, "backend rejected the step");
}

/* The driver's order: absorb N, build N+1 (in flight), deliver N, compute N+1. */
static int run_overlapped(ul_sched_t *s) {
    int steps = 0;
    int n = ul_sched_step_build(s);
    while (n > 0) {
        cr_assert_lt(++steps, 10000, "scheduler does not converge");
        compute(s);
        ul_sched_step_absorb(s);
        n = ul_sched_step_build(s);
        ul_sched_step_deliver(s);
        if (n == 0) n = ul_sched_step_build(s);
    }
    return steps;
}

static int run_sequential(ul_sched_t *s) {
    int steps = 0, n;
    while ((n = ul_sched_step_build(s)) > 0) {
        cr_assert_lt(++steps, 10000, "scheduler does not converge");
        compute(s);
        ul_sched_step_complete(s);
    }
    return steps;
}

static int in_step(const ul_sched_t *s, const oseq_t *t) {
    for (int32_t i = 0; i < s->step->n_seqs; i++)
        if (s->step->seqs[i].seq_id == t->seq.id) return 1;
    return 0;
}

/* Same tokens, same finish reasons, with and without overlap, under page pressure that
 * forces preemption and with end-of-generation tokens. */
Test(overlap, same_output_as_one_step_at_a_time) {
    for (int pool = 0; pool < 2; pool++) {
        oseq_t ref[4], t[4];
        for (int mode = 0; mode < 2; mode++) {
            ul_backend_t *b = null_backend(pool ? 7 : 256, 11);
            ul_sched_t s;
            cr_assert_eq(ul_sched_init(&s, b, &(ul_sched_config_t){.max_batch_tokens = 16}), 0);
            oseq_t *v = mode ? t : ref;
            for (int i = 0; i < 4; i++) {
                oseq_init(&v[i], &s, i == 3 ? 3 : 14);
                add(&s, &v[i], 3 + i);
            }
            if (mode)
                run_overlapped(&s);
            else
                run_sequential(&s);
            for (int i = 0; i < 4; i++) cr_assert(v[i].finished);
            if (pool) cr_assert_gt(s.stats.preemptions, 0, "a 28-token pool must preempt");
            cr_assert_eq(s.pool.n_free, s.pool.n_pages, "every page back in the pool");
            cr_assert_eq(ul_sched_n_active(&s), 0);
            ul_sched_free(&s);
            ul_backend_destroy(b);
        }
        for (int i = 0; i < 4; i++) {
            cr_assert_eq(t[i].n_out, ref[i].n_out, "seq %d: %d vs %d tokens", i, t[i].n_out,
                         ref[i].n_out);
            cr_assert_arr_eq(t[i].out, ref[i].out, (size_t)ref[i].n_out * sizeof(int32_t));
            cr_assert_eq(t[i].reason, ref[i].reason);
        }
        /* eos every 11 positions: the 14-token sequences end on eos, the 3-token one on
         * its length */
        cr_assert_eq(ref[0].reason, UL_FINISH_STOP);
        cr_assert_eq(ref[3].reason, UL_FINISH_LENGTH);
    }
}

/* The logprobs handed to on_token are those of the token delivered, although the step that
 * sampled it has been overwritten by the next one when callbacks run: the null backend
 * heads its top list with the sampled token at logprob 0, the next ids at -10 per rank.
 * Sequences that asked for no candidates get none. */
Test(overlap, logprobs_belong_to_the_token_delivered) {
    ul_backend_t *b = null_backend(256, 0);
    ul_sched_t s;
    cr_assert_eq(ul_sched_init(&s, b, &(ul_sched_config_t){.max_batch_tokens = 16}), 0);
    oseq_t t[3];
    for (int i = 0; i < 3; i++) {
        oseq_init(&t[i], &s, 12);
        t[i].seq.sampling.n_logprobs = i == 1 ? 0 : (i == 0 ? 3 : UL_MAX_LOGPROBS);
        add(&s, &t[i], 2 + i);
    }
    run_overlapped(&s);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(t[i].n_out, 12);
        for (int k = 0; k < t[i].n_out; k++) {
            const ul_token_lp_t *lp = &t[i].lp[k];
            cr_assert_eq(lp->logprob, 0.0f);
            cr_assert_eq(lp->n_top, t[i].seq.sampling.n_logprobs, "seq %d token %d", i, k);
            for (int j = 0; j < lp->n_top; j++) {
                cr_assert_eq(lp->top_ids[j], (t[i].out[k] + j) % 1000,
                             "seq %d token %d: candidate %d is another step's", i, k, j);
                cr_assert_eq(lp->top_logprobs[j], -10.0f * (float)j);
            }
        }
    }
    ul_sched_free(&s);
    ul_backend_destroy(b);
}

Test(overlap, stop_while_the_next_step_is_in_flight_drops_its_token) {
    ul_backend_t *b = null_backend(64, 0);
    ul_sched_t s;
    cr_assert_eq(ul_sched_init(&s, b, NULL), 0);
    oseq_t a, other;
    oseq_init(&a, &s, 50);
    oseq_init(&other, &s, 6);
    a.stop_after = 3;
    add(&s, &a, 4);
    add(&s, &other, 4);
    run_overlapped(&s);
    cr_assert(a.in_step_at_stop, "the stop came while the next step held the sequence");
    cr_assert(a.finished);
    cr_assert_eq(a.reason, UL_FINISH_STOP);
    cr_assert_eq(a.n_out, 3, "no token after the stop");
    cr_assert_eq(other.n_out, 6);
    cr_assert_eq(s.stats.tokens_generated, 3 + 6, "the dropped token is not counted");
    cr_assert_eq(s.pool.n_free, 64);
    cr_assert_eq(ul_sched_n_active(&s), 0);
    ul_sched_free(&s);
    ul_backend_destroy(b);
}

Test(overlap, cancel_from_a_callback_while_in_flight) {
    ul_backend_t *b = null_backend(64, 0);
    ul_sched_t s;
    cr_assert_eq(ul_sched_init(&s, b, NULL), 0);
    oseq_t a, other;
    oseq_init(&a, &s, 50);
    oseq_init(&other, &s, 8);
    a.cancel_after = 2; /* e.g. its client's write failed */
    add(&s, &a, 4);
    add(&s, &other, 4);
    run_overlapped(&s);
    cr_assert(a.finished);
    cr_assert_eq(a.reason, UL_FINISH_CANCELLED);
    cr_assert_eq(a.n_out, 2, "no token after the cancel");
    cr_assert_eq(other.n_out, 8);
    cr_assert_eq(s.pool.n_free, 64);
    cr_assert_eq(ul_sched_n_active(&s), 0);
    ul_sched_free(&s);
    ul_backend_destroy(b);
}

/* max_tokens needs no callback: the step built right after absorbing the last token does
 * not contain the sequence, and its pages are free for that step already. */
Test(overlap, length_is_decided_before_the_next_step) {
    ul_backend_t *b = null_backend(64, 0);
    ul_sched_t s;
    cr_assert_eq(ul_sched_init(&s, b, NULL), 0);
    oseq_t a, c;
    oseq_init(&a, &s, 2);
    oseq_init(&c, &s, 10);
    add(&s, &a, 4); /* 1 page; its 2nd token would need no new page */
    add(&s, &c, 4);
    cr_assert_eq(ul_sched_step_build(&s), 2);
    compute(&s);
    ul_sched_step_absorb(&s);
    cr_assert_eq(ul_sched_step_build(&s), 2);
    ul_sched_step_deliver(&s);
    cr_assert_eq(a.n_out, 1);
    compute(&s);
    ul_sched_step_absorb(&s);
    int32_t free_before = s.pool.n_free;
    cr_assert_eq(ul_sched_step_build(&s), 1);
    cr_assert_not(in_step(&s, &a), "a finished sequence is not stepped again");
    cr_assert(in_step(&s, &c));
    cr_assert_eq(free_before, 64 - 2, "its page was released before the build");
    cr_assert_eq(a.finished, 0, "on_finish waits for deliver");
    ul_sched_step_deliver(&s);
    cr_assert(a.finished);
    cr_assert_eq(a.reason, UL_FINISH_LENGTH);
    cr_assert_eq(a.tokens_at_finish, 2, "the last token's on_token before on_finish");
    compute(&s);
    ul_sched_step_complete(&s);
    run_overlapped(&s);
    cr_assert_eq(c.n_out, 10);
    ul_sched_free(&s);
    ul_backend_destroy(b);
}

/* Backpressure: pausing from on_token lets the step in flight finish (one more token),
 * then the sequence gets no step until it is resumed. */
Test(overlap, pause_from_a_callback_takes_effect_after_the_step_in_flight) {
    ul_backend_t *b = null_backend(64, 0);
    ul_sched_t s;
    cr_assert_eq(ul_sched_init(&s, b, NULL), 0);
    oseq_t a, other;
    oseq_init(&a, &s, 12);
    oseq_init(&other, &s, 8);
    a.pause_after = 3;
    add(&s, &a, 2);
    add(&s, &other, 2);
    run_overlapped(&s);
    cr_assert(other.finished);
    cr_assert_not(a.finished);
    cr_assert_eq(a.n_out, 4, "the token of the step in flight, then nothing");
    ul_sched_set_paused(&s, &a.seq, 0);
    run_overlapped(&s);
    cr_assert(a.finished);
    cr_assert_eq(a.n_out, 12);
    cr_assert_eq(s.pool.n_free, 64);
    ul_sched_free(&s);
    ul_backend_destroy(b);
}

/* ---- the loop driver ------------------------------------------------------------------ */

static int g_finished;
static void count_finish(ul_seq_t *q, ul_finish_t reason, int status) {
    on_finish(q, reason, status);
    g_finished++;
}
static void on_closed(ul_driver_t *d) { *(int *)d->data = 1; }

Test(overlap, driver_runs_callbacks_while_the_next_step_computes) {
    uv_loop_t loop;
    cr_assert_eq(uv_loop_init(&loop), 0);
    ul_backend_t *b;
    ul_null_config_t cfg = {.delay_us = 2000, .n_vocab = 1000, .page_size = 4, .n_pages = 256};
    cr_assert_eq(ul_null_backend_create(&cfg, &b), 0);
    ul_sched_t s;
    cr_assert_eq(ul_sched_init(&s, b, NULL), 0);
    ul_driver_t d;
    cr_assert_eq(ul_driver_init(&loop, &d, &s), 0);
    static oseq_t t[8];
    g_finished = 0;
    for (int i = 0; i < 8; i++) {
        oseq_init(&t[i], &s, 10);
        t[i].seq.on_finish = count_finish;
        if (i == 1) t[i].stop_after = 4;
        if (i == 2) t[i].cancel_after = 5;
        add(&s, &t[i], 3);
    }
    while (g_finished < 8) uv_run(&loop, UV_RUN_ONCE);
    for (int i = 0; i < 8; i++) {
        int want = i == 1 ? 4 : i == 2 ? 5 : 10;
        cr_assert_eq(t[i].n_out, want, "seq %d: %d tokens", i, t[i].n_out);
        /* Every token but a sequence's last is followed by another step of it, submitted
         * before the token's callback ran. */
        for (int k = 0; k + 1 < t[i].n_out; k++)
            cr_assert_eq(t[i].busy_at[k], 1, "seq %d token %d: callback ran with no step in flight",
                         i, k);
    }
    cr_assert_eq(t[1].reason, UL_FINISH_STOP);
    cr_assert(t[1].in_step_at_stop);
    cr_assert_eq(t[2].reason, UL_FINISH_CANCELLED);
    cr_assert_eq(s.pool.n_free, 256);
    int closed = 0;
    d.data = &closed;
    ul_driver_close(&d, on_closed);
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_assert(closed);
    ul_sched_free(&s);
    ul_backend_destroy(b);
    cr_assert_eq(uv_loop_close(&loop), 0);
}

/* Shutdown requested from inside a token callback (SIGTERM while streams write): every
 * sequence finishes exactly once, the step in flight is waited for, pages come back. */
static ul_driver_t *g_driver;
static int token_then_close(ul_seq_t *q, int32_t tok, const ul_token_lp_t *lp) {
    int rc = on_token(q, tok, lp);
    if (((oseq_t *)q)->n_out == 3 && !g_driver->closing) ul_driver_close(g_driver, on_closed);
    return rc;
}

Test(overlap, close_from_a_callback_finishes_everything_once) {
    uv_loop_t loop;
    cr_assert_eq(uv_loop_init(&loop), 0);
    ul_backend_t *b;
    ul_null_config_t cfg = {.delay_us = 2000, .n_vocab = 1000, .page_size = 4, .n_pages = 256};
    cr_assert_eq(ul_null_backend_create(&cfg, &b), 0);
    ul_sched_t s;
    cr_assert_eq(ul_sched_init(&s, b, NULL), 0);
    ul_driver_t d;
    cr_assert_eq(ul_driver_init(&loop, &d, &s), 0);
    g_driver = &d;
    static oseq_t t[6];
    g_finished = 0;
    for (int i = 0; i < 6; i++) {
        oseq_init(&t[i], &s, 1000);
        t[i].seq.on_finish = count_finish;
        t[i].seq.on_token = token_then_close;
        add(&s, &t[i], 3);
    }
    int closed = 0;
    d.data = &closed;
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_assert(closed, "close_cb ran");
    cr_assert_eq(g_finished, 6);
    for (int i = 0; i < 6; i++) {
        cr_assert_eq(t[i].reason, UL_FINISH_CANCELLED);
        cr_assert_lt(t[i].n_out, 6, "seq %d: %d tokens after close", i, t[i].n_out);
    }
    cr_assert_eq(s.pool.n_free, 256);
    ul_sched_free(&s);
    ul_backend_destroy(b);
    cr_assert_eq(uv_loop_close(&loop), 0);
}
