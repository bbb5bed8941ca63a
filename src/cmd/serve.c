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
#include "chat/chat.h"
#include "base/memlimit.h"
#include "base/size.h"
#include "cmd/cmd.h"
#include "cpu/kernels.h"
#include "cpu/kv.h"
#include "cpu/pool.h"
#include "model/model.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

#define MAX_CORS 16
#define PAGE_SIZE 16
/* --kv-mem with the null backend: what it really stores per token slot (owner id and
 * token, engine/null.c), so the flag bounds its pages by the same arithmetic */
#define NULL_KV_BYTES_PER_TOKEN 12
#define CHAT_TEMPLATE_MAX (1 << 20)
#define MAX_API_KEYS 64 /* --api-key flags; a key file may hold more */

typedef struct serve_args_s {
    const char *model, *backend, *host, *log_level, *chat_template, *null_reply;
    int port, threads, max_batch_tokens, max_conns, max_seqs, null_ctx, kv_type;
    int ctx_size, max_tokens_default, truncate_max_tokens, parse_special;
    int64_t null_delay_us, max_body, kv_mem, null_token_us, null_prefill_us, max_buffered_mem;
    int64_t min_body_rate;
    double request_timeout;
    int max_seqs_per_client; /* -1: a quarter of --max-seqs */
    double shutdown_grace, header_timeout, idle_timeout, stall_timeout;
    double itl_target_ms, max_queue_wait_s;
    int max_queue, no_prefix_cache;
    double canary_interval_s, drain_delay_s;
    int64_t null_fail_after; /* -1: off */
    const char *api_keys[MAX_API_KEYS], *api_key_file, *metrics_key;
    int n_api_keys;
    const char *aliases[UL_API_MAX_ALIASES];
    const char *cors[MAX_CORS];
    int n_aliases, n_cors;
    int device;   /* --backend cuda */
    int pipeline; /* --pipeline: steps in flight (0: 1) */
    /* speculative decoding (sched/spec.c): --model-draft, --spec-ngram, --draft-max/min */
    const char *model_draft;
    int spec_ngram, draft_max, draft_min;
} serve_args_t;

