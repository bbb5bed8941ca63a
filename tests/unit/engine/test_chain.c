/* Chained steps through the backend worker (backend.h "Pipelining"): step B is submitted
 * before step A completes and names, per sequence, A's entry whose sampled token is its
 * input. The worker must fill that token and A's RNG state in before B's step function
 * sees B, fail B without running it when A failed or the chain names an entry that sampled
 * nothing, and, for a backend that resolves chains on the device but defers one, hand the
 * step over again once A completed, resolved on the host. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "base/bridge.h"
#include "engine/worker.h"
#include "uvllm/err.h"

#define MAX_STEPS 8

/* What a step function saw of each step (by step data index). */
typedef struct {
    int ran;
    int32_t tokens[4];
    uint64_t rng0[4];
    int32_t chain[4];
    int32_t hist[4][8]; /* each entry's history as the step function saw it */
    int32_t n_hist[4];
} seen_t;

typedef struct {
    ul_backend_t base;
    ul_worker_t worker;
    seen_t seen[MAX_STEPS];
    int fail_id; /* this step fails (-1: none) */
    /* asynchronous variant: steps are completed by a helper thread after a delay */
    int async;
    int n_deferred;
} be_t;

/* Samples out_token = 100 * step + 10 * entry + 1 and rng0 = 1000 * step + entry. */
static void compute(be_t *b, ul_step_t *st) {
    int id = (int)(intptr_t)st->data;
    seen_t *sn = &b->seen[id];
    sn->ran = 1;
    for (int32_t i = 0; i < st->n_seqs && i < 4; i++) {
        sn->tokens[i] = st->tokens[st->seqs[i].tok_offset];
        sn->rng0[i] = st->seqs[i].rng[0];
        sn->chain[i] = st->seqs[i].chain;
        sn->n_hist[i] = st->seqs[i].n_history;
        for (int32_t k = 0; k < st->seqs[i].n_history && k < 8; k++)
            sn->hist[i][k] = st->seqs[i].history[k];
    }
    st->status = id == b->fail_id ? UL_EIO : 0;
    for (int32_t i = 0; i < st->n_seqs && !st->status; i++) {
        ul_step_seq_t *ss = &st->seqs[i];
        if (!ss->sample) continue;
        ss->out_token = 100 * id + 10 * i + 1;
        ss->rng[0] = (uint64_t)(1000 * id + i);
        ss->rng[1] = 7;
    }
}

static int sync_step(void *ctx, ul_step_t *st) {
    compute(ctx, st);
    return UL_WORKER_DONE;
}

typedef struct {
    ul_bridge_t bridge;
    int n_done, expect;
    int order[MAX_STEPS];
} loop_t;

static void on_done(ul_bridge_t *br, ul_queue_t *item) {
    loop_t *c = (loop_t *)br;
    ul_step_t *st = UL_QUEUE_DATA(item, ul_step_t, node);
    c->order[c->n_done] = (int)(intptr_t)st->data;
    if (++c->n_done == c->expect) ul_bridge_close(br, NULL);
}

/* Steps of two sequences each; tokens[] holds the inputs (-1 where chained). */
static ul_step_t steps[MAX_STEPS];
static ul_step_seq_t seqs[MAX_STEPS][2];
static int32_t toks[MAX_STEPS][2];

static void make_step(int id, int32_t chain0, int32_t chain1, int sample1) {
    memset(&steps[id], 0, sizeof steps[id]);
    memset(seqs[id], 0, sizeof seqs[id]);
    for (int i = 0; i < 2; i++) {
        int32_t ch = i ? chain1 : chain0;
        seqs[id][i].seq_id = (uint64_t)i;
        seqs[id][i].tok_offset = i;
        seqs[id][i].n_tokens = 1;
        seqs[id][i].sample = i ? sample1 : 1;
        seqs[id][i].chain = ch;
        seqs[id][i].rng[0] = 999; /* stale unless chained */
        seqs[id][i].out_token = -1;
        toks[id][i] = ch ? -1 : 50 + i;
    }
    steps[id].tokens = toks[id];
    steps[id].seqs = seqs[id];
    steps[id].n_seqs = 2;
    steps[id].n_tokens = 2;
    steps[id].data = (void *)(intptr_t)id;
}

