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
 * Bad bodies are 400s naming the field.
 *
 * The work grows with the body (a few MiB of text is seconds of tokenizing and an answer
 * ten times its size with pieces), so a body over UL_API_JOB_BYTES is handled as a job on
 * a pool thread (job.c): parsing, tokenizing and writing the answer all happen there, and
 * the answer may be at most what the memory budget allows the connection when the job is
 * queued (ul_http_resp_room): past it the job stops and answers 413 (or 503 when the whole
 * server's budget is the limit). Small bodies are answered inline the same way. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/gen.h"
#include "base/utf8.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

typedef struct tokjob_s {
    ul_api_job_t job;
    ul_http_req_t *req; /* NULL once the client left */
    const ul_codec_t *codec;
    int detok;
    char *owned; /* the body, taken from the request (jobs), else NULL */
    const char *body;
    size_t body_len;
    size_t max_out;   /* largest answer */
    int over_status;  /* what to answer past it */
    ul_api_bad_t bad; /* status 0: answer out */
    ul_buf_t out;
} tokjob_t;

/* Everything below up to the handlers runs off the loop for jobs: no net or api state. */

static int bad(tokjob_t *t, const char *param, const char *msg) {
    t->bad.status = 400;
    t->bad.param = param;
    snprintf(t->bad.msg, sizeof t->bad.msg, "%s", msg);
    return -1;
}

static int out_of_room(tokjob_t *t) {
    t->out.len = 0;
    t->bad.status = t->over_status;
    t->bad.type = t->over_status == 503 ? "server_error" : "invalid_request_error";
    t->bad.code = t->over_status == 503 ? "server_busy" : "response_too_large";
    if (t->over_status == 503)
        snprintf(t->bad.msg, sizeof t->bad.msg,
                 "the server's memory for answers is full; retry later");
    else
        snprintf(t->bad.msg, sizeof t->bad.msg,
                 "the answer would be larger than %zu bytes, this server's limit for one "
                 "connection; send less at once",
                 t->max_out);
    return -1;
}

/* Appends to the answer; -1 (answer set to a 413/503) once it passes max_out. */
static int put(tokjob_t *t, const char *s, size_t n) {
    if (t->out.len + n > t->max_out) return out_of_room(t);
    if (ul_buf_append(&t->out, s, n)) return out_of_room(t);
    return 0;
}

static int put_int(tokjob_t *t, long v) {
    char tmp[24];
    int n = snprintf(tmp, sizeof tmp, "%ld", v);
    return put(t, tmp, (size_t)n);
}

static int put_json_str(tokjob_t *t, const char *s, size_t n) {
    if (t->out.len + n + 2 > t->max_out) return out_of_room(t); /* even unescaped */
    if (put(t, "\"", 1) || ul_buf_append_json_str(&t->out, s, n) || put(t, "\"", 1))
        return out_of_room(t);
    return t->out.len > t->max_out ? out_of_room(t) : 0;
}

/* An optional boolean field: 0 when absent or valid, -1 after setting the 400. */
static int opt_bool(tokjob_t *t, const cJSON *root, const char *name, int *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsBool(v)) {
        char msg[96];
        snprintf(msg, sizeof msg, "'%s' must be a boolean", name);
        return bad(t, name, msg);
    }
    *out = cJSON_IsTrue(v);
    return 0;
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

/* A piece: a string when it is valid UTF-8 on its own, else the array of its bytes. */
static int put_piece(tokjob_t *t, const char *p, int n) {
    if (ul_utf8_check(p, (size_t)n) == (size_t)n) return put_json_str(t, p, (size_t)n);
    int rc = put(t, "[", 1);
    for (int i = 0; i < n && !rc; i++) {
        if (i) rc = put(t, ",", 1);
        if (!rc) rc = put_int(t, (unsigned char)p[i]);
    }
    return rc ? rc : put(t, "]", 1);
}

static int answer_tokens(tokjob_t *t, const int32_t *ids, int n, int with_pieces) {
    int cap = 256, rc = put(t, "{\"tokens\":[", 11);
    char *buf = with_pieces ? malloc((size_t)cap) : NULL;
    if (with_pieces && !buf) return out_of_room(t);
    for (int i = 0; i < n && !rc; i++) {
        if (i) rc = put(t, ",", 1);
        if (!with_pieces) {
            if (!rc) rc = put_int(t, ids[i]);
            continue;
        }
        int len = piece(t->codec, ids[i], 0, &buf, &cap);
        if (len < 0) {
            free(buf);
            return bad(t, "content", ul_strerror(len));
        }
        if (!rc) rc = put(t, "{\"id\":", 6);
        if (!rc) rc = put_int(t, ids[i]);
        if (!rc) rc = put(t, ",\"piece\":", 9);
        if (!rc) rc = put_piece(t, buf, len);
        if (!rc) rc = put(t, "}", 1);
    }
    free(buf);
    return rc ? rc : put(t, "]}", 2);
}

static cJSON *parse_object(tokjob_t *t) {
    size_t at;
    int rc = ul_api_body_check(t->body, t->body_len, t->bad.pbuf, sizeof t->bad.pbuf, &at);
    if (rc) {
        t->bad.param = t->bad.pbuf[0] ? t->bad.pbuf : NULL;
        t->bad.code = rc == 2 ? "nul_character" : "invalid_utf8";
        bad(t, t->bad.param,
            rc == 2 ? "the request contains \\u0000 (a NUL character), which this server does "
                      "not accept"
                    : "the request body is not valid UTF-8");
        return NULL;
    }
    cJSON *root = cJSON_ParseWithLength(t->body, t->body_len);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        t->bad.code = "invalid_json";
        bad(t, NULL, "the request body is not a JSON object");
        return NULL;
    }
    free(t->owned); /* cJSON copied what it needs */
    t->owned = NULL;
    t->body = NULL;
    return root;
}

