/* POST /v1/completions: JSON body -> validated parameters -> prompt tokens -> a scheduler
 * sequence; its tokens come back on the loop thread and are written as SSE chunks
 * (stream) or collected into one response.
 *
 * Ownership of a completion (comp_t, which embeds its ul_seq_t): created by the handler,
 * freed only in the sequence's on_finish, which the scheduler calls exactly once. The
 * HTTP request is held in c->req until the completion answers it; if the client goes
 * away first, net calls on_abort, which forgets the request and cancels the sequence —
 * on_finish(CANCELLED) then follows within one step and frees the completion. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "base/buf.h"
#include "sched/stop.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

typedef ul_buf_t sbuf_t;

/* Output text is bounded by max_tokens pieces; an allocation failure here is not a
 * user-sized request, so it is treated as fatal like other small internal allocations. */
static void sbuf_add(sbuf_t *b, const char *s, size_t n) { UL_ASSERT(ul_buf_append(b, s, n) == 0); }

static void sbuf_add_json_str(sbuf_t *b, const char *s, size_t n) {
    UL_ASSERT(ul_buf_append_json_str(b, s, n) == 0);
}

typedef struct comp_s {
    ul_seq_t seq; /* first: the scheduler's callbacks get &seq */
    ul_api_t *api;
    ul_http_req_t *req; /* NULL once the client is gone */
    ul_sse_t *sse;
    int stream, stopped, added;
    int held;          /* a chunk waits in the connection for a later write (send_chunk hold) */
    int include_usage; /* stream_options.include_usage: a last chunk with usage */
    int32_t n_prompt, n_gen;
    uv_work_t work; /* long prompts are tokenized on libuv's thread pool */
    char *prompt;   /* the prompt while it is tokenized there (owned copy) */
    size_t prompt_len;
    int32_t *ids;
    int n_ids; /* count, or a UL_E* when ids is NULL */
    ul_detok_t detok;
    ul_stop_t stop;
    char *stop_strs[UL_STOP_MAX];
    int n_stop;
    sbuf_t text;   /* non-stream: the whole completion */
    sbuf_t prefix; /* stream: chunk JSON up to the text value */
    sbuf_t frame;  /* stream: scratch for one chunk */
    char id[48];
} comp_t;

/* ---- request parsing --------------------------------------------------------------- */

typedef struct params_s {
    const char *prompt;
    size_t prompt_len;
    int32_t max_tokens;
    int stream;
    int include_usage;
    ul_sampling_t sampling;
    const char *stop[UL_STOP_MAX];
    int n_stop;
} params_t;

typedef struct bad_s {
    const char *param;
    char msg[200];
} bad_t;

static int fail(bad_t *bad, const char *param, const char *msg) {
    bad->param = param;
    snprintf(bad->msg, sizeof bad->msg, "%s", msg);
    return UL_EINVAL;
}

static int get_number(cJSON *root, const char *name, double lo, double hi, int integer, double *out,
                      bad_t *bad) {
    cJSON *it = cJSON_GetObjectItemCaseSensitive(root, name);
    if (!it || cJSON_IsNull(it)) return 0;
    if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble) || it->valuedouble < lo ||
        it->valuedouble > hi || (integer && it->valuedouble != floor(it->valuedouble))) {
        bad->param = name;
        /* %.15g keeps integer bounds exact (1073741824, not 1.07374e+09) */
        snprintf(bad->msg, sizeof bad->msg, "'%s' must be %s between %.15g and %.15g", name,
                 integer ? "an integer" : "a number", lo, hi);
        return UL_EINVAL;
    }
    *out = it->valuedouble;
    return 1;
}

