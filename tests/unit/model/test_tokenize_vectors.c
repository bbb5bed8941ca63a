/* Every vector set in ../shared/tokenizer with a vocabulary file: the ids must equal
 * llama.cpp's (no BOS/EOS, special tokens not parsed), the ids must decode back to the
 * string, and the streaming detokenizer fed one id at a time must give the same bytes
 * without ever emitting part of a UTF-8 sequence. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "test_files.h"
#include "test_vocab_util.h"

/* The check each_set runs. */
typedef void (*set_fn)(const char *dir, const char *name);

/* Calls fn(dir, NAME) for a ggml-vocab-NAME.gguf that has its .out next to it (counted). */
static int one_set(const char *path, const char *file, void *fn) {
    size_t l = strlen(file);
    if (l < 16 || strncmp(file, "ggml-vocab-", 11)) return 0;
    char name[256], p[8300];
    snprintf(name, sizeof name, "%.*s", (int)(l - 16), file + 11);
    struct stat st;
    snprintf(p, sizeof p, "%s.out", path);
    if (stat(p, &st)) return 0;
    (*(set_fn *)fn)(tv_tokenizer_dir(), name);
    return 1;
}

/* Calls fn for every ggml-vocab-NAME.gguf that has .inp and .out next to it. */
static int each_set(set_fn fn) { return tf_each(tv_tokenizer_dir(), ".gguf", one_set, &fn); }

static void check_ids(const char *dir, const char *name) {
    tv_vocab_t t;
    tv_set_t s;
    tv_open_set(dir, name, &t, &s);
    cr_assert(s.n > 0, "%s: no test strings", name);
    for (size_t i = 0; i < s.n; i++) {
        int n;
        int32_t *ids = tv_tokenize(t.v, s.str[i], s.len[i], 0, 0, &n);
        int k = 0;
        while (s.ids[i][k] >= 0) k++;
        int same = n == k;
        for (int j = 0; same && j < n; j++) same = ids[j] == s.ids[i][j];
        cr_expect(same, "%s: string %zu '%.40s': %d ids, expected %d (first %d vs %d)", name, i,
                  s.str[i], n, k, n ? ids[0] : -1, k ? s.ids[i][0] : -1);
        free(ids);
    }
    tv_set_free(&s);
    tv_free(&t);
}

Test(tokenize_vectors, ids_match_llama_cpp) {
    cr_assert(each_set(check_ids) > 0, "no vocabulary with test vectors in %s/tokenizer",
              tv_shared());
}

static void check_roundtrip(const char *dir, const char *name) {
    tv_vocab_t t;
    tv_set_t s;
    tv_open_set(dir, name, &t, &s);
    int32_t unk = ul_vocab_find(t.v, "<unk>", 5);
    for (size_t i = 0; i < s.n; i++) {
        int n;
        int32_t *ids = tv_tokenize(t.v, s.str[i], s.len[i], 0, 0, &n);
        int representable = 1;
        for (int j = 0; j < n; j++) representable &= ids[j] != unk;
        size_t len;
        char *back = tv_detok(t.v, ids, n, 1, &len);
        if (representable)
            cr_expect(len == s.len[i] && !memcmp(back, s.str[i], len),
                      "%s: string %zu '%.40s' decodes to '%.*s'", name, i, s.str[i], (int)len,
                      back);
        free(back);

        /* streaming, without the strip: must equal the plain concatenation */
        char *whole = tv_detok(t.v, ids, n, 0, &len);
        ul_detok_t d;
        ul_detok_init(&d);
        char *acc = malloc(len * 3 + 16), chunk[1024];
        size_t got = 0;
        for (int j = 0; j < n; j++) {
            int k = ul_detok_push(&d, t.v, ids[j], chunk, sizeof chunk);
            cr_assert(k >= 0);
            cr_expect(tv_utf8_ok(chunk, (size_t)k), "%s: string %zu: chunk %d splits a character",
                      name, i, j);
            memcpy(acc + got, chunk, (size_t)k);
            got += (size_t)k;
        }
        int k = ul_detok_flush(&d, chunk, sizeof chunk);
        memcpy(acc + got, chunk, (size_t)k);
        got += (size_t)k;
        if (tv_utf8_ok(whole, len))
            cr_expect(got == len && !memcmp(acc, whole, len),
                      "%s: string %zu: streamed bytes differ", name, i);
        free(acc);
        free(whole);
        free(ids);
    }
    tv_set_free(&s);
    tv_free(&t);
}

Test(tokenize_vectors, decode_and_stream_round_trip) { cr_assert(each_set(check_roundtrip) > 0); }
