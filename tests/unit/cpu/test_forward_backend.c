/* The CPU backend through its vtable: submit() returns at once and every step comes back
 * on the loop thread through the bridge, in order, with the same tokens run() gives;
 * a malformed step completes with an error status instead of crashing; the reported pool
 * geometry matches the configuration. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "base/bridge.h"
#include "cpu/kv.h"
#include "engine/sampling.h"
#include "model/model.h"
#include "uvllm/backend.h"
#include "uvllm/err.h"

#include "../shared_model.h"
#include "cpu_cfg.h"

#define NSTEP 4

typedef struct {
    ul_step_t step;
    ul_step_seq_t seq;
    int32_t toks[8];
    int32_t pages[1];
    pthread_t done_on;
} job_t;

static int g_done;
static ul_step_t *g_order[NSTEP];

static void on_done(ul_bridge_t *b, ul_queue_t *item) {
    ul_step_t *st = UL_QUEUE_DATA(item, ul_step_t, node);
    job_t *j = st->data;
    j->done_on = pthread_self();
    g_order[g_done++] = st;
    if (g_done == NSTEP) ul_bridge_close(b, NULL);
}

static void init_job(job_t *j, int i, ul_sampling_t sp) {
    memset(j, 0, sizeof *j);
    for (int k = 0; k < 8; k++) j->toks[k] = 1 + ((i + 3) * (k + 5) * 37) % 500;
    j->toks[0] = 1;
    j->pages[0] = 3 * i + 1;
    j->seq = (ul_step_seq_t){.seq_id = (uint64_t)i,
                             .n_tokens = 8,
                             .pages = j->pages,
                             .n_pages = 1,
                             .sample = 1,
                             .sampling = sp};
    ul_sampling_rng_seed(42 + (uint64_t)i, j->seq.rng);
    j->step =
        (ul_step_t){.n_tokens = 8, .tokens = j->toks, .n_seqs = 1, .seqs = &j->seq, .data = j};
}

Test(backend_cpu, submit_completes_through_the_bridge_like_run) {
    ul_model_t *m = shared_model("aidreams260K");
    ul_cpu_config_t cfg = tc_cpu_cfg(m, UL_TYPE_F16, 8, 16, 64);
    ul_backend_t *be;
    cr_assert_eq(ul_cpu_backend_create(m, &cfg, &be), 0);
    cr_assert_str_eq(be->vt->name, "cpu");
    cr_assert_eq(be->page_size, 8);
    cr_assert_eq(be->n_pages, 16);
    cr_assert_eq(be->n_vocab, m->hp.n_vocab);
    cr_assert_eq(be->n_ctx, 64);

    ul_sampling_t sp;
    ul_sampling_default(&sp);
    sp.temperature = 0.8f; /* seeded sampling: the same seed must give the same token */
    job_t jobs[NSTEP], ref[NSTEP];
    for (int i = 0; i < NSTEP; i++) {
        init_job(&ref[i], i, sp);
        cr_assert_eq(ul_backend_run(be, &ref[i].step), 0);
        init_job(&jobs[i], i, sp);
    }
    jobs[2].toks[3] = m->hp.n_vocab + 5; /* malformed: must come back with an error */

    uv_loop_t loop;
    uv_loop_init(&loop);
    ul_bridge_t bridge;
    cr_assert_eq(ul_bridge_init(&loop, &bridge, on_done), 0);
    be->bridge = &bridge;
    for (int i = 0; i < NSTEP; i++) cr_assert_eq(ul_backend_submit(be, &jobs[i].step), 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_assert_eq(g_done, NSTEP);
    for (int i = 0; i < NSTEP; i++) {
        cr_assert_eq(g_order[i], &jobs[i].step, "completions out of order");
        cr_assert(pthread_equal(jobs[i].done_on, pthread_self()));
        if (i == 2) {
            cr_assert_eq(jobs[i].step.status, UL_EINVAL);
            continue;
        }
        cr_assert_eq(jobs[i].step.status, 0);
        cr_assert_eq(jobs[i].seq.out_token, ref[i].seq.out_token);
        cr_assert_eq(jobs[i].seq.rng[0], ref[i].seq.rng[0]);
        cr_assert_gt(jobs[i].step.compute_us, 0);
    }
    cr_assert_eq(uv_loop_close(&loop), 0);
    ul_backend_destroy(be);
    ul_model_free(m);
}