static int parse_stop(cJSON *root, params_t *p, bad_t *bad) {
    cJSON *st = cJSON_GetObjectItemCaseSensitive(root, "stop");
    if (!st || cJSON_IsNull(st)) return 0;
    if (cJSON_IsString(st)) {
        if (!st->valuestring[0]) return fail(bad, "stop", "'stop' must not be empty");
        p->stop[p->n_stop++] = st->valuestring;
        return 0;
    }
    if (!cJSON_IsArray(st) || cJSON_GetArraySize(st) > UL_STOP_MAX)
        return fail(bad, "stop", "'stop' must be a string or an array of up to 4 strings");
    cJSON *it;
    cJSON_ArrayForEach(it, st) {
        if (!cJSON_IsString(it) || !it->valuestring[0])
            return fail(bad, "stop", "'stop' entries must be non-empty strings");
        p->stop[p->n_stop++] = it->valuestring;
    }
    return 0;
}

static int parse_prompt(cJSON *root, params_t *p, bad_t *bad) {
    cJSON *pr = cJSON_GetObjectItemCaseSensitive(root, "prompt");
    if (pr && cJSON_IsArray(pr) && cJSON_GetArraySize(pr) == 1) pr = cJSON_GetArrayItem(pr, 0);
    if (!pr) return fail(bad, "prompt", "'prompt' is required");
    if (!cJSON_IsString(pr)) return fail(bad, "prompt", "'prompt' must be a string");
    p->prompt = pr->valuestring;
    p->prompt_len = strlen(pr->valuestring);
    return 0;
}

static int parse_params(ul_api_t *a, cJSON *root, params_t *p, bad_t *bad) {
    memset(p, 0, sizeof *p);
    ul_sampling_default(&p->sampling);
    p->max_tokens = a->default_max_tokens;
    if (!cJSON_IsObject(root)) return fail(bad, NULL, "the body must be a JSON object");
    int rc = parse_prompt(root, p, bad);
    if (rc) return rc;
    double v;
    if ((rc = get_number(root, "max_tokens", 1, 1 << 30, 1, &v, bad)) < 0) return rc;
    if (rc) p->max_tokens = (int32_t)v;
    if ((rc = get_number(root, "temperature", 0, 2, 0, &v, bad)) < 0) return rc;
    if (rc) p->sampling.temperature = (float)v;
    if ((rc = get_number(root, "top_p", 0, 1, 0, &v, bad)) < 0) return rc;
    if (rc) p->sampling.top_p = (float)v;
    if (rc && v <= 0) return fail(bad, "top_p", "'top_p' must be greater than 0");
    if ((rc = get_number(root, "seed", -9.2e18, 1.8e19, 1, &v, bad)) < 0) return rc;
    if (rc) p->sampling.seed = v < 0 ? (uint64_t)(int64_t)v : (uint64_t)v;
    /* Without a seed each request samples differently, as OpenAI's do. */
    else
        p->sampling.seed = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ULL ^ ++a->next_cmpl;
    if ((rc = get_number(root, "presence_penalty", -2, 2, 0, &v, bad)) < 0) return rc;
    if (rc) p->sampling.presence_penalty = (float)v;
    if ((rc = get_number(root, "frequency_penalty", -2, 2, 0, &v, bad)) < 0) return rc;
    if (rc) p->sampling.frequency_penalty = (float)v;
    if ((rc = get_number(root, "n", 1, 1, 1, &v, bad)) < 0)
        return fail(bad, "n", "only 'n' = 1 is supported");
    cJSON *st = cJSON_GetObjectItemCaseSensitive(root, "stream");
    if (st && !cJSON_IsNull(st) && !cJSON_IsBool(st))
        return fail(bad, "stream", "'stream' must be a boolean");
    p->stream = st && cJSON_IsTrue(st);
    cJSON *so = cJSON_GetObjectItemCaseSensitive(root, "stream_options");
    if (so && !cJSON_IsNull(so)) {
        cJSON *iu = cJSON_GetObjectItemCaseSensitive(so, "include_usage");
        if (!cJSON_IsObject(so) || (iu && !cJSON_IsBool(iu) && !cJSON_IsNull(iu)))
            return fail(bad, "stream_options",
                        "'stream_options' must be an object with a boolean include_usage");
        p->include_usage = iu && cJSON_IsTrue(iu);
    }
    cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (m && !cJSON_IsNull(m) && !cJSON_IsString(m))
        return fail(bad, "model", "'model' must be a string");
    return parse_stop(root, p, bad);
}