static void usage(FILE *f) {
    fprintf(f, "usage: uvllm serve [--model PATH] [--backend cpu|null|cuda] [--device N]\n"
               "                   [--host H] [--port P]\n"
               "                   [--null-delay-us N] [--null-ctx N] [--threads N]\n"
               "                   [--max-body BYTES]\n"
               "                   [--max-conns N] [--max-seqs N] [--max-batch-tokens N]\n"
               "                   [--shutdown-grace SEC] [--header-timeout SEC]\n"
               "                   [--idle-timeout SEC] [--log-level debug|info|warn|error]\n"
               "                   [--kv-type f16|f32] [--ctx-size N] [--kv-mem SIZE]\n"
               "                   [--max-tokens-default N] [--truncate-max-tokens]\n"
               "                   [--no-parse-special] [--model-alias NAME]...\n"
               "                   [--cors-origin ORIGIN]... [--chat-template FILE]\n"
               "                   [--itl-target-ms MS] [--no-prefix-cache] [--max-queue N]\n"
               "                   [--max-queue-wait-s SEC] [--null-token-us N]\n"
               "                   [--null-prefill-us N] [--stall-timeout-s SEC]\n"
               "                   [--null-fail-after N]\n"
               "                   [--canary-interval-s SEC] [--drain-delay-s SEC]\n"
               "                   [--api-key KEY]... [--api-key-file PATH]\n"
               "                   [--metrics-key KEY] [--pipeline 1|2]\n"
               "                   [--model-draft PATH] [--spec-ngram N] [--draft-max K]\n"
               "                   [--draft-min K]\n"
               "                   [--max-buffered-mem SIZE] [--request-timeout SEC]\n"
               "                   [--min-body-rate BYTES] [--max-seqs-per-client N]\n"
               "\n"
               "  --model PATH           GGUF model (implies --backend cpu)\n"
               "  --backend cpu|null     null: no model, deterministic pseudo-tokens (default\n"
               "                         without --model); prompts are one token per word;\n"
               "                         cuda: the model on an NVIDIA GPU (builds with CUDA)\n"
               "  --device N             cuda backend: device ordinal (default 0)\n"
               "  --pipeline 1|2         steps in flight: 2 submits step N+1 while N computes\n"
               "                         (a sequence's next input is N's token, filled in by\n"
               "                         the backend; for a GPU, where the host's work per step\n"
               "                         can then overlap the device's); default 1\n"
               "  --host H               bind address (default 127.0.0.1)\n"
               "  --port P               TCP port, 0 picks a free one (default 8080)\n"
               "  --model-draft PATH     speculative decoding: a small model with the same\n"
               "                         vocabulary proposes tokens that --model verifies\n"
               "                         (cpu backend)\n"
               "  --spec-ngram N         speculative decoding: propose what followed the last\n"
               "                         N tokens earlier in the prompt or output (1..8)\n"
               "  --draft-max K          proposals per sequence and step (default 6, <= 16)\n"
               "  --draft-min K          fewer proposals are not made (default 1)\n"
               "  --null-delay-us N      null backend: time per step (default 0)\n"
               "  --null-ctx N           null backend: context length (default 4096)\n"
               "  --null-reply TEXT      null backend: every request gets TEXT (tokenized with\n"
               "                         --model's vocabulary, special tokens parsed), then\n"
               "                         eos: a known output for testing the serving layer\n"
               "  --null-token-us N      null backend: extra time per decode token (default 0)\n"
               "  --null-prefill-us N    null backend: extra time per prefill token (default 0)\n"
               "  --null-fail-after N    null backend, fault injection: the first N steps\n"
               "                         succeed, every later one fails (its requests get 500,\n"
               "                         /health/ready turns 503)\n"
               "  --threads N            cpu backend threads (default: the CPUs the process may\n"
               "                         use: its affinity mask and cgroup CPU quota)\n"
               "  --kv-type f16|f32      cpu backend KV cache element type (default f16)\n"
               "  --ctx-size N           context per sequence (default: the model's training\n"
               "                         context; more is refused); with --backend null it\n"
               "                         replaces --null-ctx\n"
               "  --kv-mem SIZE          KV cache pool, e.g. 512M, 4G, 1073741824 (default: a\n"
               "                         quarter of MemAvailable or of the cgroup's memory\n"
               "                         limit if lower (containers), at least one --ctx-size\n"
               "                         sequence, at most --max-seqs of them); the start-up\n"
               "                         log says the size, pages and tokens chosen. With\n"
               "                         --backend null: pages = SIZE / (16 x 12 bytes), the\n"
               "                         bytes it keeps per token (default 65536 pages)\n"
               "  --max-tokens-default N max_tokens of a request that has none (default 16)\n"
               "  --truncate-max-tokens  clip a max_tokens that does not fit the context to\n"
               "                         what fits instead of answering 400\n"
               "  --no-parse-special     special token texts in prompts (\"</s>\") stay plain\n"
               "                         text (default: they become their ids)\n"
               "  --model-alias NAME     another name the model answers to and /v1/models\n"
               "                         lists (repeatable, up to 8)\n"
               "  --cors-origin ORIGIN   allow browser requests from ORIGIN ('*': any);\n"
               "                         answers OPTIONS preflights (repeatable, up to 16)\n"
               "  --chat-template FILE   a chat template (Jinja) that replaces the model's\n"
               "                         tokenizer.chat_template\n"
               "  --max-body BYTES       largest request body (default 8388608)\n"
               "  --max-conns N          open connections (default 4096)\n"
               "  --max-seqs N           sequences in flight before 503 (default 4096)\n"
               "  --max-batch-tokens N   tokens per step (default 512)\n"
               "  --itl-target-ms MS     while streams decode, prefill chunks are sized so a\n"
               "                         step is predicted to take at most MS (default 100;\n"
               "                         0: off, prefill fills --max-batch-tokens)\n"
               "  --no-prefix-cache      do not keep computed KV pages for reuse by later\n"
               "                         requests sharing a prompt prefix\n"
               "  --max-queue N          requests waiting for prefill before 429 (default: no\n"
               "                         limit)\n"
               "  --max-queue-wait-s SEC answer 429 with Retry-After when a request's predicted\n"
               "                         wait is over SEC (default: no limit)\n"
               "  --shutdown-grace SEC   time streams get to finish once the listener closed\n"
               "                         after SIGTERM (default 30)\n"
               "  --drain-delay-s SEC    after SIGTERM keep the listener open SEC seconds,\n"
               "                         answering /health/ready and new /v1 requests 503, so\n"
               "                         load balancers stop sending first (default 0); the\n"
               "                         process exits within SEC + --shutdown-grace\n"
               "  --canary-interval-s SEC readiness: a one-token canary step runs at start-up and\n"
               "                         whenever no step completed for SEC (default 5);\n"
               "                         /health/ready is 200 while the last step succeeded\n"
               "                         and one succeeded within 3 x SEC\n"
               "  --api-key KEY          require 'Authorization: Bearer KEY' on /v1/*,\n"
               "                         /tokenize, /detokenize, /apply-template (repeatable;\n"
               "                         any listed key is accepted; health stays open)\n"
               "  --api-key-file PATH    more keys, one per line ('#' comments, blank lines\n"
               "                         ignored); the environment's UVLLM_API_KEY adds one\n"
               "  --metrics-key KEY      require 'Authorization: Bearer KEY' on /metrics\n"
               "  --header-timeout SEC   request headers must arrive within (default 10)\n"
               "  --idle-timeout SEC     idle keep-alive connections close after (default 75)\n"
               "  --stall-timeout-s SEC  a client that takes none of its waiting output for SEC\n"
               "                         is dropped: its paused stream is cancelled and its KV\n"
               "                         pages return (default 60)\n"
               "  --max-buffered-mem SIZE memory for what clients make the server hold, all\n"
               "                         connections together; past it 503 (default 1/8 of\n"
               "                         MemTotal or the cgroup limit, 64M..4G)\n"
               "  --request-timeout SEC  headers and body within SEC, else 408 (default 120)\n"
               "  --min-body-rate BYTES  bodies slower than BYTES/s get 408 (default 1024)\n"
               "  --max-seqs-per-client N sequences in flight per API key (else address); more\n"
               "                         is 429 (default --max-seqs / 4; 0: no limit)\n"
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

enum {
    O_MODEL,
    O_BACKEND,
    O_HOST,
    O_PORT,
    O_NULL_DELAY,
    O_THREADS,
    O_MAX_BODY,
    O_MAX_CONNS,
    O_MAX_SEQS,
    O_MAX_BATCH,
    O_GRACE,
    O_HDR_TIMEOUT,
    O_IDLE_TIMEOUT,
    O_LOG_LEVEL,
    O_NULL_CTX,
    O_KV_TYPE,
    O_CTX_SIZE,
    O_KV_MEM,
    O_MAX_TOKENS_DEFAULT,
    O_MODEL_ALIAS,
    O_CORS,
    O_CHAT_TEMPLATE,
    O_NULL_REPLY,
    O_ITL_TARGET,
    O_MAX_QUEUE,
    O_MAX_QUEUE_WAIT,
    O_NULL_TOKEN,
    O_NULL_PREFILL,
    O_STALL_TIMEOUT,
    O_NULL_FAIL_AFTER,
    O_CANARY_INTERVAL,
    O_DRAIN_DELAY,
    O_API_KEY,
    O_API_KEY_FILE,
    O_METRICS_KEY,
    O_DEVICE,
    O_PIPELINE,
    O_MODEL_DRAFT,
    O_SPEC_NGRAM,
    O_DRAFT_MAX,
    O_DRAFT_MIN,
    O_MAX_BUFFERED,
    O_REQUEST_TIMEOUT,
    O_MIN_BODY_RATE,
    O_SEQS_PER_CLIENT,
    O_TRUNCATE, /* flags without a value from here on */
    O_NO_PARSE_SPECIAL,
    O_NO_PREFIX_CACHE,
    O_COUNT
};

static const char *const g_opts[O_COUNT] = {"--model",
                                            "--backend",
                                            "--host",
                                            "--port",
                                            "--null-delay-us",
                                            "--threads",
                                            "--max-body",
                                            "--max-conns",
                                            "--max-seqs",
                                            "--max-batch-tokens",
                                            "--shutdown-grace",
                                            "--header-timeout",
                                            "--idle-timeout",
                                            "--log-level",
                                            "--null-ctx",
                                            "--kv-type",
                                            "--ctx-size",
                                            "--kv-mem",
                                            "--max-tokens-default",
                                            "--model-alias",
                                            "--cors-origin",
                                            "--chat-template",
                                            "--null-reply",
                                            "--itl-target-ms",
                                            "--max-queue",
                                            "--max-queue-wait-s",
                                            "--null-token-us",
                                            "--null-prefill-us",
                                            "--stall-timeout-s",
                                            "--null-fail-after",
                                            "--canary-interval-s",
                                            "--drain-delay-s",
                                            "--api-key",
                                            "--api-key-file",
                                            "--metrics-key",
                                            "--device",
                                            "--pipeline",
                                            "--model-draft",
                                            "--spec-ngram",
                                            "--draft-max",
                                            "--draft-min",
                                            "--max-buffered-mem",
                                            "--request-timeout",
                                            "--min-body-rate",
                                            "--max-seqs-per-client",
                                            "--truncate-max-tokens",
                                            "--no-parse-special",
                                            "--no-prefix-cache"};

static int parse_kv_mem(const char *v, int64_t *out) { return ul_size_parse(v, out) || *out < 1; }

/* One option with its value v; returns 1 when the value is bad. */
static int apply_opt(serve_args_t *a, int k, const char *v) {
    switch (k) {
    case O_MODEL:
        a->model = v;
        return 0;
    case O_BACKEND:
        a->backend = v;
        return strcmp(v, "cpu") && strcmp(v, "null") && strcmp(v, "cuda");
    case O_HOST:
        a->host = v;
        return 0;
    case O_PORT:
        return parse_int(v, 0, 65535, &a->port);
    case O_NULL_DELAY:
        return parse_i64(v, 0, 60000000, &a->null_delay_us);
    case O_THREADS:
        return parse_int(v, 1, 1024, &a->threads);
    case O_MAX_BODY:
        return parse_i64(v, 1, (int64_t)1 << 34, &a->max_body);
    case O_MAX_CONNS:
        return parse_int(v, 1, 1 << 20, &a->max_conns);
    case O_MAX_SEQS:
        return parse_int(v, 1, 1 << 20, &a->max_seqs);
    case O_MAX_BATCH:
        return parse_int(v, 1, 1 << 20, &a->max_batch_tokens);
    case O_GRACE:
        return parse_sec(v, 86400, &a->shutdown_grace);
    case O_HDR_TIMEOUT:
        return parse_sec(v, 86400, &a->header_timeout) || a->header_timeout <= 0;
    case O_IDLE_TIMEOUT:
        return parse_sec(v, 86400, &a->idle_timeout) || a->idle_timeout <= 0;
    case O_NULL_CTX:
        return parse_int(v, 2, 1 << 20, &a->null_ctx);
    case O_KV_TYPE:
        a->kv_type = !strcmp(v, "f16") ? UL_TYPE_F16 : !strcmp(v, "f32") ? UL_TYPE_F32 : -1;
        return a->kv_type < 0;
    case O_LOG_LEVEL: {
        ul_log_level_t l;
        a->log_level = v;
        return ul_log_parse_level(v, &l) != 0;
    }
    case O_CTX_SIZE:
        return parse_int(v, 2, 1 << 24, &a->ctx_size);
    case O_KV_MEM:
        return parse_kv_mem(v, &a->kv_mem);
    case O_MAX_TOKENS_DEFAULT:
        return parse_int(v, 1, 1 << 24, &a->max_tokens_default);
    case O_MODEL_ALIAS:
        if (a->n_aliases == UL_API_MAX_ALIASES) return 1;
        a->aliases[a->n_aliases++] = v;
        return !*v || strlen(v) >= UL_API_NAME_MAX;
    case O_CORS:
        if (a->n_cors == MAX_CORS) return 1;
        a->cors[a->n_cors++] = v;
        return !*v || strpbrk(v, "\r\n\t ") != NULL;
    case O_CHAT_TEMPLATE:
        a->chat_template = v;
        return !*v;
    case O_NULL_REPLY:
        a->null_reply = v;
        return !*v;
    case O_ITL_TARGET:
        if (parse_sec(v, 600000, &a->itl_target_ms)) return 1;
        if (a->itl_target_ms == 0) a->itl_target_ms = -1; /* off */
        return 0;
    case O_MAX_QUEUE:
        return parse_int(v, 1, 1 << 20, &a->max_queue);
    case O_MAX_QUEUE_WAIT:
        return parse_sec(v, 86400, &a->max_queue_wait_s) || a->max_queue_wait_s <= 0;
    case O_NULL_TOKEN:
        return parse_i64(v, 0, 10000000, &a->null_token_us);
    case O_NULL_PREFILL:
        return parse_i64(v, 0, 10000000, &a->null_prefill_us);
    case O_STALL_TIMEOUT:
        return parse_sec(v, 86400, &a->stall_timeout) || a->stall_timeout <= 0;
    case O_NULL_FAIL_AFTER:
        return parse_i64(v, 0, (int64_t)1 << 62, &a->null_fail_after);
    case O_CANARY_INTERVAL:
        return parse_sec(v, 86400, &a->canary_interval_s) || a->canary_interval_s < 0.05;
    case O_DRAIN_DELAY:
        return parse_sec(v, 86400, &a->drain_delay_s);
    case O_API_KEY:
        if (a->n_api_keys == MAX_API_KEYS) return 1;
        a->api_keys[a->n_api_keys++] = v;
        return 0;
    case O_API_KEY_FILE:
        a->api_key_file = v;
        return !*v;
    case O_METRICS_KEY:
        a->metrics_key = v;
        return 0;
    case O_DEVICE:
        return parse_int(v, 0, 1023, &a->device);
    case O_PIPELINE:
        return parse_int(v, 1, 2, &a->pipeline);
    case O_MODEL_DRAFT:
        a->model_draft = v;
        return 0;
    case O_SPEC_NGRAM:
        return parse_int(v, 1, 8, &a->spec_ngram);
    case O_DRAFT_MAX:
        return parse_int(v, 1, UL_MAX_DRAFT, &a->draft_max);
    case O_DRAFT_MIN:
        return parse_int(v, 1, UL_MAX_DRAFT, &a->draft_min);
    case O_MAX_BUFFERED:
        return ul_size_parse(v, &a->max_buffered_mem) || a->max_buffered_mem < (1 << 20);
    case O_REQUEST_TIMEOUT:
        return parse_sec(v, 86400, &a->request_timeout) || a->request_timeout <= 0;
    case O_MIN_BODY_RATE:
        return parse_i64(v, 0, (int64_t)1 << 40, &a->min_body_rate);
    case O_SEQS_PER_CLIENT:
        return parse_int(v, 0, 1 << 20, &a->max_seqs_per_client);
    }
    return 1;
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
                        .stall_timeout = 60,
                        .parse_special = 1,
                        .canary_interval_s = 5,
                        .null_fail_after = -1,
                        .request_timeout = 120,
                        .min_body_rate = 1024,
                        .max_seqs_per_client = -1,
                        .log_level = "info"};
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
            usage(stdout);
            return 1;
        }
        int k = -1;
        for (int j = 0; j < O_COUNT; j++)
            if (!strcmp(o, g_opts[j])) k = j;
        if (k < 0) {
            /* "--api-key=KEY" and the like: the name only, a secret may follow the '=' */
            fprintf(stderr, "uvllm serve: unknown option '%.*s' (see 'uvllm serve --help')\n",
                    (int)strcspn(o, "="), o);
            return 2;
        }
        if (k >= O_TRUNCATE) {
            if (k == O_TRUNCATE) a->truncate_max_tokens = 1;
            if (k == O_NO_PARSE_SPECIAL) a->parse_special = 0;
            if (k == O_NO_PREFIX_CACHE) a->no_prefix_cache = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "uvllm serve: option '%s' needs a value\n", o);
            return 2;
        }
        if (apply_opt(a, k, v)) {
            if (k == O_API_KEY || k == O_METRICS_KEY) v = "(not shown)"; /* secrets stay out */
            fprintf(stderr, "uvllm serve: bad value '%s' for %s (see 'uvllm serve --help')\n", v,
                    o);
            return 2;
        }
        i++;
    }
    if (!a->backend) a->backend = a->model ? "cpu" : "null";
    if (strcmp(a->backend, "null") && !a->model) {
        fprintf(stderr, "uvllm serve: --backend %s needs --model PATH\n", a->backend);
        return 2;
    }
    if (a->null_reply && strcmp(a->backend, "null")) {
        fprintf(stderr, "uvllm serve: --null-reply needs the null backend (--backend null)\n");
        return 2;
    }
    if (a->null_fail_after >= 0 && strcmp(a->backend, "null")) {
        fprintf(stderr, "uvllm serve: --null-fail-after needs the null backend\n");
        return 2;
    }
    if (a->model_draft && strcmp(a->backend, "cpu")) {
        fprintf(stderr, "uvllm serve: --model-draft needs the cpu backend (--model PATH)\n");
        return 2;
    }
    if (a->spec_ngram && !strcmp(a->backend, "cuda")) {
        fprintf(stderr, "uvllm serve: the cuda backend does not verify proposals "
                        "(--spec-ngram)\n");
        return 2;
    }
    if (a->draft_min > (a->draft_max ? a->draft_max : 6)) {
        fprintf(stderr, "uvllm serve: --draft-min is over --draft-max\n");
        return 2;
    }
    if (!strcmp(a->backend, "null") && !a->null_reply != !a->model) {
        fprintf(stderr, "uvllm serve: with --backend null, --model (its vocabulary only) and "
                        "--null-reply TEXT go together\n");
        return 2;
    }
    return 0;
}

