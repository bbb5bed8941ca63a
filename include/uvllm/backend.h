/* The backend interface: how the scheduler (loop thread) hands one batched step of
 * compute to a backend (cpu, gpu, null) and gets the sampled tokens back.
 *
 * Ownership: the loop builds a ul_step_t and calls ul_backend_submit(); from then until the
 * completion the step belongs to the backend, which reads its inputs and writes its
 * outputs. Completion: the backend posts &step->node to the bridge it was given
 * (base/bridge.h); the loop's bridge callback receives it on the loop thread and owns the
 * step again. submit() never blocks the loop. Backends do this through the one backend
 * worker (src/engine/worker.h), the only backend code that touches the bridge.
 *
 * Borrowed while in flight: from submit until the completion callback the loop must not
 * change or free
 *   - the step's tokens and seqs arrays (the scheduler's own step buffers);
 *   - each ul_step_seq_t's pages array up to its n_pages (the sequence's page table: the
 *     scheduler may append pages past n_pages for a later step, but never reallocates the
 *     array, nor frees or reuses the pages it lists);
 *   - each history array up to its n_history (the sequence's token list: the scheduler may
 *     append past n_history, never reallocates it);
 *   - each sampling.logit_bias array (owned by the request, see ul_sampling_t).
 * The backend writes only status, compute_us, each sampled sequence's rng and out_* fields,
 * the input token of each chained sequence (below), and what speculative entries produce
 * (spec's outputs; a draft model's proposals and the layout they change: below); it reads
 * everything else. A GPU
 * backend copies the borrowed arrays to pinned memory on its worker thread before the
 * step's copies are queued, but the contract is the same for every backend: nothing
 * borrowed changes until completion.
 *
 * Pipelining (max_in_flight 2): the scheduler may submit step N+1 before step N completes,
 * so the backend never waits for the loop between two steps. A sequence may then be in
 * both: in N+1 it is "chained" (ul_step_seq_t.chain > 0): its one input token is the token
 * the backend samples for it in N, not known when N+1 is built, and its RNG state is the
 * one N leaves. The backend resolves both (on the host once N is done, or on the device),
 * writing the token into tokens[tok_offset]; if N fails, N+1 fails too. Steps complete in
 * the order they were submitted. A chained entry's history ends before its input token (the
 * loop appends it when it absorbs N): penalties must count that token too (the worker
 * gives such an entry a copy of its window that ends with it, engine/worker.h), and a
 * filter sees N's token accepted before N+1 samples (one thread samples in step order).
 *
 * KV cache: the backend owns KV storage of n_pages pages of page_size tokens each (for
 * every layer). The scheduler owns page tables: each sequence of a step lists the pages
 * holding its positions 0..pos0+n_tokens-1 in order (position p lives in
 * pages[p / page_size] at slot p % page_size).
 *
 * Speculative decoding (ul_step_seq_t.spec, issue 27): an entry may carry proposals, K
 * tokens that somebody guessed follow its last known token t0. They are more tokens of the
 * sequence: the entry's tokens end with t0, d1..dK at consecutive positions, and the backend
 * samples after each of its last K + 1 rows in order, as if the sequence had decoded them one
 * by one: row j's sample is drawn (greedy: chosen) with the history extended by d1..dj; when
 * it is d(j+1) the proposal is accepted and row j+1 follows, else that sample is the last
 * token of the entry. With sampling the draw follows speculative sampling (accept d with
 * probability min(1, p(d)/q(d)), else draw from the residual max(0, p - q) normalised), so
 * the tokens keep the distribution of decoding one at a time; a proposal without draft_q is
 * certain (q = 1 at d). The entry's outputs are spec->out[0..n_accepted] (n_accepted
 * proposals, then one token of the backend's own); out_token and its logprobs repeat the
 * last of them. The KV of every token of the entry is written: the scheduler forgets the
 * rejected positions (they are written again by a later step) and frees the pages that held
 * only them. A speculative entry is never chained, nor chained upon (pipelining).
 * History: for a speculative entry history[n_history .. n_history + K) are the proposals
 * (the scheduler's token array has room for them), so penalties and filters see them.
 * The filter (ul_sampling_t.filter) accepts each produced token in order. Backends that do
 * not verify (backend->spec 0: the CUDA backend) refuse such a step with UL_ENOTSUP.
 *
 * Proposals from a draft model (ul_spec_backend_create): the scheduler sets spec->propose
 * and leaves the K proposal tokens -1; before the target computes the step, the speculative
 * backend runs the draft model on its own KV pool (the entry's draft page table, which the
 * scheduler owns as it owns the target's) to fill them in. It may propose fewer (the draft's
 * confidence under p_min, a filter refusing one): it then lowers n_draft and the entry's
 * n_tokens, moving later entries' tokens down (tok_offset and step->n_tokens follow); the
 * scheduler reads the step's layout back at completion.
 *
 * Embeddings (ul_step_seq_t.out_embd, issue 26): an entry may ask for its hidden state
 * instead of a token. It holds its whole sequence (pos0 0, sample 0, no spec, never
 * chained), so pooling needs no state across steps and a bidirectional encoder sees every
 * token. The backend writes into out_embd the final hidden state (after the output norm)
 * pooled as the entry's pooling says: the mean of its rows, its first row (cls) or its last
 * row; not normalised (the caller normalises). A reranker's entry (pooling rank, a bert
 * encoder's classification head, as llama.cpp's LLAMA_POOLING_TYPE_RANK) gets its relevance
 * score in out_embd[0] (the rest zero). Its K/V may be written to its pages like any
 * entry's, but nobody reads them after the step. Backends that cannot (backend->n_embd 0:
 * the CUDA backend) refuse such a step with UL_ENOTSUP. */
