/* The backend worker thread (worker.h): queue, parking, and the completion hand-off to
 * the loop's bridge — the one file of a backend that includes the bridge, so compute code
 * (cpu, gpu) never sees libuv. */
#include "engine/worker.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/bridge.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

static int idle(const ul_worker_t *w) {
    return ul_queue_empty(&w->queue) && ul_queue_empty(&w->finishing);
}

static int64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The oldest pending step's deadline, or 0 when nothing is watched; mu held. */
static int64_t deadline(const ul_worker_t *w) {
    if (w->ops.step_timeout_ns <= 0 || w->n_pend == 0) return 0;
    return w->pend[0].t0_ns + w->ops.step_timeout_ns;
}

static int expired(const ul_worker_t *w) {
    int64_t d = deadline(w);
    return d && mono_ns() >= d;
}

/* Waits on cv, at most until the watchdog's deadline (or until abs_ns when non-zero and
 * earlier); mu held. Returns non-zero on a timeout. */
static int wait_cv(ul_worker_t *w, int64_t abs_ns) {
    int64_t d = deadline(w);
    if (abs_ns && (!d || abs_ns < d)) d = abs_ns;
    if (!d) return pthread_cond_wait(&w->cv, &w->mu), 0;
    struct timespec ts = {.tv_sec = (time_t)(d / 1000000000), .tv_nsec = (long)(d % 1000000000)};
    return pthread_cond_timedwait(&w->cv, &w->mu, &ts) != 0;
}

/* Remembers an asynchronous step for the watchdog; mu held. Without memory the step is
 * simply not watched. */
static void watch(ul_worker_t *w, ul_step_t *step) {
    if (w->ops.step_timeout_ns <= 0) return;
    if (w->n_pend == w->cap_pend) {
        int32_t cap = w->cap_pend ? 2 * w->cap_pend : 8;
        ul_worker_pend_t *p = realloc(w->pend, (size_t)cap * sizeof *p);
        if (!p) return;
        w->pend = p;
        w->cap_pend = cap;
    }
    w->pend[w->n_pend++] = (ul_worker_pend_t){step, mono_ns()};
}

/* Forgets a pending step whose job came back; returns 0 if it was not pending; mu held. */
static int unwatch(ul_worker_t *w, const ul_step_t *step) {
    for (int32_t i = 0; i < w->n_pend; i++)
        if (w->pend[i].step == step) {
            memmove(&w->pend[i], &w->pend[i + 1], (size_t)(w->n_pend - i - 1) * sizeof *w->pend);
            w->n_pend--;
            return 1;
        }
    return 0;
}

/* The watchdog fired: every pending step fails (the oldest did not finish in time; the rest
 * wait behind it on the device) and their jobs become lost. mu held, released while
 * posting. */
static void time_out_pending(ul_worker_t *w) {
    int32_t n = w->n_pend;
    ul_worker_pend_t stack[8], *v = n <= 8 ? stack : malloc((size_t)n * sizeof *v);
    if (!v) { /* keep going without the copy: post one at a time */
        n = 1;
        v = stack;
    }
    memcpy(v, w->pend, (size_t)n * sizeof *v);
    memmove(w->pend, w->pend + n, (size_t)(w->n_pend - n) * sizeof *w->pend);
    w->n_pend -= n;
    w->n_lost += n;
    w->n_timed_out += n;
    int64_t now = mono_ns();
    pthread_mutex_unlock(&w->mu);
    for (int32_t i = 0; i < n; i++) {
        ul_step_t *st = v[i].step;
        UL_LOG_ERROR("%s: step of %d tokens did not complete within %.1f s: failing its "
                     "requests (device unresponsive)",
                     w->backend->vt ? w->backend->vt->name : "backend", st->n_tokens,
                     (double)(now - v[i].t0_ns) / 1e9);
        st->status = UL_ETIMEDOUT;
        st->compute_us = (double)(now - v[i].t0_ns) / 1e3;
        ul_worker_complete(w, st);
    }
    if (v != stack) free(v);
    pthread_mutex_lock(&w->mu);
}

static int chained(const ul_step_t *st) {
    for (int32_t i = 0; i < st->n_seqs; i++)
        if (st->seqs[i].chain > 0) return 1;
    return 0;
}

/* Whether the queue's head must wait for earlier steps to complete (a deferred step, or a
 * chained one the backend does not resolve itself); mu held. */
static int head_waits(const ul_worker_t *w) {
    if (ul_queue_empty(&w->queue) || w->n_completed >= w->n_taken) return 0;
    if (w->wait_for > w->n_completed) return 1;
    return !w->ops.chains_on_device &&
           chained(UL_QUEUE_DATA(ul_queue_head(&w->queue), ul_step_t, node));
}

