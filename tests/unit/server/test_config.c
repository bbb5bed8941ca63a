/* The options table (src/server/options.c, config.c): the command line, the environment
 * and a config file parse into ul_server_config_t with the table's bounds; precedence is
 * defaults < file < environment < command line; lists add up; bad values and unknown
 * options are errors that name the option, its bounds and where it came from. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/config.h"
#include "uvllm/err.h"

/* A fake environment: "NAME=value" entries. */
static const char *const *g_env;
static const char *fake_get(const char *name) {
    size_t n = strlen(name);
    for (const char *const *e = g_env; e && *e; e++)
        if (!strncmp(*e, name, n) && (*e)[n] == '=') return *e + n + 1;
    return NULL;
}

static int parse(ul_server_config_t *c, char *err, int argc, const char **argv) {
    int help = 0;
    return ul_server_config_load(c, argc, (char **)argv, fake_get, &help, err, 512);
}

#define PARSE(c, err, ...)                                                                         \
    parse(c, err, (int)(sizeof((const char *[]){"serve", __VA_ARGS__}) / sizeof(char *)),          \
          (const char *[]){"serve", __VA_ARGS__})

Test(config, defaults_from_the_table) {
    ul_server_config_t c;
    char err[512] = "";
    g_env = NULL;
    cr_assert_eq(parse(&c, err, 1, (const char *[]){"serve"}), 0, "%s", err);
    cr_assert_eq(c.port, 8080);
    cr_assert_eq(c.max_batch_tokens, 512);
    cr_assert_eq(c.max_body, 8 << 20);
    cr_assert_eq(c.header_timeout, 10);
    cr_assert_eq(c.itl_target_ms, 100);
    cr_assert_eq(c.null_fail_after, -1);
    cr_assert_eq(c.null_ctx, 4096);
    cr_assert_str_eq(c.host, "127.0.0.1");
    cr_assert_str_eq(c.kv_type, "f16");
    cr_assert_str_eq(c.backend, "null", "no --model: the null backend");
    cr_assert_eq(c.truncate_max_tokens, 0);
}

Test(config, command_line_values_and_flags) {
    ul_server_config_t c;
    char err[512] = "";
    g_env = NULL;
    cr_assert_eq(PARSE(&c, err, "--port", "9000", "--max-batch-tokens=256", "--kv-mem", "4G",
                       "--truncate-max-tokens", "--header-timeout", "0.5", "--kv-type", "f32",
                       "--model-alias", "a", "--model-alias", "b", "--null-fail-after", "3"),
                 0, "%s", err);
    cr_assert_eq(c.port, 9000);
    cr_assert_eq(c.max_batch_tokens, 256);
    cr_assert_eq(c.kv_mem, (int64_t)4 << 30);
    cr_assert_eq(c.truncate_max_tokens, 1);
    cr_assert_eq(c.header_timeout, 0.5);
    cr_assert_str_eq(c.kv_type, "f32");
    cr_assert_eq(c.aliases.n, 2);
    cr_assert_str_eq(c.aliases.v[1], "b");
    cr_assert_eq(c.null_fail_after, 3);
}

Test(config, bounds_are_enforced_and_named) {
    ul_server_config_t c;
    char err[512];
    g_env = NULL;
    cr_assert_eq(PARSE(&c, err, "--port", "70000"), UL_EINVAL);
    cr_assert(strstr(err, "bad value '70000' for --port") && strstr(err, "0..65535"), "%s", err);
    cr_assert_eq(PARSE(&c, err, "--max-batch-tokens", "0"), UL_EINVAL);
    cr_assert(strstr(err, "1..1048576"), "%s", err);
    cr_assert_eq(PARSE(&c, err, "--header-timeout", "0"), UL_EINVAL, "the bound is open: > 0");
    cr_assert(strstr(err, "over 0"), "%s", err);
    cr_assert_eq(PARSE(&c, err, "--canary-interval-s", "0.01"), UL_EINVAL);
    cr_assert_eq(PARSE(&c, err, "--kv-mem", "4X"), UL_EINVAL);
    cr_assert(strstr(err, "bad value '4X' for --kv-mem"), "%s", err);
    cr_assert_eq(PARSE(&c, err, "--null-delay-us", "12abc"), UL_EINVAL);
    cr_assert_eq(PARSE(&c, err, "--backend", "gpu9"), UL_EINVAL);
    cr_assert(strstr(err, "one of cpu|null|cuda"), "%s", err);
    cr_assert_eq(PARSE(&c, err, "--cors-origin", "a b"), UL_EINVAL, "no spaces in an origin");
    cr_assert_eq(PARSE(&c, err, "--port"), UL_EINVAL);
    cr_assert(strstr(err, "'--port' needs a value"), "%s", err);
    cr_assert_eq(PARSE(&c, err, "--max-body", "17179869185"), UL_EINVAL, "over 16 GiB");
    cr_assert_eq(PARSE(&c, err, "--max-body", "16G"), 0, "%s", err);
}

