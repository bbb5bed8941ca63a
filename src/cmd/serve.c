/* `uvllm serve`: the OpenAI-compatible HTTP server. The options come from the table in
 * src/server/options.c (command line, UVLLM_* environment, --config FILE); the server is
 * built by ul_server_init (src/server/server.c), as the tests and fuzzers build it. This
 * file owns what is the process's: the event loop, the log level and the signals.
 * SIGTERM/SIGINT start a graceful shutdown: /health answers 503, the listener closes
 * (after --drain-delay-s), in-flight streams get --shutdown-grace seconds to finish, then
 * whatever is left is cut; the process exits 0. A second signal cuts at once. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "cmd/cmd.h"
#include "server/server.h"
#include "uvllm/log.h"

typedef struct serve_s {
    uv_loop_t loop;
    ul_server_t server;
    uv_signal_t sigterm, sigint;
} serve_t;

static void on_closed(ul_server_t *sv) {
    serve_t *s = sv->data;
    uv_close((uv_handle_t *)&s->sigterm, NULL);
    uv_close((uv_handle_t *)&s->sigint, NULL);
}

static void on_signal(uv_signal_t *h, int signum) {
    serve_t *s = h->data;
    UL_LOG_INFO("%s received%s", signum == SIGTERM ? "SIGTERM" : "SIGINT",
                s->server.stops ? " again" : "");
    ul_server_shutdown(&s->server, on_closed);
}

static const char *env_get(const char *name) { return getenv(name); }

/* The configuration from every source; returns -1 to go on, else the exit code. */
static int load_config(ul_server_config_t *c, int argc, char **argv) {
    char err[512] = "";
    int help = 0;
    if (ul_server_config_load(c, argc, argv, env_get, &help, err, sizeof err)) {
        fprintf(stderr, "uvllm serve: %s\n", err);
        return 2;
    }
    if (help) {
        ul_server_config_usage(stdout);
        return 0;
    }
    ul_log_level_t lvl;
    if (!ul_log_parse_level(c->log_level, &lvl)) ul_log_set_level(lvl);
    return -1;
}

static int run(serve_t *s, const ul_server_config_t *c) {
    ul_server_t *sv = &s->server;
    int rc = ul_server_init(&s->loop, sv, c);
    if (rc) {
        fprintf(stderr, "uvllm serve: %s\n", sv->err);
        uv_run(&s->loop, UV_RUN_DEFAULT); /* the handles init opened close */
        ul_server_free(sv);
        return sv->bad_config ? 2 : 1;
    }
    sv->data = s;
    uv_signal_init(&s->loop, &s->sigterm);
    uv_signal_init(&s->loop, &s->sigint);
    s->sigterm.data = s->sigint.data = s;
    uv_signal_start(&s->sigterm, on_signal, SIGTERM);
    uv_signal_start(&s->sigint, on_signal, SIGINT);
    uv_run(&s->loop, UV_RUN_DEFAULT);
    UL_LOG_INFO("stopped: %llu requests, %llu tokens generated",
                (unsigned long long)sv->http.stats.requests_total,
                (unsigned long long)sv->sched.stats.tokens_generated);
    ul_server_free(sv);
    return 0;
}

int ul_cmd_serve(int argc, char **argv) {
    ul_server_config_t cfg;
    int rc = load_config(&cfg, argc, argv);
    if (rc >= 0) {
        ul_server_config_free(&cfg);
        return rc;
    }
    signal(SIGPIPE, SIG_IGN); /* a client that vanishes must cost an EPIPE, not the process */
    ul_http_raise_nofile();   /* every connection is a descriptor */
    serve_t *s = calloc(1, sizeof *s);
    if (!s || uv_loop_init(&s->loop) != 0) {
        fprintf(stderr, "uvllm serve: cannot initialise the event loop\n");
        free(s);
        ul_server_config_free(&cfg);
        return 1;
    }
    rc = run(s, &cfg);
    int lrc = uv_loop_close(&s->loop);
    if (lrc) UL_LOG_WARN("event loop closed with handles open: %s", uv_strerror(lrc));
    free(s);
    ul_server_config_free(&cfg);
    return rc;
}