typedef struct server_s {
    uv_loop_t loop;
    ul_backend_t *backend;
    ul_model_t *model;
    ul_model_t *draft_model; /* --model-draft */
    ul_sched_t sched;
    ul_driver_t driver; /* runs sched on the loop */
    ul_api_t api;
    ul_router_t router;
    ul_http_server_t http;
    uv_signal_t sigterm, sigint;
    uv_timer_t drain_timer; /* --drain-delay-s: closes the listener when it fires */
    uint64_t grace_ms, drain_delay_ms;
    int signals, http_up, sched_up, drain_timer_up;
    int bad_config;    /* setup failed on the flags' values: exit 2, like a usage error */
    char kv_note[192]; /* how the KV pool was sized, for the start-up line */
} server_t;

static void on_sched_closed(ul_driver_t *d) { UL_LOG_INFO("scheduler stopped"); }

static void on_http_closed(ul_http_server_t *h) {
    server_t *sv = h->data;
    UL_LOG_INFO("all connections closed");
    ul_api_ready_stop(&sv->api);
    if (sv->drain_timer_up) uv_close((uv_handle_t *)&sv->drain_timer, NULL);
    sv->drain_timer_up = 0;
    ul_driver_close(&sv->driver, on_sched_closed);
    uv_close((uv_handle_t *)&sv->sigterm, NULL);
    uv_close((uv_handle_t *)&sv->sigint, NULL);
}

