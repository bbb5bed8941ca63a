/* Output pacing (api/pace.h) on given numbers: a loop busy for most of each step cycle
 * makes streams write every few steps, never more than UL_PACE_MAX_WRITE_EVERY nor a wait
 * over 80 ms for a token; a light loop brings every-step writes back; which streams may
 * hold their output in a step. Then the wiring: the driver calls the api's hook once per
 * completed step, with the scheduler's time set. */
#include <criterion/criterion.h>
#include <string.h>

#include "api/api.h"
#include "engine/sampling.h"
#include "sched/driver.h"

#define MS 1000000ull

/* n completions of cycle_ms each, the loop idle idle_ms of each; returns the largest
 * write_every seen. */
static int32_t feed(ul_pace_t *p, uint64_t *now, uint64_t *idle, int n, double cycle_ms,
                    double idle_ms) {
    int32_t max_k = p->write_every;
    for (int i = 0; i < n; i++) {
        *now += (uint64_t)(cycle_ms * MS);
        *idle += (uint64_t)(idle_ms * MS);
        ul_pace_observe(p, *now, *idle);
        if (p->write_every > max_k) max_k = p->write_every;
    }
    return max_k;
}

Test(pace, follows_the_loop_load) {
    ul_pace_t p;
    ul_pace_init(&p);
    uint64_t now = 1000 * MS, idle = 0;
    cr_assert_eq(feed(&p, &now, &idle, 40, 5, 4.5), 1, "a 10%% busy loop writes every step");
    /* 5 ms steps, the loop 95% busy: writes spread out, up to the cap */
    cr_assert_eq(feed(&p, &now, &idle, 60, 5, 0.25), UL_PACE_MAX_WRITE_EVERY,
                 "busy %.2f: write_every %d", p.loop_busy, p.write_every);
    cr_assert_gt(p.loop_busy, 0.85);
    /* the load gone: back to every step */
    feed(&p, &now, &idle, 60, 5, 4.5);
    cr_assert_eq(p.write_every, 1, "busy %.2f: write_every %d", p.loop_busy, p.write_every);
}

Test(pace, a_token_never_waits_more_than_80_ms) {
    ul_pace_t p;
    ul_pace_init(&p);
    uint64_t now = 1000 * MS, idle = 0;
    /* 30 ms steps, 95% busy: every other step (60 ms), not every third (90 ms) */
    cr_assert_eq(feed(&p, &now, &idle, 100, 30, 1.5), 2);
    /* the steps grow to 50 ms: back to every step */
    feed(&p, &now, &idle, 100, 50, 2.5);
    cr_assert_eq(p.write_every, 1);
}

Test(pace, changes_settle_and_idle_gaps_teach_nothing) {
    ul_pace_t p;
    ul_pace_init(&p);
    uint64_t now = 1000 * MS, idle = 0;
    feed(&p, &now, &idle, 1, 5, 0.25);
    cr_assert_eq(p.loop_busy, 0, "the first completion only starts the clock");
    int steps = 0;
    while (p.write_every == 1) {
        feed(&p, &now, &idle, 1, 5, 0.25);
        cr_assert_lt(++steps, 20);
    }
    /* the next change waits 8 completions, however busy */
    for (int i = 0; i < 8; i++) {
        feed(&p, &now, &idle, 1, 5, 0);
        cr_assert_eq(p.write_every, 2, "completion %d after a change", i);
    }
    double busy = p.loop_busy;
    feed(&p, &now, &idle, 1, 2000, 1999); /* two seconds idle between steps */
    cr_assert_eq(p.loop_busy, busy, "an idle loop is not measured");
}

Test(pace, staggered_holding) {
    ul_pace_t p;
    ul_pace_init(&p);
    ul_seq_t q[8];
    memset(q, 0, sizeof q);
    for (int i = 0; i < 8; i++)
        q[i] = (ul_seq_t){.id = (uint64_t)i + 1, .in_step = 1, .step_samples = 1};
    for (int i = 0; i < 8; i++) cr_assert_not(ul_pace_may_hold(&p, &q[i], 5), "writes every step");
    p.write_every = 4;
    for (uint64_t step = 0; step < 8; step++) {
        int held = 0;
        for (int i = 0; i < 8; i++) held += ul_pace_may_hold(&p, &q[i], step);
        cr_assert_eq(held, 6, "step %llu: a quarter of the streams writes",
                     (unsigned long long)step);
    }
    q[0].step_samples = 0; /* no callback of it follows within a step: it must write now */
    q[1].in_step = 0;
    for (uint64_t step = 0; step < 4; step++) {
        cr_assert_not(ul_pace_may_hold(&p, &q[0], step));
        cr_assert_not(ul_pace_may_hold(&p, &q[1], step));
    }
}

/* ---- the driver's hook ---------------------------------------------------------------- */

typedef struct {
    int calls;
    uint64_t last_now;
    uint64_t steps_absorbed_before; /* stats.steps when the hook ran: not yet this step */
    int monotonic, before_absorb;
} hook_t;

static void on_step(ul_driver_t *d, void *data) {
    hook_t *h = data;
    h->monotonic &= d->sched->now_ns >= h->last_now && d->sched->now_ns > 0;
    h->before_absorb &= d->sched->stats.steps == (uint64_t)h->calls;
    h->last_now = d->sched->now_ns;
    h->calls++;
}

static int g_done;
static void count_finish(ul_seq_t *q, ul_finish_t reason, int status) {
    (void)q, (void)reason, (void)status;
    g_done++;
}

Test(pace, the_driver_calls_the_hook_once_per_step) {
    uv_loop_t loop;
    cr_assert_eq(uv_loop_init(&loop), 0);
    ul_backend_t *b;
    ul_null_config_t nc = {.delay_us = 200, .n_vocab = 100};
    cr_assert_eq(ul_null_backend_create(&nc, &b), 0);
    ul_sched_t s;
    cr_assert_eq(ul_sched_init(&s, b, NULL), 0);
    ul_driver_t d;
    cr_assert_eq(ul_driver_init(&loop, &d, &s), 0);
    hook_t h = {.monotonic = 1, .before_absorb = 1};
    d.on_step = on_step;
    d.on_step_data = &h;
    static ul_seq_t q[3];
    int32_t prompt[2] = {1, 2};
    g_done = 0;
    for (int i = 0; i < 3; i++) {
        memset(&q[i], 0, sizeof q[i]);
        q[i].max_tokens = 5 + i;
        ul_sampling_default(&q[i].sampling);
        q[i].on_finish = count_finish;
        cr_assert_eq(ul_sched_add(&s, &q[i], prompt, 2), 0);
        cr_assert_gt(q[i].t_add_ns, 0, "adding is a wake-up: the time is set");
    }
    while (g_done < 3) uv_run(&loop, UV_RUN_ONCE);
    cr_assert_eq((uint64_t)h.calls, s.stats.steps);
    cr_assert(h.monotonic, "now_ns set, never going back");
    cr_assert(h.before_absorb, "the hook runs before the step is absorbed");
    ul_driver_close(&d, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    ul_sched_free(&s);
    ul_backend_destroy(b);
    cr_assert_eq(uv_loop_close(&loop), 0);
}
