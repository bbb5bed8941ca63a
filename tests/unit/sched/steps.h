/* Driving the scheduler by hand in its tests, as the driver does but with no loop: a step
 * is built, run on the scheduler's backend and completed before the next one is built. */
#ifndef UL_TEST_STEPS_H
#define UL_TEST_STEPS_H

#include <criterion/criterion.h>

#include "sched/sched.h"

/* Builds, runs and completes one step; returns the number of sequences in it. */
static inline int one_step(ul_sched_t *s) {
    int n = ul_sched_step_build(s);
    if (n > 0) {
        cr_assert_eq(ul_backend_run(s->backend, s->step), 0, "backend rejected the step");
        ul_sched_step_complete(s);
    }
    return n;
}

/* Steps until nothing is left to run; returns how many steps that took. */
static inline int run_all(ul_sched_t *s) {
    int steps = 0;
    while (one_step(s) > 0) cr_assert_lt(++steps, 100000, "scheduler does not converge");
    return steps;
}

#endif