/* Returns a malloc'ed id array (*n ids) or NULL with *n = UL_E*. */
static int32_t *tokenize(const ul_codec_t *codec, const char *text, size_t len, int *n) {
    int cap = len + 8 < (1u << 30) ? (int)len + 8 : 1 << 30;
    for (int tries = 0; tries < 2; tries++) {
        int32_t *ids = malloc((size_t)cap * sizeof *ids);
        if (!ids) break;
        int rc = codec->tokenize(codec, text, len, ids, cap);
        if (rc >= 0) {
            *n = rc;
            return ids;
        }
        free(ids);
        if (rc == UL_ENOMEM || rc == UL_EINVAL || rc <= -(1 << 30)) {
            *n = rc == UL_EINVAL ? UL_EINVAL : UL_ENOMEM;
            return NULL;
        }
        cap = -rc;
    }
    *n = UL_ENOMEM;
    return NULL;
}

/* ---- output ------------------------------------------------------------------------ */

static void comp_free(comp_t *c) {
    ul_stop_free(&c->stop);
    for (int i = 0; i < c->n_stop; i++) free(c->stop_strs[i]);
    free(c->text.p);
    free(c->prefix.p);
    free(c->frame.p);
    free(c->prompt);
    free(c->ids);
    free(c);
}

/* hold: the chunk may wait for the stream's next write (ul_sched_may_hold_output). */
static int send_chunk(comp_t *c, const char *text, size_t len, const char *finish_reason,
                      int hold) {
    sbuf_t *f = &c->frame;
    f->len = 0;
    sbuf_add(f, c->prefix.p, c->prefix.len);
    sbuf_add_json_str(f, text, len);
    char tail[96];
    int n =
        snprintf(tail, sizeof tail, "\",\"index\":0,\"logprobs\":null,\"finish_reason\":%s%s%s}]}",
                 finish_reason ? "\"" : "", finish_reason ? finish_reason : "null",
                 finish_reason ? "\"" : "");
    sbuf_add(f, tail, (size_t)n);
    c->held = hold;
    return hold ? ul_sse_send_held(c->sse, f->p, f->len) : ul_sse_send(c->sse, f->p, f->len);
}

/* OpenAI's stream_options.include_usage: one more chunk, empty choices, with usage. */
static void send_usage_chunk(comp_t *c) {
    sbuf_t *f = &c->frame;
    f->len = 0;
    /* the prefix ends inside the choices array: rebuild the head up to "choices" */
    size_t head = c->prefix.len - strlen("[{\"text\":\"");
    sbuf_add(f, c->prefix.p, head);
    char tail[160];
    int n = snprintf(tail, sizeof tail,
                     "[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,"
                     "\"total_tokens\":%d}}",
                     c->n_prompt, c->n_gen, c->n_prompt + c->n_gen);
    sbuf_add(f, tail, (size_t)n);
    ul_sse_send(c->sse, f->p, f->len);
}

/* Text the client may see now. */
static void deliver(comp_t *c, const char *text, size_t len) {
    if (!len || !c->req) return;
    if (!c->stream) {
        sbuf_add(&c->text, text, len);
        return;
    }
    int hold = ul_sched_may_hold_output(c->api->sched, &c->seq);
    if (send_chunk(c, text, len, NULL, hold) == 0 && ul_sse_backpressured(c->sse))
        ul_sched_set_paused(c->api->sched, &c->seq, 1);
}

/* Runs a piece of text through the stop matcher; 1 when a stop string matched. */
static int emit(comp_t *c, const char *text, size_t len) {
    if (c->stop.n == 0) {
        deliver(c, text, len);
        return 0;
    }
    const char *out;
    size_t out_len;
    int rc = ul_stop_push(&c->stop, text, len, &out, &out_len);
    UL_ASSERT(rc >= 0);
    deliver(c, out, out_len);
    return rc;
}

