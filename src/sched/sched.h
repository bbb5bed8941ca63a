/* The scheduler: sequences, their KV page tables, and the iteration-level batcher that
 * turns "what every sequence needs next" into one backend step at a time.
 *
 * A policy on given time: everything here runs on the loop thread (no locks) and reads the
 * time only from s->now_ns, which whoever drives the scheduler sets once per wake-up (as
 * libuv caches loop->time). The scheduler never reads a clock and knows no event loop, so
 * tests drive it step by step with a backend's synchronous run() on real or virtual time
 * (the null backend's virtual_time: a step takes its configured cost and reports it). The
 * driver (sched/driver.h) attaches it to a libuv loop: it sets now_ns, receives the
 * backend's completions and "kicks" the batcher whenever something changed (a sequence
 * added, cancelled or resumed) through the kick hook below.
 *
 * Files: sched.c (lifecycle, step building, preemption), absorb.c (a finished step's
 * results), share.c (prefix cache, n > 1 sharing), budget.c (latency budget, first-token holding,
 * predicted wait), steptime.c (the step-time model), spec.c (speculative decoding: proposals, how
 * many, their verification's results), sched_impl.h (what they share), driver.c (the loop).
 *
 * Speculative decoding (cfg.spec_ngram, a backend with a draft model; backend.h
 * "Speculative decoding"): a decoding sequence's one token may come with proposals, from
 * n-gram lookup in its own tokens or from the draft model, verified in the same step as
 * everything else. How many each sequence proposes is priced like everything in a step: by
 * the step-time model against the tokens they are expected to add (from its acceptance
 * rate), within the step's token budget and the latency target, so a sequence whose
 * proposals are rarely right, or a step that batching already fills, proposes nothing (a
 * backed-off sequence probes with one proposal now and then). One step can give a sequence
 * several tokens: on_token runs for each in order (a stop ends it there). Pipelining
 * (cfg.pipeline 2) takes precedence: a sequence whose step is still in flight is chained
 * without proposals, and one with proposals in flight waits for their outcome, so with
 * both on a steadily decoding sequence rarely proposes.
 *
 * One step in flight at a time, double buffered (DESIGN.md "Double buffering"): when step N
 * completes, the driver first absorbs its results (tokens appended, end-of-generation,
 * max_tokens and context length decided: everything that needs no callback), then builds
 * and submits step N+1, and only then runs step N's callbacks (detokenize, stop strings,
 * SSE writes) while the backend computes N+1. A sequence that is in step N+1 when its
 * callback asks to stop, or when it is cancelled, ends once N+1 completes (the backend uses
 * its pages until then) and its N+1 token is discarded: no on_token after the stop, and
 * on_finish exactly once.
 *
 * Pipelining (cfg.pipeline 2, a backend with max_in_flight 2; backend.h "Pipelining"): step
 * N+1 is built and submitted while step N is still in flight, so the backend goes from N
 * to N+1 without waiting for the loop (a GPU copies N+1's inputs while N computes). This
 * changes DESIGN.md's rule that two steps in flight never touch the same sequence: a
 * sequence sampled in N is in N+1 "chained" (its input is N's token, which the backend
 * fills in), and one prefilling in N continues its prompt in N+1. A sequence is chained
 * unless it is paused or N's token ends it by max_tokens or the context. A sequence N's
 * token ends (end-of-generation, a stop string, cancel) computes one token
 * in N+1 for nothing, dropped like any token after an end. On completion the driver
 * absorbs N, delivers N's callbacks, then builds N+2 (N+1 computes meanwhile).
 *
 * Step building (DESIGN.md "Scheduling one step"):
 *   0. cancelled sequences are removed and their pages freed (their on_finish runs);
 *   1. every running sequence in decode contributes one token (round-robin when there
 *      are more than the budget), taking a new page when its last one is full; when no
 *      page is free the newest sequence holding pages is preempted (pages freed,
 *      requeued, recomputed from its prompt + generated tokens later);
 *   2. the rest of the token budget goes to prefill chunks, oldest sequence first,
 *      admitted only as far as pages can be allocated (a sequence that shares another's
 *      prompt pages needs only its own: see ul_sched_add_shared).
 * Paused sequences (their client's SSE buffer is full) are skipped until resumed.
 *
 * Sequence lifecycle and ownership: the caller allocates a ul_seq_t (usually embedded in
 * its request), fills the "caller" fields and calls ul_sched_add. From then on the
 * scheduler calls on_token for each generated token and on_finish exactly once; after
 * on_finish returns the scheduler never touches the sequence again and the caller may free
 * it. The caller must not free it before. Callbacks run on the loop thread, never from
 * inside ul_sched_add / ul_sched_cancel / ul_sched_set_paused. */
