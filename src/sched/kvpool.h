/* KV page allocator: the scheduler's view of the backend's KV pool. Pages are plain
 * indices 0..n_pages-1 handed out from a free stack; the backend owns the storage, the
 * scheduler owns which sequences hold which page. A page may be held by several sequences
 * (the choices of one request share their prompt's full pages): each holder has a
 * reference, and the page is free again when the last one is released. Loop thread only. */
#ifndef UL_SCHED_KVPOOL_H
#define UL_SCHED_KVPOOL_H

#include <stdint.h>

typedef struct ul_kv_pool_s {
    int32_t *free_pages; /* [n_pages] stack; the top n_free entries are free */
    int32_t *refs;       /* [n_pages]: holders of each page, 0 = free */
    int32_t n_free;      /* pages no sequence holds */
    int32_t n_pages;
    int32_t page_size; /* tokens per page */
} ul_kv_pool_t;

int ul_kv_pool_init(ul_kv_pool_t *p, int32_t n_pages, int32_t page_size);
void ul_kv_pool_free(ul_kv_pool_t *p);
/* Pages needed to hold n tokens. */
static inline int32_t ul_kv_pages_for(const ul_kv_pool_t *p, int64_t n) {
    return (int32_t)((n + p->page_size - 1) / p->page_size);
}
/* Takes n free pages into out, one reference each; all or nothing. Returns 0 or UL_EFULL. */
int ul_kv_page_alloc(ul_kv_pool_t *p, int32_t n, int32_t *out);
/* One more reference on each of n pages already held (a page is never revived once free). */
void ul_kv_page_ref(ul_kv_pool_t *p, const int32_t *pages, int32_t n);
/* Drops one reference on each; a page whose last reference goes is free again. Releasing
 * a free page is a bug (asserted). */
void ul_kv_page_release(ul_kv_pool_t *p, const int32_t *pages, int32_t n);

#endif
