/* `uvllm chat-template`: renders a chat request (JSON on stdin) with a chat template the way
 * the server will, and prints the prompt exactly (no newline added). The template comes
 * from a file or from a model's tokenizer.chat_template (ChatML when the model has none);
 * bos/eos default to the model's special token strings. Like the server, a leading BOS
 * text is dropped when tokenizing adds BOS anyway (llama.cpp's rule): with --model when
 * its vocabulary adds BOS, with --template unless --keep-bos (no vocabulary to ask). A
 * template that raises gives its message on stderr and exit status 1. Useful to check a
 * model's template before serving. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat/chat.h"
#include "cmd/cmd.h"
#include "model/gguf.h"
#include "model/vocab.h"
#include "uvllm/err.h"

static void usage(FILE *f) {
    fprintf(f, "usage: uvllm chat-template (--template FILE | --model M.gguf) [--date YYYY-MM-DD]\n"
               "                          [--bos S] [--eos S] [--keep-bos] -\n"
               "  reads a chat request body (JSON) on stdin, prints the rendered prompt as the\n"
               "  server renders it: a leading BOS is dropped when tokenizing adds one (with\n"
               "  --model: when its vocabulary does; with --template: unless --keep-bos)\n"
               "  --date  pin the date (12:00 UTC) for templates that print it\n");
}

static char *read_all(FILE *f, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *p = malloc(cap);
    while (p) {
        size_t r = fread(p + n, 1, cap - n - 1, f);
        n += r;
        if (r == 0) break;
        if (n + 1 == cap) {
            char *q = realloc(p, cap *= 2);
            if (!q) break;
            p = q;
        }
    }
    if (!p || ferror(f)) {
        free(p);
        return NULL;
    }
    p[n] = 0;
    *len = n;
    return p;
}

/* The text of token id key's value (tokenizer.ggml.bos_token_id ...); NULL if none. */
static char *token_str(const ul_gguf_t *g, const char *key) {
    uint32_t id;
    const ul_gguf_kv_t *kv = ul_gguf_find(g, "tokenizer.ggml.tokens");
    ul_gguf_iter_t it;
    ul_str_t s;
    if (ul_gguf_get_u32(g, key, &id) || !kv || ul_gguf_arr_iter(kv, &it)) return NULL;
    for (uint32_t i = 0; ul_gguf_iter_next_str(&it, &s); i++)
        if (i == id) return strndup(s.ptr, s.len);
    return NULL;
}

typedef struct args {
    const char *tmpl, *model, *date, *bos, *eos;
    int keep_bos;
} args;

static int parse_args(int argc, char **argv, args *a) {
    int dash = 0;
    for (int i = 1; i < argc; i++) {
        const char **dst = !strcmp(argv[i], "--template") ? &a->tmpl
                           : !strcmp(argv[i], "--model")  ? &a->model
                           : !strcmp(argv[i], "--date")   ? &a->date
                           : !strcmp(argv[i], "--bos")    ? &a->bos
                           : !strcmp(argv[i], "--eos")    ? &a->eos
                                                          : NULL;
        if (!strcmp(argv[i], "-"))
            dash = 1;
        else if (!strcmp(argv[i], "--keep-bos"))
            a->keep_bos = 1;
        else if (dst && i + 1 < argc)
            *dst = argv[++i];
        else
            return -1;
    }
    return dash && (!a->tmpl != !a->model) ? 0 : -1;
}

static int64_t parse_date(const char *s) {
    struct tm tm = {0};
    if (!s) return 0;
    if (sscanf(s, "%d-%d-%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday) != 3) return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    tm.tm_hour = 12;
    return (int64_t)timegm(&tm);
}

/* Loads the template source and default bos/eos into *src, *bos, *eos (malloc'd). */
static int load_template(const args *a, char **src, size_t *len, char **bos, char **eos,
                         int *adds_bos) {
    *adds_bos = !a->keep_bos;
    if (a->tmpl) {
        FILE *f = fopen(a->tmpl, "rb");
        *src = f ? read_all(f, len) : NULL;
        if (f) fclose(f);
        if (!*src) fprintf(stderr, "uvllm chat-template: cannot read %s\n", a->tmpl);
        return *src ? 0 : 1;
    }
    ul_gguf_t g;
    if (ul_gguf_open(&g, a->model)) {
        fprintf(stderr, "uvllm chat-template: %s: %s\n", a->model, g.err);
        return 1;
    }
    ul_str_t s;
    if (!ul_gguf_get_str(&g, "tokenizer.chat_template", &s)) {
        *src = strndup(s.ptr, s.len);
        *len = s.len;
    } else {
        *src = strdup(ul_chat_chatml_template);
        *len = strlen(ul_chat_chatml_template);
    }
    *bos = token_str(&g, "tokenizer.ggml.bos_token_id");
    *eos = token_str(&g, "tokenizer.ggml.eos_token_id");
    ul_vocab_t *v = NULL;
    char err[256];
    if (!ul_vocab_load(&g, &v, err, sizeof err)) { /* the server's rule: its vocabulary's */
        *adds_bos = ul_vocab_adds_bos(v);
        ul_vocab_free(v);
    }
    ul_gguf_free(&g);
    return *src ? 0 : 1;
}

static int render(const char *src, size_t len, const args *a, const char *bos, const char *eos,
                  int adds_bos) {
    char err[512];
    ul_chat_tmpl_t *t;
    if (ul_chat_tmpl_new(src, len, &t, err, sizeof err)) {
        fprintf(stderr, "uvllm chat-template: template: %s\n", err);
        return 1;
    }
    size_t blen;
    char *body = read_all(stdin, &blen);
    cJSON *req = body ? cJSON_ParseWithLength(body, blen) : NULL;
    if (req) ul_chat_json_mark_floats(req, body, blen);
    free(body);
    int rc = 1;
    if (!req) {
        fprintf(stderr, "uvllm chat-template: stdin is not JSON\n");
    } else {
        ul_chat_opts_t o;
        ul_chat_opts_init(&o);
        o.bos_token = a->bos ? a->bos : bos;
        o.eos_token = a->eos ? a->eos : eos;
        o.now = parse_date(a->date);
        ul_buf_t out = {0};
        int r = ul_chat_render(t, req, &o, &out, NULL, err, sizeof err);
        size_t nb = o.bos_token ? strlen(o.bos_token) : 0, skip = 0;
        if (!r && adds_bos && nb && out.len >= nb && !memcmp(out.p, o.bos_token, nb)) skip = nb;
        if (r)
            fprintf(stderr, "%s\n", err[0] ? err : ul_strerror(r));
        else
            rc = fwrite(out.p + skip, 1, out.len - skip, stdout) == out.len - skip ? 0 : 1;
        ul_buf_free(&out);
        cJSON_Delete(req);
    }
    ul_chat_tmpl_free(t);
    return rc;
}

int ul_cmd_chat_template(int argc, char **argv) {
    args a = {0};
    if (parse_args(argc, argv, &a)) {
        usage(stderr);
        return 2;
    }
    if (parse_date(a.date) < 0) {
        fprintf(stderr, "uvllm chat-template: --date wants YYYY-MM-DD\n");
        return 2;
    }
    char *src = NULL, *bos = NULL, *eos = NULL;
    size_t len = 0;
    int adds_bos = 0;
    int rc = load_template(&a, &src, &len, &bos, &eos, &adds_bos);
    if (!rc) rc = render(src, len, &a, bos, eos, adds_bos);
    free(src);
    free(bos);
    free(eos);
    return rc;
}
