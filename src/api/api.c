/* Routes, error bodies, and the small endpoints: /health (liveness plus live counters;
 * 503 while draining so a load balancer stops sending), /metrics (Prometheus text
 * exposition format 0.0.4) and /v1/models. */
#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "api/gen.h"
#include "base/utf8.h"
#include "chat/chat.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

void ul_api_init(ul_api_t *a, ul_sched_t *sched, const ul_codec_t *codec, const char *model_id) {
    memset(a, 0, sizeof *a);
    a->sched = sched;
    a->codec = *codec;
    snprintf(a->model_id, sizeof a->model_id, "%s", model_id ? model_id : "null");
    a->created = (int64_t)time(NULL);
    a->default_max_tokens = 0;
    a->parse_special = 1;
    ul_pace_init(&a->pace);
}

static void pace_on_step(ul_driver_t *d, void *data) {
    ul_api_t *a = data;
    ul_pace_observe(&a->pace, d->sched->now_ns, uv_metrics_idle_time(d->loop));
}

void ul_api_pace_start(ul_api_t *a, ul_driver_t *d) {
    /* the hook reads the loop's idle time; the option only adds a clock read per poll */
    uv_loop_configure(d->loop, UV_METRICS_IDLE_TIME);
    d->on_step = pace_on_step;
    d->on_step_data = a;
}

void ul_api_free(ul_api_t *a) {
    ul_http_keys_free(&a->api_keys);
    ul_http_keys_free(&a->metrics_keys);
    free(a->chat_template_override);
    a->chat_template_override = NULL;
    ul_chat_tmpl_free(a->chat_tmpl);
    ul_chat_tmpl_free(a->chat_tmpl_tool);
    ul_chat_tmpl_free(a->chat_tmpl_hermes);
    a->chat_tmpl = a->chat_tmpl_tool = a->chat_tmpl_hermes = NULL;
    ul_api_structured_free(a);
    ul_api_share_free(&a->share);
    free(a->ready.embd);
    a->ready.embd = NULL;
}

static int draining(const ul_api_t *a) {
    return a->draining || (a->server && ul_http_server_draining(a->server));
}

int ul_api_refuse_draining(ul_api_t *a, ul_http_req_t *req) {
    if (!draining(a)) return 0;
    a->stats.completions_rejected++;
    ul_http_resp_header(req, "Retry-After", "5");
    ul_api_error(req, 503, "server_error", NULL, "shutting_down", "the server is shutting down");
    return 1;
}

int ul_api_refuse_generate(ul_api_t *a, ul_http_req_t *req) {
    if (ul_api_refuse_draining(a, req)) return 1;
    if (!a->embed_only) return 0;
    a->stats.completions_rejected++;
    ul_api_error(req, 501, "invalid_request_error", NULL, "generation_not_supported",
                 "this model is an embedding model (an encoder): it serves /v1/embeddings and "
                 "/embedding, not text generation");
    return 1;
}

int ul_api_register(ul_api_t *a, ul_router_t *r) {
    int rc = ul_router_add(r, UL_HTTP_GET, "/health", ul_api_health, a);
    if (!rc) rc = ul_router_add(r, UL_HTTP_GET, "/health/live", ul_api_health_live, a);
    if (!rc) rc = ul_router_add(r, UL_HTTP_GET, "/health/ready", ul_api_health_ready, a);
    if (!rc) rc = ul_router_add(r, UL_HTTP_GET, "/metrics", ul_api_metrics, a);
    if (!rc) rc = ul_router_add(r, UL_HTTP_GET, "/v1/models", ul_api_models, a);
    if (!rc) rc = ul_router_add(r, UL_HTTP_POST, "/v1/completions", ul_api_completions, a);
    if (!rc)
        rc = ul_router_add(r, UL_HTTP_POST, "/v1/chat/completions", ul_api_chat_completions, a);
    if (!rc) rc = ul_router_add(r, UL_HTTP_POST, "/apply-template", ul_api_apply_template, a);
    if (!rc) rc = ul_router_add(r, UL_HTTP_POST, "/v1/responses", ul_api_responses, a);
    if (!rc) rc = ul_router_add(r, UL_HTTP_POST, "/v1/messages", ul_api_messages, a);
    if (!rc)
        rc = ul_router_add(r, UL_HTTP_POST, "/v1/messages/count_tokens",
                           ul_api_messages_count_tokens, a);
    if (!rc) rc = ul_router_add(r, UL_HTTP_POST, "/v1/embeddings", ul_api_embeddings, a);
    if (!rc) rc = ul_router_add(r, UL_HTTP_POST, "/embedding", ul_api_embedding, a);
    /* llama-server's four names */
    static const char *const rerank[] = {"/v1/rerank", "/rerank", "/v1/reranking", "/reranking"};
    for (size_t i = 0; i < sizeof rerank / sizeof rerank[0] && !rc; i++)
        rc = ul_router_add(r, UL_HTTP_POST, rerank[i], ul_api_rerank, a);
    if (!rc) rc = ul_router_add(r, UL_HTTP_POST, "/tokenize", ul_api_tokenize, a);
    if (!rc) rc = ul_router_add(r, UL_HTTP_POST, "/detokenize", ul_api_detokenize, a);
    /* GET /v1/models/{id}: the router matches exact paths, so one route per name */
    char path[UL_API_NAME_MAX + 16];
    for (int i = -1; i < a->n_aliases && !rc; i++) {
        snprintf(path, sizeof path, "/v1/models/%s", i < 0 ? a->model_id : a->aliases[i]);
        rc = ul_router_add(r, UL_HTTP_GET, path, ul_api_model, a);
        if (rc == UL_EBUSY) rc = 0;
    }
    return rc;
}

