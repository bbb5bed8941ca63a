/* `uvllm convert-tokenizer`: writes a vocabulary-only GGUF from a Hugging Face
 * tokenizer.json (byte-level BPE) and, optionally, its tokenizer_config.json, with the
 * same token texts, types and merges llama.cpp's converter writes, so the result tokenizes
 * like the GGUF of the original model:
 *   - ids 0..max from model.vocab and added_tokens; holes become "[PAD<i>]" (unused);
 *   - added tokens are control when marked special or when they look special (<|...|>),
 *     user-defined otherwise; the rest are normal;
 *   - merges in either form ("a b" or ["a", "b"]) are written as "a b";
 *   - tokenizer.ggml.pre comes from the Split regex (Llama 3's, Qwen2's, GPT-2's) or --pre;
 *   - bos/eos/pad/unk ids and add_bos/add_eos from tokenizer_config.json. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/small_file.h"
#include "cmd/cmd.h"
#include "model/gguf_write.h"
#include "uvllm/err.h"

#define MAX_TOKENS (1 << 22)

enum { TT_NORMAL = 1, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5 };

static const struct {
    const char *regex, *pre, *arch;
} k_pre[] = {
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
     "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
     "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     "llama-bpe", "llama"},
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
     "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
     "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     "qwen2", "qwen2"},
    {"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)", "gpt-2",
     "gpt2"},
};

typedef struct conv_s {
    cJSON *tok, *cfg;
    int32_t n;
    const char **text; /* [n] into the JSON tree, or NULL for a hole */
    int32_t *type;     /* [n] */
    ul_str_t *merges;
    char **owned; /* merge strings built here */
    uint64_t n_merges;
    const char *pre, *arch;
} conv_t;

static cJSON *parse_file(const char *path) {
    size_t len;
    char *b = ul_small_file_dup(path, &len);
    if (!b) {
        fprintf(stderr, "uvllm: convert-tokenizer: cannot read %s\n", path);
        return NULL;
    }
    cJSON *j = cJSON_ParseWithLength(b, len);
    free(b);
    if (!j) fprintf(stderr, "uvllm: convert-tokenizer: %s is not valid JSON\n", path);
    return j;
}

static int looks_special(const char *s) {
    size_t n = strlen(s);
    if (!strcmp(s, "<pad>") || !strcmp(s, "<mask>") || !strcmp(s, "<2mass>") ||
        !strcmp(s, "[@BOS@]"))
        return 1;
    if (n >= 4 && !strncmp(s, "<|", 2) && !strcmp(s + n - 2, "|>")) return 1;
    if (n >= 8 && !strncmp(s, "<\xef\xbd\x9c", 4) && !strcmp(s + n - 4, "\xef\xbd\x9c>")) return 1;
    return n >= 8 && !strncmp(s, "<unused", 7) && s[n - 1] == '>';
}

static int bad(const char *what) {
    fprintf(stderr, "uvllm: convert-tokenizer: %s\n", what);
    return UL_EFORMAT;
}

static int read_vocab(conv_t *c) {
    cJSON *model = cJSON_GetObjectItemCaseSensitive(c->tok, "model");
    cJSON *type = cJSON_GetObjectItemCaseSensitive(model, "type");
    cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    cJSON *added = cJSON_GetObjectItemCaseSensitive(c->tok, "added_tokens");
    if (!cJSON_IsString(type) || strcmp(type->valuestring, "BPE"))
        return bad("model.type is not \"BPE\" (only byte-level BPE tokenizers are supported)");
    if (!cJSON_IsObject(vocab)) return bad("model.vocab is not an object");
    int64_t max = -1;
    cJSON *e;
    cJSON_ArrayForEach(e, vocab) {
        if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble >= MAX_TOKENS)
            return bad("model.vocab: an id is not an integer in range");
        if ((int64_t)e->valuedouble > max) max = (int64_t)e->valuedouble;
    }
    cJSON_ArrayForEach(e, added) {
        cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
        if (!cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble >= MAX_TOKENS ||
            !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "content")))
            return bad("added_tokens: an entry lacks a valid id or content");
        if ((int64_t)id->valuedouble > max) max = (int64_t)id->valuedouble;
    }
    if (max < 0) return bad("model.vocab is empty");
    c->n = (int32_t)max + 1;
    c->text = calloc((size_t)c->n, sizeof *c->text);
    c->type = malloc(sizeof *c->type * (size_t)c->n);
    if (!c->text || !c->type) return UL_ENOMEM;
    for (int32_t i = 0; i < c->n; i++) c->type[i] = TT_UNUSED;
    cJSON_ArrayForEach(e, vocab) {
        int32_t id = (int32_t)e->valuedouble;
        c->text[id] = e->string;
        c->type[id] = TT_NORMAL;
    }
    cJSON_ArrayForEach(e, added) {
        int32_t id = (int32_t)cJSON_GetObjectItemCaseSensitive(e, "id")->valuedouble;
        const char *s = cJSON_GetObjectItemCaseSensitive(e, "content")->valuestring;
        c->text[id] = s;
        c->type[id] =
            cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "special")) || looks_special(s)
                ? TT_CONTROL
                : TT_USER;
    }
    return 0;
}