#ifndef UL_SCHED_SCHED_H
#define UL_SCHED_SCHED_H

#include <stdint.h>

#include "base/queue.h"
#include "sched/hist.h"
#include "sched/kvpool.h"
#include "sched/steptime.h"
#include "uvllm/backend.h"

typedef enum {
    UL_SEQ_NEW,      /* not yet added */
    UL_SEQ_WAITING,  /* queued for (re)prefill; may hold no pages */
    UL_SEQ_RUNNING,  /* holds pages; prefilling in chunks or decoding */
    UL_SEQ_FINISHED, /* on_finish has run */
} ul_seq_state_t;

typedef enum {
    UL_FINISH_NONE = 0,
    UL_FINISH_STOP,      /* end-of-generation token or a stop string */
    UL_FINISH_LENGTH,    /* max_tokens or the context length */
    UL_FINISH_CANCELLED, /* ul_sched_cancel (client gone, shutdown) */
    UL_FINISH_ERROR,     /* the backend failed the step; status says why */
    UL_FINISH_DEADLINE,  /* seq->deadline_ns passed before it ended */
} ul_finish_t;

/* "stop", "length", "cancelled", "error", "deadline" */
const char *ul_finish_name(ul_finish_t f);

typedef struct ul_seq_s ul_seq_t;
/* The log-probabilities that came with a sampled token, copied out of the step when it was
 * absorbed (the step's own outputs are overwritten by the next step before callbacks run).
 * Values are the model's raw distribution (log-softmax of the logits before penalties,
 * logit bias and temperature; see engine/sampling.h). */
typedef struct ul_token_lp_s {
    float logprob;                       /* of the token itself */
    int32_t n_top;                       /* 0 unless sampling.n_logprobs > 0 */
    int32_t top_ids[UL_MAX_LOGPROBS];    /* [n_top], most likely first */
    float top_logprobs[UL_MAX_LOGPROBS]; /* [n_top] */
} ul_token_lp_t;
/* A generated token (never the end-of-generation token unless seq->ignore_eos). lp is
 * never NULL and valid only during the call. Return 0 to continue or 1 to end the sequence
 * now with UL_FINISH_STOP (e.g. a stop string matched). Must not free the sequence. */
typedef int (*ul_seq_token_cb)(ul_seq_t *seq, int32_t token, const ul_token_lp_t *lp);
/* Exactly once per added sequence. status: 0, or the UL_E* of a failed step. */
typedef void (*ul_seq_finish_cb)(ul_seq_t *seq, ul_finish_t reason, int status);