static int on_token(ul_seq_t *q, int32_t tok, const ul_token_lp_t *lp) {
    (void)lp;
    comp_t *c = (comp_t *)q;
    const ul_codec_t *codec = &c->api->codec;
    c->n_gen++;
    c->api->stats.completion_tokens++;
    if (!c->req) return 0; /* client gone: the cancel is on its way */
    char piece[256];
    int n = codec->piece(codec, &c->detok, tok, piece, sizeof piece);
    if (n < 0) { /* a piece longer than 256 bytes is not a real token; keep going */
        UL_LOG_WARN("seq=%llu token %d: piece does not fit", (unsigned long long)q->id, tok);
        return 0;
    }
    c->stopped = emit(c, piece, (size_t)n);
    /* A held chunk leaves by this step at the latest when this token sent nothing (text
     * held back for UTF-8 or a possible stop string): holding is bounded in steps. */
    if (c->held && !c->stopped && !ul_sched_may_hold_output(c->api->sched, q)) {
        ul_sse_flush(c->sse);
        c->held = 0;
    }
    return c->stopped;
}

static void answer_json(comp_t *c, const char *finish_reason) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "id", c->id);
    cJSON_AddStringToObject(root, "object", "text_completion");
    cJSON_AddNumberToObject(root, "created", (double)c->api->created);
    cJSON_AddStringToObject(root, "model", c->api->model_id);
    cJSON *ch = cJSON_CreateObject();
    const char *text = ul_buf_cstr(&c->text);
    UL_ASSERT(text);
    cJSON_AddStringToObject(ch, "text", text);
    cJSON_AddNumberToObject(ch, "index", 0);
    cJSON_AddNullToObject(ch, "logprobs");
    cJSON_AddStringToObject(ch, "finish_reason", finish_reason);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(root, "choices"), ch);
    cJSON *u = cJSON_AddObjectToObject(root, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", c->n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", c->n_gen);
    cJSON_AddNumberToObject(u, "total_tokens", c->n_prompt + c->n_gen);
    char *body = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    UL_ASSERT(body);
    ul_http_respond(c->req, 200, NULL, body, strlen(body));
    cJSON_free(body);
}

static void answer_error(comp_t *c, int status, const char *type, const char *msg) {
    if (!c->stream) {
        ul_api_error(c->req, status, type, NULL, NULL, msg);
        return;
    }
    /* Headers are out already: an error event, then end without [DONE]. */
    sbuf_t *f = &c->frame;
    f->len = 0;
    sbuf_add(f, "{\"error\":{\"message\":\"", 21);
    sbuf_add_json_str(f, msg, strlen(msg));
    char tail[128];
    int n = snprintf(tail, sizeof tail, "\",\"type\":\"%s\",\"param\":null,\"code\":null}}", type);
    sbuf_add(f, tail, (size_t)n);
    ul_sse_send(c->sse, f->p, f->len);
    ul_sse_end(c->sse);
}

static void on_finish(ul_seq_t *q, ul_finish_t reason, int status) {
    comp_t *c = (comp_t *)q;
    ul_api_t *a = c->api;
    a->stats.active_sequences--;
    if (c->stream) a->stats.active_streams--;
    if (!c->req) {
        a->stats.completions_cancelled++;
        comp_free(c);
        return;
    }
    if (reason == UL_FINISH_STOP || reason == UL_FINISH_LENGTH) {
        if (!c->stopped) { /* text held back for undecided UTF-8 or stop strings */
            char tail[64];
            int n = a->codec.flush(&a->codec, &c->detok, tail, sizeof tail);
            if (n > 0) c->stopped = emit(c, tail, (size_t)n);
            if (!c->stopped && c->stop.n) {
                const char *out;
                size_t len;
                ul_stop_flush(&c->stop, &out, &len);
                deliver(c, out, len);
            }
        }
        const char *fr = reason == UL_FINISH_STOP ? "stop" : "length";
        if (c->stream) {
            send_chunk(c, "", 0, fr, 0);
            if (c->include_usage) send_usage_chunk(c);
            ul_sse_done(c->sse);
        } else {
            answer_json(c, fr);
        }
    } else if (reason == UL_FINISH_CANCELLED) {
        answer_error(c, 503, "server_error", "the server is shutting down");
    } else {
        char msg[128];
        snprintf(msg, sizeof msg, "generation failed: %s", ul_strerror(status));
        answer_error(c, 500, "server_error", msg);
    }
    comp_free(c);
}