static int read_merges(conv_t *c) {
    cJSON *merges = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(c->tok, "model"), "merges");
    if (!cJSON_IsArray(merges)) return bad("model.merges is not an array");
    int n = cJSON_GetArraySize(merges);
    c->merges = calloc((size_t)n + 1, sizeof *c->merges);
    c->owned = calloc((size_t)n + 1, sizeof *c->owned);
    if (!c->merges || !c->owned) return UL_ENOMEM;
    cJSON *e;
    cJSON_ArrayForEach(e, merges) {
        ul_str_t *m = &c->merges[c->n_merges];
        if (cJSON_IsString(e)) {
            m->ptr = e->valuestring;
            m->len = strlen(e->valuestring);
        } else if (cJSON_IsArray(e) && cJSON_GetArraySize(e) == 2 && cJSON_IsString(e->child) &&
                   cJSON_IsString(e->child->next)) {
            const char *a = e->child->valuestring, *b = e->child->next->valuestring;
            ul_buf_t joined = {0};
            if (ul_buf_printf(&joined, "%s %s", a, b)) return UL_ENOMEM;
            c->owned[c->n_merges] = joined.p;
            m->ptr = joined.p;
            m->len = joined.len;
        } else {
            return bad("model.merges: an entry is neither \"a b\" nor [\"a\", \"b\"]");
        }
        c->n_merges++;
    }
    return 0;
}

/* Finds the first Split regex anywhere under the pre_tokenizer. */
static const char *find_regex(const cJSON *j) {
    if (!j) return NULL;
    if (j->string && !strcmp(j->string, "Regex") && cJSON_IsString(j)) return j->valuestring;
    for (const cJSON *c = j->child; c; c = c->next) {
        const char *r = find_regex(c);
        if (r) return r;
    }
    return NULL;
}

static int pick_pre(conv_t *c) {
    cJSON *pt = cJSON_GetObjectItemCaseSensitive(c->tok, "pre_tokenizer");
    const char *re = find_regex(pt);
    for (size_t i = 0; re && i < sizeof k_pre / sizeof k_pre[0]; i++) {
        if (strcmp(re, k_pre[i].regex)) continue;
        if (!c->pre) c->pre = k_pre[i].pre;
        if (!c->arch) c->arch = k_pre[i].arch;
        return 0;
    }
    /* a bare ByteLevel pre-tokenizer with use_regex is GPT-2's */
    cJSON *t = cJSON_GetObjectItemCaseSensitive(pt, "type");
    if (!re && cJSON_IsString(t) && !strcmp(t->valuestring, "ByteLevel") && !c->pre)
        c->pre = "gpt-2";
    if (!c->pre)
        return bad(
            "unknown pre-tokenizer regex; name one with --pre (llama-bpe, qwen2, gpt-2, ...)");
    if (!c->arch) c->arch = "llama";
    return 0;
}

/* The id of a special token named in tokenizer_config.json ("x" or {"content": "x"}). */
static int32_t cfg_id(const conv_t *c, const char *key) {
    cJSON *e = cJSON_GetObjectItemCaseSensitive(c->cfg, key);
    if (cJSON_IsObject(e)) e = cJSON_GetObjectItemCaseSensitive(e, "content");
    if (!cJSON_IsString(e)) return -1;
    for (int32_t i = c->n - 1; i >= 0; i--)
        if (c->text[i] && !strcmp(c->text[i], e->valuestring)) return i;
    return -1;
}