#ifndef UVLLM_BACKEND_H
#define UVLLM_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "base/queue.h"

typedef struct ul_backend_s ul_backend_t;
typedef struct ul_bridge_s ul_bridge_t;
typedef struct ul_model_s ul_model_t;

/* Pooling of an embedding entry: llama.cpp's llama_pooling_type values, as a GGUF's
 * <arch>.pooling_type stores them (none: a vector per token, which no endpoint serves; rank:
 * a reranker's score, "Embeddings" below). */
enum { UL_POOL_NONE = 0, UL_POOL_MEAN = 1, UL_POOL_CLS = 2, UL_POOL_LAST = 3, UL_POOL_RANK = 4 };

/* One entry of a request's logit bias (OpenAI semantics): bias is added to the logit of
 * token id before the token is chosen; -100 effectively bans it, +100 effectively forces it. */
typedef struct ul_logit_bias_s {
    int32_t id;
    float bias;
} ul_logit_bias_t;

/* A constraint on the tokens a sequence may produce next (structured output: a grammar,
 * engine/grammar.h). allows: 1 if id may come next; accept: id was chosen, advance;
 * fill_mask (optional): every allowed id at once, as bits (bit id & 31 of bits[id >> 5]),
 * far cheaper than asking allows about the whole vocabulary. All run on the backend's
 * thread that samples the sequence, never concurrently for one sequence: the steps that
 * sample for it are sampled one after the other, in the order they were submitted, and
 * its owner leaves the filter alone until the sequence has finished. At least one id must
 * be allowed at every step. prefix (optional): how many of ids[0..n) it would accept one
 * after the other from where it is, its state unchanged, so proposals it refuses are cut
 * before they are computed (speculative decoding); the scheduler may call it on the loop
 * thread while no step holding the sequence is in flight. */
typedef struct ul_token_filter_s ul_token_filter_t;
struct ul_token_filter_s {
    int (*allows)(const ul_token_filter_t *f, int32_t id);
    void (*accept)(ul_token_filter_t *f, int32_t id);
    void (*fill_mask)(ul_token_filter_t *f, uint32_t *bits);                /* optional */
    int32_t (*prefix)(ul_token_filter_t *f, const int32_t *ids, int32_t n); /* optional */
};

/* Sampling parameters of one request; temperature 0 means greedy. */
typedef struct ul_sampling_s {
    float temperature;       /* 0 = greedy */
    int32_t top_k;           /* 0 = off */
    float top_p;             /* 1 = off */
    float min_p;             /* 0 = off */
    float repeat_penalty;    /* 1 = off; llama.cpp semantics over the last repeat_last_n */
    int32_t repeat_last_n;   /* window for all penalties; 0 = off, -1 = whole history */
    float frequency_penalty; /* 0 = off, OpenAI semantics */
    float presence_penalty;  /* 0 = off, OpenAI semantics */
    uint64_t seed;
    int32_t n_logprobs; /* top candidates to return with each token (0..UL_MAX_LOGPROBS) */
    /* Borrowed, not copied: the array belongs to the request (the api owns it until the
     * sequence's on_finish) and must stay valid and unchanged while the sequence can be in
     * a step, since every step's copy of these parameters points at it. Ids outside the
     * vocabulary are ignored. Applied to the logits that choose the token (greedy
     * included), before penalties; the reported logprobs stay the model's own. */
    const ul_logit_bias_t *logit_bias; /* [n_logit_bias] or NULL */
    int32_t n_logit_bias;
    /* Borrowed (the request's, see ul_token_filter_t): the token is chosen among the ids it
     * allows, after bias and penalties; NULL = none. Backends that sample on the device
     * sample such sequences on the host (ul_sample). */
    ul_token_filter_t *filter;
} ul_sampling_t;

