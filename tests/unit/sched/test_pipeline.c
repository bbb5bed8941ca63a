/* Pipelining (sched.h): with cfg.pipeline 2 the loop driver submits step N+1 while N is in
 * flight, chaining each sequence sampled in N on N's token. Driven through the loop and
 * the null backend's worker, a mix of sequences (end-of-generation, max_tokens, stop and
 * cancel from on_token, a penalty over the history, KV pressure with preemption) must get
 * exactly the tokens and ends they get one step at a time, every page must come back, and
 * steps must really have been pipelined. The null backend checks on every step that the
 * position before pos0 holds the token the history says, so a chained input filled in
 * wrongly fails a step (and the comparison). */
#include <criterion/criterion.h>
#include <string.h>

#include "sched/driver.h"
#include "sched/sched.h"
#include "uvllm/err.h"

#define N_SEQS 24

typedef struct {
    ul_seq_t seq;
    int32_t out[128];
    int n_out;
    int finished;
    ul_finish_t reason;
    int status;
    int stop_after;   /* on_token asks to stop after this many tokens (0: never) */
    int cancel_after; /* ul_sched_cancel from on_token after this many (0: never) */
    ul_sched_t *s;
} pseq_t;

static int g_finished;

static int on_token(ul_seq_t *q, int32_t tok, const ul_token_lp_t *lp) {
    pseq_t *t = (pseq_t *)q;
    cr_assert_not_null(lp);
    cr_assert_eq(t->finished, 0, "token after the finish");
    cr_assert_lt(t->n_out, 128);
    t->out[t->n_out++] = tok;
    if (t->cancel_after && t->n_out == t->cancel_after) ul_sched_cancel(t->s, q);
    return t->stop_after && t->n_out >= t->stop_after;
}

static void on_finish(ul_seq_t *q, ul_finish_t reason, int status) {
    pseq_t *t = (pseq_t *)q;
    cr_assert_eq(t->finished, 0, "on_finish twice");
    t->finished = 1;
    t->reason = reason;
    t->status = status;
    g_finished++;
}

typedef struct {
    uint64_t steps_ahead, tokens_chained, steps, preemptions;
} run_stats_t;

static void run_mix(int pipeline, int32_t n_pages, pseq_t *t, run_stats_t *st) {
    uv_loop_t loop;
    cr_assert_eq(uv_loop_init(&loop), 0);
    ul_backend_t *b;
    ul_null_config_t cfg = {.delay_us = 300,
                            .n_vocab = 1000,
                            .n_ctx = 256,
                            .page_size = 4,
                            .n_pages = n_pages,
                            .eos_every = 53};
    cr_assert_eq(ul_null_backend_create(&cfg, &b), 0);
    ul_sched_t s;
    ul_sched_config_t sc = {.pipeline = pipeline, .max_batch_tokens = 64};
    cr_assert_eq(ul_sched_init(&s, b, &sc), 0);
    cr_assert_eq(s.depth, pipeline);
    ul_driver_t d;
    cr_assert_eq(ul_driver_init(&loop, &d, &s), 0);
    g_finished = 0;
    for (int i = 0; i < N_SEQS; i++) {
        pseq_t *q = &t[i];
        memset(q, 0, sizeof *q);
        q->s = &s;
        q->seq.max_tokens = 1 + (i * 7) % 60;
        ul_sampling_default(&q->seq.sampling);
        if (i % 5 == 3) q->seq.sampling.repeat_penalty = 1.2f; /* reads its history */
        if (i % 6 == 1) q->stop_after = 2 + i % 9;
        if (i % 7 == 2) q->cancel_after = 1 + i % 5;
        q->seq.on_token = on_token;
        q->seq.on_finish = on_finish;
        int32_t p[40];
        int32_t np = 3 + (i * 5) % 30;
        for (int32_t k = 0; k < np; k++) p[k] = 100 + k + i;
        cr_assert_eq(ul_sched_add(&s, &q->seq, p, np), 0);
    }
    while (g_finished < N_SEQS) uv_run(&loop, UV_RUN_ONCE);
    cr_assert_eq(s.pool.n_free, s.pool.n_pages, "pages not returned");
    *st = (run_stats_t){s.stats.steps_ahead, s.stats.tokens_chained, s.stats.steps,
                        s.stats.preemptions};
    ul_driver_close(&d, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    ul_sched_free(&s);
    ul_backend_destroy(b);
    cr_assert_eq(uv_loop_close(&loop), 0);
}

static void compare(int32_t n_pages) {
    static pseq_t one[N_SEQS], two[N_SEQS];
    run_stats_t s1, s2;
    run_mix(1, n_pages, one, &s1);
    run_mix(2, n_pages, two, &s2);
    for (int i = 0; i < N_SEQS; i++) {
        cr_assert_eq(two[i].status, 0, "seq %d: step error %d", i, two[i].status);
        cr_assert_eq(two[i].reason, one[i].reason, "seq %d ends by %s, one step at a time by %s", i,
                     ul_finish_name(two[i].reason), ul_finish_name(one[i].reason));
        cr_assert_eq(two[i].n_out, one[i].n_out, "seq %d: %d tokens, one at a time %d", i,
                     two[i].n_out, one[i].n_out);
        cr_assert_arr_eq(two[i].out, one[i].out, sizeof(int32_t) * (size_t)one[i].n_out,
                         "seq %d: other tokens", i);
    }
    cr_assert_eq(s1.steps_ahead, 0);
    cr_assert_eq(s1.tokens_chained, 0);
    cr_assert_gt(s2.steps_ahead, s2.steps / 4, "%llu of %llu steps pipelined",
                 (unsigned long long)s2.steps_ahead, (unsigned long long)s2.steps);
    cr_assert_gt(s2.tokens_chained, 50, "%llu chained", (unsigned long long)s2.tokens_chained);
    cr_log_info("pages %d: %llu/%llu steps ahead, %llu chained, preemptions %llu vs %llu", n_pages,
                (unsigned long long)s2.steps_ahead, (unsigned long long)s2.steps,
                (unsigned long long)s2.tokens_chained, (unsigned long long)s2.preemptions,
                (unsigned long long)s1.preemptions);
}

Test(pipeline, same_tokens_and_ends_as_one_step_at_a_time) { compare(256); }

Test(pipeline, same_under_kv_pressure_with_preemption) { compare(40); }
