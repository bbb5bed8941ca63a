/* A grammar vocabulary (ul_gvocab_t) from a list of strings, for the tests and fuzzers that
 * need one: token i is toks[i], eog the token that ends generation (-1: none). No criterion,
 * so a fuzzer can include it too. */
#ifndef UL_TEST_TVOCAB_H
#define UL_TEST_TVOCAB_H

#include <stdint.h>
#include <string.h>

#include "engine/grammar.h"

typedef struct {
    const char *const *toks;
    int n;
    int eog; /* id that ends generation, or -1 */
} tvocab_t;

static inline int tv_piece(void *ctx, int32_t id, char *out, int cap) {
    const tvocab_t *t = ctx;
    int n = (int)strlen(t->toks[id]);
    if (n > cap) return -n;
    memcpy(out, t->toks[id], (size_t)n);
    return n;
}

static inline int tv_eog(void *ctx, int32_t id) { return id == ((const tvocab_t *)ctx)->eog; }

/* The vocabulary of t (which must outlive it); NULL on ENOMEM. */
static inline ul_gvocab_t *tv_vocab(tvocab_t *t) {
    return ul_gvocab_new(t->n, t, tv_piece, tv_eog);
}

#endif