struct ul_seq_s {
    /* caller's, set before ul_sched_add */
    int32_t max_tokens; /* >= 1 */
    ul_sampling_t sampling;
    ul_seq_token_cb on_token;
    ul_seq_finish_cb on_finish;
    void *data;
    int ignore_eos;       /* 1: end-of-generation tokens do not end it; they go to on_token like
                           * any other (the sampler is not biased against them) */
    uint64_t deadline_ns; /* 0, or a time (the clock of s->now_ns) after which the sequence
                           * ends at the next step with UL_FINISH_DEADLINE (tokens not yet
                           * delivered are dropped) */
    int probe;            /* 1: a health probe (the api's readiness canary), not load: not
                           * counted against max_seqs, in latency histograms or tokens */
    /* Embedding (issue 26): NULL, or [backend->n_embd] floats that receive the prompt's pooled
     * hidden state (backend.h "Embeddings", pooling UL_POOL_*). Such a sequence is prefilled
     * in one step, whole (its prompt may not exceed the step budget), samples nothing, keeps
     * no pages after that step and publishes none to the prefix cache; on_finish follows with
     * UL_FINISH_STOP once embd is written (on_token never runs). Must stay valid until then. */
    float *embd;
    int32_t pooling;
    /* scheduler's, read-only for the caller */
    uint64_t id;
    ul_seq_state_t state;
    int32_t *tokens; /* [cap]: prompt then generated; never reallocated */
    int32_t n_prompt;
    int32_t n_tokens;
    int32_t cap;        /* min(n_prompt + max_tokens, n_ctx) */
    int32_t n_computed; /* tokens whose KV is stored */
    int32_t *pages;     /* [pages_cap] page table */
    int32_t n_pages;
    int32_t pages_cap;
    uint64_t rng[2];
    uint64_t arrival; /* order of arrival: smaller is older */
    int paused;
    int cancelled;
    int in_step;        /* steps in flight it is in (2 only while pipelining) */
    int step_samples;   /* while in_step: the newest of them samples a token for it */
    int32_t step_index; /* while in_step: its index in the newest one's seqs */
    int32_t n_pending;  /* while in_step: tokens those steps compute for it (KV to come) */
    int32_t n_unknown;  /* while in_step: tokens those steps sample for it (not known yet) */
    int cb_pending;     /* has entries in the scheduler's callback list (s->done) */
    int32_t done_head;  /* while cb_pending: the first of them */
    ul_finish_t ending; /* decided end, on_finish not run yet (waits for callbacks/step) */
    int ending_status;
    int32_t n_preempted;
    /* speculative decoding (spec.c): decayed counts of proposals accepted and reached per
     * proposer (0 n-gram, 1 draft) and the optimistic prior's decayed weight; steps since it last
     * proposed; while in a step: its proposals (spec_k, -1: none) and the tokens its entry had when
     * built; the draft KV pool's page table and how many positions it holds */
    float spec_acc[2], spec_seen[2], spec_prior[2];
    int32_t spec_idle;
    int32_t spec_k, spec_from, spec_ntok;
    int32_t *dpages;
    int32_t n_dpages, dpages_cap, d_computed;
    /* KV sharing (ul_sched_add_shared): while waiting to share, the sequence whose prompt
     * pages it will take (NULL once it took them or proceeds on its own); n_sharers counts
     * the sequences waiting on this one; n_shared is how many pages at the front of the
     * page table were taken from another sequence (read-only for both). */
    ul_seq_t *share_with;
    int32_t n_sharers;
    int32_t n_shared;
    /* prefix cache: the first n_hashed pages are accounted for (published or taken from
     * the cache); prefix_hash is the hash of page n_hashed-1 (0 when none) */
    int32_t n_hashed;
    uint64_t prefix_hash;
    int32_t n_cached; /* prompt tokens found in the prefix cache at its last admission */
    int expired;      /* past deadline_ns: ends like a cancel, with UL_FINISH_DEADLINE */
    /* s->now_ns at: ul_sched_add, first admission into a step, first and last token
     * delivered */
    uint64_t t_add_ns, t_sched_ns, t_first_ns, t_last_ns;
    ul_queue_t node; /* in the waiting or running list */
};

