/* The batcher core: sequence lifecycle, step building under a token budget and KV page
 * admission, and preemption. Consuming a step's results is absorb.c's, the latency budget
 * budget.c's, page sharing share.c's; no libuv and no clock here (s->now_ns is the time), so every
 * scheduling decision can be unit-tested step by step. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sampling.h"
#include "sched/sched_impl.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

/* Asks the driver, if any, to build a step soon. */
static void kick(ul_sched_t *s) {
    if (s->kick) s->kick(s);
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
    oom |= ul_spec_init(s) != 0;
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
    return 0;
}

void ul_sched_free(ul_sched_t *s) {
    UL_ASSERT(ul_sched_n_active(s) == 0 && s->n_flight == 0);
    ul_kv_pool_free(&s->pool);
    ul_spec_free(s);
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

int ul_sched_add(ul_sched_t *s, ul_seq_t *q, const int32_t *prompt, int32_t n_prompt) {
    return ul_sched_add_shared(s, q, prompt, n_prompt, NULL);
}

int ul_sched_add_shared(ul_sched_t *s, ul_seq_t *q, const int32_t *prompt, int32_t n_prompt,
                        ul_seq_t *share_with) {
    const ul_backend_t *b = s->backend;
    if (n_prompt < 1 || q->max_tokens < 1 || !q->on_finish) return UL_EINVAL;
    int share;
    int rc = ul_share_check(q, prompt, n_prompt, share_with, &share);
    if (rc) return rc;
    if (s->closing || (!q->probe && ul_sched_n_active(s) - s->n_probes >= s->cfg.max_seqs))
        return UL_EFULL;
    if (n_prompt >= b->n_ctx) return UL_E2BIG;
    if (q->embd && (share_with || b->n_embd <= 0)) return share_with ? UL_EINVAL : UL_ENOTSUP;
    if (q->embd && n_prompt > s->cfg.max_batch_tokens) return UL_E2BIG; /* one step, whole */
    int64_t cap = (int64_t)n_prompt + q->max_tokens;
    if (cap > b->n_ctx) cap = b->n_ctx;
    if (ul_kv_pages_for(&s->pool, n_prompt) > s->pool.n_pages) return UL_E2BIG;
    q->tokens = malloc((size_t)cap * sizeof *q->tokens);
    q->pages_cap = ul_kv_pages_for(&s->pool, cap);
    q->pages = malloc((size_t)q->pages_cap * sizeof *q->pages);
    if (!q->tokens || !q->pages || ul_spec_seq_init(s, q, (int32_t)cap)) {
        free(q->tokens);
        free(q->pages);
        ul_spec_seq_free(q);
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
    kick(s); /* first: the driver may bring now_ns up to date */
    q->t_add_ns = s->now_ns;
    q->t_sched_ns = q->t_first_ns = q->t_last_ns = 0;
    if (share) share_with->n_sharers++;
    s->n_probes += q->probe != 0;
    enqueue_waiting(s, q);
    return 0;
}

void ul_sched_cancel(ul_sched_t *s, ul_seq_t *q) {
    if (q->state != UL_SEQ_WAITING && q->state != UL_SEQ_RUNNING) return;
    q->cancelled = 1;
    kick(s);
}

void ul_sched_set_paused(ul_sched_t *s, ul_seq_t *q, int paused) {
    if (q->state != UL_SEQ_WAITING && q->state != UL_SEQ_RUNNING) return;
    q->paused = paused;
    if (!paused) kick(s);
}

static void release_pages(ul_sched_t *s, ul_seq_t *q) {
    ul_share_release(s, q);
    ul_spec_release(s, q);
    ul_kv_page_release(&s->pool, q->pages, q->n_pages);
    q->n_pages = 0;
    q->n_computed = 0;
    q->n_shared = 0;
    q->n_hashed = 0;
    q->prefix_hash = 0;
}

/* Removes the sequence from the scheduler and tells its owner; q may be freed after. */
void ul_sched_finish(ul_sched_t *s, ul_seq_t *q, ul_finish_t reason, int status) {
    UL_ASSERT(!q->in_step && !q->cb_pending);
    unlink_seq(s, q);
    release_pages(s, q);
    free(q->tokens);
    free(q->pages);
    ul_spec_seq_free(q);
    q->tokens = q->pages = NULL;
    q->state = UL_SEQ_FINISHED;
    s->stats.seqs_finished++;
    s->n_probes -= q->probe != 0;
    if (reason == UL_FINISH_DEADLINE) s->stats.deadlines++;
    if (!q->probe &&
        (reason == UL_FINISH_STOP || reason == UL_FINISH_LENGTH || reason == UL_FINISH_DEADLINE))
        ul_hist_observe(&s->stats.e2e, ul_sched_seconds_since(s, q->t_add_ns));
    UL_LOG_DEBUG("seq=%llu finish=%s generated=%d preempted=%d", (unsigned long long)q->id,
                 ul_finish_name(reason), q->n_tokens - q->n_prompt, q->n_preempted);
    q->on_finish(q, reason, status);
}

/* Sequences past their deadline are cancelled with UL_FINISH_DEADLINE.
 * Finishes every cancelled sequence that no step is using and that owes no callback (those
 * are finished by ul_sched_step_deliver). Collects first: on_finish may free the sequence,
 * and its list node with it. */
static void reap_cancelled(ul_sched_t *s) {
    uint64_t now = s->now_ns;
    ul_queue_t *lists[2] = {&s->waiting, &s->running};
    for (int l = 0; l < 2; l++) {
        ul_queue_t *it = lists[l]->next;
        while (it != lists[l]) {
            ul_seq_t *q = UL_QUEUE_DATA(it, ul_seq_t, node);
            it = it->next;
            if (!q->cancelled && q->deadline_ns && !q->ending && now >= q->deadline_ns)
                q->cancelled = q->expired = 1;
            if (q->cancelled && !q->in_step && !q->cb_pending)
                ul_sched_finish(s, q, ul_seq_cancel_reason(q), 0);
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
int ul_sched_grow_pages(ul_sched_t *s, ul_seq_t *q, int32_t n) {
    int32_t need = ul_kv_pages_for(&s->pool, n) - q->n_pages;
    if (need <= 0) return 0;
    UL_ASSERT(q->n_pages + need <= q->pages_cap);
    int rc = ul_kv_page_alloc(&s->pool, need, q->pages + q->n_pages);
    if (rc == 0) q->n_pages += need;
    return rc;
}

/* q is in the step in flight and may be in the one being built: it continues its prompt,
 * or decodes chained on the token the step in flight samples, which must not end it by
 * count (an end-of-generation cannot be foreseen: then one token is computed for nothing). */
static int may_continue(const ul_seq_t *q) {
    if (q->n_unknown == 0) return ul_seq_n_left(q) > 0;
    return ul_seq_n_total(q) - q->n_prompt < q->max_tokens && ul_seq_n_total(q) < q->cap;
}

/* q's next n tokens into the step being built; the last k of them are proposals (spec.c
 * wrote them, or -1 for the draft's, after q's tokens). */
static void add_to_step(ul_sched_t *s, ul_seq_t *q, int32_t n, int32_t k) {
    ul_step_t *st = s->step;
    ul_step_seq_t *ss = &st->seqs[st->n_seqs];
    const int32_t pos0 = ul_seq_next_pos(q);
    memset(ss, 0, offsetof(ul_step_seq_t, out_token));
    ss->seq_id = q->id;
    ss->tok_offset = st->n_tokens;
    ss->n_tokens = n;
    ss->pos0 = pos0;
    ss->pages = q->pages;
    ss->n_pages = q->n_pages;
    ss->sample = !q->embd && pos0 + n - k == ul_seq_n_total(q); /* proposals follow it */
    ss->out_embd = q->embd;
    ss->pooling = q->pooling;
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
    q->spec_k = -1;
    if (k > 0) ul_spec_attach(s, q, ss, k);
    /* Never write a page another sequence reads: shared pages lie before pos0. */
    for (int32_t p = pos0 / s->pool.page_size; p < ul_kv_pages_for(&s->pool, pos0 + n); p++)
        UL_ASSERT(s->pool.refs[q->pages[p]] == 1);
    s->step_owner[st->n_seqs] = q;
    ul_step_feat_add(&s->feat, n, pos0);
    UL_ASSERT(k == 0 || pos0 + n - k == q->n_tokens); /* proposals follow its last token */
    if (!q->t_sched_ns) {
        q->t_sched_ns = s->now_ns;
        if (!q->probe) ul_hist_observe(&s->stats.queue, ul_sched_seconds_since(s, q->t_add_ns));
    }
    q->step_index = st->n_seqs;
    q->spec_ntok = n;
    st->n_tokens += n;
    st->n_seqs++;
    q->in_step++;
    q->n_pending += n;
    q->n_unknown += ss->sample;
    q->step_samples = ss->sample;
}

int ul_sched_runnable(const ul_sched_t *s, const ul_seq_t *q) {
    /* a sequence verifying proposals waits for their outcome (it is never chained) */
    return !q->paused && !q->cancelled && !q->ending && !ul_share_blocked(s, q) &&
           (!q->in_step || (q->spec_k < 0 && may_continue(q)));
}

/* Decides q's end without calling back: its pages go back to the pool at once when no
 * step uses them (else when the last step it is in is absorbed), on_finish waits for
 * ul_sched_step_deliver. */
void ul_sched_set_ending(ul_sched_t *s, ul_seq_t *q, ul_finish_t reason, int status) {
    if (!q->ending) {
        q->ending = reason;
        q->ending_status = status;
    }
    if (!q->in_step) release_pages(s, q);
}

int ul_seq_by_arrival(const void *a, const void *b) {
    const ul_seq_t *x = *(ul_seq_t *const *)a, *y = *(ul_seq_t *const *)b;
    return x->arrival < y->arrival ? -1 : x->arrival > y->arrival;
}

/* Pass 1: one token for every decoding sequence, in rotation order. Candidates are
 * collected first because preemption moves sequences between the lists. */
static void add_decoders(ul_sched_t *s) {
    int32_t n = 0;
    ul_queue_t *it;
    UL_QUEUE_FOREACH(it, &s->running) {
        ul_seq_t *q = UL_QUEUE_DATA(it, ul_seq_t, node);
        if (ul_sched_runnable(s, q) && ul_seq_n_left(q) == 1 && n < s->cfg.max_seqs &&
            !(s->hold_first && ul_budget_ready_first(s, q)))
            s->scratch[n++] = q;
    }
    ul_spec_begin(s, n);
    for (int32_t i = 0; i < n && s->step->n_tokens < s->cfg.max_batch_tokens; i++) {
        ul_seq_t *q = s->scratch[i];
        if (q->state != UL_SEQ_RUNNING) continue; /* preempted for an older one */
        /* one in flight waits for its step rather than preempt anyone (it is not a victim) */
        if (q->in_step && ul_sched_grow_pages(s, q, ul_seq_n_total(q)) != 0) continue;
        while (ul_sched_grow_pages(s, q, ul_seq_n_total(q)) != 0) {
            if (q->n_pages == s->pool.n_pages) {
                /* It holds the whole pool and needs more: it can never grow. Its last
                 * token's on_token may still be owed: then deliver finishes it. */
                if (q->cb_pending)
                    ul_sched_set_ending(s, q, UL_FINISH_LENGTH, 0);
                else
                    ul_sched_finish(s, q, UL_FINISH_LENGTH, 0);
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
        if (!q) continue;
        /* proposals from what the later decoders leave of the budget */
        int32_t room = s->cfg.max_batch_tokens - s->step->n_tokens - 1 - (n - i - 1);
        int32_t k = q->in_step ? 0 : ul_spec_plan(s, q, room);
        add_to_step(s, q, 1 + k, k);
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
    int32_t c = ul_seq_n_left(q);
    if (c > budget) c = budget;
    int64_t room = (int64_t)(q->n_pages + s->pool.n_free) * s->pool.page_size - ul_seq_next_pos(q);
    if (c > room) c = (int32_t)room;
    if (c <= 0) return 0;
    int rc = ul_sched_grow_pages(s, q, ul_seq_next_pos(q) + c);
    UL_ASSERT(rc == 0);
    return c;
}

/* An embedding sequence (sched.h) into the step with its whole prompt, when the step's
 * budget and the free pages hold it; 0 when they do not (it waits). The latency target
 * does not cut it: an embedding cannot be computed in pieces. */
static int admit_whole(ul_sched_t *s, ul_seq_t *q) {
    const int32_t n = q->n_prompt;
    if (s->cfg.max_batch_tokens - s->step->n_tokens < n) return 0;
    if (ul_kv_pages_for(&s->pool, n) > s->pool.n_free) return 0;
    int rc = ul_sched_grow_pages(s, q, n);
    UL_ASSERT(rc == 0);
    unlink_seq(s, q);
    ul_queue_insert_tail(&s->running, &q->node);
    q->state = UL_SEQ_RUNNING;
    s->n_running++;
    add_to_step(s, q, n, 0);
    return 1;
}

/* Pass 2: prefill chunks, oldest first, for running (partially prefilled) and waiting
 * sequences alike. Stops at the first one that cannot get a page: first come, first
 * served, so a long prompt is not starved by short ones slipping past it. */
static void add_prefills(ul_sched_t *s) {
    int32_t n = 0;
    ul_queue_t *it;
    UL_QUEUE_FOREACH(it, &s->running) {
        ul_seq_t *q = UL_QUEUE_DATA(it, ul_seq_t, node);
        if (ul_sched_runnable(s, q) && ul_seq_n_left(q) > 1 && n < s->cfg.max_seqs)
            s->scratch[n++] = q;
    }
    UL_QUEUE_FOREACH(it, &s->waiting) {
        ul_seq_t *q = UL_QUEUE_DATA(it, ul_seq_t, node);
        if (ul_sched_runnable(s, q) && n < s->cfg.max_seqs) s->scratch[n++] = q;
    }
    qsort(s->scratch, (size_t)n, sizeof *s->scratch, ul_seq_by_arrival);
    int32_t prefilled = 0;
    for (int32_t i = 0; i < n; i++) {
        if (s->cfg.max_batch_tokens - s->step->n_tokens <= 0) break;
        ul_seq_t *q = s->scratch[i];
        /* Pages just taken from a preempted sequence are for the decoders: admitting
         * waiting work into them now would only be preempted again next step. */
        if (q->state == UL_SEQ_WAITING && s->preempted_for_decode) break;
        if (q->embd) { /* whole or not at all, and never from the prefix cache */
            if (!admit_whole(s, q)) break;
            prefilled += q->n_prompt;
            continue;
        }
        if (ul_share_admit(s, q) != 0) break;
        int32_t budget = ul_budget_prefill(s, q, prefilled, n);
        if (budget <= 0) break; /* the latency target is spent */
        int32_t c = admit_chunk(s, q, budget);
        if (c == 0) break;
        prefilled += c;
        if (q->state == UL_SEQ_WAITING) {
            unlink_seq(s, q);
            ul_queue_insert_tail(&s->running, &q->node);
            q->state = UL_SEQ_RUNNING;
            s->n_running++;
        }
        add_to_step(s, q, c, 0);
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
    s->step->draft_us = 0;
    sl->n_spec = 0;
    sl->proposing = 0;
    s->preempted_for_decode = 0;
    int no_hold = 0;
    for (;;) {
        s->feat = (ul_step_feat_t){0};
        s->budget_cut = 0;
        ul_budget_decide_hold(s, no_hold);
        add_decoders(s);
        ul_budget_plan(s);
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
                if (ul_sched_runnable(s, q) && q != victim) any_runnable = 1;
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

void ul_sched_shutdown(ul_sched_t *s) {
    s->closing = 1;
    ul_queue_t *lists[2] = {&s->waiting, &s->running};
    for (int l = 0; l < 2; l++) {
        ul_queue_t *it;
        UL_QUEUE_FOREACH(it, lists[l]) UL_QUEUE_DATA(it, ul_seq_t, node)->cancelled = 1;
    }
}
