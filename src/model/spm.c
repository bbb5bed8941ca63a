/* SentencePiece-style tokenizer (llama.cpp's llm_tokenizer_spm): the text is cut into
 * UTF-8 characters, then the adjacent pair whose concatenation is the token with the
 * highest score is merged, again and again (ties: leftmost first), through a priority
 * queue of candidate pairs. A final piece that is no token falls back to byte tokens
 * <0xXX>. Symbols are spans of the (contiguous) text, so a pair's text is never copied:
 * its hash comes from the two symbol hashes. */
#include <stdlib.h>
#include <string.h>

#include "model/bigram.h"
#include "model/vocab_impl.h"
#include "uvllm/err.h"

typedef ul_sym_t sym_t;

typedef struct spm_s {
    const ul_vocab_t *v;
    const char *text;
    sym_t *sym;
    ul_bigram_heap_t heap;
    ul_wcache_t cache;
} spm_t;

/* Priority: higher score first, then the leftmost pair (llama.cpp's comparator). */
static int try_add(void *ctx, int32_t l, int32_t r) {
    spm_t *s = ctx;
    uint32_t n;
    int32_t id = ul_bigram_lookup(&s->v->map, s->sym, s->text, l, r, 0, &n);
    if (id < 0) return 0;
    return ul_bigram_push(&s->heap, (ul_bigram_t){-(double)s->v->scores[id], l, r, n});
}

/* Length of the UTF-8 sequence a lead byte announces (llama.cpp's unicode_len_utf8:
 * continuation and invalid bytes count as one). */
static inline uint32_t utf8_len(unsigned char c) {
    static const uint8_t lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lookup[c >> 4];
}

static int emit(const spm_t *s, const sym_t *y, ul_ids_t *out) {
    const ul_vocab_t *v = s->v;
    int32_t id = ul_tokmap_get(&v->map, y->h, s->text + y->off, y->n, 0);
    if (id >= 0) return ul_ids_push(out, id);
    for (uint32_t j = 0; j < y->n; j++) {
        int32_t b = v->byte_tok[(unsigned char)s->text[y->off + j]];
        if (b < 0) b = v->unk; /* llama.cpp throws here; the unknown token is the sane answer */
        if (b >= 0 && ul_ids_push(out, b)) return UL_ENOMEM;
    }
    return 0;
}

/* Merges one piece of text (symbols indexed from 0, offsets relative to s->text). */
static int run(spm_t *s, size_t start, size_t len, ul_ids_t *out) {
    const char *text = s->text;
    int32_t n = 0;
    for (size_t off = start; off < start + len; n++) {
        uint32_t cl = utf8_len((unsigned char)text[off]);
        if (cl > start + len - off) cl = (uint32_t)(start + len - off);
        s->sym[n] = (sym_t){(uint32_t)off, cl, n - 1, off + cl == start + len ? -1 : n + 1,
                            ul_hash_bytes(text + off, cl)};
        off += cl;
    }
    int rc = ul_bigram_merge(&s->heap, s->sym, n, try_add, s);
    for (int32_t i = 0; i != -1 && !rc; i = s->sym[i].next) rc = emit(s, &s->sym[i], out);
    return rc;
}

/* End of the piece starting at start: the next U+2581 that follows another character,
 * walking characters exactly as run() cuts them. */
static size_t piece_end(const char *t, size_t start, size_t len) {
    int prev_sp = 1;
    for (size_t i = start; i < len;) {
        size_t cl = utf8_len((unsigned char)t[i]);
        if (cl > len - i) cl = len - i;
        int sp = cl == 3 && !memcmp(t + i, "\xe2\x96\x81", 3);
        if (sp && !prev_sp && i > start) return i;
        prev_sp = sp;
        i += cl;
    }
    return len;
}

int ul_spm_tokenize(const ul_vocab_t *v, const char *text, size_t len, ul_ids_t *out) {
    if (len == 0) return 0;
    size_t max_piece = len;
    spm_t s = {.v = v, .text = text};
    if (!v->spm_inner_space) {
        max_piece = 0;
        for (size_t a = 0, b; a < len; a = b) {
            b = piece_end(text, a, len);
            if (b - a > max_piece) max_piece = b - a;
        }
    }
    s.sym = malloc(sizeof(sym_t) * max_piece);
    if (!s.sym) return UL_ENOMEM;
    int rc = 0;
    if (v->spm_inner_space) {
        rc = run(&s, 0, len, out);
    } else {
        if (len >= UL_WCACHE_MIN_TEXT) rc = ul_wcache_init(&s.cache);
        for (size_t a = 0, b; a < len && !rc; a = b) {
            b = piece_end(text, a, len);
            rc = ul_wcache_get(&s.cache, text + a, b - a, out);
            if (rc) {
                rc = rc < 0 ? rc : 0;
                continue;
            }
            size_t before = out->n;
            rc = run(&s, a, b - a, out);
            if (!rc)
                rc = ul_wcache_put(&s.cache, text + a, b - a, out->p + before, out->n - before);
        }
        ul_wcache_free(&s.cache);
    }
    free(s.sym);
    free(s.heap.v);
    return rc;
}
