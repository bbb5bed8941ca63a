/* The step-time model: what a backend step costs, learnt online from each step's
 * compute_us, so the batcher can size prefill chunks to a latency target and admission can
 * predict a request's wait.
 *
 *   t(step) = c0 + c_dec * decode tokens + c_pre * prefill tokens + c_attn * attended / 1000
 *
 * where "attended" counts, for every token of the step, the cached positions its attention
 * reads (pos + 1). The coefficients (microseconds) are a least-squares fit over
 * exponentially decayed sums (the last ~500 steps weigh most), refitted after each step,
 * with no coefficient below zero (a negative one is dropped and the rest refitted). For
 * the first UL_STEP_MIN_OBS steps a prediction is the average time per token so far. Until a
 * prefill token cost is seen, a prefill token is assumed to cost what a decode token does
 * (prefill is batched and never costs more per token on our backends). Loop thread only. */
#ifndef UL_SCHED_STEPTIME_H
#define UL_SCHED_STEPTIME_H

#include <stdint.h>

#define UL_STEP_FEATS 4
#define UL_STEP_MIN_OBS 8 /* steps observed before the fit is trusted */

typedef struct ul_step_feat_s {
    double n_decode;  /* sequences contributing one token */
    double n_prefill; /* tokens of prefill chunks */
    double attended;  /* sum over the step's tokens of the positions they attend */
} ul_step_feat_t;

typedef struct ul_step_model_s {
    double xtx[UL_STEP_FEATS][UL_STEP_FEATS], xty[UL_STEP_FEATS];
    double coef[UL_STEP_FEATS]; /* us: intercept, per decode token, per prefill token, per
                                   thousand attended positions */
    uint64_t n_obs;
    double prefill_weight;     /* decayed count of steps that had prefill tokens */
    double sum_us, sum_tokens; /* decayed: the per-token average used for the first steps */
} ul_step_model_t;

void ul_step_model_init(ul_step_model_t *m);
/* One finished step: its features and the backend's compute_us. */
void ul_step_model_observe(ul_step_model_t *m, const ul_step_feat_t *f, double us);
/* Predicted microseconds for a step with features f (0 before any observation). */
double ul_step_model_predict(const ul_step_model_t *m, const ul_step_feat_t *f);
/* Features of a chunk of n tokens starting at position pos0, added to f. */
static inline void ul_step_feat_add(ul_step_feat_t *f, int32_t n, int32_t pos0) {
    if (n == 1)
        f->n_decode += 1;
    else
        f->n_prefill += n;
    f->attended += (double)n * pos0 + (double)n * (n + 1) / 2;
}

#endif