const char *ul_api_anthropic_type(int status) {
    switch (status) {
    case 400:
        return "invalid_request_error";
    case 401:
        return "authentication_error";
    case 403:
        return "permission_error";
    case 404:
        return "not_found_error";
    case 413:
        return "request_too_large";
    case 429:
        return "rate_limit_error";
    case 503:
        return "overloaded_error";
    default:
        return status < 500 ? "invalid_request_error" : "api_error";
    }
}

/* Anthropic's SDK reads {"type":"error","error":{"type","message"}}; it has no param, so
 * the message starts with it, as Anthropic writes its own ("messages.0.content: ..."). */
static int anthropic_body(ul_buf_t *b, int status, const char *param, const char *message) {
    int rc = ul_buf_puts(b, "{\"type\":\"error\",\"error\":{\"type\":\"");
    rc |= ul_buf_puts(b, ul_api_anthropic_type(status));
    rc |= ul_buf_puts(b, "\",\"message\":\"");
    if (param) rc |= ul_buf_append_json_str(b, param, strlen(param));
    if (param) rc |= ul_buf_puts(b, ": ");
    rc |= ul_buf_append_json_str(b, message, strlen(message));
    return rc | ul_buf_puts(b, "\"}}");
}

static int is_anthropic_path(const ul_http_req_t *req) {
    static const char p[] = "/v1/messages";
    size_t n = sizeof p - 1;
    return req->path_len >= n && !memcmp(req->path, p, n) &&
           (req->path_len == n || req->path[n] == '/');
}

int ul_api_error(ul_http_req_t *req, int status, const char *type, const char *param,
                 const char *code, const char *message) {
    ul_buf_t body = {0}; /* ul_buf_append_json_str: invalid UTF-8 from a request is U+FFFD */
    if (is_anthropic_path(req))
        UL_ASSERT(anthropic_body(&body, status, param, message ? message : "") == 0);
    else
        UL_ASSERT(ul_buf_error_body(&body, type, param, code, message) == 0);
    if (ul_log_get_level() <= UL_LOG_LEVEL_DEBUG) {
        char pq[160], mq[600];
        UL_LOG_DEBUG(
            "conn=%llu req=%llu error %d param=%s: %s", (unsigned long long)req->conn_id,
            (unsigned long long)req->req_id, status,
            param ? ul_log_field(param, strlen(param), pq, sizeof pq) : "-",
            ul_log_field(message ? message : "", message ? strlen(message) : 0, mq, sizeof mq));
    }
    int rc = ul_http_respond(req, status, NULL, body.p, body.len);
    ul_buf_free(&body);
    return rc;
}

int ul_api_health(ul_http_req_t *req, void *data) {
    ul_api_t *a = data;
    const ul_sched_t *s = a->sched;
    char body[512];
    int n = snprintf(body, sizeof body,
                     "{\"status\":\"%s\",\"active_sequences\":%llu,\"waiting\":%d,"
                     "\"running\":%d,\"active_streams\":%llu,\"connections\":%llu,"
                     "\"kv_pages_free\":%d,\"kv_pages_total\":%d}",
                     draining(a) ? "draining" : "ok", (unsigned long long)a->stats.active_sequences,
                     s->n_waiting, s->n_running, (unsigned long long)a->stats.active_streams,
                     (unsigned long long)(a->server ? a->server->stats.conns_open : 0),
                     s->pool.n_free, s->pool.n_pages);
    if (draining(a)) ul_http_resp_header(req, "Retry-After", "5");
    return ul_http_respond(req, draining(a) ? 503 : 200, NULL, body, (size_t)n);
}

