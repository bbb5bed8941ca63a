/* KV page allocator: a stack of free page indices, so alloc and free are O(pages) with
 * no search, and recently freed (cache-warm) pages are reused first; a reference count per
 * page lets sequences share pages. The prefix cache adds a hash index (open addressing,
 * linear probing, deletion by backward shift: no tombstones to pile up under churn) and an
 * intrusive LRU list of cached pages no sequence holds. */
#include <stdlib.h>
#include <string.h>

#include "base/free_all.h"
#include "sched/kvpool.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

static void cache_free(ul_kv_pool_t *p) {
    UL_FREE_ALL(p->hash, p->cache_tok, p->parent, p->cached, p->lru_prev, p->lru_next, p->index);
    p->hash = p->parent = NULL;
    p->cache_tok = p->lru_prev = p->lru_next = p->index = NULL;
    p->cached = NULL;
}

static int cache_init(ul_kv_pool_t *p) {
    size_t n = (size_t)p->n_pages, cap = 16;
    while (cap < 2 * n) cap <<= 1;
    p->hash = calloc(n, sizeof *p->hash);
    p->parent = calloc(n, sizeof *p->parent);
    p->cache_tok = malloc(n * (size_t)p->page_size * sizeof *p->cache_tok);
    p->cached = calloc(n, 1);
    p->lru_prev = malloc((n + 1) * sizeof *p->lru_prev);
    p->lru_next = malloc((n + 1) * sizeof *p->lru_next);
    p->index = calloc(cap, sizeof *p->index);
    if (!p->hash || !p->parent || !p->cache_tok || !p->cached || !p->lru_prev || !p->lru_next ||
        !p->index) {
        cache_free(p);
        return UL_ENOMEM;
    }
    p->index_mask = (uint32_t)(cap - 1);
    p->lru_prev[n] = p->lru_next[n] = (int32_t)n;
    return 0;
}

int ul_kv_pool_init(ul_kv_pool_t *p, int32_t n_pages, int32_t page_size, int prefix_cache) {
    memset(p, 0, sizeof *p);
    if (n_pages < 1 || page_size < 1) return UL_EINVAL;
    p->n_pages = n_pages;
    p->page_size = page_size;
    p->free_pages = malloc((size_t)n_pages * sizeof *p->free_pages);
    p->refs = calloc((size_t)n_pages, sizeof *p->refs);
    if (!p->free_pages || !p->refs || (prefix_cache && cache_init(p))) {
        ul_kv_pool_free(p);
        return UL_ENOMEM;
    }
    /* Highest index at the bottom so page 0 is handed out first (easier to read in logs). */
    for (int32_t i = 0; i < n_pages; i++) p->free_pages[i] = n_pages - 1 - i;
    p->n_free = p->n_empty = n_pages;
    return 0;
}

void ul_kv_pool_free(ul_kv_pool_t *p) {
    free(p->free_pages);
    free(p->refs);
    cache_free(p);
    p->free_pages = p->refs = NULL;
    p->n_free = p->n_pages = p->n_empty = p->n_lru = 0;
}

/* ---- the LRU list and the index ------------------------------------------------------ */

static void lru_remove(ul_kv_pool_t *p, int32_t pg) {
    p->lru_next[p->lru_prev[pg]] = p->lru_next[pg];
    p->lru_prev[p->lru_next[pg]] = p->lru_prev[pg];
    p->n_lru--;
}

static void lru_push_recent(ul_kv_pool_t *p, int32_t pg) {
    int32_t head = p->n_pages, last = p->lru_prev[head];
    p->lru_prev[pg] = last;
    p->lru_next[pg] = head;
    p->lru_next[last] = pg;
    p->lru_prev[head] = pg;
    p->n_lru++;
}

static uint32_t slot_of(const ul_kv_pool_t *p, uint64_t h) {
    return (uint32_t)(h ^ (h >> 32)) & p->index_mask;
}

/* The index slot holding pg, or of the first empty slot on h's probe path. */
static uint32_t index_find(const ul_kv_pool_t *p, uint64_t h, int32_t pg) {
    uint32_t i = slot_of(p, h);
    while (p->index[i] && (pg >= 0 ? p->index[i] - 1 != pg : p->hash[p->index[i] - 1] != h))
        i = (i + 1) & p->index_mask;
    return i;
}

