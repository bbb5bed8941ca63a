/* The loop side of the scheduler (driver.h): the clock, the bridge, the kick and the
 * pipelining depth. The policy it drives reads the time only from sched->now_ns. */
#include "sched/driver.h"

#include <string.h>

#include "sched/sched_impl.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

/* A wake-up of the policy: the one clock read it sees until the next. */
static void wake(ul_driver_t *d) { d->sched->now_ns = uv_hrtime(); }

static void on_handle_closed(uv_handle_t *h) {
    ul_driver_t *d = h->data;
    if (--d->n_open_handles == 0 && d->close_cb) d->close_cb(d);
}

static void on_bridge_closed(ul_bridge_t *b) { on_handle_closed((uv_handle_t *)&b->async); }

static void close_handles(ul_driver_t *d) {
    /* already closing (pump may run twice per completion before the close callbacks) */
    if (d->n_open_handles != 2 || uv_is_closing((uv_handle_t *)&d->kick)) return;
    uv_idle_stop(&d->kick);
    d->kick_active = 0;
    d->sched->kick = NULL;
    uv_close((uv_handle_t *)&d->kick, on_handle_closed);
    ul_bridge_close(&d->bridge, on_bridge_closed);
    d->sched->backend->bridge = NULL;
}

/* Absorbs the steps done, oldest first (a refused step waits for the older ones). */
static int absorb_done(ul_sched_t *s) {
    int n = 0;
    for (; ul_sched_in_flight(s) > 0 && s->slot[s->head].done; n++) ul_sched_step_absorb(s);
    return n;
}

/* Builds and submits steps while fewer than the depth are in flight and there is work that
 * may run. */
static void pump(ul_driver_t *d) {
    ul_sched_t *s = d->sched;
    while (ul_sched_in_flight(s) < d->depth) {
        if (d->closing) ul_sched_shutdown(s);
        int n = ul_sched_step_build(s);
        if (n == 0) {
            if (d->closing && ul_sched_n_active(s) == 0 && ul_sched_in_flight(s) == 0)
                close_handles(d);
            return;
        }
        int rc = ul_backend_submit(s->backend, s->step);
        if (rc == 0) continue;
        /* The backend refused the step: fail its sequences rather than retry forever. */
        UL_LOG_ERROR("backend %s refused a step: %s", s->backend->vt->name, ul_strerror(rc));
        s->step->status = rc;
        s->slot[(s->head + ul_sched_in_flight(s) - 1) % s->depth].done = 1;
        if (!absorb_done(s)) return; /* after the step in flight, with it */
        ul_sched_step_deliver(s);
    }
}

static void on_kick(uv_idle_t *h) {
    ul_driver_t *d = h->data;
    uv_idle_stop(h);
    d->kick_active = 0;
    wake(d);
    pump(d);
}

/* Double buffering: the results of step N go into the sequences, step N+1 is submitted,
 * and only then do N's callbacks (detokenize, stop strings, SSE frames; the writes follow
 * in the server's check phase) run, while the backend computes N+1. The second pump
 * covers what the callbacks changed when N+1 could not be built before them (everything
 * was ending, or closing). Pipelining: N+1 is in flight already, so N's callbacks run
 * first (a stop string they find keeps the sequence out of N+2), then N+2 is built. */
static void on_step_done(ul_bridge_t *b, ul_queue_t *item) {
    ul_driver_t *d = b->data;
    ul_sched_t *s = d->sched;
    struct ul_sched_slot_s *sl = &s->slot[s->head];
    UL_ASSERT(ul_sched_in_flight(s) > 0 && item == &sl->step.node);
    sl->done = 1;
    wake(d);
    if (d->on_step) d->on_step(d, d->on_step_data);
    absorb_done(s);
    if (d->depth == 1) pump(d);
    ul_sched_step_deliver(s);
    pump(d);
}

/* The scheduler's kick hook: adding, cancelling or resuming is a wake-up too (the time a
 * sequence was added is stamped from it). */
static void kick(ul_sched_t *s) {
    ul_driver_t *d = s->kick_ctx;
    wake(d);
    if (d->kick_active || d->n_open_handles != 2 || uv_is_closing((uv_handle_t *)&d->kick)) return;
    uv_idle_start(&d->kick, on_kick);
    d->kick_active = 1;
}

int ul_driver_init(uv_loop_t *loop, ul_driver_t *d, ul_sched_t *s) {
    memset(d, 0, sizeof *d);
    int rc = ul_bridge_init(loop, &d->bridge, on_step_done);
    if (rc) return rc;
    d->bridge.data = d;
    d->bridge.async.data = d;
    uv_idle_init(loop, &d->kick);
    d->kick.data = d;
    d->loop = loop;
    d->sched = s;
    d->depth = s->depth;
    d->n_open_handles = 2;
    s->kick = kick;
    s->kick_ctx = d;
    s->backend->bridge = &d->bridge;
    wake(d);
    return 0;
}

void ul_driver_close(ul_driver_t *d, void (*close_cb)(ul_driver_t *d)) {
    d->closing = 1;
    d->close_cb = close_cb;
    ul_sched_shutdown(d->sched);
    kick(d->sched); /* reaps at the next tick, or at the completion of the step in flight */
}
