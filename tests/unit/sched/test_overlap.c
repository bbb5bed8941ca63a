/* Double buffering: step N's callbacks run after step N+1 was built and submitted. These
 * tests drive the scheduler the way the loop driver does (absorb N, build N+1, deliver N,
 * then compute N+1) with the null backend's synchronous run(), and check what a client
 * would notice: the same tokens as one step at a time, no token after a stop or a cancel,
 * on_finish exactly once, every KV page back; and on a real loop (the driver), that
 * callbacks do run while the next step is in flight (an order, not a time: the same on a
 * loaded host). Output pacing is the api's (tests/unit/api/test_pace.c). */
#include <criterion/criterion.h>
#include <string.h>

#include "seqrec.h"

static void add(ul_sched_t *s, rec_seq_t *t, int32_t n_prompt) {
    cr_assert_eq(rec_add(s, t, n_prompt, 7), 0);
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

static int in_step(const ul_sched_t *s, const rec_seq_t *t) {
    for (int32_t i = 0; i < s->step->n_seqs; i++)
        if (s->step->seqs[i].seq_id == t->seq.id) return 1;
    return 0;
}

/* Same tokens, same finish reasons, with and without overlap, under page pressure that
 * forces preemption and with end-of-generation tokens. */
Test(overlap, same_output_as_one_step_at_a_time) {
    for (int pool = 0; pool < 2; pool++) {
        rec_seq_t ref[4], t[4];
        for (int mode = 0; mode < 2; mode++) {
            ul_sched_t s;
            ul_backend_t *b = rec_sched_open(&s, rec_null_backend(4, pool ? 7 : 256, 11),
                                             &(ul_sched_config_t){.max_batch_tokens = 16});
            rec_seq_t *v = mode ? t : ref;
            for (int i = 0; i < 4; i++) {
                rec_init(&v[i], &s, i == 3 ? 3 : 14);
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
            rec_sched_close(&s, b);
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
    ul_sched_t s;
    ul_backend_t *b = rec_sched_open(&s, rec_null_backend(4, 256, 0),
                                     &(ul_sched_config_t){.max_batch_tokens = 16});
    rec_seq_t t[3];
    for (int i = 0; i < 3; i++) {
        rec_init(&t[i], &s, 12);
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
    rec_sched_close(&s, b);
}

Test(overlap, stop_while_the_next_step_is_in_flight_drops_its_token) {
    rec_pair_t f;
    rec_pair_open(&f, 64, 7, (rec_len_t){50, 4}, (rec_len_t){6, 4});
    f.a.stop_after = 3;
    run_overlapped(&f.s);
    cr_assert(f.a.in_step_at_stop, "the stop came while the next step held the sequence");
    cr_assert(f.a.finished);
    cr_assert_eq(f.a.reason, UL_FINISH_STOP);
    cr_assert_eq(f.a.n_out, 3, "no token after the stop");
    cr_assert_eq(f.c.n_out, 6);
    cr_assert_eq(f.s.stats.tokens_generated, 3 + 6, "the dropped token is not counted");
    rec_pair_close(&f);
}

Test(overlap, cancel_from_a_callback_while_in_flight) {
    rec_pair_t f;
    rec_pair_open(&f, 64, 7, (rec_len_t){50, 4}, (rec_len_t){8, 4});
    f.a.cancel_after = 2; /* e.g. its client's write failed */
    run_overlapped(&f.s);
    cr_assert(f.a.finished);
    cr_assert_eq(f.a.reason, UL_FINISH_CANCELLED);
    cr_assert_eq(f.a.n_out, 2, "no token after the cancel");
    cr_assert_eq(f.c.n_out, 8);
    rec_pair_close(&f);
}

/* max_tokens needs no callback: the step built right after absorbing the last token does
 * not contain the sequence, and its pages are free for that step already. */
Test(overlap, length_is_decided_before_the_next_step) {
    rec_pair_t f;
    /* a's prompt: 1 page; its 2nd token would need no new page */
    rec_pair_open(&f, 64, 7, (rec_len_t){2, 4}, (rec_len_t){10, 4});
    cr_assert_eq(ul_sched_step_build(&f.s), 2);
    compute(&f.s);
    ul_sched_step_absorb(&f.s);
    cr_assert_eq(ul_sched_step_build(&f.s), 2);
    ul_sched_step_deliver(&f.s);
    cr_assert_eq(f.a.n_out, 1);
    compute(&f.s);
    ul_sched_step_absorb(&f.s);
    int32_t free_before = f.s.pool.n_free;
    cr_assert_eq(ul_sched_step_build(&f.s), 1);
    cr_assert_not(in_step(&f.s, &f.a), "a finished sequence is not stepped again");
    cr_assert(in_step(&f.s, &f.c));
    cr_assert_eq(free_before, 64 - 2, "its page was released before the build");
    cr_assert_eq(f.a.finished, 0, "on_finish waits for deliver");
    ul_sched_step_deliver(&f.s);
    cr_assert(f.a.finished);
    cr_assert_eq(f.a.reason, UL_FINISH_LENGTH);
    cr_assert_eq(f.a.tokens_at_finish, 2, "the last token's on_token before on_finish");
    compute(&f.s);
    ul_sched_step_complete(&f.s);
    run_overlapped(&f.s);
    cr_assert_eq(f.c.n_out, 10);
    rec_pair_close(&f);
}

/* Backpressure: pausing from on_token lets the step in flight finish (one more token),
 * then the sequence gets no step until it is resumed. */
Test(overlap, pause_from_a_callback_takes_effect_after_the_step_in_flight) {
    rec_pair_t f;
    rec_pair_open(&f, 64, 7, (rec_len_t){12, 2}, (rec_len_t){8, 2});
    f.a.pause_after = 3;
    run_overlapped(&f.s);
    /* paused at 3: the token of the step in flight, then nothing */
    rec_pair_resume(&f, run_overlapped, 4, 12);
    rec_pair_close(&f);
}

/* ---- the loop driver ------------------------------------------------------------------ */

Test(overlap, driver_runs_callbacks_while_the_next_step_computes) {
    rec_loop_t f;
    rec_loop_init(
        &f, (ul_null_config_t){.delay_us = 2000, .n_vocab = 1000, .page_size = 4, .n_pages = 256},
        NULL);
    static rec_seq_t t[8];
    for (int i = 0; i < 8; i++) {
        rec_init(&t[i], &f.s, 10);
        if (i == 1) t[i].stop_after = 4;
        if (i == 2) t[i].cancel_after = 5;
        add(&f.s, &t[i], 3);
    }
    rec_loop_run(&f, 8);
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
    cr_assert_eq(f.s.pool.n_free, 256);
    rec_loop_close(&f);
}

/* Shutdown requested from inside a token callback (SIGTERM while streams write): every
 * sequence finishes exactly once, the step in flight is waited for, pages come back. */
static ul_driver_t *g_driver;
static int token_then_close(ul_seq_t *q, int32_t tok, const ul_token_lp_t *lp) {
    int rc = rec_on_token(q, tok, lp);
    if (((rec_seq_t *)q)->n_out == 3 && !g_driver->closing)
        ul_driver_close(g_driver, rec_on_closed);
    return rc;
}

Test(overlap, close_from_a_callback_finishes_everything_once) {
    rec_loop_t f;
    rec_loop_init(
        &f, (ul_null_config_t){.delay_us = 2000, .n_vocab = 1000, .page_size = 4, .n_pages = 256},
        NULL);
    g_driver = &f.d;
    static rec_seq_t t[6];
    for (int i = 0; i < 6; i++) {
        rec_init(&t[i], &f.s, 1000);
        t[i].seq.on_token = token_then_close;
        add(&f.s, &t[i], 3);
    }
    uv_run(&f.loop, UV_RUN_DEFAULT);
    cr_assert(f.closed, "close_cb ran");
    cr_assert_eq(g_rec_finished, 6);
    for (int i = 0; i < 6; i++) {
        cr_assert_eq(t[i].reason, UL_FINISH_CANCELLED);
        cr_assert_lt(t[i].n_out, 6, "seq %d: %d tokens after close", i, t[i].n_out);
    }
    cr_assert_eq(f.s.pool.n_free, 256);
    rec_loop_close(&f);
}