static void index_remove(ul_kv_pool_t *p, int32_t pg) {
    uint32_t i = index_find(p, p->hash[pg], pg);
    UL_ASSERT(p->index[i] == pg + 1);
    p->index[i] = 0;
    /* backward shift: move later entries of the cluster that may sit in the hole */
    for (uint32_t j = (i + 1) & p->index_mask; p->index[j]; j = (j + 1) & p->index_mask) {
        uint32_t home = slot_of(p, p->hash[p->index[j] - 1]);
        if (((j - home) & p->index_mask) >= ((j - i) & p->index_mask)) {
            p->index[i] = p->index[j];
            p->index[j] = 0;
            i = j;
        }
    }
    p->cached[pg] = 0;
}

/* ---- pages --------------------------------------------------------------------------- */

int ul_kv_page_alloc(ul_kv_pool_t *p, int32_t n, int32_t *out) {
    if (n < 0 || n > p->n_free) return UL_EFULL;
    for (int32_t i = 0; i < n; i++) {
        int32_t pg;
        if (p->n_empty > 0) {
            pg = p->free_pages[--p->n_empty];
        } else {
            pg = p->lru_next[p->n_pages];
            UL_ASSERT(pg != p->n_pages);
            lru_remove(p, pg);
            index_remove(p, pg);
            p->evictions++;
        }
        UL_ASSERT(p->refs[pg] == 0);
        p->refs[pg] = 1;
        p->n_free--;
        out[i] = pg;
    }
    return 0;
}

void ul_kv_page_ref(ul_kv_pool_t *p, const int32_t *pages, int32_t n) {
    for (int32_t i = 0; i < n; i++) {
        UL_ASSERT(pages[i] >= 0 && pages[i] < p->n_pages && p->refs[pages[i]] > 0);
        p->refs[pages[i]]++;
    }
}

void ul_kv_page_release(ul_kv_pool_t *p, const int32_t *pages, int32_t n) {
    for (int32_t i = 0; i < n; i++) {
        int32_t pg = pages[i];
        UL_ASSERT(pg >= 0 && pg < p->n_pages && p->refs[pg] > 0);
        if (--p->refs[pg] > 0) continue;
        UL_ASSERT(p->n_free < p->n_pages);
        p->n_free++;
        if (p->cached && p->cached[pg])
            lru_push_recent(p, pg);
        else
            p->free_pages[p->n_empty++] = pg;
    }
}

/* ---- prefix cache -------------------------------------------------------------------- */

uint64_t ul_kv_prefix_hash(uint64_t parent, const int32_t *toks, int32_t n) {
    /* FNV-1a over the parent hash and the ids, then a final mix; 0 is kept for "none" */
    uint64_t h = 0xcbf29ce484222325ULL ^ parent;
    for (int32_t i = 0; i < n; i++) {
        h ^= (uint32_t)toks[i];
        h *= 0x100000001b3ULL;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h ? h : 1;
}

int32_t ul_kv_prefix_take(ul_kv_pool_t *p, uint64_t h, uint64_t parent, const int32_t *toks) {
    if (!p->index) return -1;
    uint32_t i = index_find(p, h, -1);
    if (!p->index[i]) return -1;
    int32_t pg = p->index[i] - 1;
    /* the hash is 64 bits; the content check makes a collision a miss, never wrong KV */
    if (p->parent[pg] != parent ||
        memcmp(p->cache_tok + (size_t)pg * p->page_size, toks, (size_t)p->page_size * 4))
        return -1;
    if (p->refs[pg] == 0) {
        lru_remove(p, pg);
        p->n_free--;
    }
    p->refs[pg]++;
    return pg;
}

void ul_kv_prefix_publish(ul_kv_pool_t *p, int32_t pg, uint64_t h, uint64_t parent,
                          const int32_t *toks) {
    if (!p->index || p->cached[pg]) return;
    UL_ASSERT(p->refs[pg] > 0);
    uint32_t i = index_find(p, h, -1);
    if (p->index[i]) return; /* same content in another page: keep the first */
    p->index[i] = pg + 1;
    p->hash[pg] = h;
    p->parent[pg] = parent;
    memcpy(p->cache_tok + (size_t)pg * p->page_size, toks, (size_t)p->page_size * 4);
    p->cached[pg] = 1;
}
