/* Who may call what, and the load hint on every response: the two hooks `uvllm serve`
 * installs in net (ul_http_config_t.before / resp_header).
 *
 * ul_api_authorize runs as net's on_head hook: when a request's headers are complete,
 * before a 100 Continue and before its body is read, so a client without the key cannot
 * make the server hold a body (and trailers, which net never turns into headers, cannot
 * carry the key).
 *
 * With API keys (--api-key, --api-key-file, UVLLM_API_KEY) every path under /v1/ (also
 * unknown ones: 401 before 404, as OpenAI answers) and the tokenizer endpoints need
 * "Authorization: Bearer <key>" (or Anthropic's "x-api-key: <key>"); /metrics needs --metrics-key's
 * when set. Health stays open for probes and load balancers, and so is OPTIONS: CORS preflights are
 * answered by net before this runs (a browser sends them without credentials), and without CORS an
 * OPTIONS gets the router's 404/405 either way. */
#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

static int is_path(const ul_http_req_t *req, const char *p) {
    size_t n = strlen(p);
    return req->path_len == n && !memcmp(req->path, p, n);
}

static int needs_api_key(const ul_http_req_t *req) {
    return (req->path_len >= 3 && !memcmp(req->path, "/v1", 3) &&
            (req->path_len == 3 || req->path[3] == '/')) ||
           is_path(req, "/tokenize") || is_path(req, "/detokenize") ||
           is_path(req, "/apply-template");
}

/* Anthropic's SDK sends its key as "x-api-key: <key>": the same keys, the same check. */
static int x_api_key(const ul_http_keys_t *keys, const ul_http_req_t *req) {
    const ul_http_header_t *h = ul_http_req_header(req, "x-api-key");
    return h && h->value_len > 0 && ul_http_keys_match(keys, h->value, h->value_len);
}

int ul_api_authorize(ul_http_req_t *req, void *data) {
    ul_api_t *a = data;
    const ul_http_keys_t *keys = NULL;
    /* OPTIONS carries no credentials (a browser's preflight never does); no route
     * answers it with data, so it is never worth a 401 */
    if (req->method == UL_HTTP_OPTIONS) return 0;
    if (a->api_keys.n && needs_api_key(req))
        keys = &a->api_keys;
    else if (a->metrics_keys.n && is_path(req, "/metrics"))
        keys = &a->metrics_keys;
    if (!keys || ul_http_keys_check(keys, req) || x_api_key(keys, req)) return 0;
    a->unauthorized++;
    char path[200];
    UL_LOG_DEBUG("conn=%llu req=%llu %s: %s API key", (unsigned long long)req->conn_id,
                 (unsigned long long)req->req_id,
                 ul_log_field(req->path, req->path_len, path, sizeof path),
                 ul_http_req_header(req, "authorization") ? "wrong" : "no");
    if (req->path_len >= 12 && !memcmp(req->path, "/v1/messages", 12)) {
        /* in Anthropic's error shape there (ul_api_error) */
        ul_http_resp_header(req, "WWW-Authenticate", "Bearer");
        ul_api_error(req, 401, "invalid_request_error", NULL, "invalid_api_key",
                     "Incorrect API key provided");
    } else {
        ul_http_respond_unauthorized(req);
    }
    return 1;
}

/* The routes whose large bodies are handled as jobs (job.c). */
static int job_path(const ul_http_req_t *req) {
    return req->method == UL_HTTP_POST &&
           (is_path(req, "/tokenize") || is_path(req, "/detokenize") ||
            is_path(req, "/apply-template") || is_path(req, "/v1/completions") ||
            is_path(req, "/v1/chat/completions"));
}

int ul_api_head(ul_http_req_t *req, void *data) {
    ul_api_t *a = data;
    if (ul_api_authorize(req, data)) return 1;
    if (req->content_length <= UL_API_JOB_BYTES || !job_path(req)) return 0;
    int rc = ul_api_job_precheck(a, req);
    /* a job holds about 4x its body (job.c charges): refused now if that cannot fit */
    int st = 0;
    if (!rc && ul_http_resp_room(req, &st) / 4 < (size_t)req->content_length)
        rc = st == 413 ? UL_E2BIG : UL_ENOMEM;
    /* the body about to be read holds a job slot: a flood cannot pass this all at once */
    if (!rc) rc = ul_api_job_hold(a, req);
    if (!rc) return 0;
    a->jobs_refused++;
    ul_api_job_refuse(a, req, rc); /* the body stays unread: the connection ends */
    return 1;
}

/* Sequences running and waiting, the readiness canary left out (it is not load). */
size_t ul_api_load_header(char *out, size_t cap, void *data) {
    const ul_api_t *a = data;
    const ul_sched_t *s = a->sched;
    int32_t running = s->n_running, waiting = s->n_waiting;
    if (a->ready.canary_live) {
        if (a->ready.canary.state == UL_SEQ_RUNNING) running--;
        if (a->ready.canary.state == UL_SEQ_WAITING) waiting--;
    }
    int n = snprintf(out, cap, "X-Uvllm-Load: running=%d, waiting=%d\r\n", running, waiting);
    return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}
