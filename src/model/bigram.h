/* The merge queue shared by the SPM and BPE tokenizers: symbols of a word in a linked list
 * and a binary min-heap of candidate merges of adjacent symbols. Lowest key first, ties
 * to the leftmost pair (llama.cpp's comparators: SPM keys are -score, BPE keys the merge
 * rank, both exact in a double). */
#ifndef UL_MODEL_BIGRAM_H
#define UL_MODEL_BIGRAM_H

#include <stdint.h>
#include <stdlib.h>

#include "base/grow.h"
#include "model/vocab_impl.h"
#include "uvllm/err.h"

typedef struct ul_sym_s {
    uint32_t off, n;    /* bytes of the symbol in the word */
    int32_t prev, next; /* neighbours, -1 at the ends */
    uint64_t h;         /* hash of its bytes */
} ul_sym_t;

typedef struct ul_bigram_s {
    double key;
    int32_t left, right; /* symbol indices */
    uint32_t size;       /* bytes of the merged pair, to detect stale entries */
} ul_bigram_t;

typedef struct ul_bigram_heap_s {
    ul_bigram_t *v;
    size_t n, cap;
} ul_bigram_heap_t;

/* The entry of m for the text of adjacent symbols l and r joined (text: the word the
 * symbols' offsets count from), its hash made of theirs; -1 when there is none or l or r is
 * -1 (a word's end). aux_split: pass l's length as ul_tokmap_get's aux (the BPE merge
 * table tells merges apart by where they split). *n: the joined length. */
static inline int32_t ul_bigram_lookup(const ul_tokmap_t *m, const ul_sym_t *sym, const char *text,
                                       int32_t l, int32_t r, int aux_split, uint32_t *n) {
    if (l < 0 || r < 0) return -1;
    const ul_sym_t *a = &sym[l], *b = &sym[r];
    *n = a->n + b->n;
    return ul_tokmap_get(m, ul_hash_cat(a->h, b->h, b->n), text + a->off, *n, aux_split ? a->n : 0);
}

static inline int ul_bigram_before(const ul_bigram_t *a, const ul_bigram_t *b) {
    return a->key < b->key || (a->key == b->key && a->left < b->left);
}

static inline int ul_bigram_push(ul_bigram_heap_t *h, ul_bigram_t b) {
    ul_bigram_t *p = ul_grow(h->v, &h->cap, h->n + 1, sizeof *p, 64);
    if (!p) return UL_ENOMEM;
    h->v = p;
    size_t i = h->n++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!ul_bigram_before(&b, &h->v[up])) break;
        h->v[i] = h->v[up];
        i = up;
    }
    h->v[i] = b;
    return 0;
}

/* h must not be empty. */
static inline ul_bigram_t ul_bigram_pop(ul_bigram_heap_t *h) {
    ul_bigram_t top = h->v[0], last = h->v[--h->n];
    size_t i = 0, n = h->n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && ul_bigram_before(&h->v[c + 1], &h->v[c])) c++;
        if (!ul_bigram_before(&h->v[c], &last)) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (n) h->v[i] = last;
    return top;
}

/* Pushes the candidate merge of symbols l and r (either -1: none), or nothing when the
 * vocabulary has no such merge; 0 or UL_ENOMEM. */
typedef int (*ul_bigram_try_fn)(void *ctx, int32_t l, int32_t r);

/* The merge loop of both tokenizers: seeds the heap with every adjacent pair of the n
 * symbols, then merges the best pair until no candidate is left (an entry whose symbols
 * changed since it was pushed is stale and skipped). The symbols' list, from sym[0] along
 * next, then holds the word's pieces. 0 or UL_ENOMEM. */
static inline int ul_bigram_merge(ul_bigram_heap_t *h, ul_sym_t *sym, int32_t n,
                                  ul_bigram_try_fn try_add, void *ctx) {
    int rc = 0;
    h->n = 0;
    for (int32_t i = 1; i < n && !rc; i++) rc = try_add(ctx, i - 1, i);
    while (h->n && !rc) {
        ul_bigram_t b = ul_bigram_pop(h);
        ul_sym_t *l = &sym[b.left], *r = &sym[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue; /* stale */
        l->h = ul_hash_cat(l->h, r->h, r->n);
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = b.left;
        rc = try_add(ctx, l->prev, b.left);
        if (!rc) rc = try_add(ctx, b.left, l->next);
    }
    return rc;
}

#endif
