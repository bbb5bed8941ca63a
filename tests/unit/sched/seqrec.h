/* What the scheduler tests share: a sequence that records what the scheduler gives it (its
 * tokens, whether a step was in flight for each, how and when it finished) and can stop,
 * cancel or pause itself from on_token; the null backend they run on; and the loop driver
 * on a real loop, set up and torn down the way serve does (every handle closed,
 * uv_loop_close == 0). Each test file that includes it gets its own copy of the statics. */
#ifndef UL_TEST_SEQREC_H
#define UL_TEST_SEQREC_H

#include <criterion/criterion.h>
#include <string.h>

#include "sched/driver.h"
#include "sched/sched.h"
#include "uvllm/err.h"

#define REC_MAX 256

typedef struct {
    ul_seq_t seq;              /* first: the callbacks cast back */
    ul_sched_t *s;             /* for cancel and pause from on_token, and busy_at */
    int32_t out[REC_MAX];      /* the tokens */
    ul_token_lp_t lp[REC_MAX]; /* what on_token was given with each token */
    int busy_at[REC_MAX];      /* a step was in flight when on_token ran for the token */
    int n_out;
    int finished;
    ul_finish_t reason;
    int status;
    int stop_after;       /* on_token returns 1 from this many tokens on (0 = never) */
    int cancel_after;     /* on_token cancels the sequence at this many tokens */
    int pause_after;      /* on_token pauses the sequence at this many tokens */
    int in_step_at_stop;  /* the sequence was in the step in flight when it asked to stop */
    int tokens_at_finish; /* n_out when on_finish ran */
} rec_seq_t;

static int g_rec_finished; /* on_finish calls, over every recorder */

static inline int rec_on_token(ul_seq_t *q, int32_t tok, const ul_token_lp_t *lp) {
    rec_seq_t *t = (rec_seq_t *)q;
    cr_assert_eq(t->finished, 0, "on_token after on_finish");
    cr_assert_lt(t->n_out, REC_MAX);
    cr_assert_not_null(lp);
    t->lp[t->n_out] = *lp;
    t->busy_at[t->n_out] = t->s && ul_sched_in_flight(t->s) > 0;
    t->out[t->n_out++] = tok;
    if (t->cancel_after && t->n_out == t->cancel_after) ul_sched_cancel(t->s, q);
    if (t->pause_after && t->n_out == t->pause_after) ul_sched_set_paused(t->s, q, 1);
    if (t->stop_after && t->n_out >= t->stop_after) {
        if (t->n_out == t->stop_after) t->in_step_at_stop = q->in_step;
        return 1;
    }
    return 0;
}

static inline void rec_on_finish(ul_seq_t *q, ul_finish_t reason, int status) {
    rec_seq_t *t = (rec_seq_t *)q;
    cr_assert_eq(t->finished, 0, "on_finish twice");
    cr_assert_eq(status, 0, "step failed: %s", ul_strerror(status));
    t->finished = 1;
    t->reason = reason;
    t->status = status;
    t->tokens_at_finish = t->n_out;
    g_rec_finished++;
}

/* s may be NULL when no test of the sequence cancels, pauses or reads busy_at. */
static inline void rec_init(rec_seq_t *t, ul_sched_t *s, int32_t max_tokens) {
    memset(t, 0, sizeof *t);
    t->s = s;
    t->seq.max_tokens = max_tokens;
    ul_sampling_default(&t->seq.sampling);
    t->seq.on_token = rec_on_token;
    t->seq.on_finish = rec_on_finish;
}

/* A prompt of n tokens first, first + 1, ...; ul_sched_add's result. */
static inline int rec_add(ul_sched_t *s, rec_seq_t *t, int32_t n, int32_t first) {
    int32_t p[512];
    cr_assert_leq(n, 512);
    for (int32_t i = 0; i < n; i++) p[i] = first + i;
    return ul_sched_add(s, &t->seq, p, n);
}

/* 1000 ids, 256 positions; eos_every 0: no end-of-generation token. */
static inline ul_backend_t *rec_null_backend(int32_t page_size, int32_t n_pages,
                                             int32_t eos_every) {
    ul_backend_t *b;
    ul_null_config_t cfg = {.n_vocab = 1000,
                            .n_ctx = 256,
                            .page_size = page_size,
                            .n_pages = n_pages,
                            .eos_every = eos_every};
    cr_assert_eq(ul_null_backend_create(&cfg, &b), 0);
    return b;
}

/* The scheduler on backend b with cfg (NULL: defaults), stepped by hand; returns b. */
static inline ul_backend_t *rec_sched_open(ul_sched_t *s, ul_backend_t *b,
                                           const ul_sched_config_t *cfg) {
    cr_assert_eq(ul_sched_init(s, b, cfg), 0);
    return b;
}

static inline void rec_sched_close(ul_sched_t *s, ul_backend_t *b) {
    ul_sched_free(s);
    ul_backend_destroy(b);
}

/* ---- the loop driver on a real loop -------------------------------------------------- */

typedef struct {
    uv_loop_t loop;
    ul_backend_t *b;
    ul_sched_t s;
    ul_driver_t d;
    int closed; /* the driver's close_cb ran */
} rec_loop_t;

static inline void rec_on_closed(ul_driver_t *d) { ((rec_loop_t *)d->data)->closed = 1; }

/* The null backend on its worker thread with cfg, the scheduler with sc (NULL: defaults). */
static inline void rec_loop_init(rec_loop_t *f, ul_null_config_t cfg, const ul_sched_config_t *sc) {
    memset(f, 0, sizeof *f);
    cr_assert_eq(uv_loop_init(&f->loop), 0);
    cr_assert_eq(ul_null_backend_create(&cfg, &f->b), 0);
    cr_assert_eq(ul_sched_init(&f->s, f->b, sc), 0);
    cr_assert_eq(ul_driver_init(&f->loop, &f->d, &f->s), 0);
    f->d.data = f;
    g_rec_finished = 0;
}

/* Runs the loop until n sequences have finished. */
static inline void rec_loop_run(rec_loop_t *f, int n) {
    while (g_rec_finished < n) uv_run(&f->loop, UV_RUN_ONCE);
}

/* Closes the driver (unless a callback already did), runs the loop dry, frees the rest and
 * checks that the loop closes. */
static inline void rec_loop_close(rec_loop_t *f) {
    if (!f->d.closing) ul_driver_close(&f->d, rec_on_closed);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    cr_assert(f->closed, "the driver's close_cb ran");
    ul_sched_free(&f->s);
    ul_backend_destroy(f->b);
    cr_assert_eq(uv_loop_close(&f->loop), 0);
}

#endif
