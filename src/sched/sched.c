/* The batcher core: sequence bookkeeping, step building under a token budget and KV page
 * admission, preemption, and consuming a step's results. No libuv here (see driver.c), so
 * every scheduling decision can be unit-tested step by step. */
#include <stdlib.h>
#include <string.h>

#include "engine/sampling.h"
#include "sched/sched.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

void ul_sched_kick(ul_sched_t *s); /* driver.c: build the next step soon (no-op without loop) */

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

int ul_sched_init(ul_sched_t *s, ul_backend_t *backend, const ul_sched_config_t *cfg) {
    memset(s, 0, sizeof *s);
    s->backend = backend;
    if (cfg) s->cfg = *cfg;
    /* the backend says how large a step it accepts; a configured budget only lowers it */
    s->cfg.max_batch_tokens = ul_backend_max_step_tokens(backend, cfg ? cfg->max_batch_tokens : 0);
    s->cfg.max_seqs = cfg && cfg->max_seqs ? cfg->max_seqs : 4096;
    if (s->cfg.itl_target_ms == 0) s->cfg.itl_target_ms = 100;
    if (s->cfg.min_prefill <= 0) {
        int32_t m = s->cfg.max_batch_tokens / 32;
        s->cfg.min_prefill = m > backend->page_size ? m : backend->page_size;
    }
    if (s->cfg.min_prefill > s->cfg.max_batch_tokens) s->cfg.min_prefill = s->cfg.max_batch_tokens;
    ul_step_model_init(&s->model);
    if (s->cfg.max_batch_tokens < 1 || s->cfg.max_seqs < 1) return UL_EINVAL;
    int rc =
        ul_kv_pool_init(&s->pool, backend->n_pages, backend->page_size, !s->cfg.no_prefix_cache);
    if (rc) return rc;
    size_t nb = (size_t)s->cfg.max_batch_tokens;
    s->depth = s->cfg.pipeline >= 2 && backend->max_in_flight >= 2 ? 2 : 1;
    int oom = 0;
    for (int32_t i = 0; i < s->depth; i++) {
        struct ul_sched_slot_s *sl = &s->slot[i];
        sl->step.tokens = malloc(nb * sizeof *sl->step.tokens);
        sl->step.seqs = calloc(nb, sizeof *sl->step.seqs);
        sl->owner = calloc(nb, sizeof *sl->owner);
        sl->step.data = s;
        oom |= !sl->step.tokens || !sl->step.seqs || !sl->owner;
    }
    s->step = &s->slot[0].step;
    s->step_owner = s->slot[0].owner;
    s->scratch = calloc((size_t)s->cfg.max_seqs, sizeof *s->scratch);
    /* Twice a step: a refused step is absorbed while the previous one's callbacks wait. */
    s->done = calloc(2 * nb, sizeof *s->done);
    s->done_lp = calloc(2 * nb, sizeof *s->done_lp);
    if (oom || !s->scratch || !s->done || !s->done_lp) {
        ul_sched_free(s);
        return UL_ENOMEM;
    }
    ul_queue_init(&s->waiting);
    ul_queue_init(&s->running);
    s->next_id = 1;
    s->write_every = 1;
    return 0;
}

void ul_sched_free(ul_sched_t *s) {
    UL_ASSERT(ul_sched_n_active(s) == 0 && s->n_flight == 0);
    ul_kv_pool_free(&s->pool);
    for (int32_t i = 0; i < 2; i++) {
        struct ul_sched_slot_s *sl = &s->slot[i];
        free(sl->step.tokens);
        free(sl->step.seqs);
        free(sl->owner);
        sl->step.tokens = NULL;
        sl->step.seqs = NULL;
        sl->owner = NULL;
    }
    free(s->scratch);
    free(s->done);
    free(s->done_lp);
    s->done = NULL;
    s->done_lp = NULL;
    s->step_owner = s->scratch = NULL;
}

/* Waiting list stays ordered by arrival so prefill is served oldest first. New arrivals
 * are the newest, so the search starts from the tail (O(1) for them; only a preempted
 * sequence walks further). */
static void enqueue_waiting(ul_sched_t *s, ul_seq_t *q) {
    ul_queue_t *it = s->waiting.prev;
    while (it != &s->waiting && UL_QUEUE_DATA(it, ul_seq_t, node)->arrival > q->arrival)
        it = it->prev;
    ul_queue_insert_head(it, &q->node); /* inserts after it */
    q->state = UL_SEQ_WAITING;
    s->n_waiting++;
}

static void unlink_seq(ul_sched_t *s, ul_seq_t *q) {
    ul_queue_remove(&q->node);
    if (q->state == UL_SEQ_WAITING)
        s->n_waiting--;
    else if (q->state == UL_SEQ_RUNNING)
        s->n_running--;
}

