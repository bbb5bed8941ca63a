/* The owner's side of absorbed steps: the on_token / on_finish callbacks each step owes,
 * queued while it is absorbed (which calls nothing back) and run by ul_sched_step_deliver,
 * after the driver has submitted the next step. */
#include <string.h>

#include "sched/sched_impl.h"
#include "uvllm/log.h"

const char *ul_finish_name(ul_finish_t f) {
    switch (f) {
    case UL_FINISH_STOP:
        return "stop";
    case UL_FINISH_LENGTH:
        return "length";
    case UL_FINISH_CANCELLED:
        return "cancelled";
    case UL_FINISH_ERROR:
        return "error";
    case UL_FINISH_DEADLINE:
        return "deadline";
    default:
        return "none";
    }
}

/* Queues q's callbacks for ul_sched_step_deliver (once per sequence: a second entry could
 * outlive the sequence, which the first one may finish). ss: the step entry that sampled
 * token, whose logprobs are copied now (the next step overwrites them); NULL with token < 0.
 * The top candidates are copied only when asked for: most sequences want none. */
void ul_sched_owe(ul_sched_t *s, ul_seq_t *q, int32_t token, const ul_step_seq_t *ss) {
    if (q->cb_pending) {
        UL_ASSERT(token < 0); /* only a refused step can follow an undelivered one */
        return;
    }
    UL_ASSERT(s->n_done < 2 * s->cfg.max_batch_tokens);
    ul_token_lp_t *lp = &s->done_lp[s->n_done];
    lp->logprob = ss ? ss->out_logprob : 0.0f;
    lp->n_top = 0;
    if (ss && q->sampling.n_logprobs > 0) {
        int32_t n = ss->out_n_top;
        n = n < 0 ? 0 : (n > UL_MAX_LOGPROBS ? UL_MAX_LOGPROBS : n);
        memcpy(lp->top_ids, ss->out_top_ids, (size_t)n * sizeof *lp->top_ids);
        memcpy(lp->top_logprobs, ss->out_top_logprobs, (size_t)n * sizeof *lp->top_logprobs);
        lp->n_top = n;
    }
    s->done[s->n_done++] = (struct ul_sched_done_s){q, token};
    q->cb_pending = 1;
}

/* One owed entry: the token's on_token (unless the client is gone), then the finish if the
 * sequence's end is decided and no step in flight still uses it. */
static void deliver_one(ul_sched_t *s, ul_seq_t *q, int32_t tok, const ul_token_lp_t *lp) {
    q->cb_pending = 0;
    if (q->cancelled) {
        if (!q->in_step) ul_sched_finish(s, q, ul_seq_cancel_reason(q), 0);
        return; /* else reaped after the step in flight */
    }
    if (tok >= 0) {
        if (!q->t_first_ns) q->t_first_ns = s->now_ns;
        if (!q->probe)
            ul_hist_observe(q->t_last_ns ? &s->stats.itl : &s->stats.ttft,
                            ul_sched_seconds_since(s, q->t_last_ns ? q->t_last_ns : q->t_add_ns));
        q->t_last_ns = s->now_ns;
    }
    if (tok >= 0 && q->on_token && q->on_token(q, tok, lp)) {
        q->ending = UL_FINISH_STOP; /* a stop string beats max_tokens */
        q->ending_status = 0;
    }
    if (q->ending && !q->in_step) ul_sched_finish(s, q, q->ending, q->ending_status);
    /* else: in the step in flight; absorbing it finishes q and drops its token */
}

void ul_sched_step_deliver(ul_sched_t *s) {
    /* Callbacks never build or absorb a step (add, cancel and pause only mark and kick),
     * so the list does not change under this loop. */
    for (int32_t i = 0; i < s->n_done; i++)
        deliver_one(s, s->done[i].seq, s->done[i].token, &s->done_lp[i]);
    s->n_done = 0;
}

void ul_sched_step_complete(ul_sched_t *s) {
    ul_sched_step_absorb(s);
    ul_sched_step_deliver(s);
}