#define UL_MAX_LOGPROBS 20

void ul_sampling_default(ul_sampling_t *s);

/* A token a step produced, with its logprobs (ul_sampling_t.n_logprobs candidates). */
typedef struct ul_step_out_s {
    int32_t token;
    float logprob;
    int32_t n_top;
    int32_t top_ids[UL_MAX_LOGPROBS];
    float top_logprobs[UL_MAX_LOGPROBS];
} ul_step_out_t;

#define UL_MAX_DRAFT 16 /* proposals one entry may verify */

/* Speculative verification of one entry (above, "Speculative decoding"). */
typedef struct ul_step_spec_s {
    /* in: the proposals at the end of the entry's tokens (0..UL_MAX_DRAFT); a proposing
     * backend may lower it (out) */
    int32_t n_draft;
    /* Draft-model proposals (the speculative backend fills them in): the draft KV pool's
     * page table for this sequence, covering positions [0, pos0 + n_draft) of the entry's
     * t0 position pos0; draft_pos0 of them hold KV already (the rest of history, t0 and the
     * proposals are computed on the draft); p_min: proposals the draft gives less probability
     * are not made. */
    int32_t propose;
    const int32_t *draft_pages;
    int32_t n_draft_pages;
    int32_t draft_pos0;
    float p_min;
    /* out of the proposing backend: positions the draft KV holds now (of the tokens in
     * history and the proposals); [n_draft][n_vocab] the distribution each proposal was
     * drawn from (NULL: certain proposals, or greedy) */
    int32_t draft_computed;
    const float *draft_q;
    /* out */
    int32_t n_accepted; /* proposals accepted: the entry produced n_accepted + 1 tokens */
    ul_step_out_t out[UL_MAX_DRAFT + 1];
} ul_step_spec_t;

/* One sequence's slice of a step. */
typedef struct ul_step_seq_s {
    uint64_t seq_id;
    int32_t tok_offset;   /* first of this sequence's tokens in step->tokens */
    int32_t n_tokens;     /* tokens of this sequence in this step (prefill chunk or 1) */
    int32_t pos0;         /* position of the first of them = tokens already in KV */
    const int32_t *pages; /* page table, covering positions [0, pos0 + n_tokens) */
    int32_t n_pages;
    int32_t sample; /* 1: sample a token after this sequence's last token */
    /* 0, or (pipelining, above) 1 + the index, in the seqs of the step submitted just
     * before this one, of the same sequence's entry: it samples this entry's one input
     * token (tokens[tok_offset] is -1 until the backend writes it there), and the RNG state
     * it leaves is this entry's rng in (rng below is stale). */
    int32_t chain;
    ul_sampling_t sampling;
    uint64_t rng[2];        /* in/out: RNG state, advanced by each sample */
    const int32_t *history; /* tokens so far (prompt + generated), for penalties */
    int32_t n_history;
    ul_step_spec_t *spec; /* NULL, or proposals to verify (the scheduler's; see above) */
    /* NULL, or [n_vocab]: the backend writes the distribution out_token was drawn from (a
     * draft model's q; one-hot at the token when greedy). */
    float *out_probs;
    /* Embedding entry (issue 26; "Embeddings" above): NULL, or [n_embd] where the backend
     * writes the entry's pooled hidden state (pooling: UL_POOL_*) instead of sampling. */
    float *out_embd;
    int32_t pooling;
    /* outputs, valid when sample was 1 */
    int32_t out_token;
    float out_logprob;
    int32_t out_n_top;
    int32_t out_top_ids[UL_MAX_LOGPROBS];
    float out_top_logprobs[UL_MAX_LOGPROBS];
} ul_step_seq_t;