static void on_abort(ul_http_req_t *req, void *data, int reason) {
    comp_t *c = data;
    UL_LOG_DEBUG("conn=%llu req=%llu client gone (%s): cancelling seq=%llu",
                 (unsigned long long)req->conn_id, (unsigned long long)req->req_id,
                 ul_err_name(reason), (unsigned long long)c->seq.id);
    c->req = NULL;
    c->sse = NULL;
    if (c->added) ul_sched_cancel(c->api->sched, &c->seq);
    /* else the prompt is still being tokenized: tokenized_cb sees req == NULL and frees */
}

static void on_drain(ul_http_req_t *req, void *data) {
    comp_t *c = data;
    ul_sched_set_paused(c->api->sched, &c->seq, 0);
}

/* ---- handler ----------------------------------------------------------------------- */

static comp_t *comp_new(ul_api_t *a, ul_http_req_t *req, const params_t *p) {
    comp_t *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->api = a;
    c->req = req;
    c->stream = p->stream;
    c->include_usage = p->include_usage;
    snprintf(c->id, sizeof c->id, "cmpl-%llx%06llx", (unsigned long long)a->created,
             (unsigned long long)++a->next_cmpl);
    c->seq.max_tokens = p->max_tokens;
    c->seq.sampling = p->sampling;
    c->seq.on_token = on_token;
    c->seq.on_finish = on_finish;
    c->seq.data = c;
    if (a->codec.detok_init) a->codec.detok_init(&a->codec, &c->detok);
    for (int i = 0; i < p->n_stop; i++) {
        c->stop_strs[i] = strdup(p->stop[i]);
        if (!c->stop_strs[i]) {
            comp_free(c);
            return NULL;
        }
        c->n_stop++;
    }
    ul_stop_init(&c->stop, (const char *const *)c->stop_strs, c->n_stop);
    if (c->stream) {
        char head[160];
        int n = snprintf(head, sizeof head,
                         "{\"id\":\"%s\",\"object\":\"text_completion\","
                         "\"created\":%lld,\"model\":\"",
                         c->id, (long long)a->created);
        sbuf_add(&c->prefix, head, (size_t)n);
        sbuf_add_json_str(&c->prefix, a->model_id, strlen(a->model_id));
        sbuf_add(&c->prefix, "\",\"choices\":[{\"text\":\"", 22);
    }
    return c;
}

static int reject_add(ul_api_t *a, ul_http_req_t *req, int rc, int n_prompt) {
    char msg[200];
    a->stats.completions_rejected++;
    switch (rc) {
    case UL_E2BIG:
        snprintf(msg, sizeof msg, "the prompt is %d tokens; this model's context holds %d tokens",
                 n_prompt, a->sched->backend->n_ctx);
        return ul_api_error(req, 400, "invalid_request_error", "prompt", "context_length_exceeded",
                            msg);
    case UL_EFULL:
        ul_http_resp_header(req, "Retry-After", "1");
        return ul_api_error(req, 503, "server_error", NULL, "server_busy",
                            "too many requests in flight; retry later");
    case UL_EINVAL:
        return ul_api_error(req, 400, "invalid_request_error", "prompt", NULL,
                            "the prompt has no tokens");
    default:
        ul_http_resp_header(req, "Retry-After", "1");
        return ul_api_error(req, 503, "server_error", NULL, NULL, "out of memory");
    }
}

