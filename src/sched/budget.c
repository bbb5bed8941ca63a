/* The latency budget (--itl-target-ms): how much prefill a step may carry beside the
 * decoders so running streams keep their inter-token target, when ready sequences' first
 * tokens are held while a burst of prompts is prefilled, and the wait admission predicts
 * for a new request. Everything is priced by the step-time model (steptime.h) and timed by
 * s->now_ns only. */
#include <stdlib.h>

#include "sched/sched_impl.h"

/* When the decoders alone take longer than the target, prefill may stretch a step this much
 * over them: the target cannot be met anyway, and a fixed minimum share then starves new
 * requests (64 streams on the CPU: first token after 21 s instead of 3 s). */
#define OVERLOAD_STRETCH 1.5
/* The latency contract: while the decoders alone are predicted at most CONTRACT_DEC x the
 * target T, a step is planned to at most PLAN_FRAC x T, prefill getting at least
 * MIN_SHARE x T of it (so it never starves). Over CONTRACT_DEC x T the contract does not
 * bind: prefill's share ramps from MIN_SHARE x T up to (OVERLOAD_STRETCH - 1) x the
 * decoders' time, reached when they take OVERLOAD_FULL x T. (The stretch used to start as
 * soon as 1.5 x the decoders passed 0.9 T, i.e. at 0.6 T: 16 CPU decoders at ~80 ms then
 * got 120 ms steps and a p99 gap of 152 ms, over the 110 ms the contract allows.) */
#define CONTRACT_DEC 0.8
#define PLAN_FRAC 0.9
#define MIN_SHARE 0.1
#define OVERLOAD_FULL 1.2

/* Holding first tokens. A sequence whose prompt is computed but for its last token is
 * "ready": the step that computes that token samples its first token, and from then on
 * every step it is not in, or that is long, is a gap its client sees. While others' prompts
 * are still to be prefilled, ready sequences may be held back: they stream nothing yet, so
 * prefill is limited only by the sequences already streaming (by nothing when there are
 * none), instead of by one more decoder per held sequence. A burst of prompts then goes
 * through prefill at full speed and its first tokens come together, the first arrivals'
 * later, the last arrivals' much sooner (16 CPU prompts of 50 tokens arriving over 1 s:
 * the last first token at ~4.7 s under the target, where all streams stall at least one
 * target-sized step per prompt chunk). A ready sequence is held only while its age is
 * below the largest time to first token predicted for the prompts still to be prefilled
 * (so holding never makes it the worst one), and at most HOLD_MAX_T targets. */
#define HOLD_MAX_T 40.0

static int hold_enabled(const ul_sched_t *s, const ul_seq_t *q) {
    return s->cfg.itl_target_ms > 0 && !q->probe && ul_seq_n_total(q) == q->n_prompt;
}

int ul_budget_ready_first(const ul_sched_t *s, const ul_seq_t *q) {
    return hold_enabled(s, q) && q->state == UL_SEQ_RUNNING && ul_seq_n_left(q) == 1;
}

static int backlog_over_target(const ul_sched_t *s) {
    return s->backlog_us > PLAN_FRAC * s->cfg.itl_target_ms * 1000.0;
}

/* Collects the prompts still to be prefilled into s->scratch (returns how many) and the
 * oldest ready sequence's arrival time; counts the streaming decoders. */
static int32_t pending_prompts(ul_sched_t *s, uint64_t *oldest) {
    int32_t n = 0;
    ul_queue_t *it;
    UL_QUEUE_FOREACH(it, &s->running) {
        ul_seq_t *q = UL_QUEUE_DATA(it, ul_seq_t, node);
        if (!ul_sched_runnable(s, q)) continue;
        if (ul_budget_ready_first(s, q)) {
            if (!*oldest || q->t_add_ns < *oldest) *oldest = q->t_add_ns;
        } else if (ul_seq_n_left(q) == 1) {
            s->n_streaming++;
        } else if (n < s->cfg.max_seqs) {
            s->scratch[n++] = q;
        }
    }
    UL_QUEUE_FOREACH(it, &s->waiting) {
        ul_seq_t *q = UL_QUEUE_DATA(it, ul_seq_t, node);
        if (ul_sched_runnable(s, q) && n < s->cfg.max_seqs) s->scratch[n++] = q;
    }
    return n;
}

