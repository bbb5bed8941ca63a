/* ul_tokenize: splits the text around special tokens the way llama.cpp's
 * tokenizer_st_partition does (each special token in turn, longest text first, over every
 * remaining text fragment; control and unknown tokens only when parse_special, user-defined
 * ones always; optional strip of spaces around them), then runs SPM or BPE on each text
 * fragment (WordPiece: wpm.c) and adds BOS/EOS (WordPiece: [CLS]/[SEP]) as the vocabulary
 * asks. All scratch memory belongs to the
 * call, so concurrent calls on one vocabulary are safe. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
#include "model/vocab_impl.h"
#include "uvllm/err.h"

typedef struct frag_s {
    size_t off, len;
    int32_t id; /* -1: raw text */
} frag_t;

typedef struct frags_s {
    frag_t *p;
    size_t n, cap;
} frags_t;

static int frag_push(frags_t *f, size_t off, size_t len, int32_t id) {
    frag_t *p = ul_grow(f->p, &f->cap, f->n + 1, sizeof *p, 16);
    if (!p) return UL_ENOMEM;
    f->p = p;
    f->p[f->n++] = (frag_t){off, len, id};
    return 0;
}

static int c_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/* Splits one text fragment around every occurrence of token id into dst. plain: when not
 * NULL, a match that covers a byte marked plain (request text inside a chat template's
 * output) is not the token but text. */
static int split_frag(const ul_vocab_t *v, const char *text, frag_t fr, int32_t id,
                      const uint8_t *plain, frags_t *dst) {
    uint32_t tn;
    const char *tt = ul_tok_text(v, id, &tn);
    uint8_t a = v->attr[id];
    size_t off = fr.off, len = fr.len, from = fr.off;
    while (off + len - from >= tn) {
        const char *m = memmem(text + from, off + len - from, tt, tn);
        if (!m) break;
        size_t at = (size_t)(m - text), left = at - off;
        if (plain && memchr(plain + at, 1, tn)) {
            from = at + 1;
            continue;
        }
        if (a & UL_TA_LSTRIP)
            while (left > 0 && c_space(text[off + left - 1])) left--;
        if (left > 0 && frag_push(dst, off, left, -1)) return UL_ENOMEM;
        if (frag_push(dst, 0, 0, id)) return UL_ENOMEM;
        size_t roff = at + tn, rlen = off + len - roff;
        if (a & UL_TA_RSTRIP)
            while (rlen > 0 && c_space(text[roff])) roff++, rlen--;
        off = from = roff, len = rlen;
    }
    if (len > 0 && frag_push(dst, off, len, -1)) return UL_ENOMEM;
    return 0;
}

static int partition(const ul_vocab_t *v, const char *text, size_t len, int parse_special,
                     const uint8_t *plain, frags_t *f) {
    frags_t tmp = {0};
    int rc = 0;
    if (len > 0 && (rc = frag_push(f, 0, len, -1))) return rc;
    for (int32_t s = 0; s < v->n_special && f->n; s++) {
        int32_t id = v->special[s];
        int ctl = (v->attr[id] & (UL_TA_CONTROL | UL_TA_UNKNOWN)) != 0;
        if (!parse_special && ctl) continue;
        uint32_t tn;
        const char *tt = ul_tok_text(v, id, &tn);
        int hit = 0;
        for (size_t i = 0; i < f->n && !hit; i++)
            hit = f->p[i].id < 0 && f->p[i].len >= tn &&
                  memmem(text + f->p[i].off, f->p[i].len, tt, tn);
        if (!hit) continue;
        tmp.n = 0;
        for (size_t i = 0; i < f->n && !rc; i++)
            rc = f->p[i].id >= 0 ? frag_push(&tmp, 0, 0, f->p[i].id)
                                 : split_frag(v, text, f->p[i], id, ctl ? plain : NULL, &tmp);
        if (rc) break;
        frags_t sw = *f;
        *f = tmp;
        tmp = sw;
    }
    free(tmp.p);
    return rc;
}