/* The listener closes; open requests get the grace period. */
static void shutdown_http(server_t *sv, uint64_t grace) {
    if (sv->drain_timer_up) uv_timer_stop(&sv->drain_timer);
    ul_http_server_shutdown(&sv->http, grace, on_http_closed);
}

static void on_drain_delay(uv_timer_t *t) {
    server_t *sv = t->data;
    UL_LOG_INFO("drain delay over: closing the listener (in-flight requests may finish)");
    shutdown_http(sv, sv->grace_ms);
}

/* The first signal turns readiness (and /health, and new /v1 work) 503 at once; with
 * --drain-delay-s the listener stays open that long so load balancers notice and stop
 * sending before connections are refused. A second signal cuts everything. */
static void on_signal(uv_signal_t *h, int signum) {
    server_t *sv = h->data;
    const char *name = signum == SIGTERM ? "SIGTERM" : "SIGINT";
    sv->signals++;
    if (sv->signals == 1) {
        sv->api.draining = 1;
        ul_api_ready_stop(&sv->api);
        ul_http_server_drain_begin(&sv->http);
        if (sv->drain_delay_ms && uv_timer_init(&sv->loop, &sv->drain_timer) == 0) {
            sv->drain_timer_up = 1;
            sv->drain_timer.data = sv;
            uv_timer_start(&sv->drain_timer, on_drain_delay, sv->drain_delay_ms, 0);
            UL_LOG_INFO("%s: draining: not ready; the listener closes in %.1f s", name,
                        (double)sv->drain_delay_ms / 1e3);
            return;
        }
    }
    uint64_t grace = sv->signals == 1 ? sv->grace_ms : 0;
    UL_LOG_INFO("%s: shutting down (%s)", name,
                grace ? "in-flight requests may finish" : "cutting connections now");
    shutdown_http(sv, grace);
}

