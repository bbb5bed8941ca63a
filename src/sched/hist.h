/* Latency histograms with fixed bucket bounds in seconds, for Prometheus exposition
 * (cumulative buckets are computed when printed). Loop thread only. */
#ifndef UL_SCHED_HIST_H
#define UL_SCHED_HIST_H

#include <stdint.h>

#define UL_HIST_N 18 /* finite bounds; one more bucket for +Inf */

extern const double ul_hist_bounds[UL_HIST_N]; /* seconds, ascending */

typedef struct ul_hist_s {
    uint64_t counts[UL_HIST_N + 1]; /* per bucket (not cumulative); last is +Inf */
    uint64_t count;
    double sum; /* seconds */
} ul_hist_t;

void ul_hist_observe(ul_hist_t *h, double seconds);
/* The value at quantile q (0..1) by linear interpolation inside its bucket; 0 when empty. */
double ul_hist_quantile(const ul_hist_t *h, double q);

#endif
