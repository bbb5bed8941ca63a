/* `uvllm serve`: the OpenAI-compatible HTTP server. Wires the pieces together on one
 * libuv loop: backend (null, or cpu with a GGUF model) -> scheduler -> api handlers ->
 * HTTP server. SIGTERM/SIGINT start a graceful shutdown: the listener closes, /health
 * answers 503, in-flight streams get --shutdown-grace seconds to finish, then whatever is
 * left is cut; the process exits 0. A second signal cuts at once. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "cmd/cmd.h"
#include "model/model.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

typedef struct serve_args_s {
    const char *model, *backend, *host, *log_level;
    int port, threads, max_batch_tokens, max_conns, max_seqs, null_ctx, kv_type;
    int64_t null_delay_us, max_body;
    double shutdown_grace, header_timeout, idle_timeout;
} serve_args_t;

static void usage(FILE *f) {
    fprintf(f, "usage: uvllm serve [--model PATH] [--backend cpu|null] [--host H] [--port P]\n"
               "                   [--null-delay-us N] [--null-ctx N] [--threads N]\n"
               "                   [--max-body BYTES]\n"
               "                   [--max-conns N] [--max-seqs N] [--max-batch-tokens N]\n"
               "                   [--shutdown-grace SEC] [--header-timeout SEC]\n"
               "                   [--idle-timeout SEC] [--log-level debug|info|warn|error]\n"
               "                   [--kv-type f16|f32]\n"
               "\n"
               "  --model PATH           GGUF model (implies --backend cpu)\n"
               "  --backend cpu|null     null: no model, deterministic pseudo-tokens (default\n"
               "                         without --model); prompts are one token per word\n"
               "  --host H               bind address (default 127.0.0.1)\n"
               "  --port P               TCP port, 0 picks a free one (default 8080)\n"
               "  --null-delay-us N      null backend: time per step (default 0)\n"
               "  --null-ctx N           null backend: context length (default 4096)\n"
               "  --threads N            cpu backend threads (default: all cores)\n"
               "  --kv-type f16|f32      cpu backend KV cache element type (default f16)\n"
               "  --max-body BYTES       largest request body (default 8388608)\n"
               "  --max-conns N          open connections (default 4096)\n"
               "  --max-seqs N           sequences in flight before 503 (default 4096)\n"
               "  --max-batch-tokens N   tokens per step (default 512)\n"
               "  --shutdown-grace SEC   time streams get to finish on SIGTERM (default 30)\n"
               "  --header-timeout SEC   request headers must arrive within (default 10)\n"
               "  --idle-timeout SEC     idle keep-alive connections close after (default 75)\n"
               "  --log-level L          (default info)\n");
}

static int parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static int parse_int(const char *s, int lo, int hi, int *out) {
    int64_t v;
    if (parse_i64(s, lo, hi, &v)) return -1;
    *out = (int)v;
    return 0;
}

static int parse_sec(const char *s, double hi, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= 0 && v <= hi)) return -1;
    *out = v;
    return 0;
}

/* Returns 0, 1 for --help, or 2 after printing a usage error. */
static int parse_args(int argc, char **argv, serve_args_t *a) {
    *a = (serve_args_t){.host = "127.0.0.1",
                        .port = 8080,
                        .max_batch_tokens = 512,
                        .kv_type = UL_TYPE_F16,
                        .max_conns = 4096,
                        .max_seqs = 4096,
                        .max_body = 8 << 20,
                        .shutdown_grace = 30,
                        .header_timeout = 10,
                        .idle_timeout = 75,
                        .log_level = "info"};
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
            usage(stdout);
            return 1;
        }
        static const char *const known[] = {
            "--model",         "--backend",          "--host",           "--port",
            "--null-delay-us", "--threads",          "--max-body",       "--max-conns",
            "--max-seqs",      "--max-batch-tokens", "--shutdown-grace", "--header-timeout",
            "--idle-timeout",  "--log-level",        "--null-ctx",       "--kv-type"};
        int k = -1;
        for (int j = 0; j < (int)(sizeof known / sizeof *known); j++)
            if (!strcmp(o, known[j])) k = j;
        if (k < 0) {
            fprintf(stderr, "uvllm serve: unknown option '%s' (see 'uvllm serve --help')\n", o);
            return 2;
        }
        if (!v) {
            fprintf(stderr, "uvllm serve: option '%s' needs a value\n", o);
            return 2;
        }
        int bad = 0;
        switch (k) {
        case 0:
            a->model = v;
            break;
        case 1:
            a->backend = v;
            bad = strcmp(v, "cpu") && strcmp(v, "null");
            break;
        case 2:
            a->host = v;
            break;
        case 3:
            bad = parse_int(v, 0, 65535, &a->port);
            break;
        case 4:
            bad = parse_i64(v, 0, 60000000, &a->null_delay_us);
            break;
        case 5:
            bad = parse_int(v, 1, 1024, &a->threads);
            break;
        case 6:
            bad = parse_i64(v, 1, (int64_t)1 << 34, &a->max_body);
            break;
        case 7:
            bad = parse_int(v, 1, 1 << 20, &a->max_conns);
            break;
        case 8:
            bad = parse_int(v, 1, 1 << 20, &a->max_seqs);
            break;
        case 9:
            bad = parse_int(v, 1, 1 << 20, &a->max_batch_tokens);
            break;
        case 10:
            bad = parse_sec(v, 86400, &a->shutdown_grace);
            break;
        case 11:
            bad = parse_sec(v, 86400, &a->header_timeout) || a->header_timeout <= 0;
            break;
        case 12:
            bad = parse_sec(v, 86400, &a->idle_timeout) || a->idle_timeout <= 0;
            break;
        case 14:
            bad = parse_int(v, 2, 1 << 20, &a->null_ctx);
            break;
        case 15:
            a->kv_type = !strcmp(v, "f16") ? UL_TYPE_F16 : !strcmp(v, "f32") ? UL_TYPE_F32 : -1;
            bad = a->kv_type < 0;
            break;
        case 13: {
            ul_log_level_t l;
            a->log_level = v;
            bad = ul_log_parse_level(v, &l) != 0;
            break;
        }
        }
        if (bad) {
            fprintf(stderr, "uvllm serve: bad value '%s' for %s (see 'uvllm serve --help')\n", v,
                    o);
            return 2;
        }
        i++;
    }
    if (!a->backend) a->backend = a->model ? "cpu" : "null";
    if (!strcmp(a->backend, "cpu") && !a->model) {
        fprintf(stderr, "uvllm serve: --backend cpu needs --model PATH\n");
        return 2;
    }
    if (!strcmp(a->backend, "null") && a->model) {
        fprintf(stderr, "uvllm serve: --model cannot be used with --backend null\n");
        return 2;
    }
    return 0;
}

