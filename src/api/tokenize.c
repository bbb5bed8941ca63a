/* POST /tokenize and POST /detokenize in llama-server's shapes, for clients that count
 * tokens or build prompts themselves:
 *   {"content": "...", "add_special": false, "parse_special": true, "with_pieces": false}
 *     -> {"tokens": [ids]}, or with with_pieces {"tokens": [{"id": 1, "piece": "..."}]}
 *        where a piece that is not valid UTF-8 on its own (a byte of a longer character)
 *        is an array of its byte values instead of a string;
 *   {"tokens": [ids]} -> {"content": "..."}: the pieces, control tokens as their text, the
 *        first piece without the space SPM put before the text (llama_detokenize), bytes
 *        that do not form UTF-8 replaced by U+FFFD so the answer stays valid JSON.
 * Text goes through the api's codec (the vocabulary, or the null backend's pseudo-tokens).
 * Bad bodies are 400s naming the field. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

/* Length of the valid UTF-8 sequence starting s[0..n), or 0. */
static size_t utf8_seq(const unsigned char *s, size_t n) {
    unsigned char c = s[0];
    size_t len = c < 0x80                 ? 1
                 : c >= 0xC2 && c <= 0xDF ? 2
                 : c >= 0xE0 && c <= 0xEF ? 3
                 : c >= 0xF0 && c <= 0xF4 ? 4
                                          : 0;
    if (len == 0 || len > n) return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    if (len == 3 && ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] > 0x9F))) return 0;
    if (len == 4 && ((c == 0xF0 && s[1] < 0x90) || (c == 0xF4 && s[1] > 0x8F))) return 0;
    return len;
}

static int utf8_valid(const char *s, size_t n) {
    for (size_t i = 0, l; i < n; i += l)
        if (!(l = utf8_seq((const unsigned char *)s + i, n - i))) return 0;
    return 1;
}

/* Copies s to out (room for 3 * n), each byte outside a valid sequence as U+FFFD. */
static size_t utf8_sanitize(const char *s, size_t n, char *out) {
    size_t w = 0;
    for (size_t i = 0; i < n;) {
        size_t l = utf8_seq((const unsigned char *)s + i, n - i);
        if (l) {
            memcpy(out + w, s + i, l);
            w += l;
            i += l;
        } else {
            memcpy(out + w, "\xef\xbf\xbd", 3);
            w += 3;
            i++;
        }
    }
    return w;
}

static int bad(ul_api_t *a, ul_http_req_t *req, const char *param, const char *msg) {
    a->stats.completions_rejected++;
    return ul_api_error(req, 400, "invalid_request_error", param, NULL, msg);
}

static int respond_json(ul_http_req_t *req, cJSON *root) {
    char *body = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!body) return ul_api_error(req, 503, "server_error", NULL, NULL, "out of memory");
    int rc = ul_http_respond(req, 200, NULL, body, strlen(body));
    cJSON_free(body);
    return rc;
}

/* An optional boolean field: 0 when absent or valid, -1 after answering 400. */
static int opt_bool(ul_api_t *a, ul_http_req_t *req, const cJSON *root, const char *name,
                    int *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsBool(v)) {
        char msg[96];
        snprintf(msg, sizeof msg, "'%s' must be a boolean", name);
        bad(a, req, name, msg);
        return -1;
    }
    *out = cJSON_IsTrue(v);
    return 0;
}

static cJSON *parse_object(ul_api_t *a, ul_http_req_t *req) {
    cJSON *root = cJSON_ParseWithLength(req->body, req->body_len);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        a->stats.completions_rejected++;
        ul_api_error(req, 400, "invalid_request_error", NULL, "invalid_json",
                     "the request body is not a JSON object");
        return NULL;
    }
    return root;
}

/* Token ids of text; *ids is malloc'ed. Returns the count or UL_E*. */
static int tokenize(const ul_codec_t *c, const char *text, size_t len, int add_special,
                    int parse_special, int32_t **ids) {
    int cap = len < 60 ? 64 : len < (size_t)(1 << 28) ? (int)len + 4 : 1 << 28;
    for (int round = 0; round < 2; round++) {
        *ids = malloc(sizeof **ids * (size_t)cap);
        if (!*ids) return UL_ENOMEM;
        int n = c->tokenize(c, text, len, NULL, add_special, parse_special, *ids, cap);
        if (n >= 0 || n == UL_ENOMEM || n == UL_EINVAL || n == UL_E2BIG) return n;
        free(*ids);
        *ids = NULL;
        cap = -n;
    }
    return UL_ENOMEM;
}

/* The raw bytes of id into *buf (grown as needed); returns the length or UL_E*. */
static int piece(const ul_codec_t *c, int32_t id, int lstrip, char **buf, int *cap) {
    for (;;) {
        int n = c->token_piece ? c->token_piece(c, id, 1, lstrip, *buf, *cap)
                               : c->piece(c, NULL, id, *buf, *cap);
        if (n >= 0 || n == UL_EINVAL || n == UL_ENOMEM) return n;
        char *p = realloc(*buf, (size_t)-n);
        if (!p) return UL_ENOMEM;
        *buf = p;
        *cap = -n;
    }
}

