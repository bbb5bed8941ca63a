/* The null backend: a stand-in for a model that lets the serving layer (HTTP, scheduler,
 * SSE) be tested and benchmarked without weights. The backend worker (engine/worker.h)
 * takes submitted steps in order; each sleeps delay_us (plus token_us per decode token and
 * prefill_us per prefill token), or with virtual_time takes that cost without sleeping, and
 * reports exactly that cost as its compute_us (a step cost the scheduler's latency tests
 * rely on, whatever the host's load), and
 * "samples" token = hash(seq_id, position) % n_vocab, so the same sequence always produces the same
 * tokens, even after preemption and recompute.
 *
 * It also behaves like a KV cache as far as bookkeeping goes: every position computed is
 * recorded (owner sequence and token) in its page slot, and each step checks that the
 * slot of position pos0-1 still holds what the sequence's history says (for a sequence
 * sharing another's prompt pages: that every shared position holds its token). A scheduler
 * that hands one page to two sequences, or forgets a page, gets status UL_ESTATE instead of
 * silently wrong output. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/mix.h"
#include "engine/worker.h"
#include "uvllm/backend.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

typedef struct null_backend_s {
    ul_backend_t base;
    int64_t delay_us, token_us, prefill_us;
    int32_t eos_every;
    int32_t *reply; /* [n_reply] scripted reply, or NULL */
    int32_t n_reply;
    uint64_t *kv_owner; /* [n_pages * page_size]: seq_id + 1 of the position stored, 0 = empty */
    int32_t *kv_token;  /* [n_pages * page_size] */
    ul_worker_t worker; /* runs compute() on its thread, in submission order */
    int fail;           /* fault injection: steps after the first fail_after fail */
    int64_t fail_after, n_steps;
    int virtual_time; /* report the configured cost, do not sleep */
    uint64_t salt;    /* mixed into the pseudo-token hash */
} null_backend_t;

/* The token sampled for position pos of sequence seq_id. Position-based rather than
 * count-based so recomputing a preempted sequence gives the same continuation. */
static int32_t pseudo_token(const null_backend_t *nb, uint64_t seq_id, int32_t pos) {
    const ul_backend_t *b = &nb->base;
    if (nb->eos_every > 0 && pos % nb->eos_every == nb->eos_every - 1) return b->eos_id;
    int32_t n = b->eos_id >= 0 ? b->n_vocab - 1 : b->n_vocab; /* eos_id is the last id */
    return (int32_t)(ul_mix64(seq_id * UL_GOLDEN64 + (uint64_t)pos + nb->salt) % (uint64_t)n);
}

/* Logprobs of a certain choice: the token has logprob 0 and heads the top list; the other
 * candidates are the next ids, at -10 per rank (finite, so they print as JSON numbers). */
static void fill_logprobs(const null_backend_t *nb, ul_step_seq_t *s) {
    int32_t k = s->sampling.n_logprobs, n_vocab = nb->base.n_vocab;
    k = k < 0 ? 0 : (k > UL_MAX_LOGPROBS ? UL_MAX_LOGPROBS : k);
    k = k > n_vocab ? n_vocab : k;
    s->out_logprob = 0.0f;
    for (int32_t i = 0; i < k; i++) {
        s->out_top_ids[i] = (s->out_token + i) % n_vocab;
        s->out_top_logprobs[i] = -10.0f * (float)i;
    }
    s->out_n_top = k;
}

/* A constrained sequence (ul_token_filter_t) takes the first allowed id from its token on. */
static void filter_token(const null_backend_t *nb, ul_step_seq_t *s) {
    ul_token_filter_t *f = s->sampling.filter;
    if (!f) return;
    int32_t n = nb->base.n_vocab, t = s->out_token;
    for (int32_t k = 0; k < n && !f->allows(f, t); k++) t = (s->out_token + k + 1) % n;
    s->out_token = t;
    f->accept(f, t);
}

