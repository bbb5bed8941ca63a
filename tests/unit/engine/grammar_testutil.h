/* Helpers for the grammar engine's tests: a vocabulary from a list of strings, grammars
 * compiled or failed, sentences matched, and the mask checked against token-by-token
 * matching (the definition it must agree with). */
#ifndef UL_TEST_GRAMMAR_TESTUTIL_H
#define UL_TEST_GRAMMAR_TESTUTIL_H

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "engine/grammar.h"
#include "tvocab.h"

static inline ul_gvocab_t *tv_new(tvocab_t *t) {
    ul_gvocab_t *v = tv_vocab(t);
    cr_assert(v);
    return v;
}

static inline ul_grammar_t *gr(const ul_gvocab_t *v, const char *src) {
    ul_grammar_t *g = NULL;
    char err[256];
    int rc = ul_grammar_compile(v, src, strlen(src), &g, err, sizeof err);
    cr_assert_eq(rc, 0, "grammar failed: %s\n%s", err, src);
    return g;
}

/* 1 when the whole text is a sentence of g. */
static inline int sentence(const ul_grammar_t *g, const char *text) {
    ul_gmatch_t *m = ul_gmatch_new(g);
    cr_assert(m);
    int ok = ul_gmatch_feed(m, text, strlen(text)) == 0 && ul_gmatch_done(m);
    ul_gmatch_free(m);
    return ok;
}

/* 1 when the text is a prefix of some sentence. */
static inline int prefix(const ul_grammar_t *g, const char *text) {
    ul_gmatch_t *m = ul_gmatch_new(g);
    cr_assert(m);
    int ok = ul_gmatch_feed(m, text, strlen(text)) == 0;
    ul_gmatch_free(m);
    return ok;
}

/* The mask equals token-by-token allows() at m's state; returns the number allowed. */
static inline int check_mask(ul_gmatch_t *m, int32_t n_vocab) {
    uint32_t *bits = calloc(((size_t)n_vocab + 31) / 32 + 1, sizeof *bits);
    cr_assert(bits);
    ul_gmatch_fill_mask(m, bits);
    int allowed = 0;
    for (int32_t id = 0; id < n_vocab; id++) {
        int b = (int)(bits[id >> 5] >> (id & 31) & 1), a = ul_gmatch_allows(m, id);
        cr_assert_eq(b, a, "token %d: mask %d, allows %d", id, b, a);
        allowed += a;
    }
    free(bits);
    return allowed;
}

/* g's language: each of yes is a sentence, each of no is not, each of dead is not even a
 * prefix of one (NULL-terminated lists, NULL for none: YES, NO and DEAD write them). */
static inline void expect_lang(const ul_grammar_t *g, const char *const *yes, const char *const *no,
                               const char *const *dead) {
    for (; yes && *yes; yes++) cr_assert(sentence(g, *yes), "not a sentence: %s", *yes);
    for (; no && *no; no++) cr_assert(!sentence(g, *no), "a sentence: %s", *no);
    for (; dead && *dead; dead++) cr_assert(!prefix(g, *dead), "a prefix: %s", *dead);
}
#define YES(...) ((const char *const[]){__VA_ARGS__, NULL})
#define NO(...) ((const char *const[]){__VA_ARGS__, NULL})
#define DEAD(...) ((const char *const[]){__VA_ARGS__, NULL})

#endif
