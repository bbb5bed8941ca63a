/* Vocabulary loading from GGUF metadata (tokenizer.ggml.*), with llama.cpp's defaults and
 * quirks, so that tokenizing gives its ids exactly: default special ids per tokenizer
 * model, control tokens recognised by their text (<|eot_id|>, <|im_end|>, ...) and forced
 * to control type, the end-of-generation set, the special-token list sorted longest first,
 * per-model strip attributes (phi-3). Everything is validated: a vocabulary comes from a
 * file, so a bad count, type or id is an error with a reason, never an assert. */
#include <ctype.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/free_all.h"
#include "base/grow.h"
#include "model/vocab_impl.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

typedef struct ld_s {
    const ul_gguf_t *g;
    ul_vocab_t *v;
    char *err;
    size_t errlen;
} ld_t;

static int fail(ld_t *l, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(ld_t *l, int rc, const char *fmt, ...) {
    if (l->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(l->err, l->errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

int ul_ids_push(ul_ids_t *o, int32_t id) {
    int32_t *p = ul_grow(o->p, &o->cap, o->n + 1, sizeof *p, 256);
    if (!p) return o->err = UL_ENOMEM;
    o->p = p;
    o->p[o->n++] = id;
    return 0;
}

static int str_is(ul_str_t s, const char *lit) {
    size_t n = strlen(lit);
    return s.len == n && memcmp(s.ptr, lit, n) == 0;
}

/* Token texts into one blob; empty texts become "[EMPTY_i]" as in llama.cpp. */
static int read_texts(ld_t *l, const ul_gguf_kv_t *kv) {
    ul_vocab_t *v = l->v;
    ul_gguf_iter_t it;
    ul_str_t s;
    if (ul_gguf_arr_iter(kv, &it))
        return fail(l, UL_EFORMAT, "tokenizer.ggml.tokens: not a string array");
    size_t total = 0;
    while (ul_gguf_iter_next_str(&it, &s)) total += s.len ? s.len : 24;
    if (total > UINT32_MAX - 1) return fail(l, UL_EFORMAT, "tokenizer.ggml.tokens: texts too long");
    v->text = malloc(total + 1);
    v->off = malloc(sizeof *v->off * ((size_t)v->n_tokens + 1));
    if (!v->text || !v->off) return UL_ENOMEM;
    ul_gguf_arr_iter(kv, &it);
    uint32_t o = 0;
    for (int32_t i = 0; ul_gguf_iter_next_str(&it, &s); i++) {
        v->off[i] = o;
        if (s.len) {
            memcpy(v->text + o, s.ptr, s.len);
            o += (uint32_t)s.len;
        } else {
            UL_LOG_WARN("vocab: empty token at index %d", i);
            o += (uint32_t)snprintf(v->text + o, 24, "[EMPTY_%d]", i);
        }
    }
    v->off[v->n_tokens] = o;
    return 0;
}

static int attr_of_type(int64_t t) {
    switch (t) {
    case 1:
        return UL_TA_NORMAL;
    case 2:
        return UL_TA_UNKNOWN;
    case 3:
        return UL_TA_CONTROL;
    case 4:
        return UL_TA_USER;
    case 5:
        return UL_TA_UNUSED;
    case 6:
        return UL_TA_BYTE;
    default:
        return 0; /* undefined: never produced as a piece */
    }
}

static int read_tokens(ld_t *l) {
    ul_vocab_t *v = l->v;
    const ul_gguf_kv_t *kv = ul_gguf_find(l->g, "tokenizer.ggml.tokens");
    if (!kv || kv->type != UL_GGUF_ARRAY || kv->arr_type != UL_GGUF_STRING)
        return fail(l, UL_EFORMAT, "tokenizer.ggml.tokens: missing or not a string array");
    if (kv->n == 0 || kv->n > UL_VOCAB_MAX_TOKENS)
        return fail(l, UL_EFORMAT, "tokenizer.ggml.tokens: bad count %llu",
                    (unsigned long long)kv->n);
    v->n_tokens = (int32_t)kv->n;
    int rc = read_texts(l, kv);
    if (rc) return rc;
    v->scores = calloc((size_t)v->n_tokens, sizeof *v->scores);
    v->attr = malloc((size_t)v->n_tokens);
    v->eog = calloc((size_t)v->n_tokens, 1);
    if (!v->scores || !v->attr || !v->eog) return UL_ENOMEM;
    memset(v->attr, UL_TA_NORMAL, (size_t)v->n_tokens);

    const ul_gguf_kv_t *sc = ul_gguf_find(l->g, "tokenizer.ggml.scores");
    if (sc) {
        if (sc->type != UL_GGUF_ARRAY || sc->n != kv->n)
            return fail(l, UL_EFORMAT, "tokenizer.ggml.scores: not an array of %d numbers",
                        v->n_tokens);
        for (int32_t i = 0; i < v->n_tokens; i++)
            if (ul_gguf_arr_f32(sc, (uint64_t)i, &v->scores[i]))
                return fail(l, UL_EFORMAT, "tokenizer.ggml.scores: element %d is not a number", i);
    }
    const ul_gguf_kv_t *tt = ul_gguf_find(l->g, "tokenizer.ggml.token_type");
    if (tt) {
        if (tt->type != UL_GGUF_ARRAY || tt->n != kv->n)
            return fail(l, UL_EFORMAT, "tokenizer.ggml.token_type: not an array of %d integers",
                        v->n_tokens);
        for (int32_t i = 0; i < v->n_tokens; i++) {
            int64_t t;
            if (ul_gguf_arr_i64(tt, (uint64_t)i, &t))
                return fail(l, UL_EFORMAT,
                            "tokenizer.ggml.token_type: element %d is not an integer", i);
            v->attr[i] = (uint8_t)attr_of_type(t);
        }
    }
    if ((rc = ul_tokmap_init(&v->map, (uint32_t)v->n_tokens, v->text, v->off, NULL))) return rc;
    for (int32_t i = 0; i < v->n_tokens; i++) {
        uint32_t n;
        const char *p = ul_tok_text(v, i, &n);
        ul_tokmap_put(&v->map, i, ul_hash_bytes(p, n), 1);
    }
    return 0;
}

int32_t ul_vocab_find(const ul_vocab_t *v, const char *text, size_t len) {
    return ul_tokmap_get(&v->map, ul_hash_bytes(text, len), text, len, 0);
}

static int32_t find_lit(const ul_vocab_t *v, const char *lit) {
    return ul_vocab_find(v, lit, strlen(lit));
}

/* Reads an optional boolean; absent keeps *out. */
static int opt_bool(ld_t *l, const char *key, int *out) {
    int b, rc = ul_gguf_get_bool(l->g, key, &b);
    if (rc == UL_ENOENT) return 0;
    if (rc) return fail(l, UL_EFORMAT, "%s: not a boolean", key);
    *out = b;
    return 0;
}

/* An optional special id; like llama.cpp an out-of-range id keeps the default. */
static int opt_id(ld_t *l, const char *key, int32_t *out) {
    int64_t id;
    int rc = ul_gguf_get_i64(l->g, key, &id);
    if (rc == UL_ENOENT) return 0;
    if (rc) return fail(l, UL_EFORMAT, "%s: not an integer", key);
    if (id == -1 || id == UINT32_MAX) return 0; /* conventional "none" */
    if (id < 0 || id >= l->v->n_tokens) {
        UL_LOG_WARN("vocab: bad special token %s = %lld, using default id %d", key, (long long)id,
                    *out);
        return 0;
    }
    *out = (int32_t)id;
    return 0;
}

static int read_model(ld_t *l, int *no_bos) {
    ul_vocab_t *v = l->v;
    ul_str_t model, pre = {0};
    if (ul_gguf_get_str(l->g, "tokenizer.ggml.model", &model))
        return fail(l, UL_EFORMAT, "tokenizer.ggml.model: missing or not a string");
    if (str_is(model, "llama")) {
        v->type = UL_VOCAB_SPM;
        v->bos = 1, v->eos = 2, v->unk = 0;
        v->add_space_prefix = 1, v->add_bos = 1;
        return 0;
    }
    if (str_is(model, "bert")) { /* llama.cpp's WPM defaults */
        v->type = UL_VOCAB_WPM;
        v->bos = 101, v->unk = 100, v->sep = 102, v->pad = 0;
        v->add_bos = 1, v->add_sep = 1;
        return 0;
    }
    if (!str_is(model, "gpt2"))
        return fail(l, UL_ENOTSUP,
                    "tokenizer.ggml.model '%.*s' is not supported (llama, gpt2, bert)",
                    (int)(model.len > 64 ? 64 : model.len), model.ptr);
    v->type = UL_VOCAB_BPE;
    v->bos = 11, v->eos = 11;
    int rc = ul_gguf_get_str(l->g, "tokenizer.ggml.pre", &pre);
    if (rc && rc != UL_ENOENT) return fail(l, UL_EFORMAT, "tokenizer.ggml.pre: not a string");
    if (rc == UL_ENOENT) {
        UL_LOG_WARN("vocab: missing pre-tokenizer type, using 'default' (quality will suffer)");
        pre.ptr = "default", pre.len = 7;
    }
    if (ul_pretok_lookup(pre.ptr, (size_t)pre.len, &v->pre_type, &v->ignore_merges, &v->add_bos,
                         no_bos))
        return fail(l, UL_ENOTSUP, "unknown pre-tokenizer type: '%.*s'",
                    (int)(pre.len > 64 ? 64 : pre.len), pre.ptr);
    return 0;
}

static int read_specials(ld_t *l, int32_t fim[6]) {
    ul_vocab_t *v = l->v;
    static const char *fim_keys[6] = {
        "tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.fim_suf_token_id",
        "tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.fim_pad_token_id",
        "tokenizer.ggml.fim_rep_token_id", "tokenizer.ggml.fim_sep_token_id"};
    int rc;
    if ((rc = opt_id(l, "tokenizer.ggml.bos_token_id", &v->bos)) ||
        (rc = opt_id(l, "tokenizer.ggml.eos_token_id", &v->eos)) ||
        (rc = opt_id(l, "tokenizer.ggml.eot_token_id", &v->eot)) ||
        (rc = opt_id(l, "tokenizer.ggml.eom_token_id", &v->eom)) ||
        (rc = opt_id(l, "tokenizer.ggml.unknown_token_id", &v->unk)) ||
        (rc = opt_id(l, "tokenizer.ggml.seperator_token_id", &v->sep)) ||
        (rc = opt_id(l, "tokenizer.ggml.padding_token_id", &v->pad)))
        return rc;
    for (int i = 0; i < 6; i++)
        if ((rc = opt_id(l, fim_keys[i], &fim[i]))) return rc;
    if ((rc = opt_bool(l, "tokenizer.ggml.normalizer.lowercase", &v->wpm_lowercase))) return rc;
    v->wpm_strip_accents = v->wpm_lowercase;
    if ((rc = opt_bool(l, "tokenizer.ggml.normalizer.strip_accents", &v->wpm_strip_accents)))
        return rc;
    if ((rc = opt_bool(l, "tokenizer.ggml.add_bos_token", &v->add_bos)) ||
        (rc = opt_bool(l, "tokenizer.ggml.add_eos_token", &v->add_eos)) ||
        (rc = opt_bool(l, "tokenizer.ggml.add_sep_token", &v->add_sep)) ||
        (rc = opt_bool(l, "tokenizer.ggml.add_space_prefix", &v->add_space_prefix)))
        return rc;
    return 0;
}

/* Finds the first token (by id) whose text is one of lits; adds the control type to it as
 * llama.cpp does ("control-looking token ... its type will be overridden"). */
static void detect(ul_vocab_t *v, int32_t *id, const char *const *lits) {
    if (*id >= 0) return;
    int32_t best = -1;
    for (int i = 0; lits[i]; i++) {
        int32_t t = find_lit(v, lits[i]);
        if (t >= 0 && (best < 0 || t < best)) best = t;
    }
    if (best < 0) return;
    *id = best;
    v->attr[best] |= UL_TA_CONTROL;
}

#define FW "\xef\xbd\x9c" /* U+FF5C FULLWIDTH VERTICAL LINE (DeepSeek) */
#define SP "\xe2\x96\x81" /* U+2581 */

/* The lists of llama.cpp's llama_vocab::impl::load (release of 2026-09). */
static const char *const k_eot[] = {"<|eot_id|>",
                                    "<|im_end|>",
                                    "<|end|>",
                                    "<end_of_turn>",
                                    "<|endoftext|>",
                                    "<|end_of_text|>",
                                    "<EOT>",
                                    "_<EOT>",
                                    "[EOT]",
                                    "<" FW "end" SP "of" SP "sentence" FW ">",
                                    "<end_of_utterance>",
                                    NULL};
static const char *const k_eom[] = {"<|eom_id|>", NULL};
static const char *const k_fpre[] = {"<|fim_prefix|>",
                                     "<fim-prefix>",
                                     "<fim_prefix>",
                                     "<" FW "fim" SP "begin" FW ">",
                                     "<PRE>",
                                     SP "<PRE>",
                                     "<|code_prefix|>",
                                     "<|prefix|>",
                                     NULL};
static const char *const k_fsuf[] = {"<|fim_suffix|>",
                                     "<fim-suffix>",
                                     "<fim_suffix>",
                                     "<" FW "fim" SP "hole" FW ">",
                                     "<SUF>",
                                     SP "<SUF>",
                                     "<|code_suffix|>",
                                     "<|suffix|>",
                                     NULL};
static const char *const k_fmid[] = {"<|fim_middle|>",
                                     "<fim-middle>",
                                     "<fim_middle>",
                                     "<" FW "fim" SP "end" FW ">",
                                     "<MID>",
                                     SP "<MID>",
                                     "<|code_middle|>",
                                     "<|middle|>",
                                     NULL};
static const char *const k_fpad[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>",
                                     "<PAD>",       "[PAD]",     NULL};
static const char *const k_frep[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
                                     "<REPO>",       "<reponame>",    NULL};
static const char *const k_fsep[] = {"<|file_sep|>", NULL};
static const char *const k_eog[] = {"<|eot_id|>",
                                    "<|im_end|>",
                                    "<|end|>",
                                    "<|return|>",
                                    "<|call|>",
                                    "<|flush|>",
                                    "<|calls|>",
                                    "<end_of_turn>",
                                    "<|endoftext|>",
                                    "</s>",
                                    "<|eom_id|>",
                                    "<EOT>",
                                    "_<EOT>",
                                    "[EOT]",
                                    "[EOS]",
                                    "<|end_of_text|>",
                                    "<end_of_utterance>",
                                    "<eos>",
                                    "<turn|>",
                                    "<|tool_response>",
                                    "<" FW "end" SP "of" SP "sentence" FW ">",
                                    "[e~[",
                                    NULL};
/* gpt-oss: always rendered, so user-defined */
static const char *const k_user[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>",
                                     NULL};

/* The model-specific exceptions llama.cpp applies after building the EOG set. */
static void eog_exceptions(ul_vocab_t *v) {
    int32_t ret = find_lit(v, "<|return|>"), call = find_lit(v, "<|call|>");
    int32_t calls = find_lit(v, "<|calls|>"), flush = find_lit(v, "<|flush|>");
    int32_t end = find_lit(v, "<|end|>"), tool = find_lit(v, "<|tool_response>");
    int32_t s = find_lit(v, "</s>");
#define IN_EOG(t) ((t) >= 0 && v->eog[t])
    int has_call = IN_EOG(call) || IN_EOG(calls);
    if (IN_EOG(end) && has_call && (IN_EOG(ret) || IN_EOG(flush))) {
        /* o200k_harmony / solar-open: <|end|> ends a message, not the generation */
        v->eog[end] = 0;
        v->attr[end] = UL_TA_USER;
    }
    if (IN_EOG(tool) && IN_EOG(s)) { /* gemma4, paddleocr */
        v->eog[s] = 0;
        v->attr[s] = UL_TA_NORMAL;
    }
#undef IN_EOG
}

static void build_eog(ul_vocab_t *v, int32_t fim[6]) {
    detect(v, &v->eot, k_eot);
    detect(v, &v->eom, k_eom);
    const char *const *fl[6] = {k_fpre, k_fsuf, k_fmid, k_fpad, k_frep, k_fsep};
    for (int i = 0; i < 6; i++) detect(v, &fim[i], fl[i]);
    for (int i = 3; i < 6; i++)
        if (fim[i] >= 0) v->eog[fim[i]] = 1;
    for (int i = 0; k_eog[i]; i++) {
        int32_t t = find_lit(v, k_eog[i]);
        if (t < 0) continue;
        v->eog[t] = 1;
        v->attr[t] |= UL_TA_CONTROL;
    }
    for (int i = 0; k_user[i]; i++) {
        int32_t t = find_lit(v, k_user[i]);
        if (t >= 0) v->attr[t] = UL_TA_USER;
    }
    if (v->eos >= 0) v->eog[v->eos] = 1;
    if (v->eot >= 0) v->eog[v->eot] = 1;
    if (v->eom >= 0) v->eog[v->eom] = 1;
    eog_exceptions(v);
}

static const ul_vocab_t *g_sort_v; /* qsort has no context argument; load is serialised */

static int by_len_desc(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    const ul_vocab_t *v = g_sort_v;
    uint32_t lx = v->off[x + 1] - v->off[x], ly = v->off[y + 1] - v->off[y];
    if (lx != ly) return lx > ly ? -1 : 1;
    return x < y ? -1 : x > y;
}

static int build_special(ul_vocab_t *v) {
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    int32_t n = 0;
    for (int32_t i = 0; i < v->n_tokens; i++)
        if (v->attr[i] & (UL_TA_CONTROL | UL_TA_USER | UL_TA_UNKNOWN)) n++;
    v->special = malloc(sizeof *v->special * (size_t)(n ? n : 1));
    if (!v->special) return UL_ENOMEM;
    for (int32_t i = 0; i < v->n_tokens; i++)
        if (v->attr[i] & (UL_TA_CONTROL | UL_TA_USER | UL_TA_UNKNOWN))
            v->special[v->n_special++] = i;
    pthread_mutex_lock(&mu);
    g_sort_v = v;
    qsort(v->special, (size_t)n, sizeof *v->special, by_len_desc);
    pthread_mutex_unlock(&mu);
    return 0;
}

/* llama.cpp's per-model attributes: phi-3 strips spaces after its special tokens. */
static void model_attrs(ld_t *l) {
    ul_vocab_t *v = l->v;
    ul_str_t name;
    if (ul_gguf_get_str(l->g, "general.name", &name)) return;
    char low[256];
    size_t n = name.len < sizeof low - 1 ? (size_t)name.len : sizeof low - 1;
    for (size_t i = 0; i < n; i++) low[i] = (char)tolower((unsigned char)name.ptr[i]);
    low[n] = 0;
    if (!strstr(low, "phi-3") && !strstr(low, "phi3")) return;
    for (int32_t i = 0; i < v->n_special; i++) v->attr[v->special[i]] |= UL_TA_RSTRIP;
    static const char *off[] = {"<unk>", "<s>", "<|endoftext|>"};
    int32_t t = find_lit(v, "</s>");
    if (t >= 0) v->attr[t] |= UL_TA_RSTRIP;
    for (int i = 0; i < 3; i++)
        if ((t = find_lit(v, off[i])) >= 0) v->attr[t] &= (uint8_t)~UL_TA_RSTRIP;
}

/* SPM byte fallback: "<0xXX>", else the one-byte token (llama_vocab::byte_to_token). */
static void spm_bytes(ul_vocab_t *v) {
    static const char hex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; b++) {
        char buf[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
        int32_t t = ul_vocab_find(v, buf, 6);
        if (t < 0) {
            char c = (char)b;
            t = ul_vocab_find(v, &c, 1);
        }
        v->byte_tok[b] = t;
    }
    for (int32_t i = 0; i < v->n_tokens && !v->spm_inner_space; i++) {
        uint32_t n;
        const char *t = ul_tok_text(v, i, &n);
        int prev_other = 0; /* the previous character is not U+2581 */
        for (uint32_t k = 0; k < n;) {
            static const uint8_t clen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
            uint32_t cl = clen[(unsigned char)t[k] >> 4];
            if (cl > n - k) cl = n - k;
            int sp = cl == 3 && !memcmp(t + k, "\xe2\x96\x81", 3);
            if (sp && prev_other) v->spm_inner_space = 1;
            prev_other = !sp;
            k += cl;
        }
    }
}

int ul_bpe_load(ul_vocab_t *v, const ul_gguf_t *g, char *err, size_t errlen); /* bpe.c */

static int load(ld_t *l) {
    ul_vocab_t *v = l->v;
    int32_t fim[6] = {-1, -1, -1, -1, -1, -1};
    int no_bos = 0, rc;
    v->bos = v->eos = v->eot = v->eom = v->unk = v->pad = v->sep = -1;
    if ((rc = read_model(l, &no_bos)) || (rc = read_tokens(l))) return rc;
    if (v->type == UL_VOCAB_BPE) {
        if ((rc = ul_bpe_load(v, l->g, l->err, l->errlen))) return rc;
        if (no_bos) v->bos = -1;
    } else {
        spm_bytes(v);
    }
    for (int32_t i = 0; i < v->n_tokens; i++)
        if ((int32_t)(v->off[i + 1] - v->off[i]) > v->max_tok_len)
            v->max_tok_len = (int32_t)(v->off[i + 1] - v->off[i]);
    int32_t *ids[] = {&v->bos, &v->eos, &v->unk, &v->sep, &v->pad};
    for (int i = 0; i < 5; i++)
        if (*ids[i] >= v->n_tokens) *ids[i] = -1; /* defaults (1, 2, 11) may not exist */
    if ((rc = read_specials(l, fim))) return rc;
    build_eog(v, fim);
    if ((rc = build_special(v))) return rc;
    model_attrs(l);
    return ul_vocab_build_pieces(v);
}

int ul_vocab_load(const ul_gguf_t *g, ul_vocab_t **out, char *err, size_t errlen) {
    *out = NULL;
    if (errlen) err[0] = 0;
    ul_vocab_t *v = calloc(1, sizeof *v);
    if (!v) return UL_ENOMEM;
    ld_t l = {g, v, err, errlen};
    int rc = load(&l);
    if (rc) {
        if (errlen && !err[0]) snprintf(err, errlen, "vocabulary: %s", ul_strerror(rc));
        ul_vocab_free(v);
        return rc;
    }
    *out = v;
    return 0;
}

void ul_vocab_free(ul_vocab_t *v) {
    if (!v) return;
    ul_tokmap_free(&v->map);
    ul_tokmap_free(&v->dmap);
    ul_tokmap_free(&v->mmap);
    ul_pretok_free(v->pre);
    UL_FREE_ALL(v->text, v->off, v->scores, v->attr, v->eog, v->dtext, v->doff, v->mtext, v->moff,
                v->msplit, v->special, v->piece, v->poff, v);
}

int32_t ul_vocab_n_tokens(const ul_vocab_t *v) { return v->n_tokens; }
int32_t ul_vocab_bos(const ul_vocab_t *v) { return v->bos; }
int32_t ul_vocab_eos(const ul_vocab_t *v) { return v->eos; }
int ul_vocab_adds_bos(const ul_vocab_t *v) { return v->add_bos && v->bos >= 0; }
int ul_vocab_adds_eos(const ul_vocab_t *v) { return v->add_eos && v->eos >= 0; }
int ul_vocab_adds_space_prefix(const ul_vocab_t *v) { return v->add_space_prefix; }

int ul_vocab_join_pair(const ul_vocab_t *v, const int32_t *a, int na, const int32_t *b, int nb,
                       int32_t *out, int cap) {
    const int32_t end = v->eos >= 0 ? v->eos : v->sep; /* llama.cpp: eos, else sep */
    const int bos = v->add_bos && v->bos >= 0, eos = v->add_eos && end >= 0,
              sep = v->add_sep && v->sep >= 0;
    const int64_t need = (int64_t)bos + na + eos + sep + nb + eos;
    if (need > cap) return need > (1 << 30) ? UL_ENOMEM : -(int)need;
    int n = 0;
    if (bos) out[n++] = v->bos;
    memcpy(out + n, a, (size_t)na * sizeof *a), n += na;
    if (eos) out[n++] = end;
    if (sep) out[n++] = v->sep;
    memcpy(out + n, b, (size_t)nb * sizeof *b), n += nb;
    if (eos) out[n++] = end;
    return n;
}
int ul_vocab_is_eog(const ul_vocab_t *v, int32_t id) {
    return id >= 0 && id < v->n_tokens && v->eog[id];
}