static void run_tokenize(tokjob_t *t) {
    cJSON *root = parse_object(t);
    if (!root) return;
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(root, "content");
    int add_special = 0, parse_special = 1, with_pieces = 0;
    if (!cJSON_IsString(content)) {
        bad(t, "content", "'content' must be a string");
    } else if (!opt_bool(t, root, "add_special", &add_special) &&
               !opt_bool(t, root, "parse_special", &parse_special) &&
               !opt_bool(t, root, "with_pieces", &with_pieces)) {
        int32_t *ids = NULL;
        const char *text = content->valuestring;
        int n = tokenize(t->codec, text, strlen(text), add_special, parse_special, &ids);
        if (n == UL_ENOMEM)
            out_of_room(t);
        else if (n < 0)
            bad(t, "content", ul_strerror(n));
        else
            answer_tokens(t, ids, n, with_pieces);
        free(ids);
    }
    cJSON_Delete(root);
}

/* The ids of a "tokens" array into *ids (malloc'ed); returns the count, or -1 after
 * setting the 400. */
static int read_ids(tokjob_t *t, const cJSON *tokens, int32_t **ids) {
    char msg[128];
    if (!cJSON_IsArray(tokens)) return bad(t, "tokens", "'tokens' must be an array of token ids");
    int n = cJSON_GetArraySize(tokens), i = 0;
    *ids = malloc(sizeof **ids * (size_t)(n ? n : 1));
    if (!*ids) return out_of_room(t);
    const cJSON *it;
    cJSON_ArrayForEach(it, tokens) {
        double v = cJSON_IsNumber(it) ? it->valuedouble : -1;
        if (v < 0 || v >= t->codec->n_vocab || v != (double)(int32_t)v) {
            snprintf(msg, sizeof msg, "tokens[%d] is not a token id (0..%d)", i,
                     (int)t->codec->n_vocab - 1);
            return bad(t, "tokens", msg);
        }
        (*ids)[i++] = (int32_t)v;
    }
    return n;
}

