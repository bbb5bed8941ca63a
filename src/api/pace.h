/* Output pacing, beside the writer (gen.c's ul_gen_send). When the loop is busy for most of
 * a step cycle (mostly write syscalls, one per stream per step), streams write every
 * write_every-th step instead of every step, so generation keeps its pace and events share
 * writes.
 *
 * A policy on given numbers: ul_pace_observe takes each step completion's time and the
 * loop's idle time so far (the api's driver hook reads them from the loop, api.c
 * ul_api_pace_start); nothing here reads a clock, so tests feed it exact cycles. Loop
 * thread only. */
#ifndef UL_API_PACE_H
#define UL_API_PACE_H

#include <stdint.h>

#include "sched/sched.h"

#define UL_PACE_MAX_WRITE_EVERY 4

typedef struct ul_pace_s {
    int32_t write_every; /* 1..UL_PACE_MAX_WRITE_EVERY; 1 = every step */
    double loop_busy;    /* moving average of the loop's busy fraction of a cycle */
    double step_ms;      /* moving average of the cycle, completion to completion */
    uint64_t t_done_ns;  /* the previous completion */
    uint64_t idle_ns;    /* the loop's idle time then */
    int32_t hold;        /* completions to wait before write_every changes again */
} ul_pace_t;

void ul_pace_init(ul_pace_t *p);
/* A step completed at now_ns (monotonic), the loop having been idle idle_ns in all so far. */
void ul_pace_observe(ul_pace_t *p, uint64_t now_ns, uint64_t idle_ns);

/* For on_token: 1 when the output of this token may wait for a later write
 * (ul_sse_send_held): the loop is overloaded, and q is in the step in flight and samples
 * in it, so another callback of q (on_token or on_finish) follows within one step, and
 * within write_every steps one that writes. Staggered by sequence id: each step writes
 * 1/write_every of the streams (steps: the scheduler's steps absorbed). */
static inline int ul_pace_may_hold(const ul_pace_t *p, const ul_seq_t *q, uint64_t steps) {
    return p->write_every > 1 && q->in_step && q->step_samples &&
           (q->id + steps) % (uint64_t)p->write_every != 0;
}

#endif
