/* Deadlines (a sequence past seq->deadline_ns ends with UL_FINISH_DEADLINE and gives its
 * pages back), a paused sequence (its client stopped reading) that keeps its pages while
 * the others get a token every step, and the predicted wait admission answers with. On
 * virtual time (vclock.h): the same on any host. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "engine/sampling.h"
#include "sched/sched.h"
#include "uvllm/err.h"
#include "vclock.h"

#include "seqbase.h"

typedef struct {
    ul_seq_t seq;
    int n_out, finished;
    ul_finish_t reason;
} aseq_t;

static int on_token(ul_seq_t *q, int32_t tok, const ul_token_lp_t *lp) {
    (void)tok, (void)lp;
    ((aseq_t *)q)->n_out++;
    return 0;
}

static void on_finish(ul_seq_t *q, ul_finish_t reason, int status) {
    aseq_t *a = (aseq_t *)q;
    seq_base_finish(&a->finished, &a->reason, reason, status);
}

static void aseq_init(aseq_t *a, int32_t max_tokens) {
    seq_base_init(&a->seq, sizeof *a, max_tokens, on_token, on_finish);
}

/* A step costs delay_us, plus token_us a decoded token and prefill_us a prompt token (on
 * virtual time); n_pages pages of 16 tokens. */
static ul_backend_t *backend_pages(int64_t delay_us, int64_t token_us, int64_t prefill_us,
                                   int32_t n_pages) {
    ul_null_config_t cfg = {.delay_us = delay_us,
                            .token_us = token_us,
                            .prefill_us = prefill_us,
                            .n_vocab = 1000,
                            .n_ctx = 2048,
                            .page_size = 16,
                            .n_pages = n_pages};
    return vc_backend(cfg);
}

static ul_backend_t *backend(int64_t delay_us, int64_t token_us, int64_t prefill_us) {
    return backend_pages(delay_us, token_us, prefill_us, 1024);
}

static int one_step(ul_sched_t *s) { return vc_step(s); }

static void run_all(ul_sched_t *s) {
    while (one_step(s) > 0) {
    }
}

/* Every page is back in the pool; frees the scheduler and its backend. */
static void sched_close(ul_sched_t *s) {
    cr_assert_eq(s->pool.n_free, s->pool.n_pages, "every page back in the pool");
    ul_backend_t *b = s->backend;
    ul_sched_free(s);
    ul_backend_destroy(b);
}

static int add(ul_sched_t *s, aseq_t *a, int32_t n, int32_t base) {
    int32_t p[1024];
    for (int32_t i = 0; i < n; i++) p[i] = 1 + (base + i * 7) % 900;
    return ul_sched_add(s, &a->seq, p, n);
}

Test(admit, deadline_ends_the_sequence_and_frees_its_pages) {
    ul_sched_t s;
    cr_assert_eq(ul_sched_init(&s, backend(10000, 0, 0), NULL), 0); /* 10 ms a step */
    aseq_t a, other;
    aseq_init(&a, 1000);
    aseq_init(&other, 12);
    s.now_ns = 1000 * VC_MS;
    a.seq.deadline_ns = s.now_ns + 60 * VC_MS;
    cr_assert_eq(add(&s, &a, 20, 1), 0);
    cr_assert_eq(add(&s, &other, 20, 2), 0);
    run_all(&s);
    cr_assert(a.finished && other.finished);
    cr_assert_eq(a.reason, UL_FINISH_DEADLINE);
    cr_assert_str_eq(ul_finish_name(a.reason), "deadline");
    /* steps end at 10, 20, ... 60 ms: the first (prefill) samples, the one ending at 60 ms
     * is the last whose token is delivered, the next build finds the deadline passed */
    cr_assert_eq(a.n_out, 6, "%d tokens in 60 ms of 10 ms steps", a.n_out);
    cr_assert_eq(other.reason, UL_FINISH_LENGTH, "the other one is not touched");
    cr_assert_eq(other.n_out, 12);
    cr_assert_eq(s.stats.deadlines, 1);
    sched_close(&s);
}