static cJSON *piece_value(const char *p, int n) {
    if (utf8_valid(p, (size_t)n)) {
        char *s = malloc((size_t)n + 1);
        UL_ASSERT(s);
        memcpy(s, p, (size_t)n);
        s[n] = '\0';
        cJSON *v = cJSON_CreateString(s);
        free(s);
        return v;
    }
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(arr, cJSON_CreateNumber((unsigned char)p[i]));
    return arr;
}

static int answer_tokens(ul_api_t *a, ul_http_req_t *req, const int32_t *ids, int n,
                         int with_pieces) {
    cJSON *root = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(root, "tokens");
    int cap = 256;
    char *buf = with_pieces ? malloc((size_t)cap) : NULL;
    for (int i = 0; i < n; i++) {
        if (!with_pieces) {
            cJSON_AddItemToArray(arr, cJSON_CreateNumber(ids[i]));
            continue;
        }
        int len = buf ? piece(&a->codec, ids[i], 0, &buf, &cap) : UL_ENOMEM;
        if (len < 0) {
            free(buf);
            cJSON_Delete(root);
            return ul_api_error(req, 500, "server_error", NULL, NULL, ul_strerror(len));
        }
        cJSON *t = cJSON_CreateObject();
        cJSON_AddNumberToObject(t, "id", ids[i]);
        cJSON_AddItemToObject(t, "piece", piece_value(buf, len));
        cJSON_AddItemToArray(arr, t);
    }
    free(buf);
    return respond_json(req, root);
}

int ul_api_tokenize(ul_http_req_t *req, void *data) {
    ul_api_t *a = data;
    cJSON *root = parse_object(a, req);
    if (!root) return 0;
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(root, "content");
    int add_special = 0, parse_special = 1, with_pieces = 0;
    if (!cJSON_IsString(content)) {
        bad(a, req, "content", "'content' must be a string");
    } else if (!opt_bool(a, req, root, "add_special", &add_special) &&
               !opt_bool(a, req, root, "parse_special", &parse_special) &&
               !opt_bool(a, req, root, "with_pieces", &with_pieces)) {
        int32_t *ids = NULL;
        const char *text = content->valuestring;
        int n = tokenize(&a->codec, text, strlen(text), add_special, parse_special, &ids);
        if (n < 0)
            ul_api_error(req, n == UL_ENOMEM ? 503 : 400,
                         n == UL_ENOMEM ? "server_error" : "invalid_request_error",
                         n == UL_ENOMEM ? NULL : "content", NULL, ul_strerror(n));
        else
            answer_tokens(a, req, ids, n, with_pieces);
        free(ids);
    }
    cJSON_Delete(root);
    return 0;
}

/* The ids of a "tokens" array into *ids (malloc'ed); returns the count, or -1 after
 * answering 400. */
static int read_ids(ul_api_t *a, ul_http_req_t *req, const cJSON *tokens, int32_t **ids) {
    char msg[128];
    if (!cJSON_IsArray(tokens)) {
        bad(a, req, "tokens", "'tokens' must be an array of token ids");
        return -1;
    }
    int n = cJSON_GetArraySize(tokens), i = 0;
    *ids = malloc(sizeof **ids * (size_t)(n ? n : 1));
    UL_ASSERT(*ids);
    const cJSON *t;
    cJSON_ArrayForEach(t, tokens) {
        double v = cJSON_IsNumber(t) ? t->valuedouble : -1;
        if (v < 0 || v >= a->codec.n_vocab || v != (double)(int32_t)v) {
            snprintf(msg, sizeof msg, "tokens[%d] is not a token id (0..%d)", i,
                     (int)a->codec.n_vocab - 1);
            bad(a, req, "tokens", msg);
            return -1;
        }
        (*ids)[i++] = (int32_t)v;
    }
    return n;
}

int ul_api_detokenize(ul_http_req_t *req, void *data) {
    ul_api_t *a = data;
    cJSON *root = parse_object(a, req);
    if (!root) return 0;
    int32_t *ids = NULL;
    int n = read_ids(a, req, cJSON_GetObjectItemCaseSensitive(root, "tokens"), &ids);
    cJSON_Delete(root);
    if (n < 0) {
        free(ids);
        return 0;
    }
    size_t len = 0, cap = 256;
    char *text = malloc(cap), *p = NULL;
    int pcap = 0, rc = 0;
    for (int i = 0; i < n && text && rc >= 0; i++) {
        rc = piece(&a->codec, ids[i], i == 0, &p, &pcap);
        if (rc <= 0) continue;
        if (len + (size_t)rc > cap) {
            while (len + (size_t)rc > cap) cap *= 2;
            char *t = realloc(text, cap);
            if (!t) free(text);
            if (!(text = t)) break;
        }
        memcpy(text + len, p, (size_t)rc);
        len += (size_t)rc;
    }
    char *clean = text && rc >= 0 ? malloc(len * 3 + 1) : NULL;
    free(p);
    free(ids);
    if (!clean) {
        free(text);
        return ul_api_error(req, 503, "server_error", NULL, NULL, "out of memory");
    }
    clean[utf8_sanitize(text, len, clean)] = '\0';
    free(text);
    cJSON *out = cJSON_CreateObject();
    cJSON_AddStringToObject(out, "content", clean);
    free(clean);
    return respond_json(req, out);
}