static int64_t slot_of(const null_backend_t *nb, const ul_step_seq_t *s, int32_t pos) {
    int32_t ps = nb->base.page_size;
    int32_t page = s->pages[pos / ps];
    if (page < 0 || page >= nb->base.n_pages) return -1;
    return (int64_t)page * ps + pos % ps;
}

/* A sequence whose KV so far was written by another one: the full pages of a prompt it
 * shares (ul_sched_add_shared). Then they end on a page boundary (it writes its own pages
 * only) and every position holds the token its history has. Once per shared admission, so
 * the full walk is cheap. */
static int check_shared(const null_backend_t *nb, const ul_step_seq_t *s) {
    if (s->pos0 % nb->base.page_size != 0 || !s->history || s->n_history < s->pos0)
        return UL_ESTATE;
    for (int32_t p = 0; p < s->pos0; p++) {
        int64_t slot = slot_of(nb, s, p);
        if (nb->kv_owner[slot] == 0 || nb->kv_token[slot] != s->history[p]) return UL_ESTATE;
    }
    return 0;
}

static int check_seq(const null_backend_t *nb, const ul_step_t *step, const ul_step_seq_t *s) {
    const ul_backend_t *b = &nb->base;
    if (s->n_tokens < 1 || s->pos0 < 0 || s->tok_offset < 0 ||
        s->tok_offset + s->n_tokens > step->n_tokens)
        return UL_EINVAL;
    int64_t end = (int64_t)s->pos0 + s->n_tokens;
    if (end > b->n_ctx || (int64_t)s->n_pages * b->page_size < end || !s->pages) return UL_EINVAL;
    for (int32_t p = 0; p < s->n_pages; p++)
        if (s->pages[p] < 0 || s->pages[p] >= b->n_pages) return UL_EINVAL;
    if (s->pos0 > 0) {
        /* The previous position must still be this sequence's, with the token it had. */
        int64_t slot = slot_of(nb, s, s->pos0 - 1);
        if (nb->kv_owner[slot] != s->seq_id + 1) return check_shared(nb, s);
        if (s->history && s->n_history >= s->pos0 && nb->kv_token[slot] != s->history[s->pos0 - 1])
            return UL_ESTATE;
    }
    return 0;
}

/* Scripted reply: the longest k with history ending in reply[0..k) says where the sequence
 * is (position-free, so preemption and recompute continue it alike). */
static int32_t scripted_token(const null_backend_t *nb, const ul_step_seq_t *s,
                              const int32_t *tokens) {
    int32_t n = s->history ? s->n_history : 0;
    /* A chained entry's input token (backend.h "Pipelining") is not in its history yet. */
    int32_t last = s->pos0 + s->n_tokens;
    int32_t extra = s->history && n < last ? last - n : 0;
    for (int32_t k = nb->n_reply < n + extra ? nb->n_reply : n + extra; k > 0; k--) {
        int match = 1;
        for (int32_t j = 0; j < k && match; j++) {
            int32_t p = n + extra - k + j; /* position in history + extra */
            int32_t t =
                p < n ? s->history[p] : tokens[s->tok_offset + s->n_tokens - extra + (p - n)];
            match = t == nb->reply[j];
        }
        if (match) return k == nb->n_reply ? nb->base.eos_id : nb->reply[k];
    }
    return nb->reply[0];
}

/* --null-fail-after: UL_EIO for every step after the first fail_after (logged once). */
static int injected_fault(null_backend_t *nb) {
    if (!nb->fail || ++nb->n_steps <= nb->fail_after) return 0;
    if (nb->n_steps == nb->fail_after + 1)
        UL_LOG_ERROR("null backend: injected fault: step %lld and every later step fail",
                     (long long)nb->n_steps);
    return UL_EIO;
}

