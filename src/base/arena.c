/* Bump allocator in chained blocks; a request's scratch lives here and dies with it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"

struct ul_arena_block_s {
    ul_arena_block_t *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
};

void ul_arena_init(ul_arena_t *a, size_t block_size) {
    a->head = NULL;
    a->block_size = block_size ? block_size : 4096;
    a->used = 0;
}

void *ul_arena_alloc(ul_arena_t *a, size_t n) {
    size_t need = (n + 15) & ~(size_t)15;
    if (need < n) return NULL; /* overflow */
    ul_arena_block_t *b = a->head;
    if (!b || b->size - b->used < need) {
        size_t size = need > a->block_size ? need : a->block_size;
        if (size > SIZE_MAX - sizeof *b) return NULL;
        b = malloc(sizeof *b + size);
        if (!b) return NULL;
        b->size = size;
        b->used = 0;
        b->next = a->head;
        a->head = b;
    }
    void *p = b->data + b->used;
    b->used += need;
    a->used += need;
    return p;
}

char *ul_arena_strndup(ul_arena_t *a, const char *s, size_t n) {
    char *p = ul_arena_alloc(a, n + 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

void *ul_arena_grow(ul_arena_t *a, const void *old, size_t used, size_t n) {
    void *p = ul_arena_alloc(a, n);
    if (p && used) memcpy(p, old, used);
    return p;
}

void ul_arena_reset(ul_arena_t *a) {
    ul_arena_block_t *b = a->head;
    if (!b) return;
    while (b->next) {
        ul_arena_block_t *next = b->next;
        b->next = next->next;
        free(next);
    }
    b->used = 0;
    a->used = 0;
}

void ul_arena_free(ul_arena_t *a) {
    while (a->head) {
        ul_arena_block_t *next = a->head->next;
        free(a->head);
        a->head = next;
    }
    a->used = 0;
}
