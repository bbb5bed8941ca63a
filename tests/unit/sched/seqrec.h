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
#include "seqbase.h"

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
    seq_base_finish(&t->finished, &t->reason, reason, status);
    t->status = status;
    t->tokens_at_finish = t->n_out;
    g_rec_finished++;
}

/* s may be NULL when no test of the sequence cancels, pauses or reads busy_at. */
static inline void rec_init(rec_seq_t *t, ul_sched_t *s, int32_t max_tokens) {
    seq_base_init(&t->seq, sizeof *t, max_tokens, rec_on_token, rec_on_finish);
    t->s = s;
}

/* A prompt of n tokens first, first + 1, ...; ul_sched_add's result. */
static inline int rec_add(ul_sched_t *s, rec_seq_t *t, int32_t n, int32_t first) {
    int32_t p[512];
    cr_assert_leq(n, 512);
    for (int32_t i = 0; i < n; i++) p[i] = first + i;
    return ul_sched_add(s, &t->seq, p, n);
}

/* t[0..n-1], each with max_tokens and a prompt of n_prompt tokens from id first; every one
 * must be taken. */
static inline void rec_add_all(ul_sched_t *s, rec_seq_t *t, int n, int32_t max_tokens,
                               int32_t n_prompt, int32_t first) {
    for (int i = 0; i < n; i++) {
        rec_init(&t[i], s, max_tokens);
        cr_assert_eq(rec_add(s, &t[i], n_prompt, first), 0);
    }
}

/* 1000 ids, n_ctx positions; eos_every 0: no end-of-generation token. */
static inline ul_backend_t *rec_null_backend_ctx(int32_t n_ctx, int32_t page_size, int32_t n_pages,
                                                 int32_t eos_every) {
    ul_backend_t *b;
    ul_null_config_t cfg = {.n_vocab = 1000,
                            .n_ctx = n_ctx,
                            .page_size = page_size,
                            .n_pages = n_pages,
                            .eos_every = eos_every};
    cr_assert_eq(ul_null_backend_create(&cfg, &b), 0);
    return b;
}

/* 1000 ids, 256 positions. */
static inline ul_backend_t *rec_null_backend(int32_t page_size, int32_t n_pages,
                                             int32_t eos_every) {
    return rec_null_backend_ctx(256, page_size, n_pages, eos_every);
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

/* t[0..n-1] all finished on their length, n_out tokens each. */
static inline void rec_assert_all_length(const rec_seq_t *t, int n, int n_out) {
    for (int i = 0; i < n; i++) {
        cr_assert(t[i].finished, "seq %d not finished", i);
        cr_assert_eq(t[i].reason, UL_FINISH_LENGTH, "seq %d", i);
        cr_assert_eq(t[i].n_out, n_out, "seq %d: %d tokens", i, t[i].n_out);
    }
}

/* ---- two sequences on a scheduler stepped by hand ----------------------------------- */

/* What one sequence asks for: max_tokens, and a prompt of n_prompt tokens. */
typedef struct {
    int32_t max_tokens, n_prompt;
} rec_len_t;

/* a, then c, on the scheduler with the default config on rec_null_backend(4, n_pages, 0). */
typedef struct {
    ul_sched_t s;
    ul_backend_t *b;
    rec_seq_t a, c;
} rec_pair_t;

/* Opens the scheduler and adds a then c (their prompts' ids count up from first; both must
 * be taken). The recorders know the scheduler: they may cancel or pause from on_token. */
static inline void rec_pair_open(rec_pair_t *f, int32_t n_pages, int32_t first, rec_len_t a,
                                 rec_len_t c) {
    f->b = rec_sched_open(&f->s, rec_null_backend(4, n_pages, 0), NULL);
    rec_init(&f->a, &f->s, a.max_tokens);
    rec_init(&f->c, &f->s, c.max_tokens);
    cr_assert_eq(rec_add(&f->s, &f->a, a.n_prompt, first), 0);
    cr_assert_eq(rec_add(&f->s, &f->c, c.n_prompt, first), 0);
}

/* a was paused from on_token (or by the test) and c has finished: a holds n_paused tokens.
 * Resumed and run (run_all or run_overlapped) again, it runs to its max_tokens, n_total. */
static inline void rec_pair_resume(rec_pair_t *f, int (*run)(ul_sched_t *), int n_paused,
                                   int n_total) {
    cr_assert(f->c.finished);
    cr_assert_not(f->a.finished);
    cr_assert_eq(f->a.n_out, n_paused, "a paused sequence gets no step");
    ul_sched_set_paused(&f->s, &f->a.seq, 0);
    run(&f->s);
    cr_assert(f->a.finished);
    cr_assert_eq(f->a.n_out, n_total);
}

/* Every sequence is done by now: checks that no sequence is active and every page is back
 * in the pool, then frees. */
static inline void rec_pair_close(rec_pair_t *f) {
    cr_assert_eq(ul_sched_n_active(&f->s), 0);
    cr_assert_eq(f->s.pool.n_free, f->s.pool.n_pages, "every page back in the pool");
    rec_sched_close(&f->s, f->b);
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
