/* Attaches the batcher to the libuv loop. Two handles: the bridge, through which the
 * backend hands a finished step back; and an idle handle used as a "kick": anything that
 * may create work (a new sequence, a cancel, a resumed stream) starts it, and its callback
 * builds and submits a step if the backend is idle. Kicking through the loop instead of
 * building inline keeps callbacks out of the caller's stack (ul_sched_add never calls
 * back into the api) and coalesces many requests arriving in one read into one step. */
#include "sched/sched.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

void ul_sched_kick(ul_sched_t *s);

static void cancel_all(ul_sched_t *s) {
    ul_queue_t *lists[2] = {&s->waiting, &s->running};
    for (int l = 0; l < 2; l++) {
        ul_queue_t *it;
        UL_QUEUE_FOREACH(it, lists[l]) UL_QUEUE_DATA(it, ul_seq_t, node)->cancelled = 1;
    }
}

static void on_handle_closed(uv_handle_t *h) {
    ul_sched_t *s = h->data;
    if (--s->n_open_handles == 0 && s->close_cb) s->close_cb(s);
}

static void on_bridge_closed(ul_bridge_t *b) { on_handle_closed((uv_handle_t *)&b->async); }

static void close_handles(ul_sched_t *s) {
    /* already closing (pump may run twice per completion before the close callbacks) */
    if (s->n_open_handles != 2 || uv_is_closing((uv_handle_t *)&s->kick)) return;
    uv_idle_stop(&s->kick);
    s->kick_active = 0;
    uv_close((uv_handle_t *)&s->kick, on_handle_closed);
    ul_bridge_close(&s->bridge, on_bridge_closed);
    s->backend->bridge = NULL;
}

/* Absorbs the steps done, oldest first (a refused step waits for the older ones). */
static int absorb_done(ul_sched_t *s) {
    int n = 0;
    for (; ul_sched_in_flight(s) > 0 && s->slot[s->head].done; n++) ul_sched_step_absorb(s);
    return n;
}

/* Builds and submits steps while fewer than the depth are in flight (one, or two when
 * pipelining) and there is work that may run. */
static void pump(ul_sched_t *s) {
    while (ul_sched_in_flight(s) < s->depth) {
        if (s->closing) cancel_all(s);
        int n = ul_sched_step_build(s);
        if (n == 0) {
            if (s->closing && ul_sched_n_active(s) == 0 && ul_sched_in_flight(s) == 0)
                close_handles(s);
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
    ul_sched_t *s = h->data;
    uv_idle_stop(h);
    s->kick_active = 0;
    pump(s);
}

/* Output pacing. The loop's busy fraction of each cycle (wall time not spent waiting in
 * the poll, which includes time it waited for its core) is averaged over a few steps; over
 * PACE_HIGH the streams write every k+1 steps instead of every k. k goes down when the
 * busy fraction predicted for k-1 stays under PACE_DOWN, the prediction taking all of the
 * loop's work as per-write work (busy * k / (k-1)): measured with 2000 null streams the
 * loop was 85% busy writing every step and ~40% writing every other step, so write
 * syscalls are most of it, and a lower bar would flip k back and forth. A token never
 * waits longer than PACE_MAX_MS for its write. */
#define PACE_HIGH 0.85
#define PACE_DOWN 0.7
#define PACE_MAX_MS 80.0
#define PACE_SETTLE 8 /* completions between two changes: let the average follow */

static void pace(ul_sched_t *s) {
    uint64_t now = uv_hrtime(), idle = uv_metrics_idle_time(s->loop);
    uint64_t dt = now - s->t_done_ns, di = idle - s->idle_ns;
    int first = s->t_done_ns == 0;
    s->t_done_ns = now;
    s->idle_ns = idle;
    if (first || dt > 1000000000ull) return; /* the loop was idle: nothing to learn */
    double busy = di >= dt ? 0.0 : 1.0 - (double)di / (double)dt;
    s->loop_busy = 0.75 * s->loop_busy + 0.25 * busy;
    s->step_ms = s->step_ms == 0 ? (double)dt / 1e6 : 0.75 * s->step_ms + 0.25 * (double)dt / 1e6;
    if (s->pace_hold > 0) {
        s->pace_hold--;
        return;
    }
    int32_t k = s->write_every;
    if (s->loop_busy > PACE_HIGH && k < UL_SCHED_MAX_WRITE_EVERY &&
        (k + 1) * s->step_ms <= PACE_MAX_MS)
        k++;
    else if (k > 1 && (s->loop_busy * k / (k - 1) < PACE_DOWN || k * s->step_ms > PACE_MAX_MS))
        k--;
    if (k != s->write_every) {
        UL_LOG_DEBUG("sched: loop busy %.0f%% of a %.1f ms step: streams write every %d steps",
                     s->loop_busy * 100, s->step_ms, k);
        s->write_every = k;
        s->pace_hold = PACE_SETTLE;
    }
}

/* Double buffering: the results of step N go into the sequences, step N+1 is submitted,
 * and only then do N's callbacks (detokenize, stop strings, SSE frames; the writes follow
 * in the server's check phase) run, while the backend computes N+1. The second pump
 * covers what the callbacks changed when N+1 could not be built before them (everything
 * was ending, or closing). Pipelining: N+1 is in flight already, so N's callbacks run
 * first (a stop string they find keeps the sequence out of N+2), then N+2 is built. */
static void on_step_done(ul_bridge_t *b, ul_queue_t *item) {
    ul_sched_t *s = b->data;
    struct ul_sched_slot_s *sl = &s->slot[s->head];
    UL_ASSERT(ul_sched_in_flight(s) > 0 && item == &sl->step.node);
    sl->done = 1;
    pace(s);
    absorb_done(s);
    if (s->depth == 1) pump(s);
    ul_sched_step_deliver(s);
    pump(s);
}

void ul_sched_kick(ul_sched_t *s) {
    if (!s->loop || s->kick_active || s->n_open_handles != 2 ||
        uv_is_closing((uv_handle_t *)&s->kick))
        return;
    uv_idle_start(&s->kick, on_kick);
    s->kick_active = 1;
}

int ul_sched_start(ul_sched_t *s, uv_loop_t *loop) {
    int rc = ul_bridge_init(loop, &s->bridge, on_step_done);
    if (rc) return rc;
    s->bridge.data = s;
    s->bridge.async.data = s;
    uv_idle_init(loop, &s->kick);
    s->kick.data = s;
    s->loop = loop;
    s->n_open_handles = 2;
    /* pace() reads the loop's idle time; the option only adds a clock read per poll */
    uv_loop_configure(loop, UV_METRICS_IDLE_TIME);
    s->backend->bridge = &s->bridge;
    return 0;
}

void ul_sched_close(ul_sched_t *s, void (*close_cb)(ul_sched_t *s)) {
    s->closing = 1;
    s->close_cb = close_cb;
    cancel_all(s);
    if (!s->loop) { /* never started: nothing in flight, no handles */
        ul_sched_step_build(s);
        if (close_cb) close_cb(s);
        return;
    }
    ul_sched_kick(s); /* reaps at the next tick, or at the completion of the step in flight */
}
