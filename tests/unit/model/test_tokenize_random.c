/* Random inputs (ASCII, whitespace runs, multi-byte characters, digits, stray bytes):
 * every valid UTF-8 string must come back exactly from its ids (SPM: unless it contains
 * U+2581 itself, which reads as an escaped space), invalid ones must not break anything,
 * and the streaming detokenizer must never emit half a character. (With invalid bytes
 * SPM's character split, like llama.cpp's, can swallow the escaped space that follows a
 * stray lead byte into byte tokens, so those are not expected back exactly.) */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/vocab_impl.h"
#include "test_vocab_util.h"

static const char *k_atoms[] = {"a",
                                "Z",
                                "hello",
                                " ",
                                "  ",
                                "\t",
                                "\n",
                                "\r\n",
                                "0",
                                "123456",
                                "'s",
                                "'LL",
                                "!",
                                "...",
                                "\xc3\xa9",
                                "\xd0\xb4",
                                "\xe4\xb8\xad",
                                "\xf0\x9f\x98\x80",
                                "\xe2\x96\x81",
                                "\xc2\x85",
                                "\xe3\x80\x80",
                                "\xff",
                                "\xc3",
                                "\xe2\x82",
                                "\x80",
                                "<s>",
                                "<|endoftext|>"};
#define N_ATOMS (sizeof k_atoms / sizeof k_atoms[0])

static size_t random_text(unsigned *seed, char *buf, size_t cap) {
    size_t n = 0, parts = 1 + (size_t)(rand_r(seed) % 24);
    for (size_t i = 0; i < parts; i++) {
        const char *a = k_atoms[rand_r(seed) % N_ATOMS];
        size_t l = strlen(a);
        if (n + l >= cap) break;
        memcpy(buf + n, a, l);
        n += l;
    }
    return n;
}

static void check_vocab(const char *name, int spm) {
    char p[1200];
    snprintf(p, sizeof p, "%s/tokenizer/ggml-vocab-%s.gguf", tv_shared(), name);
    tv_vocab_t t;
    tv_load(&t, p);
    unsigned seed = 12345;
    char text[512];
    for (int iter = 0; iter < 2000; iter++) {
        size_t len = random_text(&seed, text, sizeof text);
        int n;
        int32_t *ids = tv_tokenize(t.v, text, len, 0, iter & 1, &n);
        /* SPM cannot tell a U+2581 in the text from an escaped space */
        int spm_escape = spm && memmem(text, len, "\xe2\x96\x81", 3);
        if (tv_utf8_ok(text, len) && !spm_escape) {
            size_t bl;
            char *back = tv_detok(t.v, ids, n, 1, &bl);
            /* parse_special may turn "<s>" into a control token, whose piece is empty */
            if (!(iter & 1))
                cr_expect(bl == len && !memcmp(back, text, len), "%s: '%.*s' came back as '%.*s'",
                          name, (int)len, text, (int)bl, back);
            free(back);
        }
        ul_detok_t d;
        ul_detok_init(&d);
        char chunk[256];
        for (int j = 0; j < n; j++) {
            int k = ul_detok_push(&d, t.v, ids[j], chunk, sizeof chunk);
            cr_assert(k >= 0);
            cr_expect(tv_utf8_ok(chunk, (size_t)k), "%s: chunk splits a character", name);
        }
        free(ids);
    }
    tv_free(&t);
}

Test(tokenize_random, spm_round_trips_utf8) { check_vocab("llama-spm", 1); }
Test(tokenize_random, bpe_round_trips_utf8) {
    check_vocab("gpt-2", 0);
    check_vocab("deepseek-coder", 0);
}

/* Writes piece i of s at u (room bytes left); returns its length. */
typedef size_t (*piece_fn)(const tv_set_t *s, size_t i, char *u, size_t room);
/* Appends the ids of text to out; 0 or an error code. */
typedef int (*tok_fn)(const ul_vocab_t *v, const char *text, size_t len, ul_ids_t *out);

/* Ten rounds of every piece of vocabulary name's set, cut so that the tokenizer never merges
 * across pieces: the ids of the whole text (over 8 KiB, so long enough for the cache) must be
 * the ids of the pieces tokenized one by one (too short for it). */
static void cache_changes_nothing(const char *name, size_t cap, piece_fn piece, tok_fn tok) {
    tv_vocab_t t;
    tv_set_t s;
    tv_open_set(tv_tokenizer_dir(), name, &t, &s);
    char *text = malloc(cap);
    size_t len = 0;
    ul_ids_t expect = {0}, whole = {0};
    for (int rep = 0; rep < 10; rep++) {
        for (size_t i = 0; i < s.n; i++) {
            size_t ul = piece(&s, i, text + len, cap - len);
            cr_assert_lt(ul, cap - len);
            cr_assert_eq(tok(t.v, text + len, ul, &expect), 0);
            len += ul;
        }
    }
    cr_assert_gt(len, 8192);
    cr_assert_eq(tok(t.v, text, len, &whole), 0);
    cr_expect_eq(whole.n, expect.n);
    cr_expect(whole.n == expect.n && !memcmp(whole.p, expect.p, whole.n * sizeof(int32_t)),
              "whole text and pieces disagree");
    free(whole.p);
    free(expect.p);
    free(text);
    tv_set_free(&s);
    tv_free(&t);
}

/* The public tokenize path, no special tokens. */
static int tok_public(const ul_vocab_t *v, const char *text, size_t len, ul_ids_t *out) {
    int n;
    int32_t *ids = tv_tokenize(v, text, len, 0, 0, &n);
    for (int i = 0; i < n; i++) cr_assert_eq(ul_ids_push(out, ids[i]), 0);
    free(ids);
    return 0;
}

/* "x" + string + ".\n": pieces the GPT-2 pre-tokenizer always separates. */
static size_t piece_gpt2(const tv_set_t *s, size_t i, char *u, size_t room) {
    return (size_t)snprintf(u, room, "x%s.\n", s->str[i]);
}

/* "\u2581x" + the string with spaces escaped + ".": SPM merges a piece that starts with
 * U+2581 after a non-U+2581 apart from what precedes it. */
static size_t piece_spm(const tv_set_t *s, size_t i, char *u, size_t room) {
    cr_assert_gt(room, 5 + 3 * s->len[i]);
    size_t ul = 0;
    memcpy(u, "\xe2\x96\x81x", 4), ul = 4;
    for (size_t k = 0; k < s->len[i]; k++) {
        if (s->str[i][k] == ' ')
            memcpy(u + ul, "\xe2\x96\x81", 3), ul += 3;
        else
            u[ul++] = s->str[i][k];
    }
    u[ul++] = '.';
    return ul;
}

/* Long texts go through the per-call word cache, short ones do not. */
Test(tokenize_random, bpe_word_cache_changes_nothing) {
    cache_changes_nothing("gpt-2", 1 << 20, piece_gpt2, tok_public);
}

/* The same for SPM, whose long texts cache their pieces. */
Test(tokenize_random, spm_piece_cache_changes_nothing) {
    cache_changes_nothing("llama-spm", 1 << 21, piece_spm, ul_spm_tokenize);
}