/* SPM: ' ' -> U+2581 and the space prefix before text that starts the input or follows a
 * special token. buf is the caller's scratch, grown as needed. */
static int spm_frag(const ul_vocab_t *v, const char *text, frag_t fr, int prefix, char **buf,
                    size_t *cap, ul_ids_t *out) {
    size_t need = (fr.len + 1) * 3;
    if (need > *cap) {
        char *p = realloc(*buf, need);
        if (!p) return UL_ENOMEM;
        *buf = p;
        *cap = need;
    }
    char *d = *buf;
    size_t n = 0;
    if (prefix) d[n++] = '\xe2', d[n++] = '\x96', d[n++] = '\x81';
    for (size_t i = 0; i < fr.len; i++) {
        char c = text[fr.off + i];
        if (c == ' ')
            d[n++] = '\xe2', d[n++] = '\x96', d[n++] = '\x81';
        else
            d[n++] = c;
    }
    return ul_spm_tokenize(v, d, n, out);
}

static int run(const ul_vocab_t *v, const char *text, const frags_t *f, int add_special,
               ul_ids_t *out) {
    int rc = 0;
    const int wpm = v->type == UL_VOCAB_WPM; /* llama.cpp: [CLS] ... [SEP], whatever add_* say */
    if (add_special && (v->add_bos || wpm) && v->bos >= 0) ul_ids_push(out, v->bos);
    if (v->type == UL_VOCAB_SPM) {
        char *buf = NULL;
        size_t cap = 0;
        int prev_special = 1;
        for (size_t i = 0; i < f->n && !rc && !out->err; i++) {
            if (f->p[i].id >= 0) {
                ul_ids_push(out, f->p[i].id);
                prev_special = 1;
                continue;
            }
            rc = spm_frag(v, text, f->p[i], v->add_space_prefix && prev_special, &buf, &cap, out);
            prev_special = 0;
        }
        free(buf);
    } else {
        int (*tok)(const ul_vocab_t *, const char *, size_t, ul_ids_t *) =
            v->type == UL_VOCAB_WPM ? ul_wpm_tokenize : ul_bpe_tokenize;
        for (size_t i = 0; i < f->n && !rc && !out->err; i++)
            rc = f->p[i].id >= 0 ? ul_ids_push(out, f->p[i].id)
                                 : tok(v, text + f->p[i].off, f->p[i].len, out);
    }
    if (add_special && v->add_eos && !wpm && v->eos >= 0) ul_ids_push(out, v->eos);
    if (add_special && wpm && v->sep >= 0) ul_ids_push(out, v->sep);
    return rc ? rc : out->err;
}

int ul_tokenize(const ul_vocab_t *v, const char *text, size_t len, int add_special,
                int parse_special, int32_t *out, int cap) {
    return ul_tokenize_plain(v, text, len, NULL, add_special, parse_special, out, cap);
}

int ul_tokenize_plain(const ul_vocab_t *v, const char *text, size_t len, const uint8_t *plain,
                      int add_special, int parse_special, int32_t *out, int cap) {
    if (!v || (!text && len) || cap < 0) return UL_EINVAL;
    if (len > (size_t)INT_MAX / 4) return UL_E2BIG; /* ids must fit the int result */
    frags_t f = {0};
    ul_ids_t ids = {0};
    int rc = partition(v, text, len, parse_special, plain, &f);
    if (!rc) rc = run(v, text, &f, add_special, &ids);
    free(f.p);
    if (!rc && ids.n > (size_t)INT_MAX) rc = UL_E2BIG;
    if (rc) {
        free(ids.p);
        return rc;
    }
    int n = (int)ids.n;
    if (n <= cap) {
        if (n) memcpy(out, ids.p, sizeof *out * (size_t)n);
    } else {
        n = -n;
    }
    free(ids.p);
    return n;
}
