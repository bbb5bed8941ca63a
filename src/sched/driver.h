/* The driver: attaches a scheduler (sched.h, a policy on given time) to a libuv loop.
 *
 * It owns what the policy must not see: the loop, the bridge through which the backend
 * hands a finished step back, an idle handle used as a "kick" (anything that may create
 * work, a new sequence, a cancel or a resumed stream, starts it, and its callback builds
 * and submits steps if the backend has room), and the pipelining depth (how many steps it
 * keeps in flight). At each wake-up (a kick, a completion) it sets sched->now_ns from the
 * monotonic clock once, before the policy runs. Kicking through the loop instead of
 * building inline keeps callbacks out of the caller's stack (ul_sched_add never calls back
 * into the api) and coalesces many requests arriving in one read into one step.
 *
 * Loop thread only. Lifecycle (a loop-bound handle): ul_driver_init(loop, d, sched) after
 * ul_sched_init; ul_driver_close(d, cb) cancels every sequence, waits for the steps in
 * flight and closes the handles; cb runs when the scheduler can be freed (then
 * ul_sched_free, then destroy the backend). */
#ifndef UL_SCHED_DRIVER_H
#define UL_SCHED_DRIVER_H

#include <uv.h>

#include "base/bridge.h"
#include "sched/sched.h"

typedef struct ul_driver_s ul_driver_t;
/* A step completed: called on the loop thread with sched->now_ns set, before the step's
 * results are absorbed and its callbacks run (api/pace.c measures the loop's load here). */
typedef void (*ul_driver_step_cb)(ul_driver_t *d, void *data);

struct ul_driver_s {
    ul_sched_t *sched;
    uv_loop_t *loop;
    ul_bridge_t bridge; /* the backend's completions */
    uv_idle_t kick;
    int kick_active;
    int32_t depth; /* steps kept in flight: 1, or 2 when the scheduler pipelines */
    int closing, n_open_handles;
    void (*close_cb)(ul_driver_t *d);
    ul_driver_step_cb on_step; /* optional, with on_step_data */
    void *on_step_data;
    void *data; /* owner's */
};

/* Attaches s to the loop: sets backend->bridge and s's kick hook. */
int ul_driver_init(uv_loop_t *loop, ul_driver_t *d, ul_sched_t *s);
/* Shuts the scheduler down (ul_sched_shutdown) and closes the handles once nothing is in
 * flight; close_cb (may be NULL) runs after. */
void ul_driver_close(ul_driver_t *d, void (*close_cb)(ul_driver_t *d));

#endif