/* The text of ids, U+FFFD for bytes that do not form UTF-8 (ul_buf_append_json_str). */
static void run_detokenize(tokjob_t *t) {
    cJSON *root = parse_object(t);
    if (!root) return;
    int32_t *ids = NULL;
    int n = read_ids(t, cJSON_GetObjectItemCaseSensitive(root, "tokens"), &ids);
    cJSON_Delete(root);
    ul_buf_t text = {0};
    char *p = NULL;
    int pcap = 0, rc = 0;
    /* the escaped text may take up to 6 bytes per byte: stop once even 1 per byte is over */
    for (int i = 0; i < n && rc >= 0; i++) {
        rc = piece(t->codec, ids[i], i == 0, &p, &pcap);
        if (rc > 0 && (text.len + (size_t)rc > t->max_out || ul_buf_append(&text, p, (size_t)rc)))
            rc = UL_E2BIG;
    }
    if (rc == UL_E2BIG || rc == UL_ENOMEM)
        out_of_room(t);
    else if (rc < 0)
        bad(t, "tokens", ul_strerror(rc));
    else if (n >= 0 && !put(t, "{\"content\":", 11) &&
             !put_json_str(t, text.p ? text.p : "", text.len))
        put(t, "}", 1);
    free(p);
    free(ids);
    ul_buf_free(&text);
}

static void job_run(ul_api_job_t *j) {
    tokjob_t *t = (tokjob_t *)j;
    if (t->detok)
        run_detokenize(t);
    else
        run_tokenize(t);
}

/* ---- loop side ---------------------------------------------------------------------- */

static void tokjob_free(tokjob_t *t) {
    free(t->owned);
    ul_buf_free(&t->out);
    free(t);
}

static void job_done(ul_api_job_t *j, int status) {
    tokjob_t *t = (tokjob_t *)j;
    ul_api_t *a = j->api;
    if (t->req) {
        ul_http_req_set_cbs(t->req, NULL, NULL);
        if (status)
            ul_api_error(t->req, 503, "server_error", NULL, NULL, "the request was not processed");
        else if (t->bad.status)
            ul_api_reject(a, t->req, &t->bad);
        else
            ul_http_respond_buf(t->req, 200, NULL, &t->out);
    }
    tokjob_free(t);
}

static void on_abort(ul_http_req_t *req, void *data, int reason) {
    tokjob_t *t = data;
    t->req = NULL; /* a waiting job is dropped, a running one answers nobody */
}

static int handle(ul_api_t *a, ul_http_req_t *req, int detok) {
    tokjob_t *t = calloc(1, sizeof *t);
    if (!t) return ul_api_error(req, 503, "server_error", NULL, NULL, "out of memory");
    t->req = req;
    t->codec = &a->codec;
    t->detok = detok;
    t->job.run = job_run;
    t->job.done = job_done;
    t->job.req = &t->req;
    t->job.api = a;
    if (req->body_len <= UL_API_JOB_BYTES || !a->server) {
        t->body = req->body;
        t->body_len = req->body_len;
        t->max_out = ul_http_resp_room(req, &t->over_status);
        job_run(&t->job);
        job_done(&t->job, 0);
        return 0;
    }
    /* the worker may start before submit returns: body and callbacks first */
    t->owned = ul_http_req_take_body(req, &t->body_len);
    t->body = t->owned ? t->owned : "";
    /* what the job holds is charged to the budget: its copy of the body, the parse tree and
     * the ids (3x the body), and the answer, at most what is left of the connection's room
     * and at most 16x the body (a piece per few bytes, escaped) */
    size_t room = ul_http_resp_room(req, &t->over_status), work = 3 * t->body_len;
    t->max_out = room > work ? room - work : 0;
    if (t->max_out > 16 * t->body_len + 4096) t->max_out = 16 * t->body_len + 4096;
    t->job.charge = work + t->max_out;
    if (t->max_out < t->body_len / 2) { /* no answer fits: refuse before any work */
        out_of_room(t);
        ul_api_reject(a, req, &t->bad);
        tokjob_free(t);
        return 0;
    }
    if (ul_api_job_start(a, req, &t->job, on_abort, t)) tokjob_free(t);
    return 0;
}

int ul_api_tokenize(ul_http_req_t *req, void *data) { return handle(data, req, 0); }

int ul_api_detokenize(ul_http_req_t *req, void *data) { return handle(data, req, 1); }
