/* What a sequence need not compute: the prompt pages of another choice of the same request
 * (n > 1, ul_sched_add_shared) and full pages found in the prefix cache (kvpool.h). Both
 * hand a sequence read-only, reference-counted pages at admission; a sequence writes only
 * the pages past them. */
#include <string.h>

#include "sched/sched_impl.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

/* A share_with that is ending, cancelled or finished has (or soon has) no pages to give. */
int ul_share_check(const ul_seq_t *q, const int32_t *prompt, int32_t n_prompt, const ul_seq_t *w,
                   int *share) {
    *share = 0;
    if (!w) return 0;
    if (w == q || w->state == UL_SEQ_NEW) return UL_EINVAL;
    if (w->state == UL_SEQ_FINISHED) return 0;
    if (w->n_prompt != n_prompt || memcmp(w->tokens, prompt, (size_t)n_prompt * sizeof *prompt))
        return UL_EINVAL;
    *share = !w->ending && !w->cancelled;
    return 0;
}

/* Ends q's wait to share (q proceeds on its own or has taken the pages). */
static void unlink_share(ul_seq_t *q) {
    if (!q->share_with) return;
    q->share_with->n_sharers--;
    q->share_with = NULL;
}

/* Sharers that have not taken the pages are always waiting. */
void ul_share_release(ul_sched_t *s, ul_seq_t *q) {
    unlink_share(q);
    ul_queue_t *it;
    UL_QUEUE_FOREACH(it, &s->waiting) {
        if (q->n_sharers == 0) break;
        ul_seq_t *w = UL_QUEUE_DATA(it, ul_seq_t, node);
        if (w->share_with == q) unlink_share(w);
    }
    UL_ASSERT(q->n_sharers == 0);
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

void ul_share_publish(ul_sched_t *s, ul_seq_t *q) {
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

int ul_share_blocked(const ul_sched_t *s, const ul_seq_t *q) {
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

int ul_share_admit(ul_sched_t *s, ul_seq_t *q) {
    if (q->share_with) {
        if (s->pool.n_free == 0) return UL_EFULL;
        take_shared(s, q);
    } else if (q->n_pages == 0 && ul_kv_prefix_enabled(&s->pool)) {
        take_cached_prefix(s, q);
    }
    return 0;
}