typedef struct ul_sched_config_s {
    int32_t max_batch_tokens; /* token budget of a step; 0: the backend's max_step_tokens */
    int32_t max_seqs;         /* sequences admitted at once (waiting + running); default 4096 */
    /* optional: other end-of-generation tokens than backend->eos_id (a vocabulary's eot,
     * eom...); the api sets it for real models so sched needs no tokenizer */
    int (*is_eog)(void *ctx, int32_t tok);
    void *eog_ctx;
    int no_prefix_cache; /* 1: computed pages are not kept for reuse (--no-prefix-cache) */
    /* Latency budget (--itl-target-ms) T: while sequences decode and the decoders alone are
     * predicted at most 0.8 T, prefill chunks are sized so the step-time model predicts at
     * most 0.9 T per step (prefill gets at least 0.1 T, and at least one token, so time to
     * first token stays bounded); over 0.8 T the contract cannot bind and prefill's share
     * ramps up to half the decoders' time (at least min_prefill tokens); when nothing
     * decodes, prefill takes the whole token budget. A ready sequence's first token may be
     * held while a burst of prompts is prefilled (sched.c, decide_hold). 0: default 100;
     * < 0: off. */
    double itl_target_ms;
    int32_t min_prefill; /* 0: default max(page_size, max_batch_tokens / 32) */
    /* Steps in flight at once (--pipeline): 0 or 1, one (the next built when it completes);
     * 2, step N+1 is submitted while N computes (pipelining, above), when the backend takes
     * it (max_in_flight >= 2), else 1. */
    int32_t pipeline;
    /* Speculative decoding (spec.c): spec_ngram N > 0 proposes the tokens that followed the
     * latest earlier occurrence of the sequence's last N (down to 1) tokens; a backend with
     * a draft model (ul_spec_backend_create) proposes with it where n-gram lookup finds
     * nothing. spec_draft_max: proposals per sequence and step (0: 6; at most UL_MAX_DRAFT);
     * spec_draft_min: fewer are not proposed (0: 1); spec_p_min: the draft stops at a token
     * it gives less probability (0: never). */
    int32_t spec_ngram, spec_draft_max, spec_draft_min;
    float spec_p_min;
    /* 1: every decoder proposes spec_draft_max tokens whenever a proposer has them, whatever
     * the step-time model says (tests and the verification's benchmark: a fixed K) */
    int spec_eager;
} ul_sched_config_t;

#define UL_SPEC_HIST_N 11 /* acceptance-rate buckets: <= 0, 0.1, ..., 1 */

typedef struct ul_sched_stats_s {
    uint64_t steps, tokens_generated, tokens_computed, preemptions, seqs_finished;
    uint64_t step_errors;
    double compute_us; /* sum of the backend's step times */
    /* prefix cache: tokens looked up at admission (prompt, or prompt + generated after a
     * preemption) and how many of them were found in cached pages (not computed again) */
    uint64_t prefix_query_tokens, prefix_hit_tokens;
    double predicted_us; /* sum of the model's predictions for the steps run */
    uint64_t deadlines;  /* sequences ended by their deadline */
    /* seconds: add -> first token delivered; between two tokens of a sequence; add -> first
     * step; add -> on_finish (stop, length or deadline) */
    ul_hist_t ttft, itl, queue, e2e;
    uint64_t steps_budgeted; /* steps whose prefill was cut by the latency target */
    uint64_t steps_held;     /* steps built while ready sequences' first tokens were held */
    uint64_t steps_ahead;    /* steps built while another was in flight (pipelining) */
    uint64_t tokens_chained; /* decode inputs left to the backend to fill in (pipelining) */
    /* speculative decoding: verifications (sequence-steps with proposals), proposals made
     * and accepted, tokens they gave per verification over steps, per verification the
     * accepted share (accept_hist[i]: share <= i / 10, not cumulative), and the draft
     * model's time (of compute_us) */
    uint64_t spec_verifications, spec_proposed, spec_accepted;
    uint64_t spec_accept_hist[UL_SPEC_HIST_N];
    double spec_draft_us;
} ul_sched_stats_t;

