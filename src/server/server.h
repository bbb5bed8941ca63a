/* The composition root: one call builds the whole server from a configuration (config.h)
 * on a libuv loop, the same way for `uvllm serve`, the tests and the fuzzers:
 *   backend (null, cpu with a GGUF model, or cuda) and its model -> scheduler + driver
 *   -> api (chat template, keys, aliases, readiness canary) -> router -> HTTP listener.
 *
 * Loop thread only. Lifecycle (a loop-bound handle, libuv's shape):
 *   ul_server_init(loop, sv, cfg)   loads, creates, listens; 0 or a negative UL_E* with
 *                                   sv->err saying why (sv->bad_config: the configuration's
 *                                   values were wrong, a usage error). On failure the
 *                                   handles it opened are already closing: run the loop
 *                                   until it returns, then ul_server_free.
 *   ul_server_shutdown(sv, cb)      SIGTERM's policy: the first call drains (readiness and
 *                                   new work 503, --drain-delay-s with the listener open,
 *                                   then --shutdown-grace for open streams); a second call
 *                                   cuts every connection at once.
 *   ul_server_close(sv, cb)         cuts at once (no drain, no grace).
 *   cb(sv)                          every handle is closed; the counters are still
 *                                   readable; then ul_server_free (in cb or after uv_run).
 *   ul_server_free(sv)              releases the api, scheduler, backend and model.
 * The configuration is copied; the strings it points to must outlive the server. */
#ifndef UL_SERVER_SERVER_H
#define UL_SERVER_SERVER_H

#include <uv.h>

#include "api/api.h"
#include "server/config.h"

typedef struct ul_server_s ul_server_t;
typedef void (*ul_server_cb)(ul_server_t *sv);

struct ul_server_s {
    uv_loop_t *loop;
    ul_server_config_t cfg;
    ul_backend_t *backend;
    struct ul_model_s *model;       /* NULL with the null backend and no --model */
    struct ul_model_s *draft_model; /* --model-draft */
    ul_sched_t sched;
    ul_driver_t driver; /* runs sched on the loop */
    ul_api_t api;
    ul_router_t router;
    ul_http_server_t http;
    uv_timer_t drain_timer; /* --drain-delay-s: closes the listener when it fires */
    int http_up, sched_up, drain_timer_up, stops;
    ul_server_cb close_cb;
    int bad_config;    /* init failed on the configuration's values */
    char err[512];     /* why init failed, one line */
    char kv_note[192]; /* how the KV pool was sized, for the start-up line */
    void *data;        /* owner's */
};

int ul_server_init(uv_loop_t *loop, ul_server_t *sv, const ul_server_config_t *cfg);
void ul_server_shutdown(ul_server_t *sv, ul_server_cb cb);
void ul_server_close(ul_server_t *sv, ul_server_cb cb);
void ul_server_free(ul_server_t *sv);

/* The port listened on (after init; useful with port 0). */
int ul_server_port(const ul_server_t *sv);

/* Backend and model from the configuration (backend.c, called by ul_server_init). */
int ul_server_make_backend(ul_server_t *sv);
/* One log line: the KV pool's size, pages and tokens, and how it was chosen. */
void ul_server_log_kv(const ul_server_t *sv);

#endif