/* MemAvailable now, or the cgroup's limit when lower (a container), or -1; which one into
 * src. A start-up read: the loop is not running yet. */
static int64_t mem_available(char *src, int cap) {
    ul_mem_info_t m;
    ul_mem_info_read("/", &m);
    ul_mem_info_source(&m, 1, src, cap);
    return m.limit_available;
}

/* The KV budget in bytes for a pool of pages of page_bytes holding page_size tokens each:
 * --kv-mem, else a quarter of MemAvailable kept between one and max_seqs full-context
 * sequences. Says how it was chosen in sv->kv_note; 0 with a message when --kv-mem cannot
 * hold one sequence. */
static int64_t kv_budget(const serve_args_t *a, server_t *sv, int32_t n_ctx, int64_t page_bytes) {
    int64_t one = (int64_t)((n_ctx + PAGE_SIZE - 1) / PAGE_SIZE) * page_bytes;
    char b1[32], b2[32];
    if (a->kv_mem) {
        if (a->kv_mem < one) {
            fprintf(stderr,
                    "uvllm serve: --kv-mem %s holds less than one sequence of %d tokens (%s); "
                    "raise --kv-mem or lower --ctx-size\n",
                    ul_size_format(a->kv_mem, b1, sizeof b1), n_ctx,
                    ul_size_format(one, b2, sizeof b2));
            sv->bad_config = 1;
            return 0;
        }
        snprintf(sv->kv_note, sizeof sv->kv_note, "--kv-mem");
        return a->kv_mem;
    }
    char src[128];
    int64_t avail = mem_available(src, sizeof src), most = one * a->max_seqs;
    int64_t want = avail > 0 ? avail / 4 : 4 * one;
    if (want > most) want = most;
    if (want < one) want = one;
    if (avail > 0)
        snprintf(sv->kv_note, sizeof sv->kv_note,
                 "default: a quarter of %s, within 1..%d sequences", src, a->max_seqs);
    else
        snprintf(sv->kv_note, sizeof sv->kv_note, "default: 4 sequences, MemAvailable unknown");
    return want;
}

/* --null-reply: the model's vocabulary only, and TEXT as token ids. */
static int null_reply(const serve_args_t *a, server_t *sv, ul_null_config_t *nc, int32_t **ids) {
    char err[256] = "";
    int rc = ul_model_load(a->model, 1, &sv->model, err, sizeof err);
    if (rc) {
        fprintf(stderr, "uvllm serve: cannot load '%s': %s\n", a->model,
                err[0] ? err : ul_strerror(rc));
        return rc;
    }
    const ul_vocab_t *v = sv->model->vocab;
    size_t len = strlen(a->null_reply);
    *ids = malloc((len + 8) * sizeof **ids);
    int n = *ids ? ul_tokenize(v, a->null_reply, len, 0, 1, *ids, (int)len + 8) : UL_ENOMEM;
    if (n <= 0 || ul_vocab_eos(v) < 1) {
        fprintf(stderr, "uvllm serve: --null-reply: cannot tokenize it (or no eos)\n");
        return n < 0 ? n : UL_EINVAL;
    }
    nc->n_vocab = ul_vocab_n_tokens(v);
    nc->eos_id = ul_vocab_eos(v);
    nc->reply = *ids;
    nc->n_reply = n;
    return 0;
}

static int make_null(const serve_args_t *a, server_t *sv) {
    ul_null_config_t nc = {.delay_us = a->null_delay_us,
                           .fail = a->null_fail_after >= 0,
                           .fail_after = a->null_fail_after > 0 ? a->null_fail_after : 0,
                           .token_us = a->null_token_us,
                           .prefill_us = a->null_prefill_us,
                           .n_ctx = a->ctx_size ? a->ctx_size : a->null_ctx,
                           .page_size = PAGE_SIZE};
    int32_t *ids = NULL;
    if (a->null_reply) {
        int rc = null_reply(a, sv, &nc, &ids);
        if (rc) {
            free(ids);
            return rc;
        }
    }
    if (a->kv_mem) {
        int32_t n_ctx = nc.n_ctx ? nc.n_ctx : 4096;
        int64_t b = kv_budget(a, sv, n_ctx, (int64_t)PAGE_SIZE * NULL_KV_BYTES_PER_TOKEN);
        if (!b) {
            free(ids);
            return UL_EINVAL;
        }
        int64_t pages = b / ((int64_t)PAGE_SIZE * NULL_KV_BYTES_PER_TOKEN);
        int64_t most = ((int64_t)1 << 31) / PAGE_SIZE - 1;
        nc.n_pages = (int32_t)(pages < most ? pages : most);
    } else {
        snprintf(sv->kv_note, sizeof sv->kv_note, "null backend default");
    }
    int rc = ul_null_backend_create(&nc, &sv->backend);
    free(ids); /* copied by the backend */
    if (rc) fprintf(stderr, "uvllm serve: cannot start the null backend: %s\n", ul_strerror(rc));
    return rc;
}

