/* The one backend worker: a thread that takes submitted steps in order, hands each to its
 * backend's step function, and brings every finished step back to the loop through the
 * backend's bridge. Backends (null, cpu, gpu) embed one and never see libuv: the only way
 * a step crosses back is ul_worker_complete, which posts it on the bridge (base/bridge.c).
 *
 * Two kinds of step function:
 * - synchronous (null, cpu): computes the step on the worker thread and returns
 *   UL_WORKER_DONE; the worker completes the step itself.
 * - asynchronous (gpu): enqueues the step's work (copies, kernels) and returns
 *   UL_WORKER_PENDING; later, from the device runtime's thread, the job's host function
 *   (ul_worker_job_done, below) hands it back to the worker, which finishes and completes
 *   it. (ul_worker_complete may also be called directly from any thread: it only locks a
 *   mutex, posts on the bridge and wakes a waiting stop; it never calls the backend.)
 *
 * Idle parking: when no step arrives within idle_after_ns of the last one, idle() runs on
 * the worker thread (the cpu backend parks its spinning pool there); the worker then waits
 * without a timeout until the next step or ul_worker_stop.
 *
 * Watchdog (asynchronous steps, ops.step_timeout_ns > 0): a step whose job has not come
 * back within the bound after ops.step returned UL_WORKER_PENDING is failed with
 * UL_ETIMEDOUT, and so is every other step still pending (they queue behind it on the
 * device), so their requests end with an error instead of waiting forever. The device
 * still owns those jobs: until every one of them has called ul_worker_job_done (late: it
 * is then dropped, its finish never runs and its step is not touched) the worker is "lost"
 * and fails each new step at once with UL_ETIMEDOUT without calling ops.step; the last
 * late callback ends that and steps run again. Synchronous steps are not watched.
 *
 * Threads: ul_worker_submit from the loop thread; ul_worker_complete and
 * ul_worker_job_done from any thread;
 * ul_worker_stop / ul_worker_free from the thread that owns the backend (never from the
 * worker or a completion callback). */
#ifndef UL_ENGINE_WORKER_H
#define UL_ENGINE_WORKER_H

#include <pthread.h>
#include <stdint.h>

#include "base/queue.h"
#include "uvllm/backend.h"

#define UL_WORKER_DONE 0
#define UL_WORKER_PENDING 1
/* ops.step cannot take this step before the previous one completed (a chained entry it
 * cannot resolve on the device): the worker hands it over again once every earlier step
 * completed, its chained entries then resolved on the host. */
#define UL_WORKER_DEFER 2

typedef struct ul_worker_s ul_worker_t;

typedef struct ul_worker_ops_s {
    /* Worker thread. Fills step->status (and outputs) and returns UL_WORKER_DONE, or returns
     * UL_WORKER_PENDING and completes the step later with ul_worker_complete. */
    int (*step)(void *ctx, ul_step_t *step);
    void (*idle)(void *ctx); /* optional: worker thread, after idle_after_ns without a step */
    int64_t idle_after_ns;   /* 0 = never call idle */
    /* Steps handed to step() and not yet completed, at most (0 = no limit): a backend whose
     * pinned buffers hold one step sets 1, and the next step waits for the previous one's
     * completion, not for its submission. */
    int32_t max_in_flight;
    /* Asynchronous steps not completed this long after ops.step fail (the watchdog, above);
     * 0 = wait forever. */
    int64_t step_timeout_ns;
    /* Chained steps (backend.h "Pipelining"). 0: the worker hands a chained step to ops.step
     * only once the step before it completed, after writing each chained entry's token and
     * RNG state from that step's outputs (and, for an entry with penalties, pointing its
     * history at a copy of the window that ends with that token) and setting its chain to
     * 0. 1 (asynchronous
     * backends): ops.step may get a chained step while the step before is still pending and
     * resolves what is still chained on the device, or returns UL_WORKER_DEFER. */
    int chains_on_device;
} ul_worker_ops_t;

typedef struct ul_worker_pend_s {
    ul_step_t *step;
    int64_t t0_ns; /* CLOCK_MONOTONIC when ops.step returned UL_WORKER_PENDING */
} ul_worker_pend_t;