Test(config, unknown_options_and_secrets) {
    ul_server_config_t c;
    char err[512];
    g_env = NULL;
    cr_assert_eq(PARSE(&c, err, "--bogus", "1"), UL_EINVAL);
    cr_assert(strstr(err, "unknown option '--bogus'"), "%s", err);
    cr_assert_eq(PARSE(&c, err, "--api-keys=sk-hidden"), UL_EINVAL);
    cr_assert(!strstr(err, "sk-hidden"), "a value after '=' may be a secret: %s", err);
    cr_assert_eq(PARSE(&c, err, "port", "1"), UL_EINVAL, "a name without '--'");
    /* the 65th --api-key is refused without printing it */
    const char *argv[1 + 2 * 65];
    argv[0] = "serve";
    for (int i = 0; i < 65; i++) argv[1 + 2 * i] = "--api-key", argv[2 + 2 * i] = "sk-secret";
    cr_assert_eq(parse(&c, err, 131, argv), UL_EINVAL);
    cr_assert(strstr(err, "--api-key") && !strstr(err, "sk-secret"), "%s", err);
}

Test(config, environment) {
    ul_server_config_t c;
    char err[512] = "";
    static const char *const env[] = {"UVLLM_PORT=9001",
                                      "UVLLM_TRUNCATE_MAX_TOKENS=yes",
                                      "UVLLM_API_KEY=k1",
                                      "UVLLM_MAX_QUEUE_WAIT_S=2.5",
                                      "UVLLM_NO_PREFIX_CACHE=off",
                                      "UVLLM_MODEL=",
                                      NULL};
    g_env = env;
    cr_assert_eq(parse(&c, err, 1, (const char *[]){"serve"}), 0, "%s", err);
    cr_assert_eq(c.port, 9001);
    cr_assert_eq(c.truncate_max_tokens, 1);
    cr_assert_eq(c.no_prefix_cache, 0);
    cr_assert_eq(c.max_queue_wait_s, 2.5);
    cr_assert_eq(c.api_keys.n, 1);
    cr_assert_str_eq(c.api_keys.v[0], "k1");
    cr_assert_null(c.model, "an empty variable is unset");
    static const char *const bad[] = {"UVLLM_PORT=x", NULL};
    g_env = bad;
    cr_assert_eq(parse(&c, err, 1, (const char *[]){"serve"}), UL_EINVAL);
    cr_assert(strstr(err, "UVLLM_PORT (--port)"), "%s", err);
    static const char *const flag[] = {"UVLLM_TRUNCATE_MAX_TOKENS=maybe", NULL};
    g_env = flag;
    cr_assert_eq(parse(&c, err, 1, (const char *[]){"serve"}), UL_EINVAL);
}

