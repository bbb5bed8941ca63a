/* Helpers of the tokenizer tests (see test_vocab_util.h). */
#include "test_vocab_util.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../test_data.h"

const char *tv_shared(void) { return ut_shared_dir(); }

const char *tv_tokenizer_dir(void) {
    static char dir[1100];
    snprintf(dir, sizeof dir, "%s/tokenizer", tv_shared());
    return dir;
}

void tv_load(tv_vocab_t *t, const char *path) {
    char err[256];
    int rc = ul_gguf_open(&t->g, path);
    if (rc) cr_assert_fail("%s: %s", path, t->g.err);
    rc = ul_vocab_load(&t->g, &t->v, err, sizeof err);
    if (rc) cr_assert_fail("%s: vocabulary: %s", path, err);
}

void tv_free(tv_vocab_t *t) {
    ul_vocab_free(t->v);
    ul_gguf_free(&t->g);
}

void tv_set_read(tv_set_t *s, const char *dir, const char *name) {
    char path[1200];
    static const char sep[] = "\n__ggml_vocab_test__\n";
    size_t n, on;
    memset(s, 0, sizeof *s);
    snprintf(path, sizeof path, "%s/ggml-vocab-%s.gguf.inp", dir, name);
    s->inp = ut_slurp(path, &n);
    snprintf(path, sizeof path, "%s/ggml-vocab-%s.gguf.out", dir, name);
    char *out = ut_slurp(path, &on);
    size_t cap = 64;
    s->str = malloc(cap * sizeof *s->str);
    s->len = malloc(cap * sizeof *s->len);
    for (char *p = s->inp, *m; (m = strstr(p, sep)); p = m + sizeof sep - 1) {
        if (s->n == cap) {
            cap *= 2;
            s->str = realloc(s->str, cap * sizeof *s->str);
            s->len = realloc(s->len, cap * sizeof *s->len);
        }
        *m = 0;
        s->str[s->n] = p;
        s->len[s->n++] = (size_t)(m - p);
    }
    s->ids = calloc(s->n, sizeof *s->ids);
    char *line = out;
    for (size_t i = 0; i < s->n; i++) {
        char *nl = strchr(line, '\n');
        if (!nl) cr_assert_fail("%s: %zu lines for %zu strings", path, i, s->n);
        *nl = 0;
        size_t k = 0, c = 16;
        s->ids[i] = malloc(c * sizeof(int32_t));
        for (char *q = line, *e; *q; q = e) {
            long v = strtol(q, &e, 10);
            if (e == q) break;
            if (k + 1 >= c) s->ids[i] = realloc(s->ids[i], (c *= 2) * sizeof(int32_t));
            s->ids[i][k++] = (int32_t)v;
        }
        s->ids[i][k] = -1;
        line = nl + 1;
    }
    free(out);
}

void tv_set_free(tv_set_t *s) {
    for (size_t i = 0; i < s->n; i++) free(s->ids[i]);
    free(s->ids);
    free(s->str);
    free(s->len);
    free(s->inp);
}

int32_t *tv_tokenize(const ul_vocab_t *v, const char *s, size_t len, int add_special,
                     int parse_special, int *n) {
    int cap = (int)len + 8;
    int32_t *ids = malloc(sizeof *ids * (size_t)cap);
    int r = ul_tokenize(v, s, len, add_special, parse_special, ids, cap);
    cr_assert(r >= 0, "ul_tokenize failed: %d", r);
    *n = r;
    return ids;
}

char *tv_detok(const ul_vocab_t *v, const int32_t *ids, int n, int strip, size_t *len) {
    size_t cap = 64, o = 0;
    char *b = malloc(cap);
    for (int i = 0; i < n; i++) {
        int k = ul_token_to_piece(v, ids[i], 0, b + o, (int)(cap - o));
        if (k < 0) {
            cap = (cap + (size_t)-k) * 2;
            b = realloc(b, cap);
            k = ul_token_to_piece(v, ids[i], 0, b + o, (int)(cap - o));
            cr_assert(k >= 0);
        }
        if (i == 0 && strip && ul_vocab_adds_space_prefix(v) && k > 0 && b[o] == ' ') {
            memmove(b + o, b + o + 1, (size_t)k - 1);
            k--;
        }
        o += (size_t)k;
    }
    *len = o;
    return b;
}

int tv_utf8_ok(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned c = p[i];
        size_t l = c < 0x80                   ? 1
                   : (c >= 0xC2 && c <= 0xDF) ? 2
                   : (c >= 0xE0 && c <= 0xEF) ? 3
                   : (c >= 0xF0 && c <= 0xF4) ? 4
                                              : 0;
        if (!l || i + l > n) return 0;
        for (size_t k = 1; k < l; k++)
            if ((p[i + k] & 0xC0) != 0x80) return 0;
        if ((c == 0xE0 && p[i + 1] < 0xA0) || (c == 0xED && p[i + 1] > 0x9F) ||
            (c == 0xF0 && p[i + 1] < 0x90) || (c == 0xF4 && p[i + 1] > 0x8F))
            return 0;
        i += l;
    }
    return 1;
}

void tv_open_set(const char *dir, const char *name, tv_vocab_t *t, tv_set_t *s) {
    char path[1400];
    snprintf(path, sizeof path, "%s/ggml-vocab-%s.gguf", dir, name);
    tv_load(t, path);
    tv_set_read(s, dir, name);
}
