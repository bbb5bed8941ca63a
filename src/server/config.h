/* The server's configuration and its one table of options (redis's config.c is the model).
 *
 * Each option is described once, in g_ul_server_opts (options.c): its name, type, field in
 * ul_server_config_t, bounds, default and help. Everything else comes from that row:
 *   - the command line: --NAME VALUE or --NAME=VALUE (a flag: --NAME alone);
 *   - the environment: UVLLM_ + NAME in capitals with '-' as '_' (UVLLM_MAX_BATCH_TOKENS);
 *   - a config file (--config FILE or UVLLM_CONFIG): "NAME VALUE" or "NAME = VALUE" lines,
 *     '#' comment lines, blank lines;
 *   - `uvllm serve --help`.
 * Precedence: defaults < config file < environment < command line. Repeatable options
 * (lists: --api-key, --model-alias, --cors-origin) add up across the three. A flag takes
 * 1/0, true/false, yes/no or on/off in the environment and in a file.
 *
 * Strings in a loaded configuration point into argv, the environment or the config file's
 * text (owned by the configuration, freed by ul_server_config_free). Start-up only: not
 * thread-safe (getenv). */
#ifndef UL_SERVER_CONFIG_H
#define UL_SERVER_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define UL_SERVER_LIST_MAX 64 /* the longest list (--api-key); each option has its own bound */

typedef struct ul_server_list_s {
    const char *v[UL_SERVER_LIST_MAX];
    int n;
} ul_server_list_t;

typedef struct ul_server_config_s {
    /* model and backend */
    const char *model;   /* GGUF path, or NULL */
    const char *backend; /* "cpu", "null" or "cuda"; NULL before ul_server_config_check */
    int device, threads, pipeline, ctx_size;
    const char *kv_type; /* "f16" or "f32" */
    int64_t kv_mem;      /* 0: sized from MemAvailable */
    /* speculative decoding (sched/spec.c) */
    const char *model_draft;
    int spec_ngram, draft_max, draft_min; /* 0: off, 0: 6, 0: 1 */
    /* null backend */
    int64_t null_delay_us, null_token_us, null_prefill_us;
    int64_t null_fail_after; /* -1: off */
    int null_ctx;
    const char *null_reply;
    /* HTTP */
    const char *host;
    int port, max_conns;
    int64_t max_body;
    double header_timeout, idle_timeout, stall_timeout, shutdown_grace, drain_delay_s;
    ul_server_list_t cors;
    int64_t max_buffered_mem; /* 0: net's default */
    int64_t min_body_rate;
    double request_timeout;
    /* scheduling and admission */
    int max_seqs, max_batch_tokens, max_queue, no_prefix_cache;
    int batch_invariant;     /* cpu backend: one attention path for every step shape */
    int max_seqs_per_client; /* -1: a quarter of max_seqs */
    double itl_target_ms;    /* 0: off */
    double max_queue_wait_s;
    /* the API */
    int max_tokens_default, truncate_max_tokens, no_parse_special;
    ul_server_list_t aliases;
    const char *chat_template; /* a file */
    const char *pooling;       /* none|mean|cls|last, or NULL: the model's */
    double canary_interval_s;  /* 0 (embedders only): no readiness canaries */
    ul_server_list_t api_keys;
    const char *api_key_file, *metrics_key;
    const char *log_level;
    /* Not options: for programs that embed the server (tests, fuzzers). */
    int no_access_log;    /* 1: no access-log line per request */
    uint64_t linger_ms;   /* 0: net's default */
    int64_t max_conn_mem; /* 0: net's default */
    /* owned: the config file's text, which strings may point into */
    char *file_text;
} ul_server_config_t;

typedef enum {
    UL_OPT_STR,    /* text; choices: one of "a|b|c"; lo 1: not empty */
    UL_OPT_INT,    /* int in lo..hi */
    UL_OPT_I64,    /* int64_t in lo..hi */
    UL_OPT_DOUBLE, /* double in lo..hi (a number of seconds, milliseconds...) */
    UL_OPT_SIZE,   /* int64_t bytes: "512M", "4G", "1073741824"; lo..hi */
    UL_OPT_FLAG,   /* int 0/1, no value on the command line */
    UL_OPT_LIST,   /* ul_server_list_t; repeatable, at most hi items, each not empty */
} ul_opt_type_t;

enum {
    UL_OPT_SECRET = 1,   /* the value is never printed (keys) */
    UL_OPT_LO_OPEN = 2,  /* the lower bound is excluded: > lo */
    UL_OPT_NO_SPACE = 4, /* a text without whitespace */
};

typedef struct ul_opt_s {
    const char *name; /* without "--" */
    ul_opt_type_t type;
    size_t off; /* of the field in ul_server_config_t */
    double lo, hi;
    double def;           /* numbers and flags */
    const char *sdef;     /* texts */
    const char *choices;  /* UL_OPT_STR: "cpu|null|cuda", or NULL */
    unsigned flags;       /* UL_OPT_* above */
    const char *metavar;  /* "N", "SEC", "PATH" ... in --help */
    const char *def_help; /* --help's default when it is not the value ("the model's") */
    const char *help;
} ul_opt_t;

extern const ul_opt_t g_ul_server_opts[];
extern const size_t g_ul_server_n_opts;

/* The defaults of every option; embedders then set fields. */
void ul_server_config_default(ul_server_config_t *c);
void ul_server_config_free(ul_server_config_t *c);

/* The option named name (without "--"), or NULL. */
const ul_opt_t *ul_server_opt_find(const char *name, size_t len);

/* Sets one option from a text value (from: "--port", "UVLLM_PORT", "FILE:LINE: port",
 * for the message). A list value is appended. Returns 0, or UL_EINVAL with err saying
 * which option, why and its bounds. */
int ul_server_opt_set(ul_server_config_t *c, const ul_opt_t *o, const char *value, const char *from,
                      char *err, size_t cap);

/* Applies a config file's text (modified in place: lines are cut). path names it in
 * messages. Returns 0 or UL_EINVAL with err. */
int ul_server_config_parse_file(ul_server_config_t *c, char *text, const char *path, char *err,
                                size_t cap);
/* Applies every UVLLM_* variable of the table found by get (getenv, or a test's). */
int ul_server_config_parse_env(ul_server_config_t *c, const char *(*get)(const char *name),
                               char *err, size_t cap);
/* Applies argv[1..argc) (argv[0] is the command). *help is set for --help/-h. */
int ul_server_config_parse_argv(ul_server_config_t *c, int argc, char **argv, int *help, char *err,
                                size_t cap);

/* Everything in order: defaults, the config file (--config in argv, else UVLLM_CONFIG),
 * the environment (get), argv; then ul_server_config_check. Returns 0 (with *help set for
 * --help), or UL_EINVAL / UL_EIO with err. */
int ul_server_config_load(ul_server_config_t *c, int argc, char **argv,
                          const char *(*get)(const char *name), int *help, char *err, size_t cap);

/* Rules between options (--backend cpu needs --model ...); fills backend's default. */
int ul_server_config_check(ul_server_config_t *c, char *err, size_t cap);

/* `uvllm serve --help`, from the table. */
void ul_server_config_usage(FILE *f);

/* The environment variable of an option: "UVLLM_MAX_BATCH_TOKENS". */
void ul_server_opt_env_name(const ul_opt_t *o, char *out, size_t cap);

#endif
