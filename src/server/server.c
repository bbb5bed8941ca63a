/* The composition root (server.h): builds backend -> scheduler -> api -> router -> HTTP on
 * one loop from a configuration, and takes it down again in the reverse order: the HTTP
 * server closes (with a grace period for open streams), then the driver (which cancels
 * what is left and waits for steps in flight), then the owner's callback; memory last, in
 * ul_server_free. */
#include <string.h>

#include "base/size.h"
#include "model/model.h"
#include "server/server.h"
#include "server/setup.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

static int setup_sched(ul_server_t *sv, ul_codec_t *codec) {
    const ul_server_config_t *c = &sv->cfg;
    /* a backend with a step limit (sized from --max-batch-tokens at create) sets the budget */
    ul_sched_config_t scfg = {.max_batch_tokens =
                                  sv->backend->max_step_tokens ? 0 : c->max_batch_tokens,
                              .max_seqs = c->max_seqs,
                              .no_prefix_cache = c->no_prefix_cache,
                              .itl_target_ms = c->itl_target_ms > 0 ? c->itl_target_ms : -1,
                              .pipeline = c->pipeline,
                              .spec_ngram = c->spec_ngram,
                              .spec_draft_max = c->draft_max,
                              .spec_draft_min = c->draft_min};
    if (sv->model) {
        ul_codec_init_vocab(codec, sv->model->vocab);
        scfg.is_eog = codec->is_eog;
        scfg.eog_ctx = (void *)sv->model->vocab;
    } else {
        ul_codec_init_null(codec, sv->backend->n_vocab, sv->backend->eos_id);
    }
    int rc = ul_sched_init(&sv->sched, sv->backend, &scfg);
    if (rc) return rc;
    if ((rc = ul_driver_init(sv->loop, &sv->driver, &sv->sched)) != 0) {
        ul_sched_free(&sv->sched);
        return rc;
    }
    sv->driver.data = sv;
    sv->sched_up = 1;
    return 0;
}

static int setup_http(ul_server_t *sv) {
    const ul_server_config_t *c = &sv->cfg;
    ul_http_config_t hc;
    ul_http_config_default(&hc);
    hc.host = c->host;
    hc.port = c->port;
    hc.max_body = (size_t)c->max_body;
    hc.max_conns = (unsigned)c->max_conns;
    hc.header_timeout_ms = (uint64_t)(c->header_timeout * 1000);
    hc.idle_timeout_ms = (uint64_t)(c->idle_timeout * 1000);
    hc.stall_timeout_ms = (uint64_t)(c->stall_timeout * 1000);
    if (c->linger_ms) hc.linger_ms = c->linger_ms;
    hc.access_log = !c->no_access_log;
    hc.cors_origins = sv->cfg.cors.v;
    hc.n_cors_origins = (size_t)c->cors.n;
    hc.request_timeout_ms = (uint64_t)(c->request_timeout * 1000);
    hc.min_body_rate = (size_t)c->min_body_rate;
    hc.max_buffered_mem = (size_t)c->max_buffered_mem; /* 0: net's default */
    if (c->max_conn_mem) hc.max_conn_mem = (size_t)c->max_conn_mem;
    hc.on_head = ul_api_head; /* credentials (and job slots) before any body byte is read */
    hc.resp_header = ul_api_load_header;
    hc.hook_data = &sv->api;
    int rc = ul_http_server_init(sv->loop, &sv->http, &hc, &sv->router);
    if (rc) return rc;
    sv->http_up = 1;
    char m1[32], m2[32];
    UL_LOG_INFO("memory for clients: %s (%s), %s per connection",
                ul_size_format((int64_t)sv->http.cfg.max_buffered_mem, m1, sizeof m1),
                c->max_buffered_mem ? "--max-buffered-mem" : "default",
                ul_size_format((int64_t)sv->http.cfg.max_conn_mem, m2, sizeof m2));
    sv->http.data = sv;
    sv->api.server = &sv->http;
    rc = ul_http_server_listen(&sv->http);
    if (rc)
        snprintf(sv->err, sizeof sv->err, "cannot listen on %s:%d: %s", c->host, c->port,
                 uv_strerror(rc));
    return rc;
}

static int setup(ul_server_t *sv) {
    ul_codec_t codec;
    int rc = ul_server_make_backend(sv);
    if (!rc) rc = setup_sched(sv, &codec);
    if (rc) return rc;
    ul_api_init(&sv->api, &sv->sched, &codec, ul_server_model_id(sv));
    ul_api_pace_start(&sv->api, &sv->driver);
    if ((rc = ul_server_setup_api(sv)) != 0) return rc;
    if ((rc = ul_server_setup_chat(sv)) != 0) return rc;
    if ((rc = ul_server_setup_keys(sv)) != 0) return rc;
    ul_router_init(&sv->router);
    if ((rc = ul_api_register(&sv->api, &sv->router)) != 0) return rc;
    return setup_http(sv);
}