typedef struct server_s {
    uv_loop_t loop;
    ul_backend_t *backend;
    ul_model_t *model;
    ul_sched_t sched;
    ul_api_t api;
    ul_router_t router;
    ul_http_server_t http;
    uv_signal_t sigterm, sigint;
    uint64_t grace_ms;
    int signals, http_up, sched_up;
} server_t;

static void on_sched_closed(ul_sched_t *s) { UL_LOG_INFO("scheduler stopped"); }

static void on_http_closed(ul_http_server_t *h) {
    server_t *sv = h->data;
    UL_LOG_INFO("all connections closed");
    ul_sched_close(&sv->sched, on_sched_closed);
    uv_close((uv_handle_t *)&sv->sigterm, NULL);
    uv_close((uv_handle_t *)&sv->sigint, NULL);
}

static void on_signal(uv_signal_t *h, int signum) {
    server_t *sv = h->data;
    sv->signals++;
    uint64_t grace = sv->signals == 1 ? sv->grace_ms : 0;
    UL_LOG_INFO("%s: shutting down (%s)", signum == SIGTERM ? "SIGTERM" : "SIGINT",
                grace ? "in-flight requests may finish" : "cutting connections now");
    ul_http_server_shutdown(&sv->http, grace, on_http_closed);
}

static int make_backend(const serve_args_t *a, server_t *sv) {
    if (!strcmp(a->backend, "null")) {
        ul_null_config_t nc = {.delay_us = a->null_delay_us, .n_ctx = a->null_ctx};
        return ul_null_backend_create(&nc, &sv->backend);
    }
    char err[256] = "";
    int rc = ul_model_load(a->model, 0, &sv->model, err, sizeof err);
    if (rc) {
        fprintf(stderr, "uvllm serve: cannot load model '%s': %s\n", a->model,
                err[0] ? err : ul_strerror(rc));
        return rc;
    }
    ul_cpu_config_t cc = {
        .n_threads = a->threads, .kv_type = a->kv_type, .max_batch_tokens = a->max_batch_tokens};
    rc = ul_cpu_backend_create(sv->model, &cc, &sv->backend);
    if (rc) fprintf(stderr, "uvllm serve: cannot start the cpu backend: %s\n", ul_strerror(rc));
    return rc;
}

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static int setup(const serve_args_t *a, server_t *sv) {
    int rc = make_backend(a, sv);
    if (rc) return rc;
    ul_codec_t codec;
    ul_sched_config_t scfg = {.max_batch_tokens = a->max_batch_tokens, .max_seqs = a->max_seqs};
    if (sv->model) {
        ul_codec_init_vocab(&codec, sv->model->vocab);
        scfg.is_eog = codec.is_eog;
        scfg.eog_ctx = (void *)sv->model->vocab;
    } else {
        ul_codec_init_null(&codec, sv->backend->n_vocab, sv->backend->eos_id);
    }
    if ((rc = ul_sched_init(&sv->sched, sv->backend, &scfg)) != 0) return rc;
    if ((rc = ul_sched_start(&sv->sched, &sv->loop)) != 0) {
        ul_sched_free(&sv->sched);
        return rc;
    }
    sv->sched_up = 1;
    ul_api_init(&sv->api, &sv->sched, &codec, sv->model ? base_name(a->model) : "null");
    ul_router_init(&sv->router);
    if ((rc = ul_api_register(&sv->api, &sv->router)) != 0) return rc;
    ul_http_config_t hc;
    ul_http_config_default(&hc);
    hc.host = a->host;
    hc.port = a->port;
    hc.max_body = (size_t)a->max_body;
    hc.max_conns = (unsigned)a->max_conns;
    hc.header_timeout_ms = (uint64_t)(a->header_timeout * 1000);
    hc.idle_timeout_ms = (uint64_t)(a->idle_timeout * 1000);
    if ((rc = ul_http_server_init(&sv->loop, &sv->http, &hc, &sv->router)) != 0) return rc;
    sv->http_up = 1;
    sv->http.data = sv;
    sv->api.server = &sv->http;
    rc = ul_http_server_listen(&sv->http);
    if (rc) {
        fprintf(stderr, "uvllm serve: cannot listen on %s:%d: %s\n", a->host, a->port,
                uv_strerror(rc));
        return rc;
    }
    return 0;
}