struct ul_worker_s {
    ul_backend_t *backend; /* completions go to backend->bridge, read at completion time */
    ul_worker_ops_t ops;
    void *ctx;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;    /* a step was queued, or stop */
    pthread_cond_t drain; /* in_flight went down */
    ul_queue_t queue;     /* submitted, not yet handed to ops.step; guarded by mu */
    ul_queue_t finishing; /* ul_worker_job_t whose device work is done; guarded by mu */
    int32_t in_flight;    /* handed to ops.step, not yet completed; guarded by mu */
    int stop;             /* guarded by mu */
    int started;
    /* the watchdog's, guarded by mu: pending asynchronous steps, oldest first */
    ul_worker_pend_t *pend;
    int32_t n_pend, cap_pend;
    int32_t n_lost;      /* jobs of timed-out steps the device has not called back yet */
    int64_t n_timed_out; /* steps failed by the watchdog, ever */
    int orphaned;        /* stop gave up on lost jobs: the worker's memory must stay valid */
    /* chaining, guarded by mu: steps handed to ops.step (or refused) and completed, ever;
     * the outputs of the last step completed (what a chained step after it reads) */
    int64_t n_taken, n_completed;
    int64_t wait_for; /* the queue's head waits until n_completed reaches this (DEFER) */
    struct ul_worker_out_s {
        int32_t token;
        uint64_t rng[2];
    } * prev;
    int32_t n_prev, cap_prev; /* n_prev -1: the outputs could not be kept (no memory) */
    int prev_status;
    int32_t *hist[2]; /* chained entries' penalty windows (worker.c extend_histories) */
    size_t hist_cap[2];
};

/* Starts the thread. On failure (UL_ENOMEM) nothing is left to free. */
int ul_worker_init(ul_worker_t *w, ul_backend_t *backend, const ul_worker_ops_t *ops, void *ctx);
/* Loop thread: queue the step and return at once. UL_ESTATE without a bridge, UL_ECLOSED
 * after ul_worker_stop. */
int ul_worker_submit(ul_worker_t *w, ul_step_t *step);
/* Any thread, once per step handed to ops.step: post it to the loop. */
void ul_worker_complete(ul_worker_t *w, ul_step_t *step);

/* An asynchronous step's completion as a device runtime calls it: one function taking one
 * pointer (the shape of cudaHostFn_t), run on a thread of the runtime's, where it only
 * enqueues the job back to the worker thread and wakes it. The worker runs finish (host
 * work on the step's results: unpacking pinned buffers, sampling from copied logits), if
 * set, then completes the step, so steps reach the loop in the order their device work
 * ended, and only the worker thread ever posts on the bridge for an asynchronous backend.
 * Finished jobs go before new steps. The job is the backend's, one per step in flight,
 * valid until the step is completed. */
typedef struct ul_worker_job_s {
    ul_queue_t node; /* in the worker's finish queue */
    ul_worker_t *w;
    ul_step_t *step;
    void (*finish)(void *ctx, ul_step_t *step); /* optional; worker thread */
    void *ctx;
} ul_worker_job_t;

void ul_worker_job_done(void *job);
/* Stops taking steps: the step in the worker's hands finishes (and for asynchronous
 * backends every pending step completes, or times out) before this returns; queued steps
 * are dropped, never posted. Jobs of timed-out steps are waited for up to one more
 * step_timeout_ns; if the device still holds some, the worker is orphaned (below).
 * Idempotent. */
void ul_worker_stop(ul_worker_t *w);
/* Non-zero once stop has given up on jobs the device never returned: a late
 * ul_worker_job_done may still touch the worker, so its owner must not free it (nor the
 * jobs): it leaks them, which is all that is left to do with an unresponsive device. */
int ul_worker_orphaned(ul_worker_t *w);
/* Steps the watchdog has failed so far (any thread). */
int64_t ul_worker_timed_out(ul_worker_t *w);
/* ul_worker_stop, then releases the thread and locks (the locks stay when orphaned). */
void ul_worker_free(ul_worker_t *w);

#endif
