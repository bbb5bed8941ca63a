/* Absorbing a finished step: its time into the step-time model and the stats, each entry's
 * computed positions and sampled token into its sequence (ending it at end of generation,
 * max_tokens or the context), failed steps and sequences asked to stop while it ran. Loop
 * thread only, like the rest of the scheduler; the callbacks are owed (deliver.c), not made. */
#include <string.h>

#include "sched/sched_impl.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

int ul_sched_take_token(ul_sched_t *s, ul_seq_t *q, int32_t tok, const ul_step_out_t *o) {
    const ul_backend_t *b = s->backend;
    if (tok < 0 || tok >= b->n_vocab) {
        ul_sched_set_ending(s, q, UL_FINISH_ERROR, UL_ERANGE);
        ul_sched_owe(s, q, -1, NULL);
        return 0;
    }
    if (!q->ignore_eos && ((b->eos_id >= 0 && tok == b->eos_id) ||
                           (s->cfg.is_eog && s->cfg.is_eog(s->cfg.eog_ctx, tok)))) {
        ul_sched_set_ending(s, q, UL_FINISH_STOP, 0);
        ul_sched_owe(s, q, -1, NULL);
        return 0;
    }
    q->tokens[q->n_tokens++] = tok;
    s->stats.tokens_generated += !q->probe;
    int more = 1;
    if (q->n_tokens - q->n_prompt >= q->max_tokens || q->n_tokens >= q->cap) {
        ul_sched_set_ending(s, q, UL_FINISH_LENGTH, 0);
        more = 0;
    }
    ul_sched_owe(s, q, tok, o);
    return more;
}

/* The token an entry sampled, with its logprobs. */
static void take_sampled(ul_sched_t *s, ul_seq_t *q, const ul_step_seq_t *ss) {
    ul_step_out_t o = {.token = ss->out_token, .logprob = ss->out_logprob, .n_top = 0};
    if (q->sampling.n_logprobs > 0 && ss->out_n_top > 0) {
        o.n_top = ss->out_n_top > UL_MAX_LOGPROBS ? UL_MAX_LOGPROBS : ss->out_n_top;
        memcpy(o.top_ids, ss->out_top_ids, (size_t)o.n_top * sizeof *o.top_ids);
        memcpy(o.top_logprobs, ss->out_top_logprobs, (size_t)o.n_top * sizeof *o.top_logprobs);
    }
    ul_sched_take_token(s, q, o.token, &o);
}

void ul_sched_step_absorb(ul_sched_t *s) {
    UL_ASSERT(s->n_flight > 0);
    struct ul_sched_slot_s *sl = &s->slot[s->head];
    s->head = (s->head + 1) % s->depth;
    s->n_flight--;
    sl->done = 0;
    ul_step_t *st = &sl->step;
    s->stats.steps++;
    s->stats.compute_us += st->compute_us;
    s->stats.spec_draft_us += st->draft_us;
    if (sl->proposing) ul_spec_refeature(s, sl); /* the draft may have shortened entries */
    s->stats.predicted_us += sl->pred_us;
    s->step_last_us = st->compute_us;
    s->t_step_done_ns = s->now_ns;
    s->step_status = st->status;
    if (!st->status) s->t_step_ok_ns = s->t_step_done_ns;
    if (st->status)
        s->stats.step_errors++;
    else
        ul_step_model_observe(&s->model, &sl->feat, st->compute_us);
    UL_LOG_DEBUG("sched: step %llu: %.0f decode + %.0f prefill tokens, %.0f attended: "
                 "predicted %.1f ms, took %.1f ms%s",
                 (unsigned long long)s->stats.steps, sl->feat.n_decode, sl->feat.n_prefill,
                 sl->feat.attended, sl->pred_us / 1e3, st->compute_us / 1e3,
                 sl->budget_cut ? " (prefill cut)" : "");
    for (int32_t i = 0; i < st->n_seqs; i++) {
        ul_seq_t *q = sl->owner[i];
        q->in_step--;
        /* (the draft may have shortened a proposing entry: what was pending is spec_ntok) */
        q->n_pending -= q->spec_k >= 0 ? q->spec_ntok : st->seqs[i].n_tokens;
        q->n_unknown -= st->seqs[i].sample;
        q->spec_k = -1;
    }
    for (int32_t i = 0; i < st->n_seqs; i++) {
        ul_step_seq_t *ss = &st->seqs[i];
        ul_seq_t *q = sl->owner[i];
        if (q->cancelled) continue; /* reaped at the next build */
        if (q->ending) {            /* asked to stop while this step ran: result dropped */
            ul_sched_set_ending(s, q, q->ending, q->ending_status);
            ul_sched_owe(s, q, -1, NULL);
            continue;
        }
        if (st->status) {
            UL_LOG_ERROR("seq=%llu step failed: %s", (unsigned long long)q->id,
                         ul_strerror(st->status));
            ul_sched_set_ending(s, q, UL_FINISH_ERROR, st->status);
            ul_sched_owe(s, q, -1, NULL);
            continue;
        }
        if (ss->spec) {
            ul_spec_absorb(s, q, ss);
            continue;
        }
        q->n_computed += ss->n_tokens;
        s->stats.tokens_computed += (uint64_t)ss->n_tokens;
        if (ss->out_embd) { /* written: done, its pages back at once */
            ul_sched_set_ending(s, q, UL_FINISH_STOP, 0);
            ul_sched_owe(s, q, -1, NULL);
            continue;
        }
        ul_share_publish(s, q);
        if (!ss->sample) continue;
        q->rng[0] = ss->rng[0];
        q->rng[1] = ss->rng[1];
        take_sampled(s, q, ss);
    }
}