/* Keeps the outputs a chained step after st reads; mu held, st just completed. */
static void keep_outputs(ul_worker_t *w, const ul_step_t *st) {
    w->n_completed++;
    w->prev_status = st->status;
    if (st->n_seqs > w->cap_prev) {
        struct ul_worker_out_s *p = realloc(w->prev, (size_t)st->n_seqs * sizeof *p);
        if (!p) {
            w->n_prev = -1;
            return;
        }
        w->prev = p;
        w->cap_prev = st->n_seqs;
    }
    for (int32_t i = 0; i < st->n_seqs; i++) {
        const ul_step_seq_t *ss = &st->seqs[i];
        w->prev[i] =
            (struct ul_worker_out_s){ss->sample ? ss->out_token : -1, {ss->rng[0], ss->rng[1]}};
    }
    w->n_prev = st->n_seqs;
}

static int penalized(const ul_sampling_t *p) {
    return p->repeat_last_n != 0 && (p->repeat_penalty != 1.0f || p->frequency_penalty != 0.0f ||
                                     p->presence_penalty != 0.0f);
}

static int32_t window(const ul_step_seq_t *ss) {
    int32_t n = ss->history ? ss->n_history : 0, k = ss->sampling.repeat_last_n;
    return k < 0 || k > n ? n : k;
}

/* A chained entry's history ends before its input token (the loop appends that token when
 * it absorbs the step before, after this step may have sampled): an entry whose penalties
 * read the history gets, in a buffer of the worker's, the last window tokens of it followed
 * by that token. Buffer n_taken % 2: a step's copy lives until the step after next is taken,
 * which is after it completed (at most two steps are in flight). mu held. */
static int extend_histories(ul_worker_t *w, ul_step_t *st) {
    size_t need = 0;
    for (int32_t i = 0; i < st->n_seqs; i++)
        if (st->seqs[i].chain > 0 && penalized(&st->seqs[i].sampling))
            need += (size_t)window(&st->seqs[i]) + 1;
    if (need == 0) return 0;
    int b = (int)(w->n_taken % 2);
    if (need > w->hist_cap[b]) {
        int32_t *p = realloc(w->hist[b], need * sizeof *p);
        if (!p) return UL_ENOMEM;
        w->hist[b] = p;
        w->hist_cap[b] = need;
    }
    int32_t *h = w->hist[b];
    for (int32_t i = 0; i < st->n_seqs; i++) {
        ul_step_seq_t *ss = &st->seqs[i];
        if (ss->chain <= 0 || !penalized(&ss->sampling)) continue;
        int32_t k = window(ss);
        if (k > 0) memcpy(h, ss->history + ss->n_history - k, (size_t)k * sizeof *h);
        h[k] = -1; /* the token, filled in by resolve_on_host */
        ss->history = h;
        ss->n_history = k + 1;
        h += k + 1;
    }
    return 0;
}

/* The chained entries of st from the step completed just before it; mu held. 0, or the
 * status st fails with: that step's failure, or a chain to an entry that sampled nothing. */
