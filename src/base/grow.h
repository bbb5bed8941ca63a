/* Growing a heap array geometrically: the one realloc-and-double step that every
 * push-to-the-end array (token ids, pre-tokenizer pieces, heap entries, grammar edges)
 * needs, so none of them writes its own. */
#ifndef UL_BASE_GROW_H
#define UL_BASE_GROW_H

#include <stddef.h>

/* Returns an array of at least need elements of size bytes holding p's first *cap
 * elements: p itself when need <= *cap, else p reallocated to a capacity that doubles
 * from *cap (from min when *cap is 0) until it holds need, with *cap updated. NULL when
 * the memory is not there or the size overflows; then p is still valid and *cap as it
 * was. Call it with need >= 1 (a NULL return then always means failure):
 *     T *v = ul_grow(a->v, &a->cap, a->n + 1, sizeof *v, 64);
 *     if (!v) return UL_ENOMEM;
 *     a->v = v; */
void *ul_grow_to(void *p, size_t *cap, size_t need, size_t size, size_t min);
/* Inline so that a push with room left (token ids, heap entries) costs a compare. */
static inline void *ul_grow(void *p, size_t *cap, size_t need, size_t size, size_t min) {
    return need <= *cap ? p : ul_grow_to(p, cap, need, size, min);
}

#endif