static void run(be_t *b, const ul_worker_ops_t *ops, int n) {
    uv_loop_t loop;
    cr_assert_eq(uv_loop_init(&loop), 0);
    loop_t c = {.expect = n};
    cr_assert_eq(ul_bridge_init(&loop, &c.bridge, on_done), 0);
    cr_assert_eq(ul_worker_init(&b->worker, &b->base, ops, b), 0);
    b->base.bridge = &c.bridge;
    for (int i = 0; i < n; i++) cr_assert_eq(ul_worker_submit(&b->worker, &steps[i]), 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_assert_eq(c.n_done, n);
    for (int i = 0; i < n; i++) cr_assert_eq(c.order[i], i, "completions out of order");
    ul_worker_free(&b->worker);
    cr_assert_eq(uv_loop_close(&loop), 0);
}

Test(chain, chained_inputs_are_the_previous_steps_samples) {
    be_t b = {.fail_id = -1};
    make_step(0, 0, 0, 1);
    make_step(1, 2, 1, 1); /* crossed: entry 0 <- A's entry 1, entry 1 <- A's entry 0 */
    make_step(2, 1, 0, 1); /* entry 0 chained, entry 1 an ordinary token */
    static const ul_worker_ops_t ops = {.step = sync_step};
    run(&b, &ops, 3);
    cr_assert_eq(b.seen[1].tokens[0], 11, "got %d", b.seen[1].tokens[0]);
    cr_assert_eq(b.seen[1].tokens[1], 1);
    cr_assert_eq(b.seen[1].rng0[0], 1, "the RNG state step 0 left for its entry 1");
    cr_assert_eq(b.seen[1].rng0[1], 0);
    cr_assert_eq(b.seen[1].chain[0], 0, "resolved entries are no longer chained");
    cr_assert_eq(b.seen[2].tokens[0], 101);
    cr_assert_eq(b.seen[2].rng0[0], 1000);
    cr_assert_eq(b.seen[2].tokens[1], 51, "an unchained input is left alone");
    cr_assert_eq(b.seen[2].rng0[1], 999);
    cr_assert_eq(seqs[2][0].out_token, 201);
}

Test(chain, a_failed_step_fails_the_step_chained_on_it) {
    be_t b = {.fail_id = 1};
    make_step(0, 0, 0, 1);
    make_step(1, 1, 2, 1);
    make_step(2, 1, 0, 1); /* chained on the failed step */
    make_step(3, 0, 0, 1); /* not chained: runs */
    static const ul_worker_ops_t ops = {.step = sync_step};
    run(&b, &ops, 4);
    cr_assert_eq(steps[1].status, UL_EIO);
    cr_assert_eq(steps[2].status, UL_EIO, "got %d", steps[2].status);
    cr_assert_not(b.seen[2].ran, "a step chained on a failed one must not run");
    cr_assert(b.seen[3].ran);
    cr_assert_eq(steps[3].status, 0);
}

Test(chain, a_chain_to_an_entry_that_sampled_nothing_is_refused) {
    be_t b = {.fail_id = -1};
    make_step(0, 0, 0, 0); /* entry 1 samples nothing */
    make_step(1, 0, 2, 1);
    make_step(2, 3, 0, 1); /* out of range */
    static const ul_worker_ops_t ops = {.step = sync_step};
    run(&b, &ops, 3);
    cr_assert_eq(steps[1].status, UL_EINVAL);
    cr_assert_not(b.seen[1].ran);
    cr_assert_eq(steps[2].status, UL_EINVAL);
}

/* An asynchronous backend that resolves chains on the device, except that it defers any
 * chained step whose previous step is still pending (as a GPU backend does for rows its
 * device did not sample). Its device thread completes each step 20 ms after launch. */
typedef struct {
    be_t *b;
    ul_step_t *st;
    ul_worker_job_t job;
} pend_t;

static pend_t pends[MAX_STEPS];

static void *complete_later(void *arg) {
    pend_t *p = arg;
    struct timespec d = {0, 20000000};
    nanosleep(&d, NULL);
    compute(p->b, p->st);
    ul_worker_job_done(&p->job);
    return NULL;
}

static int async_step(void *ctx, ul_step_t *st) {
    be_t *b = ctx;
    for (int32_t i = 0; i < st->n_seqs; i++)
        if (st->seqs[i].chain > 0) {
            b->n_deferred++;
            return UL_WORKER_DEFER;
        }
    int id = (int)(intptr_t)st->data;
    pends[id] = (pend_t){b, st, {.w = &b->worker, .step = st}};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, complete_later, &pends[id]), 0);
    pthread_detach(t);
    return UL_WORKER_PENDING;
}

Test(chain, a_deferred_step_runs_after_the_previous_completes_resolved) {
    be_t b = {.fail_id = -1};
    make_step(0, 0, 0, 1);
    make_step(1, 1, 2, 1);
    static const ul_worker_ops_t ops = {
        .step = async_step, .chains_on_device = 1, .max_in_flight = 2};
    run(&b, &ops, 2);
    cr_assert_eq(b.n_deferred, 1, "deferred %d times", b.n_deferred);
    cr_assert_eq(b.seen[1].tokens[0], 1);
    cr_assert_eq(b.seen[1].tokens[1], 11);
    cr_assert_eq(b.seen[1].rng0[1], 1);
    cr_assert_eq(steps[1].status, 0);
}

Test(chain, penalties_count_the_chained_token) {
    be_t b = {.fail_id = -1};
    static const int32_t history[5] = {7, 8, 9, 10, 11};
    make_step(0, 0, 0, 1);
    make_step(1, 1, 2, 1);
    for (int i = 0; i < 2; i++) {
        seqs[1][i].history = history;
        seqs[1][i].n_history = 5;
        seqs[1][i].sampling.repeat_penalty = 1.0f;
    }
    seqs[1][0].sampling.repeat_penalty = 1.3f; /* entry 0: a window of the last 3 */
    seqs[1][0].sampling.repeat_last_n = 3;
    static const ul_worker_ops_t ops = {.step = sync_step};
    run(&b, &ops, 2);
    cr_assert_eq(b.seen[1].n_hist[0], 4, "window + the chained token, got %d", b.seen[1].n_hist[0]);
    int32_t want[4] = {9, 10, 11, 1};
    cr_assert_arr_eq(b.seen[1].hist[0], want, sizeof want);
    cr_assert_eq(b.seen[1].n_hist[1], 5, "no penalty: the history is left alone");
    cr_assert_eq(b.seen[1].hist[1][4], 11);
    cr_assert_eq(history[4], 11);
}
