/* Internals of the tokenizers, shared by vocab.c (loading, special tokens, dispatch),
 * tokmap.c (hash maps), spm.c, bpe.c, pretok.c (regex pre-tokenizers) and detok.c.
 * Not a public header: only src/model includes it (and the model unit tests).
 *
 * Every text lookup goes through one polynomial hash (h = h * P + byte, mod 2^64) because
 * it composes: h(a + b) = h(a) * P^len(b) + h(b). The merge loops keep each symbol's hash
 * and get the hash of a candidate pair in O(1), without copying or rehashing text. */
#ifndef UL_MODEL_VOCAB_IMPL_H
#define UL_MODEL_VOCAB_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "model/vocab.h"

enum { UL_VOCAB_SPM = 1, UL_VOCAB_BPE = 2, UL_VOCAB_WPM = 3 };

/* Far above any real vocabulary; keeps every count and hash table size in 32 bits. */
#define UL_VOCAB_MAX_TOKENS (1 << 24)
#define UL_VOCAB_MAX_MERGES (1 << 25)

/* Token attributes (llama.cpp's llama_token_attr, reduced to what tokenizing needs). */
enum {
    UL_TA_NORMAL = 1 << 0,
    UL_TA_UNKNOWN = 1 << 1,
    UL_TA_UNUSED = 1 << 2,
    UL_TA_CONTROL = 1 << 3,
    UL_TA_USER = 1 << 4,
    UL_TA_BYTE = 1 << 5,
    UL_TA_LSTRIP = 1 << 6,
    UL_TA_RSTRIP = 1 << 7,
};

#define UL_HASH_P 0x100000001b3ULL /* odd multiplier of the polynomial hash */

static inline uint64_t ul_hash_bytes(const void *p, size_t n) {
    const unsigned char *s = (const unsigned char *)p;
    uint64_t h = 0;
    for (size_t i = 0; i < n; i++) h = h * UL_HASH_P + s[i] + 1;
    return h;
}
/* P^n mod 2^64 (small n from a table, larger by squaring). */
uint64_t ul_hash_pow(size_t n);
/* h(a + b) from h(a), h(b) and len(b). */
static inline uint64_t ul_hash_cat(uint64_t ha, uint64_t hb, size_t nb) {
    return ha * ul_hash_pow(nb) + hb;
}

/* Open-addressing map from a byte string to an index. Keys live in the caller's blob:
 * key i is blob[off[i] .. off[i+1]). When aux is set, a key also carries aux[i] (the
 * split point of a merge pair) and lookups must match it too. */
typedef struct ul_tokmap_s {
    uint32_t mask;
    int32_t *slot;  /* [mask+1], -1 empty */
    uint64_t *hash; /* [mask+1] full hash of the slot's key */
    const char *blob;
    const uint32_t *off;
    const uint32_t *aux;
} ul_tokmap_t;

int ul_tokmap_init(ul_tokmap_t *m, uint32_t n_keys, const char *blob, const uint32_t *off,
                   const uint32_t *aux);
void ul_tokmap_free(ul_tokmap_t *m);
/* replace: 1 = a later key with equal text wins (token texts), 0 = the first stays (merges). */
void ul_tokmap_put(ul_tokmap_t *m, int32_t idx, uint64_t h, int replace);
int32_t ul_tokmap_get(const ul_tokmap_t *m, uint64_t h, const char *p, size_t n, uint32_t aux);

/* Growable id array used by the tokenizers; *err latches UL_ENOMEM. */
typedef struct ul_ids_s {
    int32_t *p;
    size_t n, cap;
    int err;
} ul_ids_t;
int ul_ids_push(ul_ids_t *o, int32_t id);

/* Per-call cache of the ids of short words (BPE words, SPM pieces): natural text repeats
 * its words and a word's ids depend on its bytes alone. Keys point into the caller's text,
 * which must outlive the cache. Used only for long texts (UL_WCACHE_MIN_TEXT). */
#define UL_WCACHE_MIN_TEXT 4096
#define UL_WCACHE_MAX_WORD 64
typedef struct ul_wslot_s ul_wslot_t;
typedef struct ul_wcache_s {
    ul_wslot_t *slot; /* NULL: disabled */
    size_t n;
    ul_ids_t ids;
} ul_wcache_t;
int ul_wcache_init(ul_wcache_t *c);
void ul_wcache_free(ul_wcache_t *c);
/* 1 with the ids appended to out, 0 if absent (or disabled), UL_ENOMEM. */
int ul_wcache_get(const ul_wcache_t *c, const char *w, size_t n, ul_ids_t *out);
/* Remembers w -> ids (a no-op when disabled, full or w is too long). */
int ul_wcache_put(ul_wcache_t *c, const char *w, size_t n, const int32_t *ids, size_t cnt);

typedef struct ul_pretok_s ul_pretok_t; /* compiled regex list, pretok.c */