/* After a failed setup: close what was opened and let the loop run the close callbacks. */
static void teardown_failed(server_t *sv) {
    if (sv->http_up) ul_http_server_shutdown(&sv->http, 0, NULL);
    if (sv->sched_up) ul_sched_close(&sv->sched, NULL);
    uv_run(&sv->loop, UV_RUN_DEFAULT);
}

int ul_cmd_serve(int argc, char **argv) {
    serve_args_t a;
    int rc = parse_args(argc, argv, &a);
    if (rc) return rc == 1 ? 0 : 2;
    ul_log_level_t lvl;
    ul_log_parse_level(a.log_level, &lvl);
    ul_log_set_level(lvl);
    signal(SIGPIPE, SIG_IGN); /* a client that vanishes must cost an EPIPE, not the process */
    server_t *sv = calloc(1, sizeof *sv);
    if (!sv || uv_loop_init(&sv->loop) != 0) {
        fprintf(stderr, "uvllm serve: cannot initialise the event loop\n");
        free(sv);
        return 1;
    }
    sv->grace_ms = (uint64_t)(a.shutdown_grace * 1000);
    rc = setup(&a, sv);
    if (rc == 0) {
        uv_signal_init(&sv->loop, &sv->sigterm);
        uv_signal_init(&sv->loop, &sv->sigint);
        sv->sigterm.data = sv->sigint.data = sv;
        uv_signal_start(&sv->sigterm, on_signal, SIGTERM);
        uv_signal_start(&sv->sigint, on_signal, SIGINT);
        UL_LOG_INFO("serving model '%s' on the %s backend (n_ctx %d, %d KV pages of %d)",
                    sv->api.model_id, sv->backend->vt->name, sv->backend->n_ctx,
                    sv->backend->n_pages, sv->backend->page_size);
        uv_run(&sv->loop, UV_RUN_DEFAULT);
        UL_LOG_INFO("stopped: %llu requests, %llu tokens generated",
                    (unsigned long long)sv->http.stats.requests_total,
                    (unsigned long long)sv->sched.stats.tokens_generated);
    } else {
        teardown_failed(sv);
    }
    if (sv->sched_up) ul_sched_free(&sv->sched);
    if (sv->backend) ul_backend_destroy(sv->backend);
    if (sv->model) ul_model_free(sv->model);
    int lrc = uv_loop_close(&sv->loop);
    if (lrc) UL_LOG_WARN("event loop closed with handles open: %s", uv_strerror(lrc));
    free(sv);
    return rc ? 1 : 0;
}
