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

#include "seqrec.h"

#define N_SEQS 24

typedef struct {
    uint64_t steps_ahead, tokens_chained, steps, preemptions;
} run_stats_t;

static void run_mix(int pipeline, int32_t n_pages, rec_seq_t *t, run_stats_t *st) {
    rec_loop_t f;
    ul_null_config_t cfg = {.delay_us = 300,
                            .n_vocab = 1000,
                            .n_ctx = 256,
                            .page_size = 4,
                            .n_pages = n_pages,
                            .eos_every = 53};
    rec_loop_init(&f, cfg, &(ul_sched_config_t){.pipeline = pipeline, .max_batch_tokens = 64});
    cr_assert_eq(f.s.depth, pipeline);
    for (int i = 0; i < N_SEQS; i++) {
        rec_seq_t *q = &t[i];
        rec_init(q, &f.s, 1 + (i * 7) % 60);
        if (i % 5 == 3) q->seq.sampling.repeat_penalty = 1.2f; /* reads its history */
        if (i % 6 == 1) q->stop_after = 2 + i % 9;
        if (i % 7 == 2) q->cancel_after = 1 + i % 5;
        cr_assert_eq(rec_add(&f.s, q, 3 + (i * 5) % 30, 100 + i), 0);
    }
    rec_loop_run(&f, N_SEQS);
    cr_assert_eq(f.s.pool.n_free, f.s.pool.n_pages, "pages not returned");
    *st = (run_stats_t){f.s.stats.steps_ahead, f.s.stats.tokens_chained, f.s.stats.steps,
                        f.s.stats.preemptions};
    rec_loop_close(&f);
}

static void compare(int32_t n_pages) {
    static rec_seq_t one[N_SEQS], two[N_SEQS];
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
