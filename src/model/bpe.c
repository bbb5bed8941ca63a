/* Byte-level BPE (llama.cpp's llm_tokenizer_bpe): the pre-tokenizer cuts the text into
 * words; in each word, starting from single bytes, the adjacent pair with the lowest merge
 * rank is merged (ties: leftmost) until no pair has a rank; each final symbol is a token,
 * or falls back to one-byte tokens. llama.cpp does this on the GPT-2 unicode encoding of
 * the bytes; here token texts and merges were decoded to raw bytes at load time, so words
 * are merged as they are, with the same result and no encoding step. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/bigram.h"
#include "model/vocab_impl.h"
#include "uvllm/err.h"

/* Decodes a token text from the byte alphabet into d; returns its length or -1. */
static int decode_text(const char *s, size_t n, char *d, const int16_t *cpt_byte) {
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        uint32_t cp;
        if (c < 0x80) {
            cp = c, i += 1;
        } else if ((c & 0xE0) == 0xC0 && i + 1 < n && ((unsigned char)s[i + 1] & 0xC0) == 0x80) {
            cp = ((uint32_t)(c & 0x1F) << 6) | ((unsigned char)s[i + 1] & 0x3F), i += 2;
        } else {
            return -1; /* every character of the alphabet is below U+0800 */
        }
        if (cp >= 512 || cpt_byte[cp] < 0) return -1;
        d[o++] = (char)cpt_byte[cp];
    }
    return (int)o;
}

static int load_tokens(ul_vocab_t *v, const int16_t *cpt_byte) {
    v->dtext = malloc(v->off[v->n_tokens] + 1);
    v->doff = malloc(sizeof *v->doff * ((size_t)v->n_tokens + 1));
    if (!v->dtext || !v->doff) return UL_ENOMEM;
    int rc = ul_tokmap_init(&v->dmap, (uint32_t)v->n_tokens, v->dtext, v->doff, NULL);
    if (rc) return rc;
    uint32_t o = 0;
    for (int32_t i = 0; i < v->n_tokens; i++) {
        uint32_t n;
        const char *t = ul_tok_text(v, i, &n);
        v->doff[i] = o;
        int d = decode_text(t, n, v->dtext + o, cpt_byte);
        if (d <= 0) continue;
        v->doff[i + 1] = o + (uint32_t)d; /* put reads the key's end from doff[i + 1] */
        ul_tokmap_put(&v->dmap, i, ul_hash_bytes(v->dtext + o, (size_t)d), 1);
        o += (uint32_t)d;
    }
    v->doff[v->n_tokens] = o;
    return 0;
}

static int load_merges(ul_vocab_t *v, const ul_gguf_t *g, const int16_t *cpt_byte, char *err,
                       size_t errlen) {
    const ul_gguf_kv_t *kv = ul_gguf_find(g, "tokenizer.ggml.merges");
    ul_gguf_iter_t it;
    ul_str_t s;
    if (!kv || kv->type != UL_GGUF_ARRAY || ul_gguf_arr_iter(kv, &it)) {
        if (errlen) snprintf(err, errlen, "tokenizer.ggml.merges: missing or not a string array");
        return UL_EFORMAT;
    }
    if (kv->n > UL_VOCAB_MAX_MERGES) {
        if (errlen)
            snprintf(err, errlen, "tokenizer.ggml.merges: too many (%llu)",
                     (unsigned long long)kv->n);
        return UL_EFORMAT;
    }
    size_t total = 0;
    while (ul_gguf_iter_next_str(&it, &s)) total += s.len;
    if (total > UINT32_MAX / 2) return UL_EFORMAT;
    v->mtext = malloc(total + 1);
    v->moff = malloc(sizeof *v->moff * (kv->n + 1));
    v->msplit = malloc(sizeof *v->msplit * (kv->n + 1));
    if (!v->mtext || !v->moff || !v->msplit) return UL_ENOMEM;
    int rc = ul_tokmap_init(&v->mmap, (uint32_t)kv->n, v->mtext, v->moff, v->msplit);
    if (rc) return rc;
    ul_gguf_arr_iter(kv, &it);
    uint32_t o = 0, k = 0;
    while (ul_gguf_iter_next_str(&it, &s)) {
        /* "left right", split at the first space after the first byte; rank = position */
        const char *sp = s.len > 1 ? memchr(s.ptr + 1, ' ', s.len - 1) : NULL;
        if (!sp) continue;
        size_t ln = (size_t)(sp - s.ptr), rn = s.len - ln - 1;
        int a = decode_text(s.ptr, ln, v->mtext + o, cpt_byte);
        int b = a > 0 ? decode_text(sp + 1, rn, v->mtext + o + a, cpt_byte) : -1;
        if (a <= 0 || b <= 0) continue; /* cannot match a symbol pair */
        v->moff[k] = o;
        v->moff[k + 1] = o + (uint32_t)(a + b);
        v->msplit[k] = (uint32_t)a;
        /* the kept merges are numbered in file order, so k orders them as rank does */
        ul_tokmap_put(&v->mmap, (int32_t)k, ul_hash_bytes(v->mtext + o, (size_t)(a + b)), 0);
        o += (uint32_t)(a + b);
        k++;
    }
    v->n_merges = k;
    return 0;
}

