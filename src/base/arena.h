/* Bump allocator for a request's temporary data: many allocations, one free.
 * Blocks are chained; nothing is returned until ul_arena_free / ul_arena_reset. */
#ifndef UL_BASE_ARENA_H
#define UL_BASE_ARENA_H

#include <stddef.h>

typedef struct ul_arena_block_s ul_arena_block_t;
typedef struct ul_arena_s {
    ul_arena_block_t *head;
    size_t block_size; /* default size of a new block */
    size_t used;       /* bytes handed out, for limits and metrics */
} ul_arena_t;

void ul_arena_init(ul_arena_t *a, size_t block_size);
/* 16-byte aligned; NULL when malloc fails (sized by user input: caller answers UL_ENOMEM). */
void *ul_arena_alloc(ul_arena_t *a, size_t n);
char *ul_arena_strndup(ul_arena_t *a, const char *s, size_t n);
/* A new block of n bytes starting with the first used bytes of old (an array outgrowing its
 * arena block; the old one stays until the arena is reset). NULL when malloc fails. */
void *ul_arena_grow(ul_arena_t *a, const void *old, size_t used, size_t n);
/* Frees all blocks but the first, which is kept for reuse. */
void ul_arena_reset(ul_arena_t *a);
void ul_arena_free(ul_arena_t *a);

#endif
