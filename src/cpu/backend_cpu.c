/* The CPU backend behind include/uvllm/backend.h: a dedicated worker thread takes steps
 * from a queue (submit never blocks the loop beyond a mutex), runs the forward pass and
 * the sampling on the thread pool, and posts each finished step to the loop's bridge.
 * run() does the same synchronously on the caller's thread, serialised with the worker
 * because one ul_fwd_t computes one step at a time. */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "base/bridge.h"
#include "cpu/forward.h"
#include "uvllm/backend.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

typedef struct {
    ul_backend_t base;
    ul_fwd_t *fwd;
    pthread_t thread;
    int started;
    pthread_mutex_t mu; /* guards queue and stop */
    pthread_cond_t cv;
    ul_queue_t queue; /* submitted steps, in order */
    int stop;
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

/* How long the worker waits for the next step before parking the pool's spinning
 * threads: longer than the loop's turnaround between two steps, so a busy server never
 * pays the futex wake-up, short enough that an idle one stops burning cores. */
#define PARK_AFTER_NS 3000000L

static void wait_for_step(cpu_backend_t *b) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += PARK_AFTER_NS;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    while (!b->stop && ul_queue_empty(&b->queue))
        if (pthread_cond_timedwait(&b->cv, &b->mu, &ts)) break;
    if (b->stop || !ul_queue_empty(&b->queue)) return;
    pthread_mutex_unlock(&b->mu);
    pthread_mutex_lock(&b->fwd_mu);
    ul_pool_sleep(b->fwd->pool);
    pthread_mutex_unlock(&b->fwd_mu);
    pthread_mutex_lock(&b->mu);
    while (!b->stop && ul_queue_empty(&b->queue)) pthread_cond_wait(&b->cv, &b->mu);
}

static void *worker(void *arg) {
    cpu_backend_t *b = arg;
    pthread_mutex_lock(&b->mu);
    for (;;) {
        if (!b->stop && ul_queue_empty(&b->queue)) wait_for_step(b);
        /* destroy: finish the step in flight only; queued ones are dropped, never posted */
        if (b->stop) break;
        ul_queue_t *q = ul_queue_head(&b->queue);
        ul_queue_remove(q);
        pthread_mutex_unlock(&b->mu);
        ul_step_t *step = UL_QUEUE_DATA(q, ul_step_t, node);
        compute(b, step);
        ul_bridge_post(b->base.bridge, &step->node);
        pthread_mutex_lock(&b->mu);
    }
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

static int cpu_submit(ul_backend_t *base, ul_step_t *step) {
    cpu_backend_t *b = (cpu_backend_t *)base;
    if (!base->bridge) return UL_ESTATE;
    pthread_mutex_lock(&b->mu);
    if (b->stop) {
        pthread_mutex_unlock(&b->mu);
        return UL_ECLOSED;
    }
    ul_queue_insert_tail(&b->queue, &step->node);
    pthread_cond_signal(&b->cv);
    pthread_mutex_unlock(&b->mu);
    return 0;
}

static int cpu_run(ul_backend_t *base, ul_step_t *step) {
    cpu_backend_t *b = (cpu_backend_t *)base;
    compute(b, step);
    return step->status;
}

static void cpu_destroy(ul_backend_t *base) {
    cpu_backend_t *b = (cpu_backend_t *)base;
    if (b->started) {
        pthread_mutex_lock(&b->mu);
        b->stop = 1;
        pthread_cond_signal(&b->cv);
        pthread_mutex_unlock(&b->mu);
        pthread_join(b->thread, NULL);
    }
    ul_fwd_free(b->fwd);
    pthread_cond_destroy(&b->cv);
    pthread_mutex_destroy(&b->mu);
    pthread_mutex_destroy(&b->fwd_mu);
    free(b);
}

static const ul_backend_vtbl_t cpu_vtbl = {
    .name = "cpu",
    .submit = cpu_submit,
    .run = cpu_run,
    .destroy = cpu_destroy,
};

int ul_cpu_backend_create(const ul_model_t *m, const ul_cpu_config_t *cfg, ul_backend_t **out) {
    *out = NULL;
    cpu_backend_t *b = calloc(1, sizeof *b);
    if (!b) return UL_ENOMEM;
    pthread_mutex_init(&b->mu, NULL);
    pthread_mutex_init(&b->fwd_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* the park timeout ignores clock jumps */
    pthread_cond_init(&b->cv, &ca);
    pthread_condattr_destroy(&ca);
    ul_queue_init(&b->queue);
    int rc = ul_fwd_create(m, cfg, &b->fwd);
    if (!rc && pthread_create(&b->thread, NULL, worker, b)) rc = UL_ENOMEM;
    if (rc) {
        cpu_destroy(&b->base);
        return rc;
    }
    b->started = 1;
    b->base = (ul_backend_t){
        .vt = &cpu_vtbl,
        .bridge = NULL,
        .model = m,
        .n_vocab = m->hp.n_vocab,
        .n_ctx = b->fwd->n_ctx,
        .page_size = b->fwd->kv.page_size,
        .n_pages = b->fwd->kv.n_pages,
        .eos_id = m->vocab ? ul_vocab_eos(m->vocab) : -1,
    };
    *out = &b->base;
    return 0;
}