/* --model-draft (cmd/draft.c): the speculative backend over the target and the draft. */
static int make_draft(const serve_args_t *a, server_t *sv, const ul_cpu_config_t *cc) {
    char err[320];
    int rc = ul_cmd_draft_backend(sv->model, a->model_draft, cc, &sv->backend, &sv->draft_model,
                                  err, sizeof err);
    if (rc) {
        fprintf(stderr, "uvllm serve: --model-draft: %s\n", err);
        sv->bad_config = rc == UL_EINVAL;
        return rc;
    }
    UL_LOG_INFO("speculative decoding: draft model %s", a->model_draft);
    return 0;
}

/* --backend cuda: the model on device a->device; every start-up failure (no device, no
 * CUDA in this build, out of device memory) is one clear line and a non-zero exit. */
static int make_cuda(const serve_args_t *a, server_t *sv, int32_t n_ctx) {
#ifdef UVLLM_HAVE_CUDA
    char err[256] = "";
    ul_gpu_config_t gc = {.device = a->device,
                          .n_ctx = n_ctx,
                          .page_size = PAGE_SIZE,
                          .kv_bytes = a->kv_mem,
                          .max_batch_tokens = a->max_batch_tokens};
    int rc = ul_gpu_backend_create(sv->model, &gc, &sv->backend, err, sizeof err);
    if (rc)
        fprintf(stderr, "uvllm serve: cannot start the cuda backend: %s\n",
                err[0] ? err : ul_strerror(rc));
    return rc;
#else
    (void)a, (void)sv, (void)n_ctx;
    fprintf(stderr, "uvllm serve: cannot start the cuda backend: this build has no CUDA "
                    "(configure with -DUVLLM_CUDA=ON on a machine with the CUDA toolkit)\n");
    return UL_ENOTSUP;
#endif
}

static int make_backend(const serve_args_t *a, server_t *sv) {
    if (!strcmp(a->backend, "null")) return make_null(a, sv);
    char err[256] = "";
    int rc = ul_model_load(a->model, 0, &sv->model, err, sizeof err);
    if (rc) {
        fprintf(stderr, "uvllm serve: cannot load model '%s': %s\n", a->model,
                err[0] ? err : ul_strerror(rc));
        return rc;
    }
    const ul_hparams_t *hp = &sv->model->hp;
    if (a->ctx_size > hp->n_ctx_train) {
        fprintf(stderr,
                "uvllm serve: --ctx-size %d is over the model's training context (%d tokens)\n",
                a->ctx_size, hp->n_ctx_train);
        sv->bad_config = 1;
        return UL_EINVAL;
    }
    int32_t n_ctx = a->ctx_size ? a->ctx_size : hp->n_ctx_train;
    if (!strcmp(a->backend, "cuda")) return make_cuda(a, sv, n_ctx);
    int64_t page =
        (int64_t)ul_kv_page_bytes(a->kv_type, hp->n_layer, hp->n_head_kv, hp->head_dim, PAGE_SIZE);
    char why[160] = "--threads";
    ul_cpu_config_t cc = {.n_threads =
                              a->threads ? a->threads : ul_pool_default_threads(why, sizeof why),
                          .kv_type = a->kv_type,
                          .n_ctx = n_ctx,
                          .page_size = PAGE_SIZE,
                          .kv_bytes = kv_budget(a, sv, n_ctx, page),
                          .max_batch_tokens = a->max_batch_tokens};
    if (!cc.kv_bytes) return UL_EINVAL;
    UL_LOG_INFO("cpu backend: %d threads (%s), %s kernels", cc.n_threads, why,
                ul_cpu_isa_name(ul_cpu_isa()));
    rc = ul_cpu_backend_create(sv->model, &cc, &sv->backend);
    if (rc) fprintf(stderr, "uvllm serve: cannot start the cpu backend: %s\n", ul_strerror(rc));
    if (!rc && a->model_draft) rc = make_draft(a, sv, &cc);
    return rc;
}

/* Reads a whole text file (at most CHAT_TEMPLATE_MAX bytes) into a malloc'ed string;
 * on failure *why says what went wrong. */
static int read_file(const char *path, char **out, const char **why) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        *why = strerror(errno);
        return UL_EIO;
    }
    char *buf = malloc(CHAT_TEMPLATE_MAX + 1);
    size_t n = buf ? fread(buf, 1, CHAT_TEMPLATE_MAX + 1, f) : 0;
    int err = ferror(f) ? errno : 0;
    fclose(f);
    if (!buf) return *why = "out of memory", UL_ENOMEM;
    if (err || n > CHAT_TEMPLATE_MAX) {
        free(buf);
        *why = err ? strerror(err) : "larger than 1 MiB";
        return err ? UL_EIO : UL_E2BIG;
    }
    buf[n] = '\0';
    *out = buf;
    return 0;
}

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* The API keys: --api-key flags, --api-key-file's lines, UVLLM_API_KEY. A key file that
 * holds no key is an error: it would leave the API open by surprise. Keys are never
 * printed, only counted. */