typedef struct ul_step_s {
    ul_queue_t node; /* linked into the bridge on completion */
    int32_t n_tokens;
    int32_t *tokens; /* [n_tokens], grouped by sequence */
    int32_t n_seqs;
    ul_step_seq_t *seqs; /* [n_seqs] */
    int status;          /* out: 0 or UL_E*; on error no output is valid */
    double compute_us;   /* out: wall time the backend spent on the step */
    double draft_us;     /* out: of it, drafting proposals (speculative backend), else 0 */
    void *data;          /* owner's (the scheduler's) */
} ul_step_t;

typedef struct ul_backend_vtbl_s {
    const char *name;
    /* Asynchronous: queue the step and return at once; completion through the bridge. */
    int (*submit)(ul_backend_t *b, ul_step_t *step);
    /* Synchronous twin of submit, on the caller's thread (CLI tools, tests). */
    int (*run)(ul_backend_t *b, ul_step_t *step);
    /* Stops workers after the step in flight; frees everything. */
    void (*destroy)(ul_backend_t *b);
} ul_backend_vtbl_t;

struct ul_backend_s {
    const ul_backend_vtbl_t *vt;
    ul_bridge_t *bridge;     /* where completions are posted; set before the first submit */
    const ul_model_t *model; /* NULL for the null backend */
    int32_t n_vocab;
    int32_t n_ctx;     /* longest sequence supported */
    int32_t page_size; /* tokens per KV page */
    int32_t n_pages;   /* pages in the pool */
    int32_t eos_id;    /* end-of-generation token, -1 if none */
    /* Largest step the backend accepts, in tokens (its scratch is sized for it); 0 = no
     * limit. The scheduler's token budget never exceeds it (ul_backend_max_step_tokens). */
    int32_t max_step_tokens;
    /* Steps the backend takes before the first of them completes: 0 or 1, one at a time;
     * 2, it accepts a second step while one is in flight and resolves chained entries
     * (pipelining, above). The scheduler pipelines only when asked to (ul_sched_config_t). */
    int32_t max_in_flight;
    /* Speculative decoding (above): 1 when the backend verifies entries with proposals. A
     * speculative backend (ul_spec_backend_create) also has a draft model, whose KV pool the
     * scheduler pages: draft_n_pages pages of draft_page_size tokens, sequences of up to
     * draft_n_ctx tokens (all 0 without one). */
    int32_t spec;
    int32_t draft_n_pages, draft_page_size, draft_n_ctx;
    /* Embeddings (above): n_embd > 0 when the backend computes embedding entries (vectors
     * of n_embd floats); 0 when it refuses them. */
    int32_t n_embd;
};

/* The step budget a scheduler may use: want (0 = the backend's own limit, or 512 when it
 * has none), never more than the backend accepts. */
static inline int32_t ul_backend_max_step_tokens(const ul_backend_t *b, int32_t want) {
    int32_t lim = b->max_step_tokens;
    if (want <= 0) return lim > 0 ? lim : 512;
    return lim > 0 && want > lim ? lim : want;
}

static inline int ul_backend_submit(ul_backend_t *b, ul_step_t *s) { return b->vt->submit(b, s); }
static inline int ul_backend_run(ul_backend_t *b, ul_step_t *s) { return b->vt->run(b, s); }
static inline void ul_backend_destroy(ul_backend_t *b) { b->vt->destroy(b); }

/* The null backend (engine/null.c): a worker thread that sleeps per step delay_us, plus
 * token_us per decode token (a sequence with one token in the step) and prefill_us per
 * token of longer chunks (or, with virtual_time, takes that cost without sleeping), and
 * samples deterministic pseudo-tokens:
 * token = hash(seq_id, position) % n_vocab, never eos unless eos_every > 0 (then every
 * eos_every-th generated token is eos). */