void ul_budget_decide_hold(ul_sched_t *s, int no_hold) {
    s->hold_first = 0;
    s->n_streaming = 0;
    s->backlog_us = 0;
    uint64_t now = s->now_ns, oldest = 0;
    int32_t n = pending_prompts(s, &oldest);
    if (n == 0 || s->cfg.itl_target_ms <= 0 || s->model.n_obs == 0) return;
    /* the pending prompts' first tokens, prefilled oldest first at full speed */
    qsort(s->scratch, (size_t)n, sizeof *s->scratch, ul_seq_by_arrival);
    ul_step_feat_t f = {0};
    double worst = 0;
    for (int32_t i = 0; i < n; i++) {
        ul_seq_t *q = s->scratch[i];
        ul_step_feat_add(&f, ul_seq_n_left(q), ul_seq_next_pos(q));
        double age = now > q->t_add_ns ? (double)(now - q->t_add_ns) / 1e9 : 0;
        double t = age + ul_step_model_predict(&s->model, &f) / 1e6;
        if (t > worst) worst = t;
    }
    s->backlog_us = ul_step_model_predict(&s->model, &f);
    /* (a full pool: the pending prompts cannot advance, the held would only wait; a backlog
     * that fits in one step within the target is not slowed by streams) */
    if (no_hold || !oldest || s->pool.n_free == 0 || !backlog_over_target(s)) return;
    double age = now > oldest ? (double)(now - oldest) / 1e9 : 0;
    s->hold_first = age < worst && age < HOLD_MAX_T * s->cfg.itl_target_ms / 1e3;
}

/* Whether the decoders of a step (predicted d us) are over the contract's bound: prefill
 * may then stretch the step, and the minimum token share applies. */
static int overloaded(const ul_sched_t *s, double d) {
    return d > CONTRACT_DEC * s->cfg.itl_target_ms * 1000.0;
}

/* The step time prefill chunks may fill up to, given the step's decode part dec. Plans to
 * 90% of the target: the gap a client sees adds the loop's turnaround to the step, and
 * the model errs by a few percent. */
static double step_target_us(const ul_sched_t *s, const ul_step_feat_t *dec) {
    double T = s->cfg.itl_target_ms * 1000.0;
    double d = ul_step_model_predict(&s->model, dec);
    if (!overloaded(s, d)) return PLAN_FRAC * T;
    double ramp = (d - CONTRACT_DEC * T) / ((OVERLOAD_FULL - CONTRACT_DEC) * T);
    double share = (ramp < 1 ? ramp : 1) * (OVERLOAD_STRETCH - 1) * d;
    return d + (share > MIN_SHARE * T ? share : MIN_SHARE * T);
}

double ul_budget_step_cap_us(const ul_sched_t *s) {
    return s->cfg.itl_target_ms > 0 ? PLAN_FRAC * s->cfg.itl_target_ms * 1000.0 : 0;
}

void ul_budget_plan(ul_sched_t *s) {
    s->dec_overloaded = overloaded(s, ul_step_model_predict(&s->model, &s->feat));
    s->prefill_target_us = step_target_us(s, &s->feat);
}

/* The largest prefill chunk (at most n tokens from position pos0) that, added to a step
 * with features base, keeps its predicted time within target_us. */
static int32_t chunk_for_target(const ul_sched_t *s, const ul_step_feat_t *base, int32_t pos0,
                                int32_t n, double target_us) {
    int32_t lo = 0, hi = n;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo + 1) / 2;
        ul_step_feat_t f = *base;
        ul_step_feat_add(&f, mid, pos0);
        if (ul_step_model_predict(&s->model, &f) <= target_us)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* The token budget, cut to the latency target while anything decodes, but never below one
 * token a step, nor, when the decoders alone are over the contract's bound, below the
 * step's minimum prefill share in tokens. (Under the bound the target itself leaves prefill
 * MIN_SHARE x T: a token floor on top would push the step over the target wherever a
 * prefill token costs what a decode token does, as on the CPU, where 16 of them nearly
 * double a 16-decoder step.) */
static int32_t target_budget(ul_sched_t *s, const ul_seq_t *q, int32_t prefilled) {
    int32_t budget = s->cfg.max_batch_tokens - s->step->n_tokens;
    if (budget <= 0 || s->cfg.itl_target_ms < 0 || s->feat.n_decode == 0 || s->model.n_obs == 0)
        return budget;
    int32_t want = ul_seq_n_left(q);
    if (want > budget) want = budget;
    int32_t c = chunk_for_target(s, &s->feat, ul_seq_next_pos(q), want, s->prefill_target_us);
    int32_t floor = s->dec_overloaded ? s->cfg.min_prefill - prefilled : 1 - prefilled;
    if (c < floor) c = floor < budget ? floor : budget;
    if (c < want) s->budget_cut = 1;
    return c;
}

int32_t ul_budget_prefill(ul_sched_t *s, const ul_seq_t *q, int32_t prefilled, int32_t n_pending) {
    int32_t budget = target_budget(s, q, prefilled);
    if (budget <= 0) return budget; /* the latency target is spent */
    /* The prompt's last token waits for the next step, where it may be held (see
     * ul_budget_decide_hold), when holding can help: nothing streams yet, or other prompts
     * are pending. Else it goes now, and the first token comes a step sooner. */
    int32_t left = ul_seq_n_left(q);
    if (hold_enabled(s, q) && backlog_over_target(s) && left > 1 && budget >= left &&
        (s->n_streaming == 0 || n_pending > 1))
        budget = left - 1;
    return budget;
}