/* Whether q may take share_with's prompt pages later; UL_EINVAL for a caller's mistake.
 * A share_with that is ending, cancelled or finished has (or soon has) no pages to give. */
static int check_share(const ul_seq_t *q, const int32_t *prompt, int32_t n_prompt,
                       const ul_seq_t *w, int *share) {
    *share = 0;
    if (!w) return 0;
    if (w == q || w->state == UL_SEQ_NEW) return UL_EINVAL;
    if (w->state == UL_SEQ_FINISHED) return 0;
    if (w->n_prompt != n_prompt || memcmp(w->tokens, prompt, (size_t)n_prompt * sizeof *prompt))
        return UL_EINVAL;
    *share = !w->ending && !w->cancelled;
    return 0;
}

int ul_sched_add(ul_sched_t *s, ul_seq_t *q, const int32_t *prompt, int32_t n_prompt) {
    return ul_sched_add_shared(s, q, prompt, n_prompt, NULL);
}

int ul_sched_add_shared(ul_sched_t *s, ul_seq_t *q, const int32_t *prompt, int32_t n_prompt,
                        ul_seq_t *share_with) {
    const ul_backend_t *b = s->backend;
    if (n_prompt < 1 || q->max_tokens < 1 || !q->on_finish) return UL_EINVAL;
    int share;
    int rc = check_share(q, prompt, n_prompt, share_with, &share);
    if (rc) return rc;
    if (s->closing || (!q->probe && ul_sched_n_active(s) - s->n_probes >= s->cfg.max_seqs))
        return UL_EFULL;
    if (n_prompt >= b->n_ctx) return UL_E2BIG;
    int64_t cap = (int64_t)n_prompt + q->max_tokens;
    if (cap > b->n_ctx) cap = b->n_ctx;
    if (ul_kv_pages_for(&s->pool, n_prompt) > s->pool.n_pages) return UL_E2BIG;
    q->tokens = malloc((size_t)cap * sizeof *q->tokens);
    q->pages_cap = ul_kv_pages_for(&s->pool, cap);
    q->pages = malloc((size_t)q->pages_cap * sizeof *q->pages);
    if (!q->tokens || !q->pages) {
        free(q->tokens);
        free(q->pages);
        q->tokens = q->pages = NULL;
        return UL_ENOMEM;
    }
    memcpy(q->tokens, prompt, (size_t)n_prompt * sizeof *prompt);
    q->n_prompt = q->n_tokens = n_prompt;
    q->cap = (int32_t)cap;
    q->n_computed = q->n_pages = 0;
    q->id = s->next_id++;
    q->arrival = s->next_arrival++;
    ul_sampling_rng_seed(q->sampling.seed, q->rng);
    q->paused = q->cancelled = q->in_step = q->cb_pending = 0;
    q->n_pending = q->n_unknown = 0;
    q->ending = UL_FINISH_NONE;
    q->ending_status = 0;
    q->n_preempted = 0;
    q->share_with = share ? share_with : NULL;
    q->n_sharers = q->n_shared = 0;
    q->n_hashed = q->n_cached = 0;
    q->prefix_hash = 0;
    q->expired = 0;
    q->t_add_ns = uv_hrtime();
    q->t_sched_ns = q->t_first_ns = q->t_last_ns = 0;
    if (share) share_with->n_sharers++;
    s->n_probes += q->probe != 0;
    enqueue_waiting(s, q);
    ul_sched_kick(s);
    return 0;
}

void ul_sched_cancel(ul_sched_t *s, ul_seq_t *q) {
    if (q->state != UL_SEQ_WAITING && q->state != UL_SEQ_RUNNING) return;
    q->cancelled = 1;
    ul_sched_kick(s);
}

void ul_sched_set_paused(ul_sched_t *s, ul_seq_t *q, int paused) {
    if (q->state != UL_SEQ_WAITING && q->state != UL_SEQ_RUNNING) return;
    q->paused = paused;
    if (!paused) ul_sched_kick(s);
}

/* Ends q's wait to share (q proceeds on its own or has taken the pages). */
static void unlink_share(ul_seq_t *q) {
    if (!q->share_with) return;
    q->share_with->n_sharers--;
    q->share_with = NULL;
}

/* q gives up its pages: whoever waits to share them computes its own prompt instead.
 * Sharers that have not taken the pages are always waiting. */
static void detach_sharers(ul_sched_t *s, ul_seq_t *q) {
    ul_queue_t *it;
    UL_QUEUE_FOREACH(it, &s->waiting) {
        if (q->n_sharers == 0) break;
        ul_seq_t *w = UL_QUEUE_DATA(it, ul_seq_t, node);
        if (w->share_with == q) unlink_share(w);
    }
    UL_ASSERT(q->n_sharers == 0);
}