int ul_bpe_load(ul_vocab_t *v, const ul_gguf_t *g, char *err, size_t errlen) {
    int16_t cpt_byte[512];
    for (int i = 0; i < 512; i++) cpt_byte[i] = (int16_t)ul_bpe_cpt_to_byte((uint32_t)i);
    int rc = load_tokens(v, cpt_byte);
    if (!rc) rc = load_merges(v, g, cpt_byte, err, errlen);
    if (rc) return rc;
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        v->enc_byte[b] = ul_vocab_find(v, &c, 1);
    }
    return ul_pretok_new(v->pre_type, &v->pre, err, errlen);
}

typedef ul_sym_t sym_t;

typedef struct bpe_s {
    const ul_vocab_t *v;
    ul_ids_t *out;
    const char *w;
    sym_t *sym;
    size_t cap_sym;
    ul_bigram_heap_t heap;
    ul_wcache_t cache;
} bpe_t;

static int try_add(void *ctx, int32_t l, int32_t r) {
    bpe_t *s = ctx;
    uint32_t n;
    int32_t k = ul_bigram_lookup(&s->v->mmap, s->sym, s->w, l, r, 1, &n);
    if (k < 0) return 0;
    return ul_bigram_push(&s->heap, (ul_bigram_t){(double)k, l, r, n});
}

static int emit(bpe_t *s, const sym_t *y) {
    const ul_vocab_t *v = s->v;
    int32_t id = ul_tokmap_get(&v->dmap, y->h, s->w + y->off, y->n, 0);
    if (id >= 0) return ul_ids_push(s->out, id);
    /* llama.cpp looks up each byte of the encoded symbol as a one-byte token */
    for (uint32_t j = 0; j < y->n; j++) {
        uint32_t cp = ul_bpe_byte_to_cpt((uint8_t)s->w[y->off + j]);
        unsigned char e[2];
        int ne = 1;
        if (cp < 0x80) {
            e[0] = (unsigned char)cp;
        } else {
            e[0] = (unsigned char)(0xC0 | cp >> 6), e[1] = (unsigned char)(0x80 | (cp & 0x3F)),
            ne = 2;
        }
        for (int k = 0; k < ne; k++)
            if (v->enc_byte[e[k]] >= 0 && ul_ids_push(s->out, v->enc_byte[e[k]])) return UL_ENOMEM;
    }
    return 0;
}

static int merge_word(bpe_t *s, const char *w, size_t n) {
    const ul_vocab_t *v = s->v;
    if (n == 0) return 0;
    uint64_t hw = 0;
    if (v->ignore_merges || n == 1) {
        hw = ul_hash_bytes(w, n);
        int32_t id = ul_tokmap_get(&v->dmap, hw, w, n, 0);
        if (id >= 0) return ul_ids_push(s->out, id);
    }
    if (n > s->cap_sym) {
        sym_t *p = realloc(s->sym, n * sizeof *p);
        if (!p) return UL_ENOMEM;
        s->sym = p;
        s->cap_sym = n;
    }
    s->w = w;
    for (size_t i = 0; i < n; i++)
        s->sym[i] = (sym_t){(uint32_t)i, 1, (int32_t)i - 1, i + 1 == n ? -1 : (int32_t)i + 1,
                            (uint64_t)(unsigned char)w[i] + 1};
    int rc = ul_bigram_merge(&s->heap, s->sym, (int32_t)n, try_add, s);
    for (int32_t i = 0; i != -1 && !rc; i = s->sym[i].next) rc = emit(s, &s->sym[i]);
    return rc ? rc : s->out->err;
}

static int word(void *ctx, const char *w, size_t n) {
    bpe_t *s = ctx;
    int rc = ul_wcache_get(&s->cache, w, n, s->out);
    if (rc) return rc < 0 ? rc : 0;
    size_t before = s->out->n;
    rc = merge_word(s, w, n);
    return rc ? rc : ul_wcache_put(&s->cache, w, n, s->out->p + before, s->out->n - before);
}

int ul_bpe_tokenize(const ul_vocab_t *v, const char *text, size_t len, ul_ids_t *out) {
    char *clean = NULL;
    size_t clen = len;
    int rc = ul_pretok_clean(text, len, &clean, &clen);
    if (rc) return rc;
    bpe_t s = {.v = v, .out = out};
    if (clen >= UL_WCACHE_MIN_TEXT) rc = ul_wcache_init(&s.cache);
    if (!rc) rc = ul_pretok_split(v->pre, clean ? clean : text, clen, word, &s);
    free(s.sym);
    free(s.heap.v);
    ul_wcache_free(&s.cache);
    free(clean);
    return rc;
}