static int add_key(ul_http_keys_t *k, const char *key, size_t len, const char *from) {
    int rc = ul_http_keys_add(k, key, len);
    if (rc)
        fprintf(stderr,
                "uvllm serve: %s: a key must be 1..%d printable ASCII characters without "
                "spaces\n",
                from, UL_HTTP_KEY_MAX);
    return rc;
}

static int key_file(ul_http_keys_t *k, const char *path) {
    char *text = NULL;
    const char *why = "";
    int rc = read_file(path, &text, &why);
    if (rc) {
        fprintf(stderr, "uvllm serve: cannot read --api-key-file '%s': %s\n", path, why);
        return rc;
    }
    size_t before = k->n;
    for (char *line = text, *next; line && !rc; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        size_t n = strlen(line);
        while (n && strchr(" \t\r", line[n - 1])) n--;
        while (n && strchr(" \t", *line)) line++, n--;
        if (n && *line != '#') rc = add_key(k, line, n, "--api-key-file");
    }
    memset(text, 0, strlen(text));
    free(text);
    if (!rc && k->n == before) {
        fprintf(stderr, "uvllm serve: --api-key-file '%s' holds no key\n", path);
        rc = UL_EINVAL;
    }
    return rc;
}

static int setup_keys(const serve_args_t *a, server_t *sv) {
    ul_api_t *api = &sv->api;
    int rc = 0;
    for (int i = 0; i < a->n_api_keys && !rc; i++)
        rc = add_key(&api->api_keys, a->api_keys[i], strlen(a->api_keys[i]), "--api-key");
    if (!rc && a->api_key_file) rc = key_file(&api->api_keys, a->api_key_file);
    const char *env = getenv("UVLLM_API_KEY");
    if (!rc && env && *env) rc = add_key(&api->api_keys, env, strlen(env), "UVLLM_API_KEY");
    if (!rc && a->metrics_key)
        rc = add_key(&api->metrics_keys, a->metrics_key, strlen(a->metrics_key), "--metrics-key");
    if (rc) {
        sv->bad_config = 1;
        return rc;
    }
    if (api->api_keys.n)
        UL_LOG_INFO("API keys: %zu; /v1/* needs 'Authorization: Bearer <key>'", api->api_keys.n);
    else
        UL_LOG_INFO("no API key: /v1/* is open to every client that can connect");
    if (api->metrics_keys.n) UL_LOG_INFO("/metrics needs its key (--metrics-key)");
    return 0;
}

/* The api's settings from the flags; the chat template file is read here, once. */
static int setup_api(const serve_args_t *a, server_t *sv) {
    ul_api_t *api = &sv->api;
    api->model_path = a->model;
    if (a->max_tokens_default) api->default_max_tokens = a->max_tokens_default;
    api->truncate_max_tokens = a->truncate_max_tokens;
    api->parse_special = a->parse_special;
    api->max_queue = a->max_queue;
    api->max_queue_wait_s = a->max_queue_wait_s;
    api->max_seqs_per_client =
        a->max_seqs_per_client >= 0 ? a->max_seqs_per_client : a->max_seqs / 4;
    for (int i = 0; i < a->n_aliases; i++) {
        int rc = ul_api_add_alias(api, a->aliases[i]);
        if (rc) {
            fprintf(stderr, "uvllm serve: --model-alias '%s': %s\n", a->aliases[i],
                    rc == UL_EBUSY ? "already a name of the model" : ul_strerror(rc));
            sv->bad_config = 1;
            return rc;
        }
    }
    if (a->chat_template) {
        const char *why = "";
        int rc = read_file(a->chat_template, &api->chat_template_override, &why);
        if (rc) {
            fprintf(stderr, "uvllm serve: cannot read --chat-template '%s': %s\n", a->chat_template,
                    why);
            sv->bad_config = 1;
            return rc;
        }
    }
    return 0;
}

/* The chat template: --chat-template's file, else the model's tokenizer.chat_template (and
 * its tool_use variant for requests with tools), else ChatML. A template that does not
 * compile is a start-up error: every chat request would fail. */
static int setup_chat(const serve_args_t *a, server_t *sv) {
    ul_api_t *api = &sv->api;
    const char *src = api->chat_template_override, *tool_src = NULL;
    size_t len = src ? strlen(src) : 0, tool_len = 0;
    ul_str_t s;
    if (!src && sv->model && !ul_gguf_get_str(&sv->model->gguf, "tokenizer.chat_template", &s))
        src = s.ptr, len = s.len;
    if (!api->chat_template_override && sv->model &&
        !ul_gguf_get_str(&sv->model->gguf, "tokenizer.chat_template.tool_use", &s))
        tool_src = s.ptr, tool_len = s.len;
    if (!src) src = ul_chat_chatml_template, len = strlen(src);
    char err[256];
    int rc = ul_chat_tmpl_new(src, len, &api->chat_tmpl, err, sizeof err);
    if (!rc && tool_src)
        rc = ul_chat_tmpl_new(tool_src, tool_len, &api->chat_tmpl_tool, err, sizeof err);
    if (rc) {
        fprintf(stderr, "uvllm serve: the chat template does not compile: %s\n", err);
        sv->bad_config = 1;
        return rc;
    }
    if (sv->model) {
        const ul_vocab_t *v = sv->model->vocab;
        int32_t ids[2] = {ul_vocab_bos(v), ul_vocab_eos(v)};
        char *dst[2] = {api->bos_text, api->eos_text};
        for (int i = 0; i < 2; i++) {
            int n = ids[i] >= 0 ? ul_token_to_piece(v, ids[i], 1, dst[i], 63) : 0;
            dst[i][n > 0 ? n : 0] = 0;
        }
    }
    UL_LOG_INFO("chat template: %s%s",
                api->chat_template_override      ? "--chat-template"
                : src == ul_chat_chatml_template ? "ChatML (the model has none)"
                                                 : "the model's",
                api->chat_tmpl_tool ? " (+ tool_use variant)" : "");
    return 0;
}

