/* Scheduler: what goes into each step (decode first, prefill chunks under the budget,
 * oldest first), KV page admission and preemption, cancellation, stop conditions, and the
 * loop driver with the asynchronous null backend. Steps are run with the null backend's
 * synchronous run(), whose KV bookkeeping fails a step if pages were mixed up. */
#include <criterion/criterion.h>
#include <string.h>

#include "seqrec.h"
#include "steps.h"

static int add(ul_sched_t *s, rec_seq_t *t, int32_t n_prompt) {
    return rec_add(s, t, n_prompt, 100);
}

Test(sched, decode_first_then_prefill_chunks_under_budget) {
    ul_sched_t s;
    /* the prompts share their first tokens: without the cache, to see the chunks whole */
    ul_backend_t *b =
        rec_sched_open(&s, rec_null_backend(4, 64, 0),
                       &(ul_sched_config_t){.max_batch_tokens = 8, .no_prefix_cache = 1});
    rec_seq_t a, bb, c;
    rec_init(&a, NULL, 10);
    rec_init(&bb, NULL, 10);
    rec_init(&c, NULL, 10);
    cr_assert_eq(add(&s, &a, 5), 0);
    cr_assert_eq(one_step(&s), 1); /* A's whole prompt, sampled */
    cr_assert_eq(s.step->seqs[0].n_tokens, 5);
    cr_assert_eq(s.step->seqs[0].sample, 1);
    cr_assert_eq(a.n_out, 1);
    cr_assert_eq(add(&s, &bb, 10), 0);
    cr_assert_eq(add(&s, &c, 3), 0);

    cr_assert_eq(one_step(&s), 2);
    ul_step_seq_t *ss = s.step->seqs;
    cr_assert_eq(ss[0].seq_id, a.seq.id, "the decoding sequence comes first");
    cr_assert_eq(ss[0].n_tokens, 1);
    cr_assert_eq(ss[0].pos0, 5);
    cr_assert_eq(ss[1].seq_id, bb.seq.id, "then the oldest prefill");
    cr_assert_eq(ss[1].n_tokens, 7, "prefill chunk fills the rest of the budget");
    cr_assert_eq(ss[1].sample, 0, "a partial prefill samples nothing");
    cr_assert_eq(s.step->n_tokens, 8);
    cr_assert_eq(bb.n_out, 0);

    cr_assert_eq(one_step(&s), 3);
    cr_assert_eq(ss[0].seq_id, a.seq.id);
    cr_assert_eq(ss[1].seq_id, bb.seq.id);
    cr_assert_eq(ss[1].n_tokens, 3);
    cr_assert_eq(ss[1].pos0, 7);
    cr_assert_eq(ss[1].sample, 1);
    cr_assert_eq(ss[2].seq_id, c.seq.id);
    cr_assert_eq(ss[2].n_tokens, 3);
    cr_assert_eq(bb.n_out, 1);
    cr_assert_eq(c.n_out, 1);

    run_all(&s);
    cr_assert(a.finished && bb.finished && c.finished);
    cr_assert_eq(a.reason, UL_FINISH_LENGTH);
    cr_assert_eq(a.n_out, 10);
    cr_assert_eq(s.pool.n_free, 64, "all pages back in the pool");
    rec_sched_close(&s, b);
}

Test(sched, decoders_beyond_budget_take_turns) {
    ul_sched_t s;
    ul_backend_t *b = rec_sched_open(&s, rec_null_backend(4, 256, 0),
                                     &(ul_sched_config_t){.max_batch_tokens = 4});
    rec_seq_t t[6];
    rec_add_all(&s, t, 6, 5, 1, 100);
    run_all(&s);
    rec_assert_all_length(t, 6, 5);
    rec_sched_close(&s, b);
}

/* Generates with a roomy pool and with a tiny one that forces preemption: the output must
 * be the same, since a preempted sequence recomputes and continues where it was. */
Test(sched, preemption_under_page_pressure_keeps_output) {
    int32_t ref[3][256];
    for (int pass = 0; pass < 2; pass++) {
        ul_sched_t s;
        ul_backend_t *b = rec_sched_open(&s, rec_null_backend(4, pass == 0 ? 256 : 6, 0),
                                         &(ul_sched_config_t){.max_batch_tokens = 16});
        rec_seq_t t[3];
        rec_add_all(&s, t, 3, 12, 6, 100);
        run_all(&s);
        rec_assert_all_length(t, 3, 12);
        for (int i = 0; i < 3; i++) {
            if (pass == 0)
                memcpy(ref[i], t[i].out, sizeof ref[i]);
            else
                cr_assert_arr_eq(ref[i], t[i].out, 12 * sizeof(int32_t));
        }
        if (pass == 0)
            cr_assert_eq(s.stats.preemptions, 0);
        else
            cr_assert_gt(s.stats.preemptions, 0, "a 24-token pool must preempt");
        cr_assert_eq(s.pool.n_free, s.pool.n_pages);
        rec_sched_close(&s, b);
    }
}