static int resolve_on_host(ul_worker_t *w, ul_step_t *st) {
    if (w->prev_status) return w->prev_status;
    int rc = extend_histories(w, st);
    if (rc) return rc;
    for (int32_t i = 0; i < st->n_seqs; i++) {
        ul_step_seq_t *ss = &st->seqs[i];
        if (ss->chain <= 0) continue;
        if (w->n_prev < 0) return UL_ENOMEM;
        const struct ul_worker_out_s *o = ss->chain <= w->n_prev ? &w->prev[ss->chain - 1] : NULL;
        if (!o || o->token < 0 || ss->n_tokens != 1) return UL_EINVAL;
        st->tokens[ss->tok_offset] = o->token;
        if (penalized(&ss->sampling)) ((int32_t *)ss->history)[ss->n_history - 1] = o->token;
        ss->rng[0] = o->rng[0];
        ss->rng[1] = o->rng[1];
        ss->chain = 0;
    }
    return 0;
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
        int64_t until = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
        while (!w->stop && idle(w) && !expired(w))
            if (wait_cv(w, until) && mono_ns() >= until) break;
        if (w->stop || !idle(w) || expired(w)) return;
        pthread_mutex_unlock(&w->mu);
        w->ops.idle(w->ctx);
        pthread_mutex_lock(&w->mu);
    }
    while (!w->stop && idle(w) && !expired(w)) wait_cv(w, 0);
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
        if (expired(w)) {
            time_out_pending(w);
            continue;
        }
        if (!w->stop && idle(w)) wait_for_step(w);
        if (expired(w)) continue;
        if (!w->stop && w->ops.max_in_flight > 0 && w->in_flight >= w->ops.max_in_flight &&
            ul_queue_empty(&w->finishing)) {
            wait_cv(w, 0); /* woken by a completion, a finish job or the watchdog */
            continue;
        }
        if (!ul_queue_empty(&w->finishing)) continue;
        /* stop: steps in flight finish; queued ones are dropped, never posted */
        if (w->stop) {
            if (w->in_flight == 0) break;
            wait_cv(w, 0); /* a pending job may still need finishing, or time out */
            continue;
        }
        if (head_waits(w)) {
            wait_cv(w, 0); /* woken by the completion it waits for, or the watchdog */
            continue;
        }
        ul_queue_t *q = ul_queue_head(&w->queue);
        ul_queue_remove(q);
        w->in_flight++;
        w->n_taken++;
        ul_step_t *step = UL_QUEUE_DATA(q, ul_step_t, node);
        int refuse = w->n_lost > 0 ? UL_ETIMEDOUT : 0; /* the device holds timed-out work */
        if (!refuse && w->n_completed == w->n_taken - 1 && chained(step))
            refuse = resolve_on_host(w, step);
        if (refuse) {
            pthread_mutex_unlock(&w->mu);
            step->status = refuse;
            step->compute_us = 0;
            ul_worker_complete(w, step);
            pthread_mutex_lock(&w->mu);
            continue;
        }
        /* watched from before the launch: its job may come back before ops.step returns */
        watch(w, step);
        pthread_mutex_unlock(&w->mu);
        int r = w->ops.step(w->ctx, step);
        pthread_mutex_lock(&w->mu);
        if (r == UL_WORKER_DEFER) { /* back to the queue's head until the earlier complete */
            unwatch(w, step);
            w->in_flight--;
            w->n_taken--;
            w->wait_for = w->n_taken;
            ul_queue_insert_head(&w->queue, &step->node);
            continue;
        }
        if (r == UL_WORKER_DONE) {
            unwatch(w, step);
            pthread_mutex_unlock(&w->mu);
            ul_worker_complete(w, step);
            pthread_mutex_lock(&w->mu);
        }
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
    pthread_cond_init(&w->drain, &ca); /* stop's bounded wait for lost jobs */
    pthread_condattr_destroy(&ca);
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
    keep_outputs(w, step); /* before the post: then the loop owns the step again */
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
    if (!unwatch(w, job->step) && w->n_lost > 0) {
        /* a timed-out step's job, late: its step went back to the loop failed and may be
         * reused already; drop it untouched */
        if (--w->n_lost == 0)
            UL_LOG_WARN("%s: the device returned every timed-out step; steps run again",
                        w->backend->vt ? w->backend->vt->name : "backend");
        pthread_cond_broadcast(&w->drain); /* stop may wait for lost jobs */
        pthread_mutex_unlock(&w->mu);
        return;
    }
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
    /* lost jobs may still call back into the worker: give them one more bound */
    if (w->n_lost > 0) {
        int64_t until = mono_ns() + w->ops.step_timeout_ns;
        struct timespec ts = {.tv_sec = (time_t)(until / 1000000000),
                              .tv_nsec = (long)(until % 1000000000)};
        while (w->n_lost > 0)
            if (pthread_cond_timedwait(&w->drain, &w->mu, &ts)) break;
        if (w->n_lost > 0) {
            UL_LOG_ERROR("%s: the device never returned %d timed-out steps; leaving them",
                         w->backend->vt ? w->backend->vt->name : "backend", (int)w->n_lost);
            w->orphaned = 1;
        }
    }
    w->stop = 2;
    pthread_mutex_unlock(&w->mu);
}

int ul_worker_orphaned(ul_worker_t *w) {
    if (!w->started) return w->orphaned; /* freed: read by the owner's thread only */
    pthread_mutex_lock(&w->mu);
    int o = w->orphaned;
    pthread_mutex_unlock(&w->mu);
    return o;
}

int64_t ul_worker_timed_out(ul_worker_t *w) {
    pthread_mutex_lock(&w->mu);
    int64_t n = w->n_timed_out;
    pthread_mutex_unlock(&w->mu);
    return n;
}

void ul_worker_free(ul_worker_t *w) {
    if (!w->started) return;
    ul_worker_stop(w);
    free(w->pend);
    w->pend = NULL;
    free(w->prev);
    w->prev = NULL;
    for (int b = 0; b < 2; b++) {
        free(w->hist[b]);
        w->hist[b] = NULL;
        w->hist_cap[b] = 0;
    }
    if (!w->orphaned) { /* else a late callback may still lock mu */
        pthread_cond_destroy(&w->drain);
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
    }
    w->started = 0;
}