/* The configured cost of a step, in microseconds. */
static int64_t step_cost_us(const null_backend_t *nb, const ul_step_t *step) {
    int64_t us = nb->delay_us;
    for (int32_t i = 0; i < step->n_seqs; i++)
        us += step->seqs[i].n_tokens == 1 ? nb->token_us
                                          : nb->prefill_us * (int64_t)step->seqs[i].n_tokens;
    return us;
}

static void sleep_us(int64_t us) {
    struct timespec d = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
    while (nanosleep(&d, &d) != 0) {
    }
}

/* The token sampled after entry s's last token (its filter and logprobs done). */
static void sample_one(null_backend_t *nb, const ul_step_t *step, ul_step_seq_t *s) {
    s->out_token = nb->reply ? scripted_token(nb, s, step->tokens)
                             : pseudo_token(nb, s->seq_id, s->pos0 + s->n_tokens);
    filter_token(nb, s);
    fill_logprobs(nb, s);
    s->rng[0] = ul_mix64(s->rng[0] + 1);
    if (s->out_probs) { /* a draft's q: this backend is certain */
        memset(s->out_probs, 0, (size_t)nb->base.n_vocab * sizeof *s->out_probs);
        s->out_probs[s->out_token] = 1.0f;
    }
}

/* Speculative entry (backend.h): the sample after each of its last n_draft + 1 tokens in
 * turn, as an entry ending there would give it, while it is the next proposal. */
static void verify(null_backend_t *nb, const ul_step_t *step, ul_step_seq_t *s) {
    ul_step_spec_t *sp = s->spec;
    const int32_t k = sp->n_draft, *drafts = step->tokens + s->tok_offset + s->n_tokens - k;
    ul_step_seq_t v = *s;
    v.spec = NULL;
    v.out_probs = NULL;
    int32_t j = 0;
    for (;; j++) {
        v.n_tokens = s->n_tokens - k + j;
        if (s->history) v.n_history = s->n_history + j;
        sample_one(nb, step, &v);
        ul_step_out_t *o = &sp->out[j];
        o->token = v.out_token;
        o->logprob = v.out_logprob;
        o->n_top = v.out_n_top;
        memcpy(o->top_ids, v.out_top_ids, sizeof o->top_ids);
        memcpy(o->top_logprobs, v.out_top_logprobs, sizeof o->top_logprobs);
        if (j == k || v.out_token != drafts[j]) break;
    }
    sp->n_accepted = j;
    s->out_token = v.out_token;
    s->out_logprob = v.out_logprob;
    s->out_n_top = v.out_n_top;
    memcpy(s->out_top_ids, v.out_top_ids, sizeof s->out_top_ids);
    memcpy(s->out_top_logprobs, v.out_top_logprobs, sizeof s->out_top_logprobs);
    s->rng[0] = v.rng[0];
    s->rng[1] = v.rng[1];
}

/* An embedding entry (backend.h, "Embeddings"): each token's vector is a hash of its id
 * (per element, in [-1, 1)), pooled as the entry asks (rank: element 0's mean is the score); so
 * equal inputs give equal vectors, different ones different vectors, and the serving layer can be
 * tested exactly. */
static float pseudo_elem(int32_t tok, int32_t i) {
    uint64_t h = ul_mix64((uint64_t)(uint32_t)tok * UL_GOLDEN64 + (uint64_t)i);
    return (float)(h >> 40) / (float)(1u << 23) - 1.0f;
}

static void embed_one(const null_backend_t *nb, const ul_step_t *step, ul_step_seq_t *s) {
    const int32_t E = nb->base.n_embd, *tok = step->tokens + s->tok_offset, n = s->n_tokens;
    for (int32_t i = 0; i < E; i++) {
        float v = 0;
        if (s->pooling == UL_POOL_RANK) { /* a score: the mean of element 0, the rest 0 */
            for (int32_t t = 0; i == 0 && t < n; t++) v += pseudo_elem(tok[t], 0);
            v /= (float)n;
        } else if (s->pooling == UL_POOL_CLS) {
            v = pseudo_elem(tok[0], i);
        } else if (s->pooling == UL_POOL_LAST) {
            v = pseudo_elem(tok[n - 1], i);
        } else {
            for (int32_t t = 0; t < n; t++) v += pseudo_elem(tok[t], i);
            v /= (float)n;
        }
        s->out_embd[i] = v;
    }
}

