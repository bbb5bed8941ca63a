/* The api's settings from the configuration: request defaults and admission limits,
 * model aliases, the chat template (--chat-template's file, else the model's, else
 * ChatML) and the API keys (--api-key, --api-key-file's lines, UVLLM_API_KEY). Start-up
 * only; a value that is wrong fails the start as a usage error (sv->bad_config). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat.h"
#include "model/model.h"
#include "server/server.h"
#include "server/setup.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

#define TEXT_FILE_MAX (1 << 20)

static int fail_config(ul_server_t *sv, int rc) {
    sv->bad_config = 1;
    return rc;
}

/* Reads a whole text file (at most 1 MiB) into a malloc'ed string; on failure *why says
 * what went wrong. */
static int read_text(const char *path, char **out, const char **why) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        *why = strerror(errno);
        return UL_EIO;
    }
    char *buf = malloc(TEXT_FILE_MAX + 1);
    size_t n = buf ? fread(buf, 1, TEXT_FILE_MAX + 1, f) : 0;
    int err = ferror(f) ? errno : 0;
    fclose(f);
    if (!buf) return *why = "out of memory", UL_ENOMEM;
    if (err || n > TEXT_FILE_MAX) {
        free(buf);
        *why = err ? strerror(err) : "larger than 1 MiB";
        return err ? UL_EIO : UL_E2BIG;
    }
    buf[n] = '\0';
    *out = buf;
    return 0;
}

/* Keys are never printed, only counted. */
static int add_key(ul_server_t *sv, ul_http_keys_t *k, const char *key, size_t len,
                   const char *from) {
    int rc = ul_http_keys_add(k, key, len);
    if (rc)
        snprintf(sv->err, sizeof sv->err,
                 "%s: a key must be 1..%d printable ASCII characters without spaces", from,
                 UL_HTTP_KEY_MAX);
    return rc;
}

/* A key file that holds no key is an error: it would leave the API open by surprise. */
static int key_file(ul_server_t *sv, ul_http_keys_t *k, const char *path) {
    char *text = NULL;
    const char *why = "";
    int rc = read_text(path, &text, &why);
    if (rc) {
        snprintf(sv->err, sizeof sv->err, "cannot read --api-key-file '%s': %s", path, why);
        return rc;
    }
    size_t before = k->n;
    for (char *line = text, *next; line && !rc; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        size_t n = strlen(line);
        while (n && strchr(" \t\r", line[n - 1])) n--;
        while (n && strchr(" \t", *line)) line++, n--;
        if (n && *line != '#') rc = add_key(sv, k, line, n, "--api-key-file");
    }
    memset(text, 0, strlen(text));
    free(text);
    if (!rc && k->n == before) {
        snprintf(sv->err, sizeof sv->err, "--api-key-file '%s' holds no key", path);
        rc = UL_EINVAL;
    }
    return rc;
}

int ul_server_setup_keys(ul_server_t *sv) {
    const ul_server_config_t *c = &sv->cfg;
    ul_api_t *api = &sv->api;
    int rc = 0;
    for (int i = 0; i < c->api_keys.n && !rc; i++)
        rc = add_key(sv, &api->api_keys, c->api_keys.v[i], strlen(c->api_keys.v[i]), "--api-key");
    if (!rc && c->api_key_file) rc = key_file(sv, &api->api_keys, c->api_key_file);
    if (!rc && c->metrics_key)
        rc = add_key(sv, &api->metrics_keys, c->metrics_key, strlen(c->metrics_key),
                     "--metrics-key");
    if (rc) return fail_config(sv, rc);
    if (api->api_keys.n)
        UL_LOG_INFO("API keys: %zu; /v1/* needs 'Authorization: Bearer <key>'", api->api_keys.n);
    else
        UL_LOG_INFO("no API key: /v1/* is open to every client that can connect");
    if (api->metrics_keys.n) UL_LOG_INFO("/metrics needs its key (--metrics-key)");
    return 0;
}

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

const char *ul_server_model_id(const ul_server_t *sv) {
    return sv->model && sv->cfg.model ? base_name(sv->cfg.model) : "null";
}

/* Embeddings' pooling (UL_POOL_*): --pooling, else the model's pooling_type, else (null
 * backend) mean. */
static int32_t pooling_of(const ul_server_t *sv) {
    static const char *const names[] = {"none", "mean", "cls", "last", "rank"};
    for (int32_t i = 0; sv->cfg.pooling && i < 5; i++)
        if (!strcmp(sv->cfg.pooling, names[i])) return i;
    return sv->backend && sv->backend->model ? sv->backend->model->hp.pooling : UL_POOL_MEAN;
}

int ul_server_setup_api(ul_server_t *sv) {
    const ul_server_config_t *c = &sv->cfg;
    ul_api_t *api = &sv->api;
    api->model_path = c->model;
    api->default_max_tokens = c->max_tokens_default;
    api->truncate_max_tokens = c->truncate_max_tokens;
    api->parse_special = !c->no_parse_special;
    api->pooling = pooling_of(sv);
    api->rank_ok = !sv->backend || !sv->backend->model || sv->backend->model->hp.encoder;
    api->embed_only = sv->backend && sv->backend->model && sv->backend->model->hp.encoder;
    api->max_queue = c->max_queue;
    api->max_queue_wait_s = c->max_queue_wait_s;
    api->max_seqs_per_client =
        c->max_seqs_per_client >= 0 ? c->max_seqs_per_client : c->max_seqs / 4;
    for (int i = 0; i < c->aliases.n; i++) {
        int rc = ul_api_add_alias(api, c->aliases.v[i]);
        if (rc) {
            snprintf(sv->err, sizeof sv->err, "--model-alias '%s': %s", c->aliases.v[i],
                     rc == UL_EBUSY ? "already a name of the model" : ul_strerror(rc));
            return fail_config(sv, rc);
        }
    }
    if (c->chat_template) {
        const char *why = "";
        int rc = read_text(c->chat_template, &api->chat_template_override, &why);
        if (rc) {
            snprintf(sv->err, sizeof sv->err, "cannot read --chat-template '%s': %s",
                     c->chat_template, why);
            return fail_config(sv, rc);
        }
    }
    return 0;
}

/* The vocabulary's BOS/EOS texts, for templates that print them. */
static void special_texts(ul_server_t *sv) {
    const ul_vocab_t *v = sv->model->vocab;
    int32_t ids[2] = {ul_vocab_bos(v), ul_vocab_eos(v)};
    char *dst[2] = {sv->api.bos_text, sv->api.eos_text};
    for (int i = 0; i < 2; i++) {
        int n = ids[i] >= 0 ? ul_token_to_piece(v, ids[i], 1, dst[i], 63) : 0;
        dst[i][n > 0 ? n : 0] = 0;
    }
}

/* --chat-template's text, else the model's tokenizer.chat_template (and its tool_use variant
 * for requests with tools), else ChatML. A template that does not compile fails the start:
 * every chat request would fail. */
int ul_server_setup_chat(ul_server_t *sv) {
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
        snprintf(sv->err, sizeof sv->err, "the chat template does not compile: %s", err);
        return fail_config(sv, rc);
    }
    if (sv->model) special_texts(sv);
    UL_LOG_INFO("chat template: %s%s",
                api->chat_template_override      ? "--chat-template"
                : src == ul_chat_chatml_template ? "ChatML (the model has none)"
                                                 : "the model's",
                api->chat_tmpl_tool ? " (+ tool_use variant)" : "");
    return 0;
}
