/* Allocation of the paged KV pool (layout in kv.h). One anonymous mapping: the kernel hands
 * out zeroed memory as pages are first written, so a pool sized from --kv-mem (by default a
 * quarter of the available memory) costs resident memory only for the KV actually used,
 * and a read of a never-written slot (a scheduler bug) is a finite zero, not NaN. Touching
 * it all at start-up made a 512 MiB default pool cost ~0.5 s and 512 MiB of RSS before the
 * first request. */
#include "cpu/kv.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

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
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED) return UL_ENOMEM;
    kv->data = p;
    kv->bytes = bytes;
    kv->n_pages = (int32_t)n;
    return 0;
}

void ul_kv_free(ul_kv_t *kv) {
    if (kv->data) munmap(kv->data, kv->bytes);
    kv->data = NULL;
}