static void release_pages(ul_sched_t *s, ul_seq_t *q) {
    unlink_share(q);
    if (q->n_sharers) detach_sharers(s, q);
    ul_kv_page_release(&s->pool, q->pages, q->n_pages);
    q->n_pages = 0;
    q->n_computed = 0;
    q->n_shared = 0;
    q->n_hashed = 0;
    q->prefix_hash = 0;
}

/* Takes the cached pages that hold the start of q's tokens (before its last one, which it
 * must compute for its own logits): q prefills only the rest. */
static void take_cached_prefix(ul_sched_t *s, ul_seq_t *q) {
    ul_kv_pool_t *p = &s->pool;
    int32_t ps = p->page_size, max = (q->n_tokens - 1) / ps;
    UL_ASSERT(q->n_pages == 0 && q->n_computed == 0);
    uint64_t h = 0;
    int32_t k = 0;
    for (; k < max; k++) {
        const int32_t *toks = q->tokens + (size_t)k * ps;
        uint64_t hk = ul_kv_prefix_hash(h, toks, ps);
        int32_t pg = ul_kv_prefix_take(p, hk, h, toks);
        if (pg < 0) break;
        q->pages[k] = pg;
        h = hk;
    }
    q->n_pages = q->n_hashed = k;
    q->n_computed = q->n_cached = k * ps;
    q->prefix_hash = h;
    s->stats.prefix_query_tokens += (uint64_t)q->n_tokens;
    s->stats.prefix_hit_tokens += (uint64_t)(k * ps);
    if (k)
        UL_LOG_DEBUG("seq=%llu prefix cache: %d of %d tokens", (unsigned long long)q->id, k * ps,
                     q->n_tokens);
}

/* Publishes q's pages that became full and computed, for later sequences to reuse. */
static void publish_full_pages(ul_sched_t *s, ul_seq_t *q) {
    ul_kv_pool_t *p = &s->pool;
    int32_t ps = p->page_size;
    if (!ul_kv_prefix_enabled(p)) return;
    while ((q->n_hashed + 1) * ps <= q->n_computed) {
        const int32_t *toks = q->tokens + (size_t)q->n_hashed * ps;
        uint64_t h = ul_kv_prefix_hash(q->prefix_hash, toks, ps);
        ul_kv_prefix_publish(p, q->pages[q->n_hashed], h, q->prefix_hash, toks);
        q->prefix_hash = h;
        q->n_hashed++;
    }
}

/* Pages q can take from the sequence it shares with: the prompt's full pages before its
 * last token, which q must compute itself for its own logits. */
static int32_t shareable_pages(const ul_sched_t *s, const ul_seq_t *q) {
    return (q->n_prompt - 1) / s->pool.page_size;
}

/* Waits for the sequence it shares with to compute the pages it will take. */
static int share_blocked(const ul_sched_t *s, const ul_seq_t *q) {
    return q->share_with && q->share_with->n_computed < shareable_pages(s, q) * s->pool.page_size;
}

/* Takes a reference on the shared prompt pages: q's KV now covers them. */
static void take_shared(ul_sched_t *s, ul_seq_t *q) {
    ul_seq_t *w = q->share_with;
    int32_t n = shareable_pages(s, q);
    UL_ASSERT(q->n_pages == 0 && q->n_tokens == q->n_prompt && w->n_pages >= n);
    unlink_share(q);
    if (n == 0) return;
    ul_kv_page_ref(&s->pool, w->pages, n);
    memcpy(q->pages, w->pages, (size_t)n * sizeof *q->pages);
    q->n_pages = q->n_shared = n;
    q->n_computed = n * s->pool.page_size;
    UL_LOG_DEBUG("seq=%llu shares %d pages of seq=%llu", (unsigned long long)q->id, n,
                 (unsigned long long)w->id);
}

/* Removes the sequence from the scheduler and tells its owner; q may be freed after. */
static void finish(ul_sched_t *s, ul_seq_t *q, ul_finish_t reason, int status) {
    UL_ASSERT(!q->in_step && !q->cb_pending);
    unlink_seq(s, q);
    release_pages(s, q);
    free(q->tokens);
    free(q->pages);
    q->tokens = q->pages = NULL;
    q->state = UL_SEQ_FINISHED;
    s->stats.seqs_finished++;
    s->n_probes -= q->probe != 0;
    if (reason == UL_FINISH_DEADLINE) s->stats.deadlines++;
    if (!q->probe &&
        (reason == UL_FINISH_STOP || reason == UL_FINISH_LENGTH || reason == UL_FINISH_DEADLINE))
        ul_hist_observe(&s->stats.e2e, (double)(uv_hrtime() - q->t_add_ns) / 1e9);
    UL_LOG_DEBUG("seq=%llu finish=%s generated=%d preempted=%d", (unsigned long long)q->id,
                 ul_finish_name(reason), q->n_tokens - q->n_prompt, q->n_preempted);
    q->on_finish(q, reason, status);
}

