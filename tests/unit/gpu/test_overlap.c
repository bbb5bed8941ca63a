/* The double-buffered input path of the CUDA backend (src/gpu/overlap.h) on a simulated
 * device: two streams that run their ops in issue order, events that complete when their
 * stream reaches the record (a wait sees the record issued last before it, as
 * cudaStreamWaitEvent does), and a host that issues step n only after step n - 2 has
 * completed (the worker's max_in_flight 2). Random copy and compute durations; every run
 * must keep the pinned and device input slots safe, start no step before its own inputs
 * arrived, and the copies of step n + 1 must overlap step n's compute. Chained steps
 * (src/gpu/chain.h) gather from the other slot's outputs after their own inputs arrived and
 * after the step before computed, and no copy may overwrite that slot before the gather
 * read it. Plans with a wait or the gather's record removed must be caught breaking a
 * slot. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "gpu/overlap.h"

#define N_STEPS 200

typedef struct {
    double t_copy_end[N_STEPS], t_comp_start[N_STEPS], t_comp_end[N_STEPS], t_copy_start[N_STEPS];
    double t_fill[N_STEPS], t_done[N_STEPS], t_gather_end[N_STEPS];
    int chained[N_STEPS];
    int bad_pinned, bad_device, bad_order, n_overlap;
} sim_t;

static uint64_t rnd(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}
static double dur(uint64_t *s, double lo, double hi) {
    return lo + (hi - lo) * (double)(rnd(s) >> 11) / 9007199254740992.0;
}

static int drop_kind = -1;    /* a broken plan: this kind of op left out */
static int drop_rerecord = 0; /* a broken plan: the gather's record of the other slot left out */
static int chain_every = 0;   /* 0: no step chains; 1: every step; 2: every other, randomly */

static int plan(int64_t n, int chained, ul_ov_op_t *ops) {
    ul_ov_op_t all[UL_OV_MAX_OPS];
    int k = ul_ov_plan(n, chained, all), m = 0;
    for (int i = 0; i < k; i++)
        if ((int)all[i].kind != drop_kind &&
            !(drop_rerecord && all[i].kind == UL_OV_COMPUTE_RECORD &&
              all[i].slot != n % UL_OV_SLOTS))
            ops[m++] = all[i];
    return m;
}

/* in_flight: steps the host may have issued and not seen complete (0: no limit). */
static void simulate(uint64_t seed, int in_flight, sim_t *r) {
    memset(r, 0, sizeof *r);
    uint64_t s = seed;
    double host = 0, copy_end = 0, comp_end = 0;
    double ev_done[UL_OV_N_EVENTS]; /* completion time of each event's last record */
    for (int e = 0; e < UL_OV_N_EVENTS; e++) ev_done[e] = 0;
    for (int64_t n = 0; n < N_STEPS; n++) {
        if (in_flight > 0 && n >= in_flight && host < r->t_done[n - in_flight])
            host = r->t_done[n - in_flight]; /* the worker's max_in_flight */
        r->chained[n] = n >= 1 && (chain_every == 1 || (chain_every == 2 && rnd(&s) % 2));
        ul_ov_op_t ops[UL_OV_MAX_OPS];
        int k = plan(n, r->chained[n], ops);
        for (int i = 0; i < k; i++) {
            const ul_ov_op_t *o = &ops[i];
            host += 0.01; /* issuing costs a little host time */
            switch (o->kind) {
            case UL_OV_HOST_WAIT:
                if (host < ev_done[o->event]) host = ev_done[o->event];
                break;
            case UL_OV_HOST_FILL:
                host += dur(&s, 0.05, 0.3);
                r->t_fill[n] = host;
                /* the pinned slot's previous copy (step n - 2) must be over */
                if (n >= 2 && r->t_copy_end[n - 2] > host - 1e-12) r->bad_pinned++;
                break;
            case UL_OV_COPY_WAIT:
                if (copy_end < ev_done[o->event]) copy_end = ev_done[o->event];
                break;
            case UL_OV_COPY_H2D:
                if (copy_end < host) copy_end = host; /* issued now */
                r->t_copy_start[n] = copy_end;
                copy_end += dur(&s, 0.1, 1.0);
                r->t_copy_end[n] = copy_end;
                /* the device slot's previous readers (step n - 2, and step n - 1's gather of
                 * n - 2's outputs) must be done */
                if (n >= 2 && r->t_comp_end[n - 2] > r->t_copy_start[n] + 1e-12) r->bad_device++;
                if (n >= 2 && r->chained[n - 1] &&
                    r->t_gather_end[n - 1] > r->t_copy_start[n] + 1e-12)
                    r->bad_device++;
                break;
            case UL_OV_COPY_RECORD:
                if (copy_end < host) copy_end = host;
                ev_done[o->event] = copy_end;
                break;
            case UL_OV_COMPUTE_WAIT:
                if (comp_end < ev_done[o->event]) comp_end = ev_done[o->event];
                break;
            case UL_OV_COMPUTE_GATHER:
                if (comp_end < host) comp_end = host;
                /* it writes the slot's inputs and reads the outputs of step n - 1 */
                if (comp_end < r->t_copy_end[n] - 1e-12 || comp_end < r->t_comp_end[n - 1] - 1e-12)
                    r->bad_order++;
                comp_end += dur(&s, 0.01, 0.1);
                r->t_gather_end[n] = comp_end;
                break;
            case UL_OV_COMPUTE:
                if (comp_end < host) comp_end = host;
                r->t_comp_start[n] = comp_end;
                comp_end += dur(&s, 0.5, 3.0);
                r->t_comp_end[n] = comp_end;
                if (r->t_comp_start[n] < r->t_copy_end[n] - 1e-12) r->bad_order++;
                break;
            case UL_OV_COMPUTE_RECORD:
                if (comp_end < host) comp_end = host;
                ev_done[o->event] = comp_end;
                break;
            case UL_OV_COMPLETE:
                if (comp_end < host) comp_end = host;
                r->t_done[n] = comp_end + 0.02; /* the host function, then finish */
                break;
            }
        }
        if (n >= 1 && r->t_copy_start[n] < r->t_comp_end[n - 1] &&
            r->t_copy_end[n] > r->t_comp_start[n - 1])
            r->n_overlap++;
    }
}