Test(admit, paused_sequence_keeps_its_pages_others_run_every_step) {
    ul_sched_t s;
    cr_assert_eq(ul_sched_init(&s, backend(0, 0, 0), NULL), 0);
    aseq_t q[3];
    for (int i = 0; i < 3; i++) {
        aseq_init(&q[i], 40);
        cr_assert_eq(add(&s, &q[i], 30, 100 * i), 0);
    }
    for (int i = 0; i < 5; i++) one_step(&s);
    ul_sched_set_paused(&s, &q[0].seq, 1);
    int32_t pages = q[0].seq.n_pages, out0 = q[0].n_out, out1 = q[1].n_out;
    cr_assert_gt(pages, 0);
    for (int i = 0; i < 20; i++) {
        cr_assert_eq(one_step(&s), 2, "the two readers are in every step");
        for (int k = 0; k < s.step->n_seqs; k++) cr_assert_neq(s.step->seqs[k].seq_id, q[0].seq.id);
    }
    cr_assert_eq(q[1].n_out, out1 + 20, "one token per step for the others");
    cr_assert_eq(q[0].n_out, out0);
    cr_assert_eq(q[0].seq.n_pages, pages, "its pages stay");
    ul_sched_set_paused(&s, &q[0].seq, 0);
    run_all(&s);
    for (int i = 0; i < 3; i++) cr_assert(q[i].finished && q[i].n_out == 40);
    sched_close(&s);
}

Test(admit, predicted_wait_follows_the_queue) {
    /* 1 ms a step, 0.5 ms a decode token, 1 ms a prefill token; target 40 ms */
    ul_sched_t s;
    ul_sched_config_t cfg = {.max_batch_tokens = 256, .itl_target_ms = 40};
    cr_assert_eq(ul_sched_init(&s, backend(1000, 500, 1000), &cfg), 0);
    cr_assert_eq(ul_sched_predict_wait_s(&s, 100), 0, "nothing known yet");
    static aseq_t q[12];
    for (int i = 0; i < 4; i++) {
        aseq_init(&q[i], 200);
        cr_assert_eq(add(&s, &q[i], 40 + 13 * i, 50 * i), 0);
    }
    for (int i = 0; i < 30; i++) one_step(&s); /* prefills then decodes: costs are learnt */
    for (int i = 4; i < 12; i++) {
        aseq_init(&q[i], 200);
        cr_assert_eq(add(&s, &q[i], 300, 50 * i), 0);
    }
    /* 8 x 300 + 100 tokens of prefill at ~(36 - 1 - 2) ms / 1 ms per token a step of ~36 ms:
     * about 2500 / 33 steps x 36 ms = 2.7 s */
    double w = ul_sched_predict_wait_s(&s, 100);
    cr_assert(w > 1.8 && w < 4.0, "predicted %.2f s", w);
    uint64_t t0 = s.now_ns;
    while (!q[11].n_out) one_step(&s);
    double real = (double)(s.now_ns - t0) / 1e9;
    cr_log_info("predicted wait %.2f s, the last of the queue waited %.2f s", w, real);
    cr_assert(fabs(w - real) < 0.25 * real, "predicted %.2f s, real %.2f s", w, real);
    for (int i = 0; i < 12; i++) ul_sched_cancel(&s, &q[i].seq);
    one_step(&s);
    sched_close(&s);
}

Test(admit, predicted_wait_counts_a_full_kv_pool) {
    /* 14 pages of 16 tokens. Two sequences of 100 + 12 and 98 + 14 tokens hold all of them
     * (7 pages each) once prefilled: a new 20-token prompt (2 pages) waits until one of
     * them ends, ~12 decode steps, although there is no prefill queued ahead of it. */
    ul_sched_t s;
    ul_sched_config_t cfg = {.max_batch_tokens = 256, .itl_target_ms = 100};
    cr_assert_eq(ul_sched_init(&s, backend_pages(10000, 1000, 100, 14), &cfg), 0);
    aseq_t w[3], a, c, d;
    for (int i = 0; i < 3; i++) { /* the step-time model learns what steps cost */
        aseq_init(&w[i], 6 + 2 * i);
        cr_assert_eq(add(&s, &w[i], 20 + 10 * i, 30 * i), 0);
    }
    run_all(&s);
    aseq_init(&a, 12);
    aseq_init(&c, 14);
    cr_assert_eq(add(&s, &a, 100, 1), 0);
    cr_assert_eq(add(&s, &c, 98, 2), 0);
    one_step(&s);
    one_step(&s);
    cr_assert_eq(s.pool.n_free, 0, "the two hold the whole pool");
    double w0 = ul_sched_predict_wait_s(&s, 20);
    uint64_t t0 = s.now_ns;
    aseq_init(&d, 4);
    cr_assert_eq(add(&s, &d, 20, 3), 0);
    while (!d.n_out) cr_assert_gt(one_step(&s), 0);
    double real = (double)(s.now_ns - t0) / 1e9;
    cr_log_info("full pool: predicted wait %.3f s, real %.3f s", w0, real);
    cr_assert(a.finished || c.finished, "it waited for the pages of one that ended");
    cr_assert(fabs(w0 - real) < 0.25 * real, "predicted %.3f s, real %.3f s", w0, real);
    run_all(&s);
    cr_assert(a.finished && c.finished && d.finished);
    sched_close(&s);
}