typedef struct ul_sched_s ul_sched_t;
struct ul_sched_s {
    ul_backend_t *backend;
    ul_sched_config_t cfg;
    ul_kv_pool_t pool;
    ul_queue_t waiting; /* by arrival, oldest first */
    ul_queue_t running; /* decode order (rotated for fairness) */
    int32_t n_waiting, n_running;
    uint64_t next_id, next_arrival;
    /* The steps: one slot per step that may be in flight (depth), buffers sized for
     * max_batch_tokens. Steps are absorbed in the order they were built: slot[head] is the
     * oldest in flight, slot[(head + n_flight) % depth] the next one built. */
    struct ul_sched_slot_s {
        ul_step_t step;
        ul_seq_t **owner;     /* [max_batch_tokens]: the sequence of each step.seqs entry */
        ul_step_feat_t feat;  /* its shape, for the step-time model */
        double pred_us;       /* the model's prediction when it was built */
        int budget_cut;       /* the latency target cut its prefill */
        int done;             /* completed (or refused), not absorbed yet */
        ul_step_spec_t *spec; /* [spec_cap]: its entries' proposals (NULL: no speculation) */
        int32_t n_spec;
        int proposing; /* a draft model proposes for some of its entries */
    } slot[2];
    int32_t spec_cap;      /* speculative entries a step may have (0: speculation off) */
    ul_kv_pool_t dpool;    /* the draft model's KV pages (n_pages 0: no draft model) */
    int32_t depth;         /* 1, or 2 when pipelining */
    int32_t head;          /* slot of the oldest step in flight */
    int32_t n_flight;      /* steps built and not absorbed yet */
    ul_step_t *step;       /* the step built last (slot[(head + n_flight - 1) % depth]) */
    ul_seq_t **step_owner; /* its owners (as step) */
    ul_seq_t **scratch;    /* [max_seqs]: prefill candidates while building */
    /* Callbacks owed for absorbed steps, run by ul_sched_step_deliver: token < 0 means only
     * the finish (a sequence's entries are one run, added by one absorb: ul_seq_t.cb_pending). */
    struct ul_sched_done_s {
        ul_seq_t *seq;
        int32_t token;
        int32_t n;          /* at a sequence's first entry: its entries here (several tokens of one
                             * step: speculative decoding), consecutive */
    } * done;               /* [2 * max_batch_tokens] */
    ul_token_lp_t *done_lp; /* [2 * max_batch_tokens]: the logprobs of done[i].token */
    int32_t n_done;
    int preempted_for_decode; /* while building: a decoder preempted someone */
    ul_sched_stats_t stats;
    ul_step_model_t model;    /* what steps cost (steptime.h) */
    ul_step_feat_t feat;      /* of the step being built */
    double step_pred_us;      /* the model's prediction for the step built last */
    double step_last_us;      /* the backend's time for the last step absorbed */
    int budget_cut;           /* while building: the latency target cut a prefill chunk */
    int dec_overloaded;       /* while building: the decoders alone are over 0.8 x target */
    int hold_first;           /* while building: ready sequences' first tokens wait */
    int32_t n_streaming;      /* while building: runnable decoders that have streamed */
    double backlog_us;        /* while building: predicted prefill time of pending prompts */
    double prefill_target_us; /* while building: the step time prefill may fill up to */
    ul_step_feat_t spec_feat; /* while adding decoders: the step as planned so far (spec.c) */
    double spec_tokens;       /* while adding decoders: tokens it is expected to produce */
    /* The time of the current wake-up (ns, monotonic), set by the driver (or a test)
     * before it builds, absorbs or delivers and whenever it is kicked: the only clock the
     * policy reads. */
    uint64_t now_ns;
    /* The driver's "build a step soon" (sched/driver.h), called when a sequence is added,
     * cancelled or resumed; it may refresh now_ns before returning. NULL: no driver (a test
     * builds steps itself). */
    void (*kick)(ul_sched_t *s);
    void *kick_ctx;
    int closing; /* ul_sched_shutdown: no sequence is added any more */
    /* The last step absorbed, for readiness (api/ready.c): now_ns when it completed,
     * its status, and when a step last succeeded (0: never). */
    uint64_t t_step_done_ns, t_step_ok_ns;
    int step_status;
    int32_t n_probes; /* probe sequences not yet finished */
    void *data;       /* owner's */
};

/* Core. The backend must outlive the scheduler. */
int ul_sched_init(ul_sched_t *s, ul_backend_t *backend, const ul_sched_config_t *cfg);
/* Frees buffers. Every sequence must have finished (call after ul_driver_close's cb, or
 * in loop-less tests after draining). */
void ul_sched_free(ul_sched_t *s);