/* The prompt is tokenized: queue the sequence and start answering. */
static void admit(ul_api_t *a, comp_t *c) {
    ul_http_req_t *req = c->req;
    int n_prompt = c->n_ids;
    int rc = !c->ids         ? n_prompt
             : n_prompt == 0 ? UL_EINVAL
                             : ul_sched_add(a->sched, &c->seq, c->ids, n_prompt);
    free(c->ids);
    c->ids = NULL;
    if (rc) {
        comp_free(c);
        reject_add(a, req, rc, n_prompt);
        return;
    }
    c->added = 1;
    c->n_prompt = n_prompt;
    a->stats.completions_total++;
    a->stats.active_sequences++;
    a->stats.prompt_tokens += (uint64_t)n_prompt;
    if (c->stream) {
        a->stats.active_streams++;
        rc = ul_sse_start(req, &c->sse);
        /* On failure the connection is going away: on_abort follows and cancels. */
        if (rc)
            UL_LOG_DEBUG("conn=%llu sse start: %s", (unsigned long long)req->conn_id,
                         ul_strerror(rc));
    }
}

static void tokenize_work(uv_work_t *w) {
    comp_t *c = w->data;
    c->ids = tokenize(&c->api->codec, c->prompt, c->prompt_len, &c->n_ids);
}

static void tokenized_cb(uv_work_t *w, int status) {
    comp_t *c = w->data;
    free(c->prompt);
    c->prompt = NULL;
    if (!c->req) { /* the client left meanwhile */
        comp_free(c);
        return;
    }
    if (status) { /* cancelled by libuv: not expected, answer rather than hang */
        free(c->ids);
        c->ids = NULL;
        c->n_ids = UL_ECANCELED;
    }
    admit(c->api, c);
}

/* Prompts longer than this are tokenized off the loop thread, so one huge prompt does
 * not stall every other stream. */
#define ASYNC_TOKENIZE_BYTES 4096

static int start(ul_api_t *a, ul_http_req_t *req, const params_t *p) {
    comp_t *c = comp_new(a, req, p);
    if (!c) return reject_add(a, req, UL_ENOMEM, 0);
    ul_http_req_set_cbs(req, &(ul_http_req_cbs_t){.on_abort = on_abort, .on_drain = on_drain}, c);
    if (p->prompt_len > ASYNC_TOKENIZE_BYTES && a->server) {
        c->prompt = malloc(p->prompt_len + 1);
        if (c->prompt) {
            memcpy(c->prompt, p->prompt, p->prompt_len + 1);
            c->prompt_len = p->prompt_len;
            c->work.data = c;
            if (uv_queue_work(a->server->loop, &c->work, tokenize_work, tokenized_cb) == 0)
                return 0;
            free(c->prompt);
            c->prompt = NULL;
        }
    }
    c->ids = tokenize(&a->codec, p->prompt, p->prompt_len, &c->n_ids);
    admit(a, c);
    return 0;
}

int ul_api_completions(ul_http_req_t *req, void *data) {
    ul_api_t *a = data;
    if (a->server && ul_http_server_draining(a->server)) {
        a->stats.completions_rejected++;
        ul_http_resp_header(req, "Retry-After", "5");
        return ul_api_error(req, 503, "server_error", NULL, "shutting_down",
                            "the server is shutting down");
    }
    cJSON *root = cJSON_ParseWithLength(req->body, req->body_len);
    if (!root) {
        a->stats.completions_rejected++;
        return ul_api_error(req, 400, "invalid_request_error", NULL, "invalid_json",
                            "the request body is not valid JSON");
    }
    params_t p;
    bad_t bad = {0};
    int rc = parse_params(a, root, &p, &bad);
    if (rc == 0) {
        start(a, req, &p);
    } else {
        a->stats.completions_rejected++;
        ul_api_error(req, 400, "invalid_request_error", bad.param, NULL, bad.msg);
    }
    cJSON_Delete(root); /* params point into it: start() copies what it keeps */
    return 0;
}