static ul_finish_t cancel_reason(const ul_seq_t *q) {
    return q->expired ? UL_FINISH_DEADLINE : UL_FINISH_CANCELLED;
}

/* Sequences past their deadline are cancelled with UL_FINISH_DEADLINE.
 * Finishes every cancelled sequence that no step is using and that owes no callback (those
 * are finished by ul_sched_step_deliver). Collects first: on_finish may free the sequence,
 * and its list node with it. */
static void reap_cancelled(ul_sched_t *s) {
    uint64_t now = uv_hrtime();
    ul_queue_t *lists[2] = {&s->waiting, &s->running};
    for (int l = 0; l < 2; l++) {
        ul_queue_t *it = lists[l]->next;
        while (it != lists[l]) {
            ul_seq_t *q = UL_QUEUE_DATA(it, ul_seq_t, node);
            it = it->next;
            if (!q->cancelled && q->deadline_ns && !q->ending && now >= q->deadline_ns)
                q->cancelled = q->expired = 1;
            if (q->cancelled && !q->in_step && !q->cb_pending) finish(s, q, cancel_reason(q), 0);
        }
    }
}

static void preempt(ul_sched_t *s, ul_seq_t *q) {
    UL_LOG_DEBUG("seq=%llu preempted at %d tokens", (unsigned long long)q->id, q->n_tokens);
    unlink_seq(s, q);
    release_pages(s, q);
    q->n_preempted++;
    s->stats.preemptions++;
    enqueue_waiting(s, q);
}

/* The newest sequence that holds pages and is not in the step being built. */
static ul_seq_t *newest_holder(ul_sched_t *s) {
    ul_seq_t *best = NULL;
    ul_queue_t *lists[2] = {&s->waiting, &s->running};
    for (int l = 0; l < 2; l++) {
        ul_queue_t *it;
        UL_QUEUE_FOREACH(it, lists[l]) {
            ul_seq_t *q = UL_QUEUE_DATA(it, ul_seq_t, node);
            if (q->n_pages > 0 && !q->in_step && (!best || q->arrival > best->arrival)) best = q;
        }
    }
    return best;
}

/* Makes the page table cover n tokens; 0 or UL_EFULL (nothing allocated). */
static int grow_pages(ul_sched_t *s, ul_seq_t *q, int32_t n) {
    int32_t need = ul_kv_pages_for(&s->pool, n) - q->n_pages;
    if (need <= 0) return 0;
    UL_ASSERT(q->n_pages + need <= q->pages_cap);
    int rc = ul_kv_page_alloc(&s->pool, need, q->pages + q->n_pages);
    if (rc == 0) q->n_pages += need;
    return rc;
}

/* Building counts what the steps in flight will have done (pipelining): the next position
 * to compute, and the tokens there will be once they are absorbed. Equal to n_computed and
 * n_tokens when q is in no step. */
static int32_t next_pos(const ul_seq_t *q) { return q->n_computed + q->n_pending; }
static int32_t n_total(const ul_seq_t *q) { return q->n_tokens + q->n_unknown; }
static int32_t n_left(const ul_seq_t *q) { return n_total(q) - next_pos(q); }

/* q is in the step in flight and may be in the one being built: it continues its prompt,
 * or decodes chained on the token the step in flight samples, which must not end it by
 * count (an end-of-generation cannot be foreseen: then one token is computed for nothing). */
static int may_continue(const ul_seq_t *q) {
    if (q->n_unknown == 0) return n_left(q) > 0;
    return n_total(q) - q->n_prompt < q->max_tokens && n_total(q) < q->cap;
}

static void add_to_step(ul_sched_t *s, ul_seq_t *q, int32_t n) {
    ul_step_t *st = s->step;
    ul_step_seq_t *ss = &st->seqs[st->n_seqs];
    const int32_t pos0 = next_pos(q);
    memset(ss, 0, offsetof(ul_step_seq_t, out_token));
    ss->seq_id = q->id;
    ss->tok_offset = st->n_tokens;
    ss->n_tokens = n;
    ss->pos0 = pos0;
    ss->pages = q->pages;
    ss->n_pages = q->n_pages;
    ss->sample = pos0 + n == n_total(q);
    ss->sampling = q->sampling;
    ss->rng[0] = q->rng[0];
    ss->rng[1] = q->rng[1];
    ss->history = q->tokens;
    ss->n_history = q->n_tokens;
    ss->out_token = -1;
    if (q->n_unknown > 0) { /* chained: its token is the one the step in flight samples */
        UL_ASSERT(n == 1 && q->in_step == 1 && q->step_samples);
        ss->chain = 1 + q->step_index;
        st->tokens[st->n_tokens] = -1;
        s->stats.tokens_chained++;
    } else {
        memcpy(st->tokens + st->n_tokens, q->tokens + pos0, (size_t)n * sizeof(int32_t));
    }
    /* Never write a page another sequence reads: shared pages lie before pos0. */
    for (int32_t p = pos0 / s->pool.page_size; p < ul_kv_pages_for(&s->pool, pos0 + n); p++)
        UL_ASSERT(s->pool.refs[q->pages[p]] == 1);
    s->step_owner[st->n_seqs] = q;
    ul_step_feat_add(&s->feat, n, pos0);
    if (!q->t_sched_ns) {
        q->t_sched_ns = uv_hrtime();
        if (!q->probe)
            ul_hist_observe(&s->stats.queue, (double)(q->t_sched_ns - q->t_add_ns) / 1e9);
    }
    q->step_index = st->n_seqs;
    st->n_tokens += n;
    st->n_seqs++;
    q->in_step++;
    q->n_pending += n;
    q->n_unknown += ss->sample;
    q->step_samples = ss->sample;
}