/* Copies the prompt and queues the sequence. Errors (the sequence is not queued and no
 * callback will run): UL_EINVAL empty prompt or bad max_tokens; UL_E2BIG prompt does not
 * fit the context length or the KV pool (an embedding: or the step budget); UL_EFULL
 * max_seqs reached or closing; UL_ENOTSUP an embedding on a backend without them;
 * UL_ENOMEM. */
int ul_sched_add(ul_sched_t *s, ul_seq_t *seq, const int32_t *prompt, int32_t n_prompt);
/* ul_sched_add for one of several choices of the same prompt (a request's n > 1): seq
 * shares the KV of share_with's prompt instead of computing it again. share_with was added
 * earlier with the same prompt and not yet freed by its owner (NULL: plain ul_sched_add;
 * already finished, ending or cancelled: seq simply computes on its own). seq
 * waits until share_with has computed the prompt's full pages that lie entirely before
 * position n_prompt-1, then takes a reference on them and prefills only the rest (at most
 * one page of tokens: it must compute its last prompt token to get its own logits). If
 * share_with ends, is cancelled or is preempted first, seq computes its prompt on its own
 * (while share_with is paused before computing them, seq waits with it).
 * Shared pages are full and read-only: each sequence writes only pages past its shared
 * prefix. Each choice samples with its own sampling (seed) and RNG. Preemption, cancel and
 * finish of any of them release only its own references. Errors as ul_sched_add, and
 * UL_EINVAL when share_with is seq, was never added, or has another prompt. */
int ul_sched_add_shared(ul_sched_t *s, ul_seq_t *seq, const int32_t *prompt, int32_t n_prompt,
                        ul_seq_t *share_with);
/* Asks for the sequence to end; on_finish(UL_FINISH_CANCELLED) follows at the next safe
 * point (within one step). Idempotent; no-op once finished. */
void ul_sched_cancel(ul_sched_t *s, ul_seq_t *seq);
/* Paused sequences keep their pages but get no step until resumed (backpressure). */
void ul_sched_set_paused(ul_sched_t *s, ul_seq_t *seq, int paused);
/* Predicted seconds until a new sequence with an n_prompt-token prompt gets its first
 * token: the prefill queued ahead of it and its own, at the prefill rate the step-time
 * model and the latency target allow with the current decoders, plus, when the KV pool
 * cannot hold that prefill now, the decode steps until running sequences end (by their
 * max_tokens or the context) and return enough pages. 0 before any step ran. */
double ul_sched_predict_wait_s(const ul_sched_t *s, int32_t n_prompt);
/* Sequences not yet finished. */
static inline int32_t ul_sched_n_active(const ul_sched_t *s) { return s->n_waiting + s->n_running; }

/* Builds the next step (s->step) from the current state, after reaping cancelled
 * sequences. Returns the number of sequences in it; 0 means there is nothing runnable (or,
 * with a step in flight, nothing that may run beside it). A step built is in flight until
 * absorbed: the caller submits (or runs) it. Must not be called with depth steps in
 * flight. */
int ul_sched_step_build(ul_sched_t *s);
/* Steps built and not absorbed yet; a step may be built while this is below the depth. */
static inline int32_t ul_sched_in_flight(const ul_sched_t *s) { return s->n_flight; }
/* Consumes the results of the oldest step in flight: absorb, then deliver. */
void ul_sched_step_complete(ul_sched_t *s);
/* The two halves of ul_sched_step_complete, so the next step can be built and submitted in
 * between. absorb: takes the oldest step's sampled tokens into the sequences and decides
 * every end that needs no callback (eog, max_tokens, context, step error); calls nothing
 * back, and its slot may be rebuilt afterwards. deliver: runs the owed on_token /
 * on_finish callbacks; a sequence whose on_token asks to stop while it is in a step in
 * flight finishes when the last of them is absorbed. */
void ul_sched_step_absorb(ul_sched_t *s);
void ul_sched_step_deliver(ul_sched_t *s);

/* Shutdown: cancels every sequence and refuses new ones (UL_EFULL); each on_finish follows
 * at the next build (or when the step in flight using it is absorbed). */
void ul_sched_shutdown(ul_sched_t *s);

#endif