typedef struct {
    char *buf;
    size_t len, cap;
} text_t;

__attribute__((format(printf, 2, 3))) static void put(text_t *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    if (n > 0) t->len += (size_t)n < t->cap - t->len ? (size_t)n : t->cap - t->len - 1;
}

static void metric(text_t *t, const char *name, const char *type, const char *help, double value) {
    put(t, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, value);
}

static void histogram(text_t *t, const char *name, const char *help, const ul_hist_t *h) {
    put(t, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    uint64_t cum = 0;
    for (int i = 0; i < UL_HIST_N; i++) {
        cum += h->counts[i];
        put(t, "%s_bucket{le=\"%g\"} %llu\n", name, ul_hist_bounds[i], (unsigned long long)cum);
    }
    put(t, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.9g\n%s_count %llu\n", name,
        (unsigned long long)h->count, name, h->sum, name, (unsigned long long)h->count);
}

/* Serving under load: latency histograms, prefix cache, step-time model, admission. */
static void load_metrics(text_t *t, const ul_api_t *a) {
    const ul_sched_t *s = a->sched;
    const ul_sched_stats_t *ss = &s->stats;
    histogram(t, "uvllm_time_to_first_token_seconds", "request arrival to its first token",
              &ss->ttft);
    histogram(t, "uvllm_inter_token_seconds", "gap between two tokens of a sequence", &ss->itl);
    histogram(t, "uvllm_queue_seconds", "request arrival to its first step", &ss->queue);
    histogram(t, "uvllm_e2e_seconds", "request arrival to its end (stop, length, deadline)",
              &ss->e2e);
    metric(t, "uvllm_prefix_cache_query_tokens_total", "counter",
           "tokens looked up in the prefix cache at admission", (double)ss->prefix_query_tokens);
    metric(t, "uvllm_prefix_cache_hit_tokens_total", "counter",
           "tokens found in the prefix cache (not computed again)", (double)ss->prefix_hit_tokens);
    metric(t, "uvllm_prefix_cache_hit_ratio", "gauge", "hit tokens / looked-up tokens",
           ss->prefix_query_tokens ? (double)ss->prefix_hit_tokens / ss->prefix_query_tokens : 0);
    metric(t, "uvllm_prefix_cache_pages", "gauge", "cached KV pages no sequence holds",
           (double)s->pool.n_lru);
    metric(t, "uvllm_prefix_cache_evictions_total", "counter", "cached pages reused",
           (double)s->pool.evictions);
    metric(t, "uvllm_step_predicted_seconds_total", "counter",
           "the step-time model's predictions for the steps run", ss->predicted_us / 1e6);
    metric(t, "uvllm_step_last_predicted_seconds", "gauge", "prediction for the last step",
           s->step_pred_us / 1e6);
    metric(t, "uvllm_step_last_seconds", "gauge", "backend time of the last step",
           s->step_last_us / 1e6);
    metric(t, "uvllm_steps_budgeted_total", "counter", "steps whose prefill the latency target cut",
           (double)ss->steps_budgeted);
    metric(t, "uvllm_pipeline_depth", "gauge", "steps in flight at once (--pipeline)",
           (double)s->depth);
    metric(t, "uvllm_steps_ahead_total", "counter",
           "steps submitted while another was in flight (--pipeline 2)", (double)ss->steps_ahead);
    metric(t, "uvllm_tokens_chained_total", "counter",
           "decode inputs the backend filled in from the step before (--pipeline 2)",
           (double)ss->tokens_chained);
    metric(t, "uvllm_itl_target_seconds", "gauge", "the latency target (--itl-target-ms)",
           s->cfg.itl_target_ms > 0 ? s->cfg.itl_target_ms / 1e3 : 0);
    metric(t, "uvllm_predicted_wait_seconds", "gauge", "predicted wait of a new 1-token request",
           ul_sched_predict_wait_s(s, 1));
    metric(t, "uvllm_completions_overloaded_total", "counter",
           "requests answered 429 (--max-queue, --max-queue-wait-s)",
           (double)a->stats.completions_overloaded);
    metric(t, "uvllm_deadlines_total", "counter", "sequences ended by their deadline",
           (double)ss->deadlines);
    metric(t, "uvllm_ready", "gauge", "1 while /health/ready answers 200",
           !strcmp(ul_api_ready_state(a, NULL, 0), "ready"));
    metric(t, "uvllm_canary_total", "counter", "readiness canaries run", (double)a->ready.canaries);
    metric(t, "uvllm_canary_failures_total", "counter", "readiness canaries whose step failed",
           (double)a->ready.canary_failures);
    metric(t, "uvllm_step_errors_total", "counter", "backend steps that failed",
           (double)ss->step_errors);
    metric(t, "uvllm_http_unauthorized_total", "counter", "requests answered 401 (API key)",
           (double)a->unauthorized);
    metric(t, "uvllm_seqs_per_client_refused_total", "counter",
           "requests answered 429 (--max-seqs-per-client)", (double)a->seqs_refused);
    metric(t, "uvllm_jobs_total", "counter", "large requests handled off the loop",
           (double)a->jobs_total);
    metric(t, "uvllm_jobs_refused_total", "counter", "large requests refused (queue full)",
           (double)a->jobs_refused);
    metric(t, "uvllm_jobs_waiting", "gauge", "large requests waiting for a worker",
           (double)a->jobs_queued);
}

/* The memory budget for what clients make the server hold (serve --max-buffered-mem). */
static void budget_metrics(text_t *t, const ul_http_stats_t *hs) {
    metric(t, "uvllm_http_buffered_bytes", "gauge", "bytes held for clients (the budget's use)",
           (double)hs->mem_buffered);
    metric(t, "uvllm_http_buffered_limit_bytes", "gauge", "the budget (--max-buffered-mem)",
           (double)hs->mem_limit);
    metric(t, "uvllm_http_budget_refused_total", "counter",
           "requests and answers refused for the memory budget", (double)hs->mem_refused);
    metric(t, "uvllm_http_budget_evictions_total", "counter",
           "connections closed to free memory (clients not reading)", (double)hs->mem_evicted);
    metric(t, "uvllm_http_timeouts_total", "counter",
           "requests answered 408 (headers, body deadline or rate)", (double)hs->timeouts);
}

/* Speculative decoding (--spec-ngram, --model-draft): proposals, acceptance per verification. */
static void spec_metrics(text_t *t, const ul_sched_stats_t *ss) {
    metric(t, "uvllm_spec_verifications_total", "counter", "sequence-steps that verified proposals",
           (double)ss->spec_verifications);
    metric(t, "uvllm_spec_proposed_tokens_total", "counter", "tokens proposed",
           (double)ss->spec_proposed);
    metric(t, "uvllm_spec_accepted_tokens_total", "counter", "proposed tokens accepted",
           (double)ss->spec_accepted);
    metric(t, "uvllm_spec_draft_seconds_total", "counter", "time the draft model computed",
           ss->spec_draft_us / 1e6);
    const char *n = "uvllm_spec_acceptance_rate";
    put(t, "# HELP %s accepted share of one verification's proposals\n# TYPE %s histogram\n", n, n);
    uint64_t cum = 0;
    for (int i = 0; i < UL_SPEC_HIST_N; i++) {
        cum += ss->spec_accept_hist[i];
        put(t, "%s_bucket{le=\"%g\"} %llu\n", n, i / 10.0, (unsigned long long)cum);
    }
    put(t, "%s_bucket{le=\"+Inf\"} %llu\n%s_count %llu\n", n, (unsigned long long)cum, n,
        (unsigned long long)cum);
}

int ul_api_metrics(ul_http_req_t *req, void *data) {
    ul_api_t *a = data;
    const ul_sched_stats_t *ss = &a->sched->stats;
    const ul_http_stats_t *hs = a->server ? &a->server->stats : &(ul_http_stats_t){0};
    char buf[24576];
    text_t t = {buf, 0, sizeof buf};
    metric(&t, "uvllm_http_requests_total", "counter", "HTTP requests answered",
           (double)hs->requests_total);
    metric(&t, "uvllm_http_connections", "gauge", "open connections", (double)hs->conns_open);
    metric(&t, "uvllm_http_connections_total", "counter", "accepted connections",
           (double)hs->conns_total);
    metric(&t, "uvllm_http_connections_rejected_total", "counter",
           "connections refused over max-conns", (double)hs->conns_rejected);
    metric(&t, "uvllm_http_bytes_out_total", "counter", "bytes written", (double)hs->bytes_out);
    metric(&t, "uvllm_completions_total", "counter", "completion requests accepted",
           (double)a->stats.completions_total);
    metric(&t, "uvllm_completions_rejected_total", "counter", "completion requests refused",
           (double)a->stats.completions_rejected);
    metric(&t, "uvllm_completions_cancelled_total", "counter",
           "completions whose client left early", (double)a->stats.completions_cancelled);
    metric(&t, "uvllm_active_sequences", "gauge", "sequences not yet finished",
           (double)a->stats.active_sequences);
    metric(&t, "uvllm_active_streams", "gauge", "open SSE completion streams",
           (double)a->stats.active_streams);
    metric(&t, "uvllm_waiting_sequences", "gauge", "sequences waiting for prefill",
           (double)a->sched->n_waiting);
    metric(&t, "uvllm_prompt_tokens_total", "counter", "prompt tokens accepted",
           (double)a->stats.prompt_tokens);
    metric(&t, "uvllm_tokens_generated_total", "counter", "tokens generated",
           (double)ss->tokens_generated);
    metric(&t, "uvllm_steps_total", "counter", "backend steps", (double)ss->steps);
    metric(&t, "uvllm_step_compute_seconds_total", "counter", "backend time in steps",
           ss->compute_us / 1e6);
    metric(&t, "uvllm_preemptions_total", "counter", "sequences preempted for KV pages",
           (double)ss->preemptions);
    metric(&t, "uvllm_kv_pages_free", "gauge", "free KV pages", (double)a->sched->pool.n_free);
    metric(&t, "uvllm_kv_pages_total", "gauge", "KV pages", (double)a->sched->pool.n_pages);
    load_metrics(&t, a);
    spec_metrics(&t, ss);
    budget_metrics(&t, hs);
    return ul_http_respond(req, 200, "text/plain; version=0.0.4; charset=utf-8", buf, t.len);
}

/* One entry per name, as vLLM lists each --served-model-name: the id first, then the
 * aliases, each with the same meta and "root" naming the model they stand for. */
static void model_entry(const ul_api_t *a, cJSON *arr, const char *id) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "id", id);
    cJSON_AddStringToObject(m, "root", a->model_id);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)a->created);
    cJSON_AddStringToObject(m, "owned_by", "uvllm");
    cJSON *meta = cJSON_AddObjectToObject(m, "meta");
    cJSON_AddStringToObject(meta, "backend", a->sched->backend->vt->name);
    cJSON_AddNumberToObject(meta, "n_ctx", a->sched->backend->n_ctx);
    cJSON_AddNumberToObject(meta, "n_vocab", a->sched->backend->n_vocab);
    cJSON_AddItemToArray(arr, m);
}