Test(sched, preempts_the_newest) {
    /* Two prompts of 8 tokens fill 4 pages of 4; the older one's decode needs a 3rd page. */
    rec_pair_t f;
    rec_pair_open(&f, 4, 100, (rec_len_t){4, 8}, (rec_len_t){4, 8});
    cr_assert_eq(one_step(&f.s), 2); /* both prefills: 8 tokens in 2 pages each, 9th sampled */
    cr_assert_eq(f.s.pool.n_free, 0);
    cr_assert_eq(ul_sched_step_build(&f.s), 1);
    cr_assert_eq(f.s.step->seqs[0].seq_id, f.a.seq.id, "the older sequence decodes");
    cr_assert_eq(f.a.seq.n_pages, 3);
    cr_assert_eq(f.c.seq.n_preempted, 1, "the newer one gave up its pages");
    cr_assert_eq(f.c.seq.state, UL_SEQ_WAITING);
    cr_assert_eq(f.c.seq.n_pages, 0, "and is not re-admitted into the pages it just gave up");
    cr_assert_eq(f.s.pool.n_free, 1);
    cr_assert_eq(ul_backend_run(f.b, f.s.step), 0);
    ul_sched_step_complete(&f.s);
    run_all(&f.s);
    cr_assert(f.a.finished && f.c.finished);
    cr_assert_eq(f.c.n_out, 4);
    rec_pair_close(&f);
}

Test(sched, admission_waits_for_pages) {
    rec_pair_t f;
    /* a's prompt of 16 tokens takes the whole pool */
    rec_pair_open(&f, 4, 100, (rec_len_t){1, 16}, (rec_len_t){1, 4});
    cr_assert_eq(ul_sched_step_build(&f.s), 1, "no page left for the second prompt");
    cr_assert_eq(f.s.step->seqs[0].seq_id, f.a.seq.id);
    cr_assert_eq(f.c.seq.state, UL_SEQ_WAITING);
    cr_assert_eq(ul_backend_run(f.b, f.s.step), 0);
    ul_sched_step_complete(&f.s);
    cr_assert(f.a.finished, "max_tokens 1 finishes after the prefill");
    cr_assert_eq(one_step(&f.s), 1);
    cr_assert(f.c.finished);
    rec_pair_close(&f);
}

Test(sched, cancellation_frees_pages_before_the_next_step) {
    rec_pair_t f;
    rec_pair_open(&f, 32, 100, (rec_len_t){100, 10}, (rec_len_t){100, 10});
    cr_assert_eq(one_step(&f.s), 2);
    cr_assert_eq(f.s.pool.n_free, 32 - 6);
    ul_sched_cancel(&f.s, &f.a.seq);
    cr_assert_eq(f.a.finished, 0, "cancel never calls back inline");
    cr_assert_eq(ul_sched_step_build(&f.s), 1);
    cr_assert(f.a.finished);
    cr_assert_eq(f.a.reason, UL_FINISH_CANCELLED);
    cr_assert_eq(f.s.step->seqs[0].seq_id, f.c.seq.id);
    cr_assert_eq(f.s.pool.n_free, 32 - 3);
    /* Cancel while the step is in flight: results are dropped, reaped afterwards. */
    ul_sched_cancel(&f.s, &f.c.seq);
    cr_assert_eq(ul_backend_run(f.b, f.s.step), 0);
    int before = f.c.n_out;
    ul_sched_step_complete(&f.s);
    cr_assert_eq(f.c.n_out, before);
    cr_assert_eq(ul_sched_step_build(&f.s), 0);
    cr_assert(f.c.finished);
    rec_pair_close(&f); /* all 32 pages back */
}

Test(sched, paused_sequences_are_skipped) {
    rec_pair_t f;
    rec_pair_open(&f, 32, 100, (rec_len_t){5, 2}, (rec_len_t){5, 2});
    cr_assert_eq(one_step(&f.s), 2);
    ul_sched_set_paused(&f.s, &f.a.seq, 1);
    cr_assert_eq(one_step(&f.s), 1);
    cr_assert_eq(f.s.step->seqs[0].seq_id, f.c.seq.id);
    run_all(&f.s);
    rec_pair_resume(&f, run_all, 1, 5);
    rec_pair_close(&f);
}

