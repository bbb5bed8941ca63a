/* Private to src/sched: the sequence predicates and the functions that sched.c (lifecycle,
 * building, preemption), absorb.c (a finished step's results), share.c (prefix cache, n > 1
 * sharing) and budget.c (latency budget, first-token holding, predicted wait) call across each
 * other. Loop thread only, like the rest of the scheduler. */
#ifndef UL_SCHED_SCHED_IMPL_H
#define UL_SCHED_SCHED_IMPL_H

#include "sched/sched.h"

/* Building counts what the steps in flight will have done (pipelining): the next position
 * to compute, and the tokens there will be once they are absorbed. Equal to n_computed and
 * n_tokens when q is in no step. */
static inline int32_t ul_seq_next_pos(const ul_seq_t *q) { return q->n_computed + q->n_pending; }
static inline int32_t ul_seq_n_total(const ul_seq_t *q) { return q->n_tokens + q->n_unknown; }
static inline int32_t ul_seq_n_left(const ul_seq_t *q) {
    return ul_seq_n_total(q) - ul_seq_next_pos(q);
}

/* Seconds from t (ns) to s->now_ns; 0 when the clock has not passed t. */
static inline double ul_sched_seconds_since(const ul_sched_t *s, uint64_t t) {
    return s->now_ns > t ? (double)(s->now_ns - t) / 1e9 : 0;
}

/* How a cancelled sequence ends: by its deadline, or cancelled. */
static inline ul_finish_t ul_seq_cancel_reason(const ul_seq_t *q) {
    return q->expired ? UL_FINISH_DEADLINE : UL_FINISH_CANCELLED;
}

/* sched.c: removes q from the scheduler and tells its owner; q may be freed after. */
void ul_sched_finish(ul_sched_t *s, ul_seq_t *q, ul_finish_t reason, int status);
/* sched.c: decides q's end without calling back; its pages go back to the pool at once when
 * no step uses them. */
void ul_sched_set_ending(ul_sched_t *s, ul_seq_t *q, ul_finish_t reason, int status);
/* deliver.c: queues q's callbacks (token < 0: only the finish) for ul_sched_step_deliver;
 * o: the token's logprobs (copied now), NULL with token < 0. Several tokens of one step
 * (speculative decoding) are owed one after the other. */
void ul_sched_owe(ul_sched_t *s, ul_seq_t *q, int32_t token, const ul_step_out_t *o);
/* absorb.c: appends a token q produced and decides whatever needs no callback (end of
 * generation, max_tokens, the context), owing its on_token; 1 while q may take more. */
int ul_sched_take_token(ul_sched_t *s, ul_seq_t *q, int32_t tok, const ul_step_out_t *o);
/* sched.c: makes q's page table cover n tokens; 0 or UL_EFULL (nothing allocated). */
int ul_sched_grow_pages(ul_sched_t *s, ul_seq_t *q, int32_t n);

/* spec.c (speculative decoding). init: the draft KV pool and the steps' proposal buffers
 * when speculation is on (0 or UL_ENOMEM); seq_init / seq_free: a sequence's draft page
 * table (cap tokens); release: its draft pages back (with its target pages). */
int ul_spec_init(ul_sched_t *s);
void ul_spec_free(ul_sched_t *s);
int ul_spec_seq_init(ul_sched_t *s, ul_seq_t *q, int32_t cap);
void ul_spec_seq_free(ul_seq_t *q);
void ul_spec_release(ul_sched_t *s, ul_seq_t *q);
/* spec.c, while the decoders are added: begin, with the n candidates in s->scratch; plan:
 * how many proposals q (a decoder in no step) makes in this step, at most room, its pages
 * grown for them and the proposals written after its tokens (-1: the draft's to come);
 * attach: the entry's proposals (add_to_step). */
void ul_spec_begin(ul_sched_t *s, int32_t n);
int32_t ul_spec_plan(ul_sched_t *s, ul_seq_t *q, int32_t room);
void ul_spec_attach(ul_sched_t *s, ul_seq_t *q, ul_step_seq_t *ss, int32_t k);
/* spec.c, absorbing: a verified entry's tokens, KV (rejected positions forgotten, pages
 * that held only them freed) and acceptance; refeature: a step the draft changed, its
 * features (for the step-time model) from its final layout. */
void ul_spec_absorb(ul_sched_t *s, ul_seq_t *q, const ul_step_seq_t *ss);
void ul_spec_refeature(ul_sched_t *s, struct ul_sched_slot_s *sl);
/* budget.c: the step time a step is planned to while anything decodes (the latency
 * target's plan), or 0 without a target. */
double ul_budget_step_cap_us(const ul_sched_t *s);

/* sched.c: q may get tokens in the step being built (not paused, cancelled, ending, waiting
 * to share, nor in a step in flight that leaves it nothing to do). */
int ul_sched_runnable(const ul_sched_t *s, const ul_seq_t *q);
/* sched.c: the qsort order of sequences by arrival, oldest first. */
int ul_seq_by_arrival(const void *a, const void *b);

/* share.c: whether q may take w's prompt pages later (*share), or UL_EINVAL for a caller's
 * mistake (see ul_sched_add_shared). */
int ul_share_check(const ul_seq_t *q, const int32_t *prompt, int32_t n_prompt, const ul_seq_t *w,
                   int *share);
/* share.c: q gives its pages back: it stops waiting to share, and whoever waits to share its
 * pages computes its own prompt instead. */
void ul_share_release(ul_sched_t *s, ul_seq_t *q);
/* share.c: q waits for the sequence it shares with to compute the pages it will take. */
int ul_share_blocked(const ul_sched_t *s, const ul_seq_t *q);
/* share.c: at admission, the pages q need not compute: those of the sequence it shares
 * with, or those found in the prefix cache. UL_EFULL: it shares, and not even the page past
 * the shared ones is free (it is not admitted). */
int ul_share_admit(ul_sched_t *s, ul_seq_t *q);
/* share.c: publishes q's pages that became full and computed, for later sequences. */
void ul_share_publish(ul_sched_t *s, ul_seq_t *q);

/* budget.c: decides s->hold_first for the step being built (no_hold: never) and counts the
 * streaming decoders. */
void ul_budget_decide_hold(ul_sched_t *s, int no_hold);
/* budget.c: q's last prompt token is all it has left and it may be held (its next step
 * samples its first token). */
int ul_budget_ready_first(const ul_sched_t *s, const ul_seq_t *q);
/* budget.c: after the decoders are in the step: whether they alone are over the contract's
 * bound, and the step time prefill may fill up to. */
void ul_budget_plan(ul_sched_t *s);
/* budget.c: prefill tokens q may get in this step (prefilled: prefill tokens already in it;
 * n_pending: prompts that could be prefilled in it). */
int32_t ul_budget_prefill(ul_sched_t *s, const ul_seq_t *q, int32_t prefilled, int32_t n_pending);

#endif