/* GET /v1/models/{id}: the one entry, as OpenAI answers it. */
int ul_api_model(ul_http_req_t *req, void *data) {
    ul_api_t *a = data;
    const char *id = req->path + strlen("/v1/models/");
    cJSON *arr = cJSON_CreateArray();
    model_entry(a, arr, id);
    char *body = cJSON_PrintUnformatted(arr->child);
    cJSON_Delete(arr);
    UL_ASSERT(body);
    int rc = ul_http_respond(req, 200, NULL, body, strlen(body));
    cJSON_free(body);
    return rc;
}

int ul_api_models(ul_http_req_t *req, void *data) {
    ul_api_t *a = data;
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "object", "list");
    cJSON *arr = cJSON_AddArrayToObject(root, "data");
    model_entry(a, arr, a->model_id);
    for (int i = 0; i < a->n_aliases; i++) model_entry(a, arr, a->aliases[i]);
    char *body = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    UL_ASSERT(body);
    /* names come from the command line and the file system, which need not be UTF-8 */
    size_t n = strlen(body);
    ul_buf_t clean = {0};
    if (ul_utf8_check(body, n) != n && !ul_buf_reserve(&clean, ul_utf8_sanitized_len(body, n)))
        clean.len = ul_utf8_sanitize(body, n, clean.p);
    int rc = clean.len ? ul_http_respond(req, 200, NULL, clean.p, clean.len)
                       : ul_http_respond(req, 200, NULL, body, n);
    ul_buf_free(&clean);
    cJSON_free(body);
    return rc;
}