static int runnable(const ul_sched_t *s, const ul_seq_t *q) {
    return !q->paused && !q->cancelled && !q->ending && !share_blocked(s, q) &&
           (!q->in_step || may_continue(q));
}

/* Decides q's end without calling back: its pages go back to the pool at once when no
 * step uses them (else when the last step it is in is absorbed), on_finish waits for
 * ul_sched_step_deliver. */
static void set_ending(ul_sched_t *s, ul_seq_t *q, ul_finish_t reason, int status) {
    if (!q->ending) {
        q->ending = reason;
        q->ending_status = status;
    }
    if (!q->in_step) release_pages(s, q);
}

/* Queues q's callbacks for ul_sched_step_deliver (once per sequence: a second entry could
 * outlive the sequence, which the first one may finish). ss: the step entry that sampled
 * token, whose logprobs are copied now (the next step overwrites them); NULL with token < 0.
 * The top candidates are copied only when asked for: most sequences want none. */
static void owe(ul_sched_t *s, ul_seq_t *q, int32_t token, const ul_step_seq_t *ss) {
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

static int by_arrival(const void *a, const void *b) {
    const ul_seq_t *x = *(ul_seq_t *const *)a, *y = *(ul_seq_t *const *)b;
    return x->arrival < y->arrival ? -1 : x->arrival > y->arrival;
}

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
    return s->cfg.itl_target_ms > 0 && !q->probe && n_total(q) == q->n_prompt;
}

/* q's last prompt token is all it has left to compute: its next step samples its first. */
static int ready_first(const ul_sched_t *s, const ul_seq_t *q) {
    return hold_enabled(s, q) && q->state == UL_SEQ_RUNNING && n_left(q) == 1;
}

static int backlog_over_target(const ul_sched_t *s) {
    return s->backlog_us > PLAN_FRAC * s->cfg.itl_target_ms * 1000.0;
}

/* Decides s->hold_first for the step being built (no_hold: never), and counts the
 * streaming decoders. */
static void decide_hold(ul_sched_t *s, int no_hold) {
    s->hold_first = 0;
    s->n_streaming = 0;
    s->backlog_us = 0;
    uint64_t now = uv_hrtime(), oldest = 0;
    int32_t n = 0;
    ul_queue_t *it;
    UL_QUEUE_FOREACH(it, &s->running) {
        ul_seq_t *q = UL_QUEUE_DATA(it, ul_seq_t, node);
        if (!runnable(s, q)) continue;
        int32_t left = n_left(q);
        if (ready_first(s, q)) {
            if (!oldest || q->t_add_ns < oldest) oldest = q->t_add_ns;
        } else if (left == 1) {
            s->n_streaming++;
        } else if (n < s->cfg.max_seqs) {
            s->scratch[n++] = q;
        }
    }
    UL_QUEUE_FOREACH(it, &s->waiting) {
        ul_seq_t *q = UL_QUEUE_DATA(it, ul_seq_t, node);
        if (runnable(s, q) && n < s->cfg.max_seqs) s->scratch[n++] = q;
    }
    if (n == 0 || s->cfg.itl_target_ms <= 0 || s->model.n_obs == 0) return;
    /* the pending prompts' first tokens, prefilled oldest first at full speed */
    qsort(s->scratch, (size_t)n, sizeof *s->scratch, by_arrival);
    ul_step_feat_t f = {0};
    double worst = 0;
    for (int32_t i = 0; i < n; i++) {
        ul_seq_t *q = s->scratch[i];
        ul_step_feat_add(&f, n_left(q), next_pos(q));
        double t = (double)(now - q->t_add_ns) / 1e9 + ul_step_model_predict(&s->model, &f) / 1e6;
        if (t > worst) worst = t;
    }
    s->backlog_us = ul_step_model_predict(&s->model, &f);
    /* (a full pool: the pending prompts cannot advance, the held would only wait; a backlog
     * that fits in one step within the target is not slowed by streams) */
    if (no_hold || !oldest || s->pool.n_free == 0 || !backlog_over_target(s)) return;
    double age = (double)(now - oldest) / 1e9;
    s->hold_first = age < worst && age < HOLD_MAX_T * s->cfg.itl_target_ms / 1e3;
}