struct ul_vocab_s {
    int type; /* UL_VOCAB_SPM / UL_VOCAB_BPE / UL_VOCAB_WPM */
    int32_t n_tokens;
    char *text;      /* all token texts, concatenated */
    uint32_t *off;   /* [n_tokens + 1] into text */
    float *scores;   /* [n_tokens] */
    uint8_t *attr;   /* [n_tokens] UL_TA_* */
    uint8_t *eog;    /* [n_tokens] 1 if the token ends generation */
    ul_tokmap_t map; /* token text -> id */

    /* Byte-level BPE works on raw bytes: token texts and merges are decoded from the
     * GPT-2 byte-to-unicode alphabet once here, so words are never encoded. A token whose
     * text is not in that alphabet cannot come out of the merge loop and is left out. */
    char *dtext;
    uint32_t *doff;   /* [n_tokens + 1]; decodable tokens only are in dmap */
    ul_tokmap_t dmap; /* decoded bytes -> id */
    char *mtext;      /* merges: decoded (left + right), concatenated */
    uint32_t *moff;   /* [n_merges + 1] */
    uint32_t *msplit; /* [n_merges] length of the left part */
    ul_tokmap_t mmap; /* (left, right) -> rank */
    uint32_t n_merges;
    /* Fallback for a symbol that is not a token: llama.cpp looks up each byte of the
     * encoded symbol as a one-byte token text. enc_byte[b] = that token or -1. */
    int32_t enc_byte[256];
    ul_pretok_t *pre;
    int pre_type;
    int ignore_merges; /* llama3: a word that is a token is taken whole */

    /* SPM byte fallback: <0xXX> tokens (or the raw one-char token), -1 if absent. */
    int32_t byte_tok[256];
    /* SPM: 1 if some token has U+2581 right after another character. When none has, no
     * merge can join the text before a U+2581 (that follows a non-U+2581) with it, so
     * such positions split the text into pieces merged independently, with the same
     * result and a small priority queue. */
    int spm_inner_space;

    int32_t bos, eos, eot, eom, unk, pad, sep;
    int add_bos, add_eos, add_space_prefix;
    int add_sep; /* tokenizer.ggml.add_sep_token (WPM default 1): ul_vocab_join_pair only */
    /* WordPiece (wpm.c): [CLS] text [SEP] with add_special (bos is [CLS], sep [SEP]);
     * tokenizer.ggml.normalizer.lowercase / strip_accents (default: as lowercase) */
    int wpm_lowercase, wpm_strip_accents;
    int32_t max_tok_len; /* bytes of the longest token text */

    int32_t *special; /* control/user-defined/unknown ids, longest text first */
    int32_t n_special;

    char *piece;    /* token_to_piece(id, special=1) for every id, concatenated */
    uint32_t *poff; /* [n_tokens + 1] */
};

static inline const char *ul_tok_text(const ul_vocab_t *v, int32_t id, uint32_t *len) {
    *len = v->off[id + 1] - v->off[id];
    return v->text + v->off[id];
}

/* SPM (llama.cpp llm_tokenizer_spm): text already escaped (' ' -> U+2581, prefix added). */
int ul_spm_tokenize(const ul_vocab_t *v, const char *text, size_t len, ul_ids_t *out);

/* WordPiece of one raw text fragment (wpm.c). */
int ul_wpm_tokenize(const ul_vocab_t *v, const char *text, size_t len, ul_ids_t *out);

/* Byte-level BPE of one raw text fragment: pre-tokenize then merge each word. */
int ul_bpe_tokenize(const ul_vocab_t *v, const char *text, size_t len, ul_ids_t *out);

/* Pre-tokenizers: name -> type (flags filled as llama.cpp sets them). */
int ul_pretok_lookup(const char *name, size_t len, int *type, int *ignore_merges, int *add_bos,
                     int *no_bos);
int ul_pretok_new(int type, ul_pretok_t **out, char *err, size_t errlen);
void ul_pretok_free(ul_pretok_t *p);
/* Splits text into words; calls word(ctx, start, len) for each, in order. The text must
 * be what ul_pretok_clean produced. Returns 0 or UL_ENOMEM. */
typedef int (*ul_word_cb)(void *ctx, const char *w, size_t n);
int ul_pretok_split(const ul_pretok_t *p, const char *text, size_t len, ul_word_cb cb, void *ctx);
/* llama.cpp decodes the text leniently and re-encodes it: invalid bytes become U+FFFD and
 * over-long forms are normalised. Returns a malloc'ed copy in *out, or NULL in *out when
 * the text is already in that form (the common case). */
int ul_pretok_clean(const char *text, size_t len, char **out, size_t *out_len);

/* GPT-2 byte <-> unicode alphabet. */
uint32_t ul_bpe_byte_to_cpt(uint8_t b);
int ul_bpe_cpt_to_byte(uint32_t cpt); /* -1 if not in the alphabet */

/* detok.c: builds v->piece / v->poff after everything else is loaded. */
int ul_vocab_build_pieces(ul_vocab_t *v);

#endif