typedef struct ul_null_config_s {
    int64_t delay_us;
    int32_t n_vocab;    /* default 32000 */
    int32_t n_ctx;      /* default 4096 */
    int32_t page_size;  /* default 16 */
    int32_t n_pages;    /* default 65536 */
    int32_t eos_every;  /* default 0 */
    int64_t token_us;   /* per decode token, default 0 */
    int64_t prefill_us; /* per prefill token, default 0 */
    int32_t eos_id;     /* 0 = n_vocab - 1; used with eos_every or reply */
    /* Optional scripted reply: a sequence whose history ends with reply[0..k) samples
     * reply[k] (reply[0] when no such k > 0), then eos once the reply is complete, so the
     * serving layer's handling of a known output (tool calls, reasoning) can be tested
     * exactly. Copied at create. */
    const int32_t *reply;
    int32_t n_reply;
    /* Fault injection (serve --null-fail-after): with fail set, the first fail_after steps
     * succeed and every later one fails with UL_EIO (no output), as a broken device would. */
    int fail;
    int64_t fail_after;
    /* Mixed into the pseudo-token hash: a null backend with another salt samples other
     * tokens (a draft that is never right); the same salt, the same tokens. */
    uint64_t salt;
    /* Virtual time: a step does not sleep. Either way its compute_us is exactly its
     * configured cost (with none, the bookkeeping's time); with a clock that the step times
     * advance (sched->now_ns), latency tests are exact on any host, loaded or sanitised. */
    int virtual_time;
} ul_null_config_t;

int ul_null_backend_create(const ul_null_config_t *cfg, ul_backend_t **out);
/* The null backend's embedding vectors: UL_NULL_EMBD floats, each token's a hash of its id,
 * pooled as asked. */
#define UL_NULL_EMBD 8

/* The CPU backend (src/cpu): forward pass of a `llama` model on a worker thread pool.
 * KV pages are allocated once from kv_bytes; 0 means room for n_ctx tokens x 4 sequences,
 * capped at 2 GiB but never less than one full-context sequence. */
typedef struct ul_cpu_config_s {
    int32_t n_threads;        /* 0 = the CPUs we may use (affinity, cgroup quota) */
    int32_t kv_type;          /* UL_TYPE_F16 (default) or UL_TYPE_F32 */
    int32_t n_ctx;            /* 0 = the model's training context */
    int32_t page_size;        /* tokens per page, default 16 */
    int64_t kv_bytes;         /* KV pool budget; 0 = the default above */
    int32_t max_batch_tokens; /* largest step the scratch must hold, default 512 */
    /* 1: every token on the per-token attention path, so a token's logits do not depend on
     * how its sequence was cut into steps (prefix cache, chunked prefill, batching); 0: the
     * tiled path for a sequence's tokens from UL_ATTN_TILE of them in a step (llama.cpp's
     * choice by batch size: faster long prompts, last-bit differences between the paths) */
    int32_t batch_invariant;
} ul_cpu_config_t;

int ul_cpu_backend_create(const ul_model_t *m, const ul_cpu_config_t *cfg, ul_backend_t **out);
/* A draft model's CPU backend beside its target (another CPU backend): it computes on the
 * target's thread pool (two pools would spin against each other on the same cores), so the
 * two must never compute at once (the speculative backend runs both on its one thread) and
 * it must be destroyed first. */
int ul_cpu_backend_create_beside(const ul_model_t *m, const ul_cpu_config_t *cfg,
                                 ul_backend_t *target, ul_backend_t **out);

/* The speculative backend (engine/spec_backend.c): the target's steps, with the proposals of
 * entries that ask for them (spec->propose) drafted on the draft backend first, on a worker
 * thread of its own; target and draft compute through their synchronous run(). Takes
 * ownership of both (destroyed with it, the draft first). UL_EINVAL when the vocabularies'
 * sizes differ or the target does not verify (backend->spec 0). */
int ul_spec_backend_create(ul_backend_t *target, ul_backend_t *draft, ul_backend_t **out);

/* The CUDA backend (src/gpu; built when UVLLM_CUDA finds the toolkit): weights uploaded to
 * device `device` once, KV pages in one device pool, one step at a time on a compute
 * stream whose end (cudaLaunchHostFunc) hands the step back through the backend worker.
 * Returns UL_ENOTSUP with no usable device or a model it cannot run, UL_ENOMEM when the
 * weights, KV pool or scratch do not fit; the reason is written to err. */
typedef struct ul_gpu_config_s {
    int32_t device;           /* CUDA device ordinal, default 0 */
    int32_t n_ctx;            /* 0 = the model's training context */
    int32_t page_size;        /* tokens per page, default 16 */
    int64_t kv_bytes;         /* KV pool budget; 0 = half the device memory left */
    int32_t max_batch_tokens; /* largest step, default 512 */
    int32_t step_timeout_ms;  /* a step not done by then fails (UL_ETIMEDOUT); default 30000 */
} ul_gpu_config_t;

int ul_gpu_backend_create(const ul_model_t *m, const ul_gpu_config_t *cfg, ul_backend_t **out,
                          char *err, size_t errlen);

#endif