/* Pass 1: one token for every decoding sequence, in rotation order. Candidates are
 * collected first because preemption moves sequences between the lists. */
static void add_decoders(ul_sched_t *s) {
    int32_t n = 0;
    ul_queue_t *it;
    UL_QUEUE_FOREACH(it, &s->running) {
        ul_seq_t *q = UL_QUEUE_DATA(it, ul_seq_t, node);
        if (runnable(s, q) && n_left(q) == 1 && n < s->cfg.max_seqs &&
            !(s->hold_first && ready_first(s, q)))
            s->scratch[n++] = q;
    }
    for (int32_t i = 0; i < n && s->step->n_tokens < s->cfg.max_batch_tokens; i++) {
        ul_seq_t *q = s->scratch[i];
        if (q->state != UL_SEQ_RUNNING) continue; /* preempted for an older one */
        /* one in flight waits for its step rather than preempt anyone (it is not a victim) */
        if (q->in_step && grow_pages(s, q, n_total(q)) != 0) continue;
        while (grow_pages(s, q, n_total(q)) != 0) {
            if (q->n_pages == s->pool.n_pages) {
                /* It holds the whole pool and needs more: it can never grow. Its last
                 * token's on_token may still be owed: then deliver finishes it. */
                if (q->cb_pending)
                    set_ending(s, q, UL_FINISH_LENGTH, 0);
                else
                    finish(s, q, UL_FINISH_LENGTH, 0);
                q = NULL;
                break;
            }
            ul_seq_t *victim = newest_holder(s);
            UL_ASSERT(victim); /* q itself holds pages and is not in the step */
            preempt(s, victim);
            s->preempted_for_decode = 1;
            if (victim == q) {
                q = NULL;
                break;
            }
        }
        if (q) add_to_step(s, q, 1);
    }
    /* Rotate: the sequences just scheduled go to the back, so when decoders outnumber the
     * budget every one of them gets a turn. */
    for (int32_t i = 0; i < s->step->n_seqs; i++) {
        ul_seq_t *q = s->step_owner[i];
        ul_queue_remove(&q->node);
        ul_queue_insert_tail(&s->running, &q->node);
    }
}

/* Gives q a prefill chunk of up to budget tokens, as far as pages allow. Returns the chunk
 * size (0: no page could be had). */
