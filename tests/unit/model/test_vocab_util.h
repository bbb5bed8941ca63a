/* Helpers of the tokenizer tests: the shared-data folder, vocabulary loading, the
 * llama.cpp test-vector files (NAME.gguf.inp / .out) and small UTF-8 checks. */
#ifndef UL_TEST_VOCAB_UTIL_H
#define UL_TEST_VOCAB_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "model/gguf.h"
#include "model/vocab.h"

/* $UVLLM_SHARED, else $UVLLM_SOURCE_DIR/../shared; fails the test naming the path. */
const char *tv_shared(void);
/* tv_shared()/tokenizer: llama.cpp's test-vector vocabularies (NAME.gguf, .inp, .out). */
const char *tv_tokenizer_dir(void);

typedef struct tv_vocab_s {
    ul_gguf_t g;
    ul_vocab_t *v;
} tv_vocab_t;
/* Opens path and loads its vocabulary; fails the test with the reason on error. */
void tv_load(tv_vocab_t *t, const char *path);
void tv_free(tv_vocab_t *t);

/* One vector set: strings from .inp and expected ids from .out. */
typedef struct tv_set_s {
    char *inp;     /* whole .inp file, strings NUL-terminated in place */
    char **str;    /* [n] */
    size_t *len;   /* [n] */
    int32_t **ids; /* [n], each ended by -1 */
    size_t n;
} tv_set_t;
/* Reads ggml-vocab-NAME.gguf.inp/.out from dir; fails the test if missing. */
void tv_set_read(tv_set_t *s, const char *dir, const char *name);
/* dir's ggml-vocab-NAME.gguf into t and its test strings into s. */
void tv_open_set(const char *dir, const char *name, tv_vocab_t *t, tv_set_t *s);
void tv_set_free(tv_set_t *s);

/* Tokenizes into a malloc'ed array (*n ids); fails the test on error. */
int32_t *tv_tokenize(const ul_vocab_t *v, const char *s, size_t len, int add_special,
                     int parse_special, int *n);
/* Whole decode: concatenated pieces (special=0), first piece's leading space removed when
 * strip and the vocabulary adds a space prefix. malloc'ed, *len bytes. */
char *tv_detok(const ul_vocab_t *v, const int32_t *ids, int n, int strip, size_t *len);
/* 1 if s[0..n) is well-formed UTF-8. */
int tv_utf8_ok(const char *s, size_t n);

#endif
