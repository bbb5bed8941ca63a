/* KV page allocator and prefix cache: the scheduler's view of the backend's KV pool. Pages
 * are plain indices 0..n_pages-1; the backend owns the storage, the scheduler owns which
 * sequences hold which page. A page may be held by several sequences (the choices of one
 * request, or requests sharing a cached prefix): each holder has a reference.
 *
 * Prefix cache (DESIGN.md "KV cache"): a full page whose KV is computed can be published
 * under a hash of (its parent page's hash, its token ids). A page whose last reference goes
 * stays cached (its KV intact) in a least-recently-used list instead of returning to the
 * free stack; a later sequence whose prompt starts with the same tokens finds it by hash
 * and takes a reference again. Cached unreferenced pages count as free: when the free stack
 * is empty, allocation evicts the least recently used of them (it leaves the hash index).
 * So n_free = truly free + cached unreferenced, and admission arithmetic is unchanged.
 * Loop thread only. */
#ifndef UL_SCHED_KVPOOL_H
#define UL_SCHED_KVPOOL_H

#include <stdint.h>

typedef struct ul_kv_pool_s {
    int32_t *free_pages; /* [n_pages] stack; the top n_empty entries hold no KV worth keeping */
    int32_t *refs;       /* [n_pages]: holders of each page, 0 = free or cached-unreferenced */
    int32_t n_free;      /* pages no sequence holds (n_empty + n_lru) */
    int32_t n_pages;
    int32_t page_size; /* tokens per page */
    int32_t n_empty;   /* of n_free: on the free stack */
    /* prefix cache; all NULL when disabled */
    uint64_t *hash;      /* [n_pages]: hash a cached page is published under */
    int32_t *cache_tok;  /* [n_pages * page_size]: its tokens (checked on lookup) */
    uint64_t *parent;    /* [n_pages]: its parent's hash (checked on lookup) */
    uint8_t *cached;     /* [n_pages]: 1 = published in the index */
    int32_t *lru_prev;   /* [n_pages + 1]: unreferenced cached pages; n_pages is the head */
    int32_t *lru_next;   /* [n_pages + 1]: head's next is the least recently used */
    int32_t n_lru;       /* pages in the LRU list */
    int32_t *index;      /* [index_cap]: page + 1 by hash (linear probing), 0 = empty */
    uint32_t index_mask; /* index_cap - 1 */
    uint64_t evictions;  /* cached pages reused for other KV */
} ul_kv_pool_t;

/* prefix_cache: 1 to keep computed full pages for reuse. */
int ul_kv_pool_init(ul_kv_pool_t *p, int32_t n_pages, int32_t page_size, int prefix_cache);
void ul_kv_pool_free(ul_kv_pool_t *p);
/* Pages needed to hold n tokens. */
static inline int32_t ul_kv_pages_for(const ul_kv_pool_t *p, int64_t n) {
    return (int32_t)((n + p->page_size - 1) / p->page_size);
}
/* Takes n free pages into out, one reference each; all or nothing. Returns 0 or UL_EFULL.
 * Empty pages go first, then cached ones, least recently used first (evicted). */
int ul_kv_page_alloc(ul_kv_pool_t *p, int32_t n, int32_t *out);
/* One more reference on each of n pages already held (a page is never revived once free). */
void ul_kv_page_ref(ul_kv_pool_t *p, const int32_t *pages, int32_t n);
/* Drops one reference on each; a page whose last reference goes is free again (cached pages
 * keep their KV until evicted). Releasing a free page is a bug (asserted). */
void ul_kv_page_release(ul_kv_pool_t *p, const int32_t *pages, int32_t n);

/* Prefix cache. The hash of a page's content: parent is the previous page's hash (0 for
 * the first page of a sequence), toks its page_size token ids. */
uint64_t ul_kv_prefix_hash(uint64_t parent, const int32_t *toks, int32_t n);
static inline int ul_kv_prefix_enabled(const ul_kv_pool_t *p) { return p->index != 0; }
/* The cached page with hash h, parent and tokens toks, or -1. Takes a reference on it
 * (reviving it from the LRU list when unreferenced). */
int32_t ul_kv_prefix_take(ul_kv_pool_t *p, uint64_t h, uint64_t parent, const int32_t *toks);
/* Publishes held page pg (full, KV computed for toks) under h. No-op when the cache is off,
 * pg is already published, or another page has this content. */
void ul_kv_prefix_publish(ul_kv_pool_t *p, int32_t pg, uint64_t h, uint64_t parent,
                          const int32_t *toks);

#endif