static int write_gguf(conv_t *c, const char *out) {
    ul_gguf_writer_t *w;
    int rc = ul_gguf_writer_new(&w, 0);
    if (rc) return rc;
    ul_str_t *toks = calloc((size_t)c->n, sizeof *toks);
    char *pads = malloc((size_t)c->n * 20);
    if (!toks || !pads) rc = UL_ENOMEM;
    for (int32_t i = 0; !rc && i < c->n; i++) {
        if (c->text[i]) {
            toks[i] = (ul_str_t){c->text[i], strlen(c->text[i])};
        } else {
            int k = snprintf(pads + (size_t)i * 20, 20, "[PAD%d]", i);
            toks[i] = (ul_str_t){pads + (size_t)i * 20, (uint64_t)k};
        }
    }
    static const char *ids[][2] = {{"bos_token", "tokenizer.ggml.bos_token_id"},
                                   {"eos_token", "tokenizer.ggml.eos_token_id"},
                                   {"pad_token", "tokenizer.ggml.padding_token_id"},
                                   {"unk_token", "tokenizer.ggml.unknown_token_id"}};
    if (!rc) rc = ul_gguf_w_str(w, "general.architecture", c->arch, strlen(c->arch));
    if (!rc) rc = ul_gguf_w_str(w, "general.name", "vocabulary", 10);
    if (!rc) rc = ul_gguf_w_str(w, "tokenizer.ggml.model", "gpt2", 4);
    if (!rc) rc = ul_gguf_w_str(w, "tokenizer.ggml.pre", c->pre, strlen(c->pre));
    if (!rc) rc = ul_gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, (uint64_t)c->n);
    if (!rc)
        rc = ul_gguf_w_arr(w, "tokenizer.ggml.token_type", UL_GGUF_INT32, c->type, (uint64_t)c->n);
    if (!rc) rc = ul_gguf_w_arr_str(w, "tokenizer.ggml.merges", c->merges, c->n_merges);
    for (int i = 0; !rc && c->cfg && i < 4; i++) {
        int32_t id = cfg_id(c, ids[i][0]);
        if (id >= 0) rc = ul_gguf_w_u32(w, ids[i][1], (uint32_t)id);
    }
    cJSON *ab = cJSON_GetObjectItemCaseSensitive(c->cfg, "add_bos_token");
    cJSON *ae = cJSON_GetObjectItemCaseSensitive(c->cfg, "add_eos_token");
    if (!rc && cJSON_IsBool(ab))
        rc = ul_gguf_w_bool(w, "tokenizer.ggml.add_bos_token", cJSON_IsTrue(ab));
    if (!rc && cJSON_IsBool(ae))
        rc = ul_gguf_w_bool(w, "tokenizer.ggml.add_eos_token", cJSON_IsTrue(ae));
    if (!rc) rc = ul_gguf_w_write(w, out);
    ul_gguf_writer_free(w);
    free(toks);
    free(pads);
    return rc;
}

static void usage(FILE *f) {
    fprintf(f, "usage: uvllm convert-tokenizer [--pre NAME] [--arch NAME] tokenizer.json "
               "[tokenizer_config.json] OUT.gguf\n"
               "  writes a vocabulary-only GGUF (byte-level BPE) from Hugging Face files\n"
               "  --pre NAME   tokenizer.ggml.pre (default: recognised from the Split regex)\n"
               "  --arch NAME  general.architecture (default: from the pre-tokenizer)\n");
}

int ul_cmd_convert_tokenizer(int argc, char **argv) {
    conv_t c = {0};
    const char *files[3];
    int nf = 0, rc = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--pre") && i + 1 < argc) {
            c.pre = argv[++i];
        } else if (!strcmp(argv[i], "--arch") && i + 1 < argc) {
            c.arch = argv[++i];
        } else if (argv[i][0] != '-' && nf < 3) {
            files[nf++] = argv[i];
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (nf < 2) {
        usage(stderr);
        return 2;
    }
    if (!(c.tok = parse_file(files[0]))) return 1;
    if (nf == 3 && !(c.cfg = parse_file(files[1]))) rc = UL_EFORMAT;
    if (!rc) rc = read_vocab(&c);
    if (!rc) rc = read_merges(&c);
    if (!rc) rc = pick_pre(&c);
    if (!rc) {
        rc = write_gguf(&c, files[nf - 1]);
        if (rc)
            fprintf(stderr, "uvllm: convert-tokenizer: %s: %s\n", files[nf - 1], ul_strerror(rc));
    }
    if (!rc)
        fprintf(stderr, "uvllm: wrote %s: %d tokens, %llu merges, pre '%s'\n", files[nf - 1], c.n,
                (unsigned long long)c.n_merges, c.pre);
    for (uint64_t i = 0; c.owned && i < c.n_merges; i++) free(c.owned[i]);
    free(c.owned);
    free(c.merges);
    free(c.text);
    free(c.type);
    cJSON_Delete(c.tok);
    cJSON_Delete(c.cfg);
    return rc ? 1 : 0;
}