static int check_embed(const ul_step_seq_t *s) {
    if (!s->out_embd) return 0;
    return s->pos0 || s->sample || s->spec || s->chain ||
                   (s->pooling != UL_POOL_MEAN && s->pooling != UL_POOL_CLS &&
                    s->pooling != UL_POOL_LAST && s->pooling != UL_POOL_RANK)
               ? UL_EINVAL
               : 0;
}

static int check_spec(const ul_step_seq_t *s) {
    const ul_step_spec_t *sp = s->spec;
    if (!sp) return 0;
    return !s->sample || sp->propose || sp->n_draft < 0 || sp->n_draft >= s->n_tokens ||
                   sp->n_draft > UL_MAX_DRAFT
               ? UL_EINVAL
               : 0;
}

/* Runs the step's bookkeeping and "samples" every sequence that samples. */
static void fill_step(null_backend_t *nb, ul_step_t *step) {
    step->status = injected_fault(nb);
    for (int32_t i = 0; i < step->n_seqs && !step->status; i++)
        step->status = check_seq(nb, step, &step->seqs[i]);
    for (int32_t i = 0; i < step->n_seqs && !step->status; i++)
        step->status = check_spec(&step->seqs[i]);
    for (int32_t i = 0; i < step->n_seqs && !step->status; i++)
        step->status = check_embed(&step->seqs[i]);
    for (int32_t i = 0; i < step->n_seqs && !step->status; i++) {
        ul_step_seq_t *s = &step->seqs[i];
        for (int32_t k = 0; k < s->n_tokens; k++) {
            int64_t slot = slot_of(nb, s, s->pos0 + k);
            nb->kv_owner[slot] = s->seq_id + 1;
            nb->kv_token[slot] = step->tokens[s->tok_offset + k];
        }
        if (s->out_embd)
            embed_one(nb, step, s);
        else if (s->spec)
            verify(nb, step, s);
        else if (s->sample)
            sample_one(nb, step, s);
    }
}

/* compute_us is the configured cost when there is one: what the simulated device takes.
 * Measuring the sleep instead would add the host's lateness in waking this thread (several
 * ms a step on a loaded machine), and the scheduler's step-time model, its latency budget
 * and its admission would then price the host's load, not the device. Without a cost, the
 * bookkeeping's own time. */
static void compute(null_backend_t *nb, ul_step_t *step) {
    int64_t us = step_cost_us(nb, step);
    if (us > 0 && !nb->virtual_time) sleep_us(us);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    fill_step(nb, step);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    step->compute_us = us > 0 || nb->virtual_time ? (double)us
                                                  : (double)(t1.tv_sec - t0.tv_sec) * 1e6 +
                                                        (double)(t1.tv_nsec - t0.tv_nsec) / 1e3;
}

static int worker_step(void *ctx, ul_step_t *step) {
    compute(ctx, step);
    return UL_WORKER_DONE;
}

static int null_submit(ul_backend_t *b, ul_step_t *step) {
    return ul_worker_submit(&((null_backend_t *)b)->worker, step);
}

static int null_run(ul_backend_t *b, ul_step_t *step) {
    /* The worker may touch the KV arrays concurrently only if the caller mixes run and
     * submit, which the contract does not allow. */
    compute((null_backend_t *)b, step);
    return step->status;
}

static void null_destroy(ul_backend_t *b) {
    null_backend_t *nb = (null_backend_t *)b;
    ul_worker_free(&nb->worker);
    free(nb->kv_owner);
    free(nb->kv_token);
    free(nb->reply);
    free(nb);
}

