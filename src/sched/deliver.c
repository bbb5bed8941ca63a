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

/* Queues q's callbacks for ul_sched_step_deliver. A sequence's entries are one run, all
 * from the absorb that queued the first (a later one could outlive the sequence, which the
 * first may finish): more tokens of the same step (speculative decoding) join the run; after
 * that only a refused step's finish may follow, and it is implied (q->ending). o: the token's
 * logprobs, copied now (the next step overwrites them); NULL with token < 0. The top
 * candidates are copied only when asked for: most sequences want none. */
void ul_sched_owe(ul_sched_t *s, ul_seq_t *q, int32_t token, const ul_step_out_t *o) {
    if (q->cb_pending) {
        if (token < 0) return; /* the finish follows the owed tokens (q->ending) */
        UL_ASSERT(s->n_done > 0 && s->done[s->n_done - 1].seq == q); /* the same absorb */
        s->done[q->done_head].n++;
    } else {
        q->cb_pending = 1;
        q->done_head = s->n_done;
    }
    UL_ASSERT(s->n_done < 2 * s->cfg.max_batch_tokens);
    ul_token_lp_t *lp = &s->done_lp[s->n_done];
    lp->logprob = o ? o->logprob : 0.0f;
    lp->n_top = 0;
    if (o && q->sampling.n_logprobs > 0) {
        int32_t n = o->n_top;
        n = n < 0 ? 0 : (n > UL_MAX_LOGPROBS ? UL_MAX_LOGPROBS : n);
        memcpy(lp->top_ids, o->top_ids, (size_t)n * sizeof *lp->top_ids);
        memcpy(lp->top_logprobs, o->top_logprobs, (size_t)n * sizeof *lp->top_logprobs);
        lp->n_top = n;
    }
    const int32_t first = q->done_head == s->n_done;
    s->done[s->n_done++] = (struct ul_sched_done_s){q, token, first};
}

/* One token's on_token (unless the client is gone); 1 when it asks to stop. */
static int deliver_token(ul_sched_t *s, ul_seq_t *q, int32_t tok, const ul_token_lp_t *lp) {
    if (!q->t_first_ns) q->t_first_ns = s->now_ns;
    if (!q->probe)
        ul_hist_observe(q->t_last_ns ? &s->stats.itl : &s->stats.ttft,
                        ul_sched_seconds_since(s, q->t_last_ns ? q->t_last_ns : q->t_add_ns));
    q->t_last_ns = s->now_ns;
    if (q->on_token && q->on_token(q, tok, lp)) {
        q->ending = UL_FINISH_STOP; /* a stop string beats max_tokens */
        q->ending_status = 0;
        return 1;
    }
    return 0;
}

/* A sequence's owed entries (n of them): its tokens in order until one asks to stop (the
 * rest are dropped), then the finish if its end is decided and no step in flight still
 * uses it. */
static void deliver_run(ul_sched_t *s, const struct ul_sched_done_s *d, const ul_token_lp_t *lp,
                        int32_t n) {
    ul_seq_t *q = d->seq;
    q->cb_pending = 0;
    if (q->cancelled) {
        if (!q->in_step) ul_sched_finish(s, q, ul_seq_cancel_reason(q), 0);
        return; /* else reaped after the step in flight */
    }
    for (int32_t i = 0; i < n; i++)
        if (d[i].token >= 0 && deliver_token(s, q, d[i].token, &lp[i])) break;
    if (q->ending && !q->in_step) ul_sched_finish(s, q, q->ending, q->ending_status);
    /* else: in the step in flight; absorbing it finishes q and drops its token */
}

void ul_sched_step_deliver(ul_sched_t *s) {
    /* Callbacks never build or absorb a step (add, cancel and pause only mark and kick),
     * so the list does not change under this loop. */
    for (int32_t i = 0; i < s->n_done;) {
        int32_t n = s->done[i].n > 0 ? s->done[i].n : 1;
        deliver_run(s, &s->done[i], &s->done_lp[i], n);
        i += n;
    }
    s->n_done = 0;
}

void ul_sched_step_complete(ul_sched_t *s) {
    ul_sched_step_absorb(s);
    ul_sched_step_deliver(s);
}
