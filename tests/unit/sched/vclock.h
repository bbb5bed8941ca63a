/* Virtual time for the scheduler's tests: the null backend's virtual_time mode (a step
 * takes its configured cost without sleeping and reports it) and a clock, sched->now_ns,
 * that each step moves on by exactly that cost, in the driver's order (driver.c). Latency
 * assertions are then exact and the same on any host, loaded or sanitised. */
#ifndef UL_TEST_VCLOCK_H
#define UL_TEST_VCLOCK_H

#include <criterion/criterion.h>
#include <stdint.h>

#include "sched/sched.h"

#define VC_MS 1000000ull /* ns */

static inline ul_backend_t *vc_backend(ul_null_config_t cfg) {
    ul_backend_t *b;
    cfg.virtual_time = 1;
    cr_assert_eq(ul_null_backend_create(&cfg, &b), 0);
    return b;
}

/* The step built last, run on the backend: it ends at the returned time. */
static inline uint64_t vc_run(ul_sched_t *s) {
    cr_assert_eq(ul_backend_run(s->backend, s->step), 0, "backend rejected the step");
    return s->now_ns + (uint64_t)(s->step->compute_us * 1e3);
}

/* One step at a time: built now, the clock moves to its end, absorbed and delivered there.
 * Returns the sequences in it (0: nothing to run, the clock stays). */
static inline int vc_step(ul_sched_t *s) {
    int n = ul_sched_step_build(s);
    if (n == 0) return 0;
    s->now_ns = vc_run(s);
    ul_sched_step_complete(s);
    return n;
}

/* The loop driver on virtual time, at depth 1 (double buffered): a step in flight ends at
 * t_done; arrivals come between steps (vc_arrive). */
typedef struct vc_s {
    ul_sched_t *s;
    int busy;        /* a step in flight */
    uint64_t t_done; /* when it completes */
} vc_t;

/* Builds and "submits" a step if none is in flight; 1 when one is. */
static inline int vc_pump(vc_t *v) {
    if (!v->busy && ul_sched_step_build(v->s) > 0) {
        v->t_done = vc_run(v->s);
        v->busy = 1;
    }
    return v->busy;
}

/* The completion of the step in flight (driver.c's on_step_done): the clock moves to its
 * end; absorb, build and submit the next, deliver the callbacks, and build after them when
 * nothing could be built before. */
static inline void vc_complete(vc_t *v) {
    v->s->now_ns = v->t_done;
    v->busy = 0;
    ul_sched_step_absorb(v->s);
    vc_pump(v);
    ul_sched_step_deliver(v->s);
    vc_pump(v);
}

#endif