static const ul_backend_vtbl_t null_vtbl = {
    .name = "null",
    .submit = null_submit,
    .run = null_run,
    .destroy = null_destroy,
};

int ul_null_backend_create(const ul_null_config_t *cfg, ul_backend_t **out) {
    ul_null_config_t c = {.n_vocab = 32000, .n_ctx = 4096, .page_size = 16, .n_pages = 65536};
    if (cfg) {
        c.delay_us = cfg->delay_us;
        if (cfg->n_vocab) c.n_vocab = cfg->n_vocab;
        if (cfg->n_ctx) c.n_ctx = cfg->n_ctx;
        if (cfg->page_size) c.page_size = cfg->page_size;
        if (cfg->n_pages) c.n_pages = cfg->n_pages;
        c.eos_every = cfg->eos_every;
        c.token_us = cfg->token_us;
        c.prefill_us = cfg->prefill_us;
        c.eos_id = cfg->eos_id;
        c.reply = cfg->reply;
        c.n_reply = cfg->n_reply;
        c.fail = cfg->fail;
        c.fail_after = cfg->fail_after;
        c.virtual_time = cfg->virtual_time;
        c.salt = cfg->salt;
    }
    if (!c.eos_id) c.eos_id = c.n_vocab - 1;
    if (c.delay_us < 0 || c.token_us < 0 || c.prefill_us < 0 || c.n_vocab < 2 || c.n_ctx < 1 ||
        c.page_size < 1 || c.n_pages < 1 || c.eos_every < 0 ||
        (int64_t)c.n_pages * c.page_size > ((int64_t)1 << 31) || c.eos_id < 0 ||
        c.eos_id >= c.n_vocab || c.n_reply < 0 || (c.n_reply && !c.reply) || c.fail_after < 0)
        return UL_EINVAL;
    null_backend_t *nb = calloc(1, sizeof *nb);
    if (!nb) return UL_ENOMEM;
    size_t slots = (size_t)c.n_pages * (size_t)c.page_size;
    nb->kv_owner = calloc(slots, sizeof *nb->kv_owner);
    nb->kv_token = calloc(slots, sizeof *nb->kv_token);
    nb->reply = c.n_reply ? malloc((size_t)c.n_reply * sizeof *nb->reply) : NULL;
    if (!nb->kv_owner || !nb->kv_token || (c.n_reply && !nb->reply)) {
        free(nb->kv_owner);
        free(nb->kv_token);
        free(nb->reply);
        free(nb);
        return UL_ENOMEM;
    }
    if (c.n_reply) memcpy(nb->reply, c.reply, (size_t)c.n_reply * sizeof *nb->reply);
    nb->n_reply = c.n_reply;
    nb->base = (ul_backend_t){.vt = &null_vtbl,
                              .n_vocab = c.n_vocab,
                              .n_ctx = c.n_ctx,
                              .page_size = c.page_size,
                              .n_pages = c.n_pages,
                              .eos_id = c.eos_every > 0 || c.n_reply ? c.eos_id : -1,
                              .max_in_flight = 2, /* the worker resolves chains */
                              .spec = 1,
                              .n_embd = UL_NULL_EMBD};
    nb->delay_us = c.delay_us;
    nb->token_us = c.token_us;
    nb->prefill_us = c.prefill_us;
    nb->eos_every = c.eos_every;
    nb->fail = c.fail;
    nb->fail_after = c.fail_after;
    nb->virtual_time = c.virtual_time;
    nb->salt = c.salt;
    static const ul_worker_ops_t ops = {.step = worker_step};
    int rc = ul_worker_init(&nb->worker, &nb->base, &ops, nb);
    if (rc) {
        free(nb->kv_owner);
        free(nb->kv_token);
        free(nb->reply);
        free(nb);
        return UL_ENOMEM;
    }
    *out = &nb->base;
    return 0;
}
