/* Output pacing (pace.h). The loop's busy fraction of each cycle (wall time not spent
 * waiting in the poll, which includes time it waited for its core) is averaged over a few
 * steps; over PACE_HIGH the streams write every k+1 steps instead of every k. k goes down
 * when the busy fraction predicted for k-1 stays under PACE_DOWN, the prediction taking all
 * of the loop's work as per-write work (busy * k / (k-1)): measured with 2000 null streams
 * the loop was 85% busy writing every step and ~40% writing every other step, so write
 * syscalls are most of it, and a lower bar would flip k back and forth. A token never
 * waits longer than PACE_MAX_MS for its write. */
#include "api/pace.h"

#include <string.h>

#include "uvllm/log.h"

#define PACE_HIGH 0.85
#define PACE_DOWN 0.7
#define PACE_MAX_MS 80.0
#define PACE_SETTLE 8 /* completions between two changes: let the average follow */

void ul_pace_init(ul_pace_t *p) {
    memset(p, 0, sizeof *p);
    p->write_every = 1;
}

/* The next write_every from the averages. */
static int32_t next_k(const ul_pace_t *p) {
    int32_t k = p->write_every;
    if (p->loop_busy > PACE_HIGH && k < UL_PACE_MAX_WRITE_EVERY &&
        (k + 1) * p->step_ms <= PACE_MAX_MS)
        return k + 1;
    if (k > 1 && (p->loop_busy * k / (k - 1) < PACE_DOWN || k * p->step_ms > PACE_MAX_MS))
        return k - 1;
    return k;
}

void ul_pace_observe(ul_pace_t *p, uint64_t now_ns, uint64_t idle_ns) {
    uint64_t dt = now_ns - p->t_done_ns, di = idle_ns - p->idle_ns;
    int first = p->t_done_ns == 0;
    p->t_done_ns = now_ns;
    p->idle_ns = idle_ns;
    if (first || dt > 1000000000ull) return; /* the loop was idle: nothing to learn */
    double busy = di >= dt ? 0.0 : 1.0 - (double)di / (double)dt;
    p->loop_busy = 0.75 * p->loop_busy + 0.25 * busy;
    p->step_ms = p->step_ms == 0 ? (double)dt / 1e6 : 0.75 * p->step_ms + 0.25 * (double)dt / 1e6;
    if (p->hold > 0) {
        p->hold--;
        return;
    }
    int32_t k = next_k(p);
    if (k != p->write_every) {
        UL_LOG_DEBUG("pace: loop busy %.0f%% of a %.1f ms step: streams write every %d steps",
                     p->loop_busy * 100, p->step_ms, k);
        p->write_every = k;
        p->hold = PACE_SETTLE;
    }
}
