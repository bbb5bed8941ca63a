/* Paged KV storage of the CPU backend: one allocation of n_pages fixed-size pages made at
 * start-up. A page holds page_size consecutive positions of one sequence for every layer:
 *
 *   page = [n_layer][2 (K, V)][n_head_kv][page_size x head_dim]   elements of type (f16|f32)
 *
 * Head-major inside a page so that attention for one KV head reads one contiguous block.
 * V is [page_size][head_dim] (a row per position); K is transposed, [head_dim][page_size],
 * so that one vector load gives one dimension of consecutive keys (forward_attn.c). The scheduler
 * owns which page belongs to which sequence; this module only maps (page, layer, K/V, head, slot)
 * to an address. */
#ifndef UL_CPU_KV_H
#define UL_CPU_KV_H

#include <stddef.h>
#include <stdint.h>

typedef struct ul_kv_s {
    uint8_t *data; /* [n_pages][page_bytes], an anonymous mapping */
    size_t bytes;  /* of the mapping */
    int32_t type;  /* UL_TYPE_F16 or UL_TYPE_F32 */
    int32_t esize; /* bytes per element */
    int32_t n_layer, n_head_kv, head_dim, page_size;
    int32_t n_pages;
    size_t page_bytes;
    size_t head_bytes; /* page_size * head_dim * esize: one head's rows in one page */
} ul_kv_t;

/* Sizes the pool to floor(budget / page_bytes) pages (at least min_pages) and allocates it.
 * Returns 0, UL_EINVAL (bad type/shape) or UL_ENOMEM. */
int ul_kv_init(ul_kv_t *kv, int32_t type, int32_t n_layer, int32_t n_head_kv, int32_t head_dim,
               int32_t page_size, int64_t budget, int32_t min_pages);
void ul_kv_free(ul_kv_t *kv);
/* Bytes one page takes for this shape (for sizing a budget before ul_kv_init). */
size_t ul_kv_page_bytes(int32_t type, int32_t n_layer, int32_t n_head_kv, int32_t head_dim,
                        int32_t page_size);

/* Block of head h of K (kv=0) or V (kv=1) in page, layer il. */
static inline void *ul_kv_head(const ul_kv_t *kv, int32_t page, int32_t il, int kvi, int32_t h) {
    return kv->data + (size_t)page * kv->page_bytes +
           ((size_t)(il * 2 + kvi) * (size_t)kv->n_head_kv + (size_t)h) * kv->head_bytes;
}

#endif
