/* Fixed-bound latency histograms (see hist.h). Bounds span 5 ms to a minute: inter-token
 * gaps live at the low end, queue and end-to-end times at the high end. */
#include "sched/hist.h"

const double ul_hist_bounds[UL_HIST_N] = {0.005, 0.01, 0.025, 0.05, 0.075, 0.1,  0.15, 0.2,  0.3,
                                          0.5,   0.75, 1.0,   2.5,  5.0,   10.0, 20.0, 30.0, 60.0};

void ul_hist_observe(ul_hist_t *h, double v) {
    int i = 0;
    while (i < UL_HIST_N && v > ul_hist_bounds[i]) i++;
    h->counts[i]++;
    h->count++;
    h->sum += v;
}

double ul_hist_quantile(const ul_hist_t *h, double q) {
    if (h->count == 0) return 0;
    double rank = q * (double)h->count, seen = 0;
    for (int i = 0; i <= UL_HIST_N; i++) {
        if (seen + (double)h->counts[i] >= rank && h->counts[i]) {
            double lo = i ? ul_hist_bounds[i - 1] : 0;
            double hi = i < UL_HIST_N ? ul_hist_bounds[i] : lo;
            return lo + (hi - lo) * (rank - seen) / (double)h->counts[i];
        }
        seen += (double)h->counts[i];
    }
    return ul_hist_bounds[UL_HIST_N - 1];
}