static int32_t admit_chunk(ul_sched_t *s, ul_seq_t *q, int32_t budget) {
    int32_t c = n_left(q);
    if (c > budget) c = budget;
    int64_t room = (int64_t)(q->n_pages + s->pool.n_free) * s->pool.page_size - next_pos(q);
    if (c > room) c = (int32_t)room;
    if (c <= 0) return 0;
    int rc = grow_pages(s, q, next_pos(q) + c);
    UL_ASSERT(rc == 0);
    return c;
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

/* Prefill tokens q may get in this step: the token budget, cut to the latency target while
 * anything decodes, but never below one token a step, nor, when the decoders alone are
 * over the contract's bound, below the step's minimum prefill share in tokens. (Under the
 * bound the target itself leaves prefill MIN_SHARE x T: a token floor on top would push the
 * step over the target wherever a prefill token costs what a decode token does, as on the
 * CPU, where 16 of them nearly double a 16-decoder step.) */
static int32_t prefill_budget(ul_sched_t *s, const ul_seq_t *q, int32_t prefilled) {
    int32_t budget = s->cfg.max_batch_tokens - s->step->n_tokens;
    if (budget <= 0 || s->cfg.itl_target_ms < 0 || s->feat.n_decode == 0 || s->model.n_obs == 0)
        return budget;
    int32_t want = n_left(q);
    if (want > budget) want = budget;
    int32_t c = chunk_for_target(s, &s->feat, next_pos(q), want, s->prefill_target_us);
    int32_t floor = s->dec_overloaded ? s->cfg.min_prefill - prefilled : 1 - prefilled;
    if (c < floor) c = floor < budget ? floor : budget;
    if (c < want) s->budget_cut = 1;
    return c;
}

/* Pass 2: prefill chunks, oldest first, for running (partially prefilled) and waiting
 * sequences alike. Stops at the first one that cannot get a page: first come, first
 * served, so a long prompt is not starved by short ones slipping past it. */
static void add_prefills(ul_sched_t *s) {
    int32_t n = 0;
    ul_queue_t *it;
    UL_QUEUE_FOREACH(it, &s->running) {
        ul_seq_t *q = UL_QUEUE_DATA(it, ul_seq_t, node);
        if (runnable(s, q) && n_left(q) > 1 && n < s->cfg.max_seqs) s->scratch[n++] = q;
    }
    UL_QUEUE_FOREACH(it, &s->waiting) {
        ul_seq_t *q = UL_QUEUE_DATA(it, ul_seq_t, node);
        if (runnable(s, q) && n < s->cfg.max_seqs) s->scratch[n++] = q;
    }
    qsort(s->scratch, (size_t)n, sizeof *s->scratch, by_arrival);
    int32_t prefilled = 0;
    for (int32_t i = 0; i < n; i++) {
        if (s->cfg.max_batch_tokens - s->step->n_tokens <= 0) break;
        ul_seq_t *q = s->scratch[i];
        /* Pages just taken from a preempted sequence are for the decoders: admitting
         * waiting work into them now would only be preempted again next step. */
        if (q->state == UL_SEQ_WAITING && s->preempted_for_decode) break;
        if (q->share_with) {
            if (s->pool.n_free == 0) break; /* not even the page past the shared ones */
            take_shared(s, q);
        } else if (q->n_pages == 0 && ul_kv_prefix_enabled(&s->pool)) {
            take_cached_prefix(s, q);
        }
        int32_t budget = prefill_budget(s, q, prefilled);
        if (budget <= 0) break; /* the latency target is spent */
        /* The prompt's last token waits for the next step, where it may be held (see
         * decide_hold), when holding can help: nothing streams yet, or other prompts are
         * pending. Else it goes now, and the first token comes a step sooner. */
        int32_t left = n_left(q);
        if (hold_enabled(s, q) && backlog_over_target(s) && left > 1 && budget >= left &&
            (s->n_streaming == 0 || n > 1))
            budget = left - 1;
        int32_t c = admit_chunk(s, q, budget);
        if (c == 0) break;
        prefilled += c;
        if (q->state == UL_SEQ_WAITING) {
            unlink_seq(s, q);
            ul_queue_insert_tail(&s->running, &q->node);
            q->state = UL_SEQ_RUNNING;
            s->n_running++;
        }
        add_to_step(s, q, c);
    }
}
int ul_sched_step_build(ul_sched_t *s) {
    UL_ASSERT(s->n_flight < s->depth);
    reap_cancelled(s);
    struct ul_sched_slot_s *sl = &s->slot[(s->head + s->n_flight) % s->depth];
    s->step = &sl->step;
    s->step_owner = sl->owner;
    s->step->n_tokens = 0;
    s->step->n_seqs = 0;
    s->step->status = 0;
    s->preempted_for_decode = 0;
    int no_hold = 0;
    for (;;) {
        s->feat = (ul_step_feat_t){0};
        s->budget_cut = 0;
        decide_hold(s, no_hold);
        add_decoders(s);
        s->dec_overloaded = overloaded(s, ul_step_model_predict(&s->model, &s->feat));
        s->prefill_target_us = step_target_us(s, &s->feat);
        add_prefills(s);
        if (s->step->n_seqs > 0) break;
        if (s->hold_first) { /* no pending prompt could advance: release the held */
            no_hold = 1;
            continue;
        }
        /* Nothing fits although there may be work: partial prefills can hold every page
         * between them. Free the newest holder's pages so the older ones advance. */
        ul_seq_t *victim = newest_holder(s);
        if (!victim) break;
        int any_runnable = 0;
        ul_queue_t *lists[2] = {&s->waiting, &s->running};
        for (int l = 0; l < 2 && !any_runnable; l++) {
            ul_queue_t *it;
            UL_QUEUE_FOREACH(it, lists[l]) {
                ul_seq_t *q = UL_QUEUE_DATA(it, ul_seq_t, node);
                if (runnable(s, q) && q != victim) any_runnable = 1;
            }
        }
        if (!any_runnable) break; /* only paused sequences (or the victim alone) */
        preempt(s, victim);
    }
    if (s->step->n_seqs == 0) return 0;
    s->step_pred_us = ul_step_model_predict(&s->model, &s->feat);
    if (s->budget_cut) s->stats.steps_budgeted++;
    if (s->hold_first) s->stats.steps_held++;
    sl->feat = s->feat;
    sl->pred_us = s->step_pred_us;
    sl->budget_cut = s->budget_cut;
    sl->done = 0;
    s->stats.steps_ahead += s->n_flight > 0;
    s->n_flight++;
    return s->step->n_seqs;
}

/* Appends a sampled token and decides whatever needs no callback: end-of-generation (unless
 * the sequence ignores it), max_tokens, the context length. */
static void take_token(ul_sched_t *s, ul_seq_t *q, const ul_step_seq_t *ss) {
    int32_t tok = ss->out_token;
    const ul_backend_t *b = s->backend;
    if (tok < 0 || tok >= b->n_vocab) {
        set_ending(s, q, UL_FINISH_ERROR, UL_ERANGE);
        owe(s, q, -1, NULL);
        return;
    }
    if (!q->ignore_eos && ((b->eos_id >= 0 && tok == b->eos_id) ||
                           (s->cfg.is_eog && s->cfg.is_eog(s->cfg.eog_ctx, tok)))) {
        set_ending(s, q, UL_FINISH_STOP, 0);
        owe(s, q, -1, NULL);
        return;
    }
    q->tokens[q->n_tokens++] = tok;
    s->stats.tokens_generated += !q->probe;
    if (q->n_tokens - q->n_prompt >= q->max_tokens || q->n_tokens >= q->cap)
        set_ending(s, q, UL_FINISH_LENGTH, 0);
    owe(s, q, tok, ss);
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
    s->stats.predicted_us += sl->pred_us;
    s->step_last_us = st->compute_us;
    s->t_step_done_ns = uv_hrtime();
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
        q->n_pending -= st->seqs[i].n_tokens;
        q->n_unknown -= st->seqs[i].sample;
    }
    for (int32_t i = 0; i < st->n_seqs; i++) {
        ul_step_seq_t *ss = &st->seqs[i];
        ul_seq_t *q = sl->owner[i];
        if (q->cancelled) continue; /* reaped at the next build */
        if (q->ending) {            /* asked to stop while this step ran: result dropped */
            set_ending(s, q, q->ending, q->ending_status);
            owe(s, q, -1, NULL);
            continue;
        }
        if (st->status) {
            UL_LOG_ERROR("seq=%llu step failed: %s", (unsigned long long)q->id,
                         ul_strerror(st->status));
            set_ending(s, q, UL_FINISH_ERROR, st->status);
            owe(s, q, -1, NULL);
            continue;
        }
        q->n_computed += ss->n_tokens;
        s->stats.tokens_computed += (uint64_t)ss->n_tokens;
        publish_full_pages(s, q);
        if (!ss->sample) continue;
        q->rng[0] = ss->rng[0];
        q->rng[1] = ss->rng[1];
        take_token(s, q, ss);
    }
}