Test(sched, stop_conditions) {
    ul_sched_t s;
    ul_backend_t *b = rec_sched_open(&s, rec_null_backend_ctx(20, 4, 64, 8), NULL);
    rec_seq_t eos, ctx, cb;
    rec_init(&eos, NULL, 100);
    rec_init(&ctx, NULL, 100);
    rec_init(&cb, NULL, 100);
    cb.stop_after = 2;
    cr_assert_eq(add(&s, &eos, 2), 0);  /* positions 2..6 sampled, eos at position 7 */
    cr_assert_eq(add(&s, &ctx, 17), 0); /* positions 17..19, then the context is full */
    cr_assert_eq(add(&s, &cb, 1), 0);
    run_all(&s);
    cr_assert_eq(eos.reason, UL_FINISH_STOP);
    cr_assert_eq(eos.n_out, 5, "eos itself is not a generated token");
    cr_assert_eq(ctx.reason, UL_FINISH_LENGTH);
    cr_assert_eq(ctx.n_out, 3, "generation stops at the context length");
    cr_assert_eq(cb.reason, UL_FINISH_STOP);
    cr_assert_eq(cb.n_out, 2);
    rec_sched_close(&s, b);
}

/* ignore_eos: the end-of-generation token does not end the sequence; it is delivered like
 * any other and generation runs to max_tokens. A sequence without it stops there. */
Test(sched, ignore_eos_continues_past_eos) {
    ul_sched_t s;
    ul_backend_t *b = rec_sched_open(&s, rec_null_backend_ctx(64, 4, 64, 8), NULL);
    rec_seq_t keep, stop;
    rec_init(&keep, NULL, 12);
    rec_init(&stop, NULL, 12);
    keep.seq.ignore_eos = 1;
    cr_assert_eq(add(&s, &keep, 2), 0); /* samples positions 2..13: eos at 7 and 15 */
    cr_assert_eq(add(&s, &stop, 2), 0);
    run_all(&s);
    cr_assert_eq(stop.reason, UL_FINISH_STOP);
    cr_assert_eq(stop.n_out, 5);
    cr_assert_eq(keep.reason, UL_FINISH_LENGTH);
    cr_assert_eq(keep.n_out, 12);
    cr_assert_eq(keep.out[5], b->eos_id, "eos is delivered as a token");
    for (int i = 0; i < 12; i++)
        if (i != 5) cr_assert_neq(keep.out[i], b->eos_id);
    cr_assert_eq(s.pool.n_free, 64);
    rec_sched_close(&s, b);
}

Test(sched, add_validates) {
    ul_sched_t s;
    ul_backend_t *b =
        rec_sched_open(&s, rec_null_backend(4, 4, 0), &(ul_sched_config_t){.max_seqs = 1});
    rec_seq_t a, c;
    rec_init(&a, NULL, 5);
    cr_assert_eq(add(&s, &a, 0), UL_EINVAL);
    cr_assert_eq(add(&s, &a, 256), UL_E2BIG, "longer than the context");
    cr_assert_eq(add(&s, &a, 17), UL_E2BIG, "larger than the KV pool");
    a.seq.max_tokens = 0;
    cr_assert_eq(add(&s, &a, 3), UL_EINVAL);
    a.seq.max_tokens = 5;
    cr_assert_eq(add(&s, &a, 3), 0);
    rec_init(&c, NULL, 5);
    cr_assert_eq(add(&s, &c, 3), UL_EFULL);
    run_all(&s);
    rec_sched_close(&s, b);
}

/* The driver on a real loop with the asynchronous backend. */
Test(sched, loop_driver_runs_to_completion_and_closes) {
    rec_loop_t f;
    rec_loop_init(
        &f, (ul_null_config_t){.delay_us = 1000, .n_vocab = 1000, .page_size = 4, .n_pages = 64},
        NULL);
    static rec_seq_t t[20];
    rec_add_all(&f.s, t, 20, 8, 3, 100);
    rec_loop_run(&f, 20);
    rec_assert_all_length(t, 20, 8);
    /* Closing with a sequence still running cancels it. */
    rec_seq_t late;
    rec_init(&late, NULL, 1000);
    cr_assert_eq(add(&f.s, &late, 3), 0);
    rec_loop_close(&f);
    cr_assert(late.finished);
    cr_assert_eq(late.reason, UL_FINISH_CANCELLED);
}
