/* Online least squares for the step-time model (see steptime.h). Four unknowns: the
 * normal equations are solved by Gaussian elimination after every step (a few hundred
 * flops), over the coefficients still active (non-negative). */
#include <math.h>
#include <string.h>

#include "sched/steptime.h"

#define DECAY 0.998
#define RIDGE 1e-6
/* The attention term is nearly collinear with the others over a typical run (decoders'
 * positions grow as the step count does, prefill chunks are as big as their attention):
 * without a prior it soaks up arbitrary weight and over-predicts large chunks (2.5x on the
 * null backend, which has no attention cost at all). A ridge of 10% of its own scale lets
 * it in only when it explains what the other terms cannot. */
#define RIDGE_ATTN 0.1

void ul_step_model_init(ul_step_model_t *m) { memset(m, 0, sizeof *m); }

static void features(const ul_step_feat_t *f, double x[UL_STEP_FEATS]) {
    x[0] = 1.0;
    x[1] = f->n_decode;
    x[2] = f->n_prefill;
    x[3] = f->attended / 1000.0;
}

/* Solves the normal equations restricted to active[]; 0 on success. */
static int solve(const ul_step_model_t *m, const int *active, double *out) {
    double a[UL_STEP_FEATS][UL_STEP_FEATS + 1];
    int idx[UL_STEP_FEATS], n = 0;
    for (int i = 0; i < UL_STEP_FEATS; i++)
        if (active[i]) idx[n++] = i;
    for (int r = 0; r < n; r++) {
        for (int c = 0; c < n; c++) a[r][c] = m->xtx[idx[r]][idx[c]];
        a[r][r] += (idx[r] == 3 ? RIDGE_ATTN : RIDGE) * (1.0 + m->xtx[idx[r]][idx[r]]);
        a[r][n] = m->xty[idx[r]];
    }
    for (int c = 0; c < n; c++) {
        int p = c;
        for (int r = c + 1; r < n; r++)
            if (fabs(a[r][c]) > fabs(a[p][c])) p = r;
        if (fabs(a[p][c]) < 1e-12) return -1;
        for (int k = 0; k <= n; k++) {
            double t = a[c][k];
            a[c][k] = a[p][k];
            a[p][k] = t;
        }
        for (int r = 0; r < n; r++) {
            if (r == c) continue;
            double f = a[r][c] / a[c][c];
            for (int k = c; k <= n; k++) a[r][k] -= f * a[c][k];
        }
    }
    for (int i = 0; i < UL_STEP_FEATS; i++) out[i] = 0;
    for (int r = 0; r < n; r++) out[idx[r]] = a[r][n] / a[r][r];
    return 0;
}

static void refit(ul_step_model_t *m) {
    int active[UL_STEP_FEATS] = {1, 1, 1, 1};
    double c[UL_STEP_FEATS];
    /* a column never excited stays out of the fit (its coefficient would be noise) */
    for (int i = 1; i < UL_STEP_FEATS; i++)
        if (m->xtx[i][i] < 1e-9) active[i] = 0;
    for (int round = 0; round < UL_STEP_FEATS; round++) {
        if (solve(m, active, c)) return; /* keep the previous fit */
        int neg = -1;
        for (int i = 0; i < UL_STEP_FEATS; i++)
            if (active[i] && c[i] < 0 && (neg < 0 || c[i] < c[neg])) neg = i;
        if (neg < 0) break;
        active[neg] = 0;
    }
    for (int i = 0; i < UL_STEP_FEATS; i++) m->coef[i] = c[i] > 0 ? c[i] : 0;
}

void ul_step_model_observe(ul_step_model_t *m, const ul_step_feat_t *f, double us) {
    double x[UL_STEP_FEATS];
    if (!(us >= 0) || !isfinite(us)) return;
    features(f, x);
    for (int i = 0; i < UL_STEP_FEATS; i++) {
        for (int j = 0; j < UL_STEP_FEATS; j++) m->xtx[i][j] = DECAY * m->xtx[i][j] + x[i] * x[j];
        m->xty[i] = DECAY * m->xty[i] + x[i] * us;
    }
    m->prefill_weight = DECAY * m->prefill_weight + (f->n_prefill > 0);
    m->sum_us = DECAY * m->sum_us + us;
    m->sum_tokens = DECAY * m->sum_tokens + f->n_decode + f->n_prefill;
    m->n_obs++;
    /* The fit (a few 4x4 solves) cost ~2k instructions on the loop thread per step, as much
     * as a chat request's template rendering on a fast backend; the decayed sums move slowly,
     * so refitting every 4th step loses nothing a step's prediction can show. */
    if (m->n_obs <= 2 * UL_STEP_MIN_OBS || m->n_obs % 4 == 0) refit(m);
}

double ul_step_model_predict(const ul_step_model_t *m, const ul_step_feat_t *f) {
    double x[UL_STEP_FEATS];
    /* A few steps cannot separate four terms (a fit on three observations predicted 25x a
     * step's real time): until then, the average time per token. */
    if (m->n_obs < UL_STEP_MIN_OBS)
        return m->sum_tokens > 0 ? m->sum_us / m->sum_tokens * (f->n_decode + f->n_prefill) : 0;
    features(f, x);
    double c_pre = m->coef[2];
    /* prefill seen too rarely to separate from the rest: price it like decode */
    if (m->prefill_weight < 2 && c_pre < m->coef[1]) c_pre = m->coef[1];
    return m->coef[0] + m->coef[1] * x[1] + c_pre * x[2] + m->coef[3] * x[3];
}