/* One owed entry: the token's on_token (unless the client is gone), then the finish if the
 * sequence's end is decided and no step in flight still uses it. */
static void deliver_one(ul_sched_t *s, ul_seq_t *q, int32_t tok, const ul_token_lp_t *lp) {
    q->cb_pending = 0;
    if (q->cancelled) {
        if (!q->in_step) finish(s, q, cancel_reason(q), 0);
        return; /* else reaped after the step in flight */
    }
    if (tok >= 0) {
        uint64_t now = uv_hrtime();
        if (!q->t_first_ns) q->t_first_ns = now;
        if (!q->probe)
            ul_hist_observe(q->t_last_ns ? &s->stats.itl : &s->stats.ttft,
                            (double)(now - (q->t_last_ns ? q->t_last_ns : q->t_add_ns)) / 1e9);
        q->t_last_ns = now;
    }
    if (tok >= 0 && q->on_token && q->on_token(q, tok, lp)) {
        q->ending = UL_FINISH_STOP; /* a stop string beats max_tokens */
        q->ending_status = 0;
    }
    if (q->ending && !q->in_step) finish(s, q, q->ending, q->ending_status);
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

double ul_sched_predict_wait_s(const ul_sched_t *s, int32_t n_prompt) {
    if (s->model.n_obs == 0) return 0;
    int64_t ahead = n_prompt;
    int64_t need = ul_kv_pages_for(&s->pool, n_prompt); /* pages the prefill ahead lacks */
    int32_t n_dec = 0;
    ul_step_feat_t dec = {0};
    const ul_queue_t *lists[2] = {&s->waiting, &s->running};
    for (int l = 0; l < 2; l++) {
        const ul_queue_t *it;
        for (it = lists[l]->next; it != lists[l]; it = it->next) {
            const ul_seq_t *q = UL_QUEUE_DATA(it, ul_seq_t, node);
            int32_t left = q->n_tokens - q->n_computed;
            if (q->cancelled || q->ending) continue;
            if (left > 1 || q->state == UL_SEQ_WAITING) {
                ahead += left;
                need += ul_kv_pages_for(&s->pool, q->n_tokens) - q->n_pages;
            } else if (!q->paused && n_dec < s->cfg.max_batch_tokens) {
                n_dec++;
                ul_step_feat_add(&dec, 1, q->n_computed);
            }
        }
    }
    /* prefill tokens per step: all the batch when nothing decodes, else what the target
     * leaves (at least the minimum share, as in prefill_budget) */
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