static char *write_tmp(const char *text) {
    static char path[64];
    snprintf(path, sizeof path, "/tmp/uvllm_cfg_XXXXXX");
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

Test(config, config_file) {
    ul_server_config_t c;
    char err[512] = "";
    g_env = NULL;
    char *path = write_tmp("# a comment\n\n  port 7000\nmax-batch-tokens = 128\r\n"
                           "no-prefix-cache\nhost=0.0.0.0\n--cors-origin https://a.example\n");
    cr_assert_eq(PARSE(&c, err, "--config", path), 0, "%s", err);
    cr_assert_eq(c.port, 7000);
    cr_assert_eq(c.max_batch_tokens, 128);
    cr_assert_eq(c.no_prefix_cache, 1);
    cr_assert_str_eq(c.host, "0.0.0.0");
    cr_assert_eq(c.cors.n, 1);
    cr_assert_str_eq(c.cors.v[0], "https://a.example");
    ul_server_config_free(&c);
    unlink(path);

    path = write_tmp("port 7000\nmax-batch-tokenz 5\n");
    cr_assert_eq(PARSE(&c, err, "--config", path), UL_EINVAL);
    cr_assert(strstr(err, ":2: unknown option 'max-batch-tokenz'"), "%s", err);
    ul_server_config_free(&c);
    unlink(path);

    path = write_tmp("\nport = 99999\n");
    cr_assert_eq(PARSE(&c, err, "--config", path), UL_EINVAL);
    cr_assert(strstr(err, ":2: port") && strstr(err, "0..65535"), "%s", err);
    ul_server_config_free(&c);
    unlink(path);

    cr_assert_eq(PARSE(&c, err, "--config", "/nonexistent/uvllm.conf"), UL_EIO);
    cr_assert(strstr(err, "/nonexistent/uvllm.conf"), "%s", err);
    ul_server_config_free(&c);
}

Test(config, precedence_defaults_file_env_argv) {
    ul_server_config_t c;
    char err[512] = "";
    char *path = write_tmp("port 1001\nmax-seqs 11\nmax-conns 21\napi-key from-file\n");
    static const char *const env[] = {"UVLLM_PORT=1002", "UVLLM_MAX_SEQS=12",
                                      "UVLLM_API_KEY=from-env", NULL};
    g_env = env;
    cr_assert_eq(PARSE(&c, err, "--config", path, "--port", "1003", "--api-key", "from-argv"), 0,
                 "%s", err);
    cr_assert_eq(c.port, 1003, "argv over env and file");
    cr_assert_eq(c.max_seqs, 12, "env over file");
    cr_assert_eq(c.max_conns, 21, "file over default");
    cr_assert_eq(c.max_batch_tokens, 512, "the default when no source sets it");
    cr_assert_eq(c.api_keys.n, 3, "lists add up across sources");
    cr_assert_str_eq(c.api_keys.v[0], "from-file");
    cr_assert_str_eq(c.api_keys.v[2], "from-argv");
    ul_server_config_free(&c);
    /* UVLLM_CONFIG names the file when argv does not */
    static const char *env2[] = {"UVLLM_CONFIG=", NULL};
    char var[96];
    snprintf(var, sizeof var, "UVLLM_CONFIG=%s", path);
    env2[0] = var;
    g_env = env2;
    cr_assert_eq(parse(&c, err, 1, (const char *[]){"serve"}), 0, "%s", err);
    cr_assert_eq(c.port, 1001);
    ul_server_config_free(&c);
    unlink(path);
}

Test(config, rules_between_options) {
    ul_server_config_t c;
    char err[512];
    g_env = NULL;
    cr_assert_eq(PARSE(&c, err, "--backend", "cpu"), UL_EINVAL);
    cr_assert(strstr(err, "--backend cpu needs --model"), "%s", err);
    cr_assert_eq(PARSE(&c, err, "--model", "m.gguf", "--null-reply", "hi"), UL_EINVAL);
    cr_assert(strstr(err, "--null-reply needs the null backend"), "%s", err);
    cr_assert_eq(PARSE(&c, err, "--model", "m.gguf"), 0, "%s", err);
    cr_assert_str_eq(c.backend, "cpu", "--model implies the cpu backend");
}

Test(config, help_lists_every_option_with_its_variable) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ul_server_config_usage(f);
    fclose(f);
    cr_assert(strstr(text, "defaults < config file < environment < command line"));
    for (size_t i = 0; i < g_ul_server_n_opts; i++) {
        const ul_opt_t *o = &g_ul_server_opts[i];
        char flag[64], env[64];
        snprintf(flag, sizeof flag, "\n  --%s", o->name);
        ul_server_opt_env_name(o, env, sizeof env);
        const char *at = strstr(text, flag);
        cr_assert(at && strchr(" \n", at[strlen(flag)]), "%s missing from --help", flag);
        cr_assert(strstr(text, env), "%s missing from --help", env);
        cr_assert_eq(ul_server_opt_find(o->name, strlen(o->name)), o);
    }
    cr_assert(strstr(text, "(default: 512; UVLLM_MAX_BATCH_TOKENS)"), "%s", text);
    free(text);
}
