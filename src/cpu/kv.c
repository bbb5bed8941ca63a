/* Allocation of the paged KV pool (layout in kv.h). One aligned allocation, touched once
 * so that the pages are resident before the first request measures latency. */
#include "cpu/kv.h"

#include <stdlib.h>
#include <string.h>

#include "model/gguf.h"
#include "uvllm/err.h"

size_t ul_kv_page_bytes(int32_t type, int32_t n_layer, int32_t n_head_kv, int32_t head_dim,
                        int32_t page_size) {
    size_t es = type == UL_TYPE_F32 ? 4 : 2;
    return (size_t)n_layer * 2 * (size_t)n_head_kv * (size_t)page_size * (size_t)head_dim * es;
}

int ul_kv_init(ul_kv_t *kv, int32_t type, int32_t n_layer, int32_t n_head_kv, int32_t head_dim,
               int32_t page_size, int64_t budget, int32_t min_pages) {
    memset(kv, 0, sizeof *kv);
    if (type != UL_TYPE_F16 && type != UL_TYPE_F32) return UL_EINVAL;
    if (n_layer <= 0 || n_head_kv <= 0 || head_dim <= 0 || page_size <= 0) return UL_EINVAL;
    kv->type = type;
    kv->esize = type == UL_TYPE_F32 ? 4 : 2;
    kv->n_layer = n_layer;
    kv->n_head_kv = n_head_kv;
    kv->head_dim = head_dim;
    kv->page_size = page_size;
    kv->head_bytes = (size_t)page_size * (size_t)head_dim * (size_t)kv->esize;
    kv->page_bytes = ul_kv_page_bytes(type, n_layer, n_head_kv, head_dim, page_size);
    int64_t n = budget > 0 ? budget / (int64_t)kv->page_bytes : 0;
    if (n < min_pages) n = min_pages;
    if (n <= 0 || n > INT32_MAX) return UL_EINVAL;
    size_t bytes = (size_t)n * kv->page_bytes;
    if (bytes / kv->page_bytes != (size_t)n) return UL_ENOMEM;
    size_t rounded = (bytes + 63) & ~(size_t)63;
    kv->data = aligned_alloc(64, rounded);
    if (!kv->data) return UL_ENOMEM;
    /* zero so that a read of a never-written slot (a scheduler bug) is finite, not NaN */
    memset(kv->data, 0, rounded);
    kv->n_pages = (int32_t)n;
    return 0;
}

void ul_kv_free(ul_kv_t *kv) {
    free(kv->data);
    kv->data = NULL;
}
