/* KV page allocator: a stack of free page indices, so alloc and free are O(pages) with
 * no search, and recently freed (cache-warm) pages are reused first; a reference count per
 * page lets sequences share pages. */
#include <stdlib.h>

#include "sched/kvpool.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

int ul_kv_pool_init(ul_kv_pool_t *p, int32_t n_pages, int32_t page_size) {
    if (n_pages < 1 || page_size < 1) return UL_EINVAL;
    p->free_pages = malloc((size_t)n_pages * sizeof *p->free_pages);
    p->refs = calloc((size_t)n_pages, sizeof *p->refs);
    if (!p->free_pages || !p->refs) {
        free(p->free_pages);
        free(p->refs);
        p->free_pages = p->refs = NULL;
        return UL_ENOMEM;
    }
    /* Highest index at the bottom so page 0 is handed out first (easier to read in logs). */
    for (int32_t i = 0; i < n_pages; i++) p->free_pages[i] = n_pages - 1 - i;
    p->n_free = n_pages;
    p->n_pages = n_pages;
    p->page_size = page_size;
    return 0;
}

void ul_kv_pool_free(ul_kv_pool_t *p) {
    free(p->free_pages);
    free(p->refs);
    p->free_pages = p->refs = NULL;
    p->n_free = p->n_pages = 0;
}

int ul_kv_page_alloc(ul_kv_pool_t *p, int32_t n, int32_t *out) {
    if (n < 0 || n > p->n_free) return UL_EFULL;
    for (int32_t i = 0; i < n; i++) {
        int32_t pg = p->free_pages[--p->n_free];
        UL_ASSERT(p->refs[pg] == 0);
        p->refs[pg] = 1;
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
        UL_ASSERT(pages[i] >= 0 && pages[i] < p->n_pages && p->refs[pages[i]] > 0);
        if (--p->refs[pages[i]] > 0) continue;
        UL_ASSERT(p->n_free < p->n_pages);
        p->free_pages[p->n_free++] = pages[i];
    }
}