int ul_server_init(uv_loop_t *loop, ul_server_t *sv, const ul_server_config_t *cfg) {
    memset(sv, 0, sizeof *sv);
    sv->loop = loop;
    sv->cfg = *cfg;
    sv->cfg.file_text = NULL; /* the caller's */
    if (!sv->cfg.backend) sv->cfg.backend = sv->cfg.model ? "cpu" : "null";
    int rc = setup(sv);
    if (rc) {
        if (!sv->err[0]) snprintf(sv->err, sizeof sv->err, "cannot start: %s", ul_strerror(rc));
        if (sv->http_up) ul_http_server_shutdown(&sv->http, 0, NULL);
        if (sv->sched_up) ul_driver_close(&sv->driver, NULL);
        return rc;
    }
    UL_LOG_INFO("serving model '%s' on the %s backend (n_ctx %d, %d KV pages of %d)",
                sv->api.model_id, sv->backend->vt->name, sv->backend->n_ctx, sv->backend->n_pages,
                sv->backend->page_size);
    ul_server_log_kv(sv);
    if (sv->cfg.canary_interval_s > 0 &&
        ul_api_ready_start(&sv->api, loop, sv->cfg.canary_interval_s))
        UL_LOG_WARN("readiness canary not started: /health/ready stays 503");
    return 0;
}

int ul_server_port(const ul_server_t *sv) { return ul_http_server_port(&sv->http); }

static void on_driver_closed(ul_driver_t *d) {
    ul_server_t *sv = d->data;
    UL_LOG_INFO("scheduler stopped");
    if (sv->close_cb) sv->close_cb(sv);
}

static void on_http_closed(ul_http_server_t *h) {
    ul_server_t *sv = h->data;
    UL_LOG_INFO("all connections closed");
    ul_api_ready_stop(&sv->api);
    if (sv->drain_timer_up) uv_close((uv_handle_t *)&sv->drain_timer, NULL);
    sv->drain_timer_up = 0;
    ul_driver_close(&sv->driver, on_driver_closed);
}

/* The listener closes; open requests get grace_ms. */
static void close_http(ul_server_t *sv, uint64_t grace_ms) {
    if (sv->drain_timer_up) uv_timer_stop(&sv->drain_timer);
    UL_LOG_INFO("shutting down (%s)",
                grace_ms ? "in-flight requests may finish" : "cutting connections now");
    ul_http_server_shutdown(&sv->http, grace_ms, on_http_closed);
}

static uint64_t ms(double s) { return (uint64_t)(s * 1000); }

static void on_drain_delay(uv_timer_t *t) {
    ul_server_t *sv = t->data;
    UL_LOG_INFO("drain delay over: closing the listener");
    close_http(sv, ms(sv->cfg.shutdown_grace));
}

/* The first call turns readiness (and /health, and new /v1 work) 503 at once; with
 * --drain-delay-s the listener stays open that long so load balancers notice and stop
 * sending before connections are refused. */
void ul_server_shutdown(ul_server_t *sv, ul_server_cb cb) {
    sv->close_cb = cb;
    if (++sv->stops > 1) {
        close_http(sv, 0);
        return;
    }
    sv->api.draining = 1;
    ul_api_ready_stop(&sv->api);
    ul_http_server_drain_begin(&sv->http);
    if (sv->cfg.drain_delay_s > 0 && uv_timer_init(sv->loop, &sv->drain_timer) == 0) {
        sv->drain_timer_up = 1;
        sv->drain_timer.data = sv;
        uv_timer_start(&sv->drain_timer, on_drain_delay, ms(sv->cfg.drain_delay_s), 0);
        UL_LOG_INFO("draining: not ready; the listener closes in %.1f s", sv->cfg.drain_delay_s);
        return;
    }
    close_http(sv, ms(sv->cfg.shutdown_grace));
}

void ul_server_close(ul_server_t *sv, ul_server_cb cb) {
    sv->close_cb = cb;
    sv->stops = 2;
    sv->api.draining = 1;
    close_http(sv, 0);
}

void ul_server_free(ul_server_t *sv) {
    ul_api_free(&sv->api);
    if (sv->sched_up) ul_sched_free(&sv->sched);
    if (sv->backend) ul_backend_destroy(sv->backend);
    if (sv->model) ul_model_free(sv->model);
    if (sv->draft_model) ul_model_free(sv->draft_model);
    sv->sched_up = 0, sv->backend = NULL, sv->model = sv->draft_model = NULL;
}
