/* The backend worker thread (worker.h): queue, parking, and the completion hand-off to
 * the loop's bridge — the one file of a backend that includes the bridge, so compute code
 * (cpu, gpu) never sees libuv. */
#include "engine/worker.h"

#include <time.h>

#include "base/bridge.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

static int idle(const ul_worker_t *w) {
    return ul_queue_empty(&w->queue) && ul_queue_empty(&w->finishing);
}

/* Waits for a step, a job to finish or stop, with the idle hook after ops.idle_after_ns; mu held.
 */
static void wait_for_step(ul_worker_t *w) {
    if (w->ops.idle && w->ops.idle_after_ns > 0) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        int64_t ns = (int64_t)ts.tv_nsec + w->ops.idle_after_ns;
        ts.tv_sec += (time_t)(ns / 1000000000L);
        ts.tv_nsec = (long)(ns % 1000000000L);
        while (!w->stop && idle(w))
            if (pthread_cond_timedwait(&w->cv, &w->mu, &ts)) break;
        if (w->stop || !idle(w)) return;
        pthread_mutex_unlock(&w->mu);
        w->ops.idle(w->ctx);
        pthread_mutex_lock(&w->mu);
    }
    while (!w->stop && idle(w)) pthread_cond_wait(&w->cv, &w->mu);
}

static void *run(void *arg) {
    ul_worker_t *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        /* finishing jobs run even while stopping: their steps are in flight */
        if (!ul_queue_empty(&w->finishing)) {
            ul_queue_t *q = ul_queue_head(&w->finishing);
            ul_queue_remove(q);
            pthread_mutex_unlock(&w->mu);
            ul_worker_job_t *job = UL_QUEUE_DATA(q, ul_worker_job_t, node);
            if (job->finish) job->finish(job->ctx, job->step);
            ul_worker_complete(w, job->step);
            pthread_mutex_lock(&w->mu);
            continue;
        }
        if (!w->stop && idle(w)) wait_for_step(w);
        if (!w->stop && w->ops.max_in_flight > 0 && w->in_flight >= w->ops.max_in_flight &&
            ul_queue_empty(&w->finishing)) {
            pthread_cond_wait(&w->cv, &w->mu); /* woken by a completion or a finish job */
            continue;
        }
        if (!ul_queue_empty(&w->finishing)) continue;
        /* stop: steps in flight finish; queued ones are dropped, never posted */
        if (w->stop) {
            if (w->in_flight == 0) break;
            pthread_cond_wait(&w->cv, &w->mu); /* a pending job may still need finishing */
            continue;
        }
        ul_queue_t *q = ul_queue_head(&w->queue);
        ul_queue_remove(q);
        w->in_flight++;
        pthread_mutex_unlock(&w->mu);
        ul_step_t *step = UL_QUEUE_DATA(q, ul_step_t, node);
        if (w->ops.step(w->ctx, step) == UL_WORKER_DONE) ul_worker_complete(w, step);
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

int ul_worker_init(ul_worker_t *w, ul_backend_t *backend, const ul_worker_ops_t *ops, void *ctx) {
    *w = (ul_worker_t){.backend = backend, .ops = *ops, .ctx = ctx};
    ul_queue_init(&w->queue);
    ul_queue_init(&w->finishing);
    pthread_mutex_init(&w->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* the idle timeout ignores clock jumps */
    pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_cond_init(&w->drain, NULL);
    if (pthread_create(&w->thread, NULL, run, w)) {
        pthread_cond_destroy(&w->drain);
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        return UL_ENOMEM;
    }
    w->started = 1;
    return 0;
}

int ul_worker_submit(ul_worker_t *w, ul_step_t *step) {
    if (!w->backend->bridge) return UL_ESTATE;
    pthread_mutex_lock(&w->mu);
    if (w->stop) {
        pthread_mutex_unlock(&w->mu);
        return UL_ECLOSED;
    }
    ul_queue_insert_tail(&w->queue, &step->node);
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return 0;
}

void ul_worker_complete(ul_worker_t *w, ul_step_t *step) {
    pthread_mutex_lock(&w->mu);
    UL_ASSERT(w->in_flight > 0);
    UL_ASSERT(w->backend->bridge);
    ul_bridge_post(w->backend->bridge, &step->node);
    /* Under mu: once it is released, stop may return and the worker be freed. */
    if (--w->in_flight == 0) pthread_cond_broadcast(&w->drain);
    pthread_cond_signal(&w->cv); /* a stopping or max_in_flight-bound worker waits for it */
    pthread_mutex_unlock(&w->mu);
}

void ul_worker_job_done(void *arg) {
    ul_worker_job_t *job = arg;
    ul_worker_t *w = job->w;
    pthread_mutex_lock(&w->mu);
    ul_queue_insert_tail(&w->finishing, &job->node);
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

void ul_worker_stop(ul_worker_t *w) {
    if (!w->started) return;
    pthread_mutex_lock(&w->mu);
    if (w->stop == 2) { /* stopped before */
        pthread_mutex_unlock(&w->mu);
        return;
    }
    w->stop = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    pthread_mutex_lock(&w->mu);
    while (w->in_flight > 0) pthread_cond_wait(&w->drain, &w->mu);
    w->stop = 2;
    pthread_mutex_unlock(&w->mu);
}

void ul_worker_free(ul_worker_t *w) {
    if (!w->started) return;
    ul_worker_stop(w);
    pthread_cond_destroy(&w->drain);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    w->started = 0;
}