/* Decode steps until the pool can give the pages that the work queued ahead of a new
 * sequence and its own prompt (need pages) still lack, when it cannot now. The running
 * sequences decode one token a step and grow into new pages as they go; one that will
 * end after r more tokens (max_tokens or the context; an earlier end-of-generation cannot
 * be foreseen) returns all its pages at step r. The answer is the first r at which the
 * pages free then cover need; 0 when they do now. O(running^2), only while the pool is
 * short. A paused sequence neither grows nor ends. Uses s->scratch, which only step
 * building uses otherwise (never at the same time: both run on the loop thread). */
static int64_t steps_until_pages(const ul_sched_t *s, int64_t need) {
    const ul_kv_pool_t *p = &s->pool;
    if (need <= p->n_free) return 0;
    int32_t n = 0;
    const ul_queue_t *it;
    for (it = s->running.next; it != &s->running; it = it->next) {
        const ul_seq_t *q = UL_QUEUE_DATA(it, ul_seq_t, node);
        if (!q->cancelled && !q->ending && !q->paused && q->n_tokens - q->n_computed <= 1 &&
            n < s->cfg.max_seqs)
            s->scratch[n++] = (ul_seq_t *)q;
    }
    int64_t best = -1;
    for (int32_t i = 0; i < n; i++) {
        /* candidate: the step at which sequence i ends */
        int64_t r = s->scratch[i]->cap - s->scratch[i]->n_tokens;
        if (best >= 0 && r >= best) continue;
        int64_t free = p->n_free;
        for (int32_t j = 0; j < n; j++) {
            const ul_seq_t *q = s->scratch[j];
            if (q->cap - q->n_tokens <= r) /* ended by then: its own pages are back */
                free += q->n_pages - q->n_shared;
            else /* grew by r tokens */
                free -= ul_kv_pages_for(p, (int64_t)q->n_tokens + r) - q->n_pages;
        }
        if (free >= need) best = r;
    }
    if (best < 0) { /* not even when all of them end: at the last end */
        for (int32_t i = 0; i < n; i++)
            if (s->scratch[i]->cap - s->scratch[i]->n_tokens > best)
                best = s->scratch[i]->cap - s->scratch[i]->n_tokens;
    }
    return best < 0 ? 0 : best;
}

/* The prefill queued ahead (tokens and the pages it lacks, on top of n_prompt's own) and the
 * decoders of the next steps. */
static void queue_ahead(const ul_sched_t *s, int64_t *ahead, int64_t *need, int32_t *n_dec,
                        ul_step_feat_t *dec) {
    const ul_queue_t *lists[2] = {&s->waiting, &s->running};
    for (int l = 0; l < 2; l++) {
        const ul_queue_t *it;
        for (it = lists[l]->next; it != lists[l]; it = it->next) {
            const ul_seq_t *q = UL_QUEUE_DATA(it, ul_seq_t, node);
            int32_t left = q->n_tokens - q->n_computed;
            if (q->cancelled || q->ending) continue;
            if (left > 1 || q->state == UL_SEQ_WAITING) {
                *ahead += left;
                *need += ul_kv_pages_for(&s->pool, q->n_tokens) - q->n_pages;
            } else if (!q->paused && *n_dec < s->cfg.max_batch_tokens) {
                (*n_dec)++;
                ul_step_feat_add(dec, 1, q->n_computed);
            }
        }
    }
}

double ul_sched_predict_wait_s(const ul_sched_t *s, int32_t n_prompt) {
    if (s->model.n_obs == 0) return 0;
    int64_t ahead = n_prompt;
    int64_t need = ul_kv_pages_for(&s->pool, n_prompt); /* pages the prefill ahead lacks */
    int32_t n_dec = 0;
    ul_step_feat_t dec = {0};
    queue_ahead(s, &ahead, &need, &n_dec, &dec);
    /* prefill tokens per step: all the batch when nothing decodes, else what the target
     * leaves (at least the minimum share, as in target_budget) */
    int32_t room = s->cfg.max_batch_tokens - n_dec, per = room;
    if (n_dec > 0 && s->cfg.itl_target_ms > 0) {
        per = chunk_for_target(s, &dec, 0, room, step_target_us(s, &dec));
        int32_t floor =
            overloaded(s, ul_step_model_predict(&s->model, &dec)) ? s->cfg.min_prefill : 1;
        if (per < floor) per = floor;
        if (per > room) per = room;
    }
    if (per < 1) per = 1;
    /* full steps of per prefill tokens, then one with the rest */
    ul_step_feat_t f = dec, last = dec;
    ul_step_feat_add(&f, per, 0);
    double wait = (double)(ahead / per) * ul_step_model_predict(&s->model, &f) / 1e6;
    if (ahead % per) {
        ul_step_feat_add(&last, (int32_t)(ahead % per), 0);
        wait += ul_step_model_predict(&s->model, &last) / 1e6;
    }
    /* A full pool: the prefill ahead starts only when running sequences end and return
     * their pages; until then the steps decode only. */
    int64_t kv_steps = steps_until_pages(s, need);
    if (kv_steps > 0) wait += (double)kv_steps * ul_step_model_predict(&s->model, &dec) / 1e6;
    return wait;
}