static int setup(const serve_args_t *a, server_t *sv) {
    int rc = make_backend(a, sv);
    if (rc) return rc;
    ul_codec_t codec;
    /* a backend with a step limit (sized from --max-batch-tokens at create) sets the budget */
    ul_sched_config_t scfg = {.max_batch_tokens =
                                  sv->backend->max_step_tokens ? 0 : a->max_batch_tokens,
                              .max_seqs = a->max_seqs,
                              .no_prefix_cache = a->no_prefix_cache,
                              .itl_target_ms = a->itl_target_ms,
                              .pipeline = a->pipeline,
                              .spec_ngram = a->spec_ngram,
                              .spec_draft_max = a->draft_max,
                              .spec_draft_min = a->draft_min};
    if (sv->model) {
        ul_codec_init_vocab(&codec, sv->model->vocab);
        scfg.is_eog = codec.is_eog;
        scfg.eog_ctx = (void *)sv->model->vocab;
    } else {
        ul_codec_init_null(&codec, sv->backend->n_vocab, sv->backend->eos_id);
    }
    if ((rc = ul_sched_init(&sv->sched, sv->backend, &scfg)) != 0) return rc;
    if ((rc = ul_driver_init(&sv->loop, &sv->driver, &sv->sched)) != 0) {
        ul_sched_free(&sv->sched);
        return rc;
    }
    sv->sched_up = 1;
    ul_api_init(&sv->api, &sv->sched, &codec, sv->model ? base_name(a->model) : "null");
    ul_api_pace_start(&sv->api, &sv->driver);
    if ((rc = setup_api(a, sv)) != 0) return rc;
    if ((rc = setup_chat(a, sv)) != 0) return rc;
    if ((rc = setup_keys(a, sv)) != 0) return rc;
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
    hc.stall_timeout_ms = (uint64_t)(a->stall_timeout * 1000);
    hc.request_timeout_ms = (uint64_t)(a->request_timeout * 1000);
    hc.min_body_rate = (size_t)a->min_body_rate;
    hc.max_buffered_mem = (size_t)a->max_buffered_mem; /* 0: net's default */
    hc.cors_origins = a->cors;
    hc.n_cors_origins = (size_t)a->n_cors;
    hc.on_head = ul_api_head; /* credentials (and job slots) before any body byte is read */
    hc.resp_header = ul_api_load_header;
    hc.hook_data = &sv->api;
    if ((rc = ul_http_server_init(&sv->loop, &sv->http, &hc, &sv->router)) != 0) return rc;
    sv->http_up = 1;
    char m1[32], m2[32];
    UL_LOG_INFO("memory for clients: %s (%s), %s per connection",
                ul_size_format((int64_t)sv->http.cfg.max_buffered_mem, m1, sizeof m1),
                a->max_buffered_mem ? "--max-buffered-mem" : "default",
                ul_size_format((int64_t)sv->http.cfg.max_conn_mem, m2, sizeof m2));
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
    if (sv->sched_up) ul_driver_close(&sv->driver, NULL);
    uv_run(&sv->loop, UV_RUN_DEFAULT);
}

static void log_kv(const serve_args_t *a, const server_t *sv) {
    const ul_backend_t *b = sv->backend;
    int64_t tokens = (int64_t)b->n_pages * b->page_size, bytes;
    if (sv->model) {
        const ul_hparams_t *hp = &sv->model->hp;
        bytes =
            (int64_t)b->n_pages * (int64_t)ul_kv_page_bytes(a->kv_type, hp->n_layer, hp->n_head_kv,
                                                            hp->head_dim, b->page_size);
    } else {
        bytes = tokens * NULL_KV_BYTES_PER_TOKEN;
    }
    char sz[32];
    UL_LOG_INFO("kv cache: %s in %d pages of %d tokens = %lld tokens, %lld full-context "
                "sequences (%s)",
                ul_size_format(bytes, sz, sizeof sz), b->n_pages, b->page_size, (long long)tokens,
                (long long)(tokens / (b->n_ctx ? b->n_ctx : 1)), sv->kv_note);
}

int ul_cmd_serve(int argc, char **argv) {
    serve_args_t a;
    int rc = parse_args(argc, argv, &a);
    if (rc) return rc == 1 ? 0 : 2;
    ul_log_level_t lvl;
    ul_log_parse_level(a.log_level, &lvl);
    ul_log_set_level(lvl);
    signal(SIGPIPE, SIG_IGN); /* a client that vanishes must cost an EPIPE, not the process */
    ul_http_raise_nofile();   /* every connection is a descriptor */
    server_t *sv = calloc(1, sizeof *sv);
    if (!sv || uv_loop_init(&sv->loop) != 0) {
        fprintf(stderr, "uvllm serve: cannot initialise the event loop\n");
        free(sv);
        return 1;
    }
    sv->grace_ms = (uint64_t)(a.shutdown_grace * 1000);
    sv->drain_delay_ms = (uint64_t)(a.drain_delay_s * 1000);
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
        log_kv(&a, sv);
        if (ul_api_ready_start(&sv->api, &sv->loop, a.canary_interval_s))
            UL_LOG_WARN("readiness canary not started: /health/ready stays 503");
        uv_run(&sv->loop, UV_RUN_DEFAULT);
        UL_LOG_INFO("stopped: %llu requests, %llu tokens generated",
                    (unsigned long long)sv->http.stats.requests_total,
                    (unsigned long long)sv->sched.stats.tokens_generated);
    } else {
        teardown_failed(sv);
    }
    ul_api_free(&sv->api);
    if (sv->sched_up) ul_sched_free(&sv->sched);
    if (sv->backend) ul_backend_destroy(sv->backend);
    if (sv->model) ul_model_free(sv->model);
    if (sv->draft_model) ul_model_free(sv->draft_model);
    int lrc = uv_loop_close(&sv->loop);
    if (lrc) UL_LOG_WARN("event loop closed with handles open: %s", uv_strerror(lrc));
    int bad_config = sv->bad_config;
    free(sv);
    return rc ? (bad_config ? 2 : 1) : 0;
}
