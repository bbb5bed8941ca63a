/* The CPU backend behind include/uvllm/backend.h: the backend worker (engine/worker.h)
 * takes steps in order, runs the forward pass and the sampling on the thread pool, and
 * hands each finished step back to the loop. run() does the same synchronously on the
 * caller's thread, serialised with the worker because one ul_fwd_t computes one step at a
 * time. */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "cpu/forward.h"
#include "engine/worker.h"
#include "uvllm/backend.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

typedef struct {
    ul_backend_t base;
    ul_fwd_t *fwd;
    ul_worker_t worker;
    pthread_mutex_t fwd_mu; /* one step at a time through fwd (worker vs run) */
} cpu_backend_t;

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void compute(cpu_backend_t *b, ul_step_t *step) {
    pthread_mutex_lock(&b->fwd_mu);
    double t0 = now_us();
    step->status = ul_fwd_step(b->fwd, step, NULL);
    step->compute_us = now_us() - t0;
    pthread_mutex_unlock(&b->fwd_mu);
    if (step->status)
        UL_LOG_WARN("cpu: step of %d tokens refused: %s", step->n_tokens,
                    ul_strerror(step->status));
}

static int worker_step(void *ctx, ul_step_t *step) {
    compute(ctx, step);
    return UL_WORKER_DONE;
}

/* Parks the pool's spinning threads once the worker has waited PARK_AFTER_NS for a step. */
static void worker_idle(void *ctx) {
    cpu_backend_t *b = ctx;
    pthread_mutex_lock(&b->fwd_mu);
    ul_pool_sleep(b->fwd->pool);
    pthread_mutex_unlock(&b->fwd_mu);
}

/* Longer than the loop's turnaround between two steps, so a busy server never pays the
 * futex wake-up, short enough that an idle one stops burning cores. */
#define PARK_AFTER_NS 3000000L

static int cpu_submit(ul_backend_t *base, ul_step_t *step) {
    return ul_worker_submit(&((cpu_backend_t *)base)->worker, step);
}

static int cpu_run(ul_backend_t *base, ul_step_t *step) {
    cpu_backend_t *b = (cpu_backend_t *)base;
    compute(b, step);
    return step->status;
}

static void cpu_destroy(ul_backend_t *base) {
    cpu_backend_t *b = (cpu_backend_t *)base;
    ul_worker_free(&b->worker);
    ul_fwd_free(b->fwd);
    pthread_mutex_destroy(&b->fwd_mu);
    free(b);
}

static const ul_backend_vtbl_t cpu_vtbl = {
    .name = "cpu",
    .submit = cpu_submit,
    .run = cpu_run,
    .destroy = cpu_destroy,
};

/* beside: the CPU backend whose thread pool this one computes on, or NULL */
static int create(const ul_model_t *m, const ul_cpu_config_t *cfg, ul_backend_t *beside,
                  ul_backend_t **out) {
    *out = NULL;
    cpu_backend_t *b = calloc(1, sizeof *b);
    if (!b) return UL_ENOMEM;
    pthread_mutex_init(&b->fwd_mu, NULL);
    int rc =
        ul_fwd_create_on(m, cfg, beside ? ((cpu_backend_t *)beside)->fwd->pool : NULL, &b->fwd);
    if (rc) {
        cpu_destroy(&b->base);
        return rc;
    }
    b->base = (ul_backend_t){
        .vt = &cpu_vtbl,
        .bridge = NULL,
        .model = m,
        .n_vocab = m->hp.n_vocab,
        .n_ctx = b->fwd->n_ctx,
        .page_size = b->fwd->kv.page_size,
        .n_pages = b->fwd->kv.n_pages,
        .eos_id = m->vocab ? ul_vocab_eos(m->vocab) : -1,
        .max_step_tokens = b->fwd->max_tokens,
        .max_in_flight = 2,     /* the worker resolves chained steps on the host */
        .spec = 1,              /* output() verifies proposals (engine/spec.h) */
        .n_embd = m->hp.n_embd, /* forward.c pools embedding entries */
    };
    static const ul_worker_ops_t ops = {
        .step = worker_step, .idle = worker_idle, .idle_after_ns = PARK_AFTER_NS};
    if ((rc = ul_worker_init(&b->worker, &b->base, &ops, b)) != 0) {
        cpu_destroy(&b->base);
        return rc;
    }
    *out = &b->base;
    return 0;
}

int ul_cpu_backend_create(const ul_model_t *m, const ul_cpu_config_t *cfg, ul_backend_t **out) {
    return create(m, cfg, NULL, out);
}

int ul_cpu_backend_create_beside(const ul_model_t *m, const ul_cpu_config_t *cfg,
                                 ul_backend_t *target, ul_backend_t **out) {
    if (!target || target->vt != &cpu_vtbl) return UL_EINVAL;
    return create(m, cfg, target, out);
}