Test(overlap, plan_keeps_slots_safe_and_overlaps_copies_with_compute) {
    drop_kind = -1;
    int overlaps = 0;
    for (uint64_t seed = 1; seed <= 200; seed++) {
        chain_every = (int)(seed % 3);
        sim_t r;
        /* the backend runs 2 in flight; the events alone keep deeper pipelines safe too */
        for (int inf = 0; inf <= 4; inf++)
            if (inf != 1 && inf != 2) {
                simulate(seed * 0x9e3779b97f4a7c15ull, inf, &r);
                cr_assert_eq(r.bad_pinned + r.bad_device + r.bad_order, 0,
                             "seed %llu, %d in flight: a slot broken", (unsigned long long)seed,
                             inf);
            }
        simulate(seed * 0x9e3779b97f4a7c15ull, 2, &r);
        cr_assert_eq(r.bad_pinned, 0, "seed %llu: a pinned slot refilled during its copy",
                     (unsigned long long)seed);
        cr_assert_eq(r.bad_device, 0, "seed %llu: a device slot overwritten while read",
                     (unsigned long long)seed);
        cr_assert_eq(r.bad_order, 0, "seed %llu: a step computed before its inputs arrived",
                     (unsigned long long)seed);
        overlaps += r.n_overlap;
    }
    printf("overlap: step n+1's copy overlapped step n's compute in %d of %d steps\n", overlaps,
           200 * (N_STEPS - 1));
    cr_assert_gt(overlaps, 200 * (N_STEPS - 1) / 2, "copies rarely overlap compute: %d", overlaps);
}

/* The checker is not blind: with the host running ahead of the device (no in-flight
 * limit), each wait of the plan is needed. */
Test(overlap, each_wait_is_needed) {
    static const int kinds[] = {UL_OV_HOST_WAIT, UL_OV_COPY_WAIT, UL_OV_COMPUTE_WAIT};
    static const char *const names[] = {"host wait", "copy wait", "compute wait"};
    for (int i = 0; i < 3; i++) {
        drop_kind = kinds[i];
        int bad = 0;
        for (uint64_t seed = 1; seed <= 200; seed++) {
            sim_t r;
            simulate(seed * 0x9e3779b97f4a7c15ull, 0, &r);
            bad += r.bad_pinned + r.bad_device + r.bad_order;
        }
        printf("overlap without the %s: %d violations in 200 runs\n", names[i], bad);
        cr_assert_gt(bad, 0, "dropping the %s broke nothing", names[i]);
    }
    drop_kind = -1;
    /* chained steps: the gather's record of the other slot is needed, even with the
     * backend's two steps in flight */
    chain_every = 1;
    for (int rerecord = 0; rerecord <= 1; rerecord++) {
        drop_rerecord = !rerecord;
        int bad = 0;
        for (uint64_t seed = 1; seed <= 200; seed++) {
            sim_t r;
            simulate(seed * 0x9e3779b97f4a7c15ull, 2, &r);
            bad += r.bad_pinned + r.bad_device + r.bad_order;
        }
        printf("overlap, chained steps %s the gather's record: %d violations in 200 runs\n",
               rerecord ? "with" : "without", bad);
        if (rerecord)
            cr_assert_eq(bad, 0, "chained steps broke a slot");
        else
            cr_assert_gt(bad, 0, "dropping the gather's record broke nothing");
    }
    drop_rerecord = 0;
    chain_every = 0;
}

Test(overlap, plan_shape) {
    ul_ov_op_t ops[UL_OV_MAX_OPS];
    cr_assert_eq(ul_ov_plan(0, 0, ops), 7, "first use of slot 0: no waits on old events");
    cr_assert_eq(ops[0].kind, UL_OV_HOST_FILL);
    cr_assert_eq(ul_ov_plan(0, 1, ops), 7, "step 0 has nothing to chain to");
    cr_assert_eq(ul_ov_plan(3, 0, ops), 9);
    for (int i = 0; i < 9; i++) cr_assert_eq(ops[i].slot, 1);
    cr_assert_eq(ops[0].event, UL_OV_IN_READY(1));
    cr_assert_eq(ops[2].event, UL_OV_IN_FREE(1));
    /* chained: the gather right after the compute wait, then slot 0's IN_FREE again */
    cr_assert_eq(ul_ov_plan(3, 1, ops), 11);
    cr_assert_eq(ops[5].kind, UL_OV_COMPUTE_WAIT);
    cr_assert_eq(ops[6].kind, UL_OV_COMPUTE_GATHER);
    cr_assert_eq(ops[6].slot, 1);
    cr_assert_eq(ops[7].kind, UL_OV_COMPUTE_RECORD);
    cr_assert_eq(ops[7].slot, 0);
    cr_assert_eq(ops[7].event, UL_OV_IN_FREE(0));
    cr_assert_eq(ops[8].kind, UL_OV_COMPUTE);
}
