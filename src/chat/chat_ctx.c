/* The chat layer: request normalisation and the template context, as llama-server builds
 * them for its Jinja engine (oracle.py's llamacpp_context is the reference). The request is
 * copied and normalised as cJSON, then handed to the interpreter with its strings marked
 * plain; bos/eos and the dates are template-side text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat/chat.h"
#include "base/buf.h"
#include "chat/jinja.h"
#include "uvllm/err.h"

struct ul_chat_tmpl_s {
    ul_jinja_t *j;
    char *src;
    int supports_system;
    int thinking;
};

const char ul_chat_chatml_template[] =
    "{%- for message in messages -%}\n"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "{{- '<|im_start|>assistant\\n' -}}\n"
    "{%- endif -%}\n";

const char ul_chat_chatml_tools_template[] =
    "{%- if tools -%}\n"
    "{{- '<|im_start|>system\\n' -}}\n"
    "{%- if messages[0]['role'] == 'system' -%}{{- messages[0]['content'] + '\\n\\n' -}}{%- endif "
    "-%}\n"
    "{{- '# Tools\\n<tools>' -}}\n"
    "{%- for tool in tools -%}{{- '\\n' + (tool | tojson) -}}{%- endfor -%}\n"
    "{{- '\\n</tools>\\nTo call a tool: <tool_call>\\n{\"name\": <name>, \"arguments\": "
    "<json-object>}\\n</tool_call><|im_end|>\\n' -}}\n"
    "{%- endif -%}\n"
    "{%- for message in messages -%}\n"
    "{%- if message['role'] == 'system' and loop.first and tools -%}\n"
    "{%- elif message['role'] == 'assistant' and message['tool_calls'] -%}\n"
    "{{- '<|im_start|>assistant' -}}\n"
    "{%- if message['content'] -%}{{- '\\n' + message['content'] -}}{%- endif -%}\n"
    "{%- for tc in message['tool_calls'] -%}\n"
    "{%- set f = tc['function'] if tc['function'] else tc -%}\n"
    "{{- '\\n<tool_call>\\n{\"name\": \"' + f['name'] + '\", \"arguments\": ' + "
    "(f['arguments'] | tojson) + '}\\n</tool_call>' -}}\n"
    "{%- endfor -%}\n"
    "{{- '<|im_end|>\\n' -}}\n"
    "{%- elif message['role'] == 'tool' -%}\n"
    "{{- '<|im_start|>user\\n<tool_response>\\n' + message['content'] + "
    "'\\n</tool_response><|im_end|>\\n' -}}\n"
    "{%- else -%}\n"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}\n"
    "{%- endif -%}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}\n";

void ul_chat_opts_init(ul_chat_opts_t *o) {
    memset(o, 0, sizeof *o);
    o->add_generation_prompt = 1;
}

/* ---- probes (oracle.py: supports_system_role, thinking_changes_generation_prompt) ---- */

static cJSON *msg_json(const char *role, const char *content) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", role);
    cJSON_AddStringToObject(m, "content", content);
    return m;
}

static int probe_render(const ul_jinja_t *j, cJSON *msgs, int thinking, ul_buf_t *out) {
    cJSON *agp = cJSON_CreateTrue(), *bos = cJSON_CreateString("<s>");
    cJSON *eos = cJSON_CreateString("</s>"), *th = cJSON_CreateBool(thinking > 0);
    ul_jinja_var_t vars[] = {{"messages", msgs, 1},
                             {"add_generation_prompt", agp, 0},
                             {"bos_token", bos, 0},
                             {"eos_token", eos, 0},
                             {"enable_thinking", th, 0}};
    char msg[256];
    int rc = UL_ENOMEM;
    /* A probe of a real template takes thousands of steps; these limits keep the three
     * probes of a hostile one from costing more than the render itself. */
    ul_jinja_limits_t lim = ul_jinja_default_limits;
    lim.max_steps = 1000000;
    lim.max_memory = 16u << 20;
    if (msgs && agp && bos && eos && th)
        rc = ul_jinja_render(j, vars, thinking < 0 ? 4 : 5, 0, &lim, out, NULL, msg, sizeof msg);
    cJSON_Delete(agp);
    cJSON_Delete(bos);
    cJSON_Delete(eos);
    cJSON_Delete(th);
    return rc;
}

static int probe_system(const ul_jinja_t *j) {
    static const char probe[] = "SYSTEM_PROBE_7f3a";
    cJSON *msgs = cJSON_CreateArray();
    cJSON_AddItemToArray(msgs, msg_json("system", probe));
    cJSON_AddItemToArray(msgs, msg_json("user", "u"));
    ul_buf_t out = {0};
    int rc = probe_render(j, msgs, -1, &out);
    int ok = rc == UL_EINVAL ? 0 : rc ? 1 : memmem(out.p, out.len, probe, strlen(probe)) != NULL;
    cJSON_Delete(msgs);
    ul_buf_free(&out);
    return ok;
}

/* The text after the last probe, or NULL when the render failed or lost the probe. */
static char *after_probe(const ul_jinja_t *j, int thinking) {
    static const char probe[] = "USER_PROBE_7f3a";
    cJSON *msgs = cJSON_CreateArray();
    cJSON_AddItemToArray(msgs, msg_json("user", probe));
    ul_buf_t out = {0};
    char *res = NULL;
    if (!probe_render(j, msgs, thinking, &out)) {
        const char *last = NULL, *p = out.p;
        size_t pl = strlen(probe);
        while (p && (p = memmem(p, out.len - (size_t)(p - out.p), probe, pl))) last = p++;
        if (last) res = strndup(last + pl, out.len - (size_t)(last + pl - out.p));
    }
    cJSON_Delete(msgs);
    ul_buf_free(&out);
    return res;
}

static int probe_thinking(const ul_jinja_t *j) {
    char *on = after_probe(j, 1), *off = after_probe(j, 0);
    int r = on && (!off || strcmp(on, off));
    free(on);
    free(off);
    return r;
}

int ul_chat_tmpl_new(const char *src, size_t len, ul_chat_tmpl_t **out, char *err, size_t errcap) {
    ul_chat_tmpl_t *t = calloc(1, sizeof *t);
    if (!t || !(t->src = malloc(len + 1))) {
        free(t);
        return UL_ENOMEM;
    }
    memcpy(t->src, src, len);
    t->src[len] = 0;
    int rc = ul_jinja_new(src, len, &t->j, err, errcap);
    if (rc) {
        ul_chat_tmpl_free(t);
        return rc;
    }
    t->supports_system = probe_system(t->j);
    t->thinking = probe_thinking(t->j);
    *out = t;
    return 0;
}

void ul_chat_tmpl_free(ul_chat_tmpl_t *t) {
    if (!t) return;
    ul_jinja_free(t->j);
    free(t->src);
    free(t);
}

const char *ul_chat_tmpl_src(const ul_chat_tmpl_t *t) { return t->src; }
int ul_chat_tmpl_supports_system(const ul_chat_tmpl_t *t) { return t->supports_system; }
int ul_chat_tmpl_thinking(const ul_chat_tmpl_t *t) { return t->thinking; }

/* ---- normalisation ---- */

/* Content given as [{"type": "text", "text": ...}, ...]: the texts joined by "\n". */
static int join_parts(cJSON *m, cJSON *content) {
    size_t n = 0;
    cJSON *part;
    cJSON_ArrayForEach(part, content) {
        cJSON *tx = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (cJSON_IsString(tx)) n += strlen(tx->valuestring) + 1;
    }
    char *s = malloc(n + 1), *o = s;
    if (!s) return UL_ENOMEM;
    cJSON_ArrayForEach(part, content) {
        cJSON *tx = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (!cJSON_IsString(tx)) continue;
        if (o != s) *o++ = '\n';
        size_t l = strlen(tx->valuestring);
        memcpy(o, tx->valuestring, l);
        o += l;
    }
    *o = 0;
    cJSON *str = cJSON_CreateString(s);
    free(s);
    if (!str) return UL_ENOMEM;
    cJSON_ReplaceItemInObjectCaseSensitive(m, "content", str);
    return 0;
}

static void parse_arguments(cJSON *m) {
    cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls"), *tc;
    if (!cJSON_IsArray(calls)) return;
    cJSON_ArrayForEach(tc, calls) {
        cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
        cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
        if (!cJSON_IsString(args)) continue;
        cJSON *parsed = cJSON_Parse(args->valuestring);
        if (!parsed) continue;
        ul_chat_json_mark_floats(parsed, args->valuestring, strlen(args->valuestring));
        cJSON_ReplaceItemInObjectCaseSensitive(fn, "arguments", parsed);
    }
}

static int normalize_message(cJSON *m, char *msg, size_t msgcap) {
    if (!cJSON_IsObject(m)) {
        snprintf(msg, msgcap, "each message must be an object");
        return UL_EINVAL;
    }
    cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
    if (cJSON_IsArray(c)) {
        if (join_parts(m, c)) return UL_ENOMEM;
    } else if (!c || cJSON_IsNull(c)) {
        cJSON *e = cJSON_CreateString("");
        if (!e) return UL_ENOMEM;
        if (c)
            cJSON_ReplaceItemInObjectCaseSensitive(m, "content", e);
        else
            cJSON_AddItemToObject(m, "content", e);
    }
    parse_arguments(m);
    return 0;
}

/* llama.cpp's workaround for templates without a system role. */
static int merge_system(cJSON *msgs) {
    cJSON *first = cJSON_GetArrayItem(msgs, 0);
    cJSON *role = cJSON_GetObjectItemCaseSensitive(first, "role");
    if (!cJSON_IsString(role) || strcmp(role->valuestring, "system")) return 0;
    cJSON *second = cJSON_GetArrayItem(msgs, 1);
    if (second) {
        cJSON *sc = cJSON_GetObjectItemCaseSensitive(first, "content");
        cJSON *uc = cJSON_GetObjectItemCaseSensitive(second, "content");
        const char *a = cJSON_IsString(sc) ? sc->valuestring : "";
        const char *b = cJSON_IsString(uc) ? uc->valuestring : "";
        ul_buf_t joined = {0};
        int rc = ul_buf_printf(&joined, "%s\n%s", a, b);
        cJSON *str = rc ? NULL : cJSON_CreateString(ul_buf_cstr(&joined));
        ul_buf_free(&joined);
        if (!str) return UL_ENOMEM;
        cJSON_ReplaceItemInObjectCaseSensitive(second, "content", str);
    }
    cJSON_DeleteItemFromArray(msgs, 0);
    return 0;
}

/* 1 when no message needs a change (the common case: string contents, no tool calls, and a
 * template that takes a system message): the request's messages are used as they are,
 * without the copy (a third of a render's cost for a short chat). */
static int as_given(const ul_chat_tmpl_t *t, const cJSON *msgs) {
    const cJSON *m;
    cJSON_ArrayForEach(m, msgs) {
        if (!cJSON_IsObject(m) || cJSON_GetObjectItemCaseSensitive(m, "tool_calls")) return 0;
        if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(m, "content"))) return 0;
        if (!t->supports_system) {
            const cJSON *r = cJSON_GetObjectItemCaseSensitive(m, "role");
            if (cJSON_IsString(r) && !strcmp(r->valuestring, "system")) return 0;
        }
    }
    return 1;
}

static cJSON *normalize_messages(const ul_chat_tmpl_t *t, const cJSON *req, int *rc, char *msg,
                                 size_t msgcap) {
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(req, "messages");
    if (!cJSON_IsArray(in)) {
        snprintf(msg, msgcap, "'messages' must be an array");
        *rc = UL_EINVAL;
        return NULL;
    }
    if (as_given(t, in)) {
        *rc = 0;
        return (cJSON *)in; /* the caller knows not to free it */
    }
    cJSON *msgs = cJSON_Duplicate(in, 1), *m;
    *rc = msgs ? 0 : UL_ENOMEM;
    if (!msgs) return NULL;
    cJSON_ArrayForEach(m, msgs) {
        if ((*rc = normalize_message(m, msg, msgcap))) break;
    }
    if (!*rc && !t->supports_system) *rc = merge_system(msgs);
    if (*rc) {
        cJSON_Delete(msgs);
        return NULL;
    }
    return msgs;
}

/* ---- render ---- */

#define MAX_VARS 64

typedef struct ctx {
    ul_jinja_var_t vars[MAX_VARS];
    size_t n;
    cJSON *owned; /* array holding the values made here */
} ctx;

static int add_var(ctx *c, const char *name, const cJSON *v, int plain) {
    if (!v || c->n >= MAX_VARS) return UL_ENOMEM;
    c->vars[c->n++] = (ul_jinja_var_t){name, v, plain};
    return 0;
}

static int add_owned(ctx *c, const char *name, cJSON *v, int plain) {
    if (!v) return UL_ENOMEM;
    cJSON_AddItemToArray(c->owned, v);
    return add_var(c, name, v, plain);
}

static int add_dates(ctx *c, int64_t now) {
    time_t tt = (time_t)(now ? now : (int64_t)time(NULL));
    struct tm tm;
    char a[64], b[64];
    gmtime_r(&tt, &tm);
    strftime(a, sizeof a, "%d %b %Y", &tm);
    strftime(b, sizeof b, "%b %d %Y", &tm);
    int rc = add_owned(c, "date_string", cJSON_CreateString(a), 0);
    return rc ? rc : add_owned(c, "datetime", cJSON_CreateString(b), 0);
}

static int build_ctx(const ul_chat_tmpl_t *t, const cJSON *req, const ul_chat_opts_t *o,
                     cJSON *msgs, ctx *c) {
    const cJSON *agp = cJSON_GetObjectItemCaseSensitive(req, "add_generation_prompt");
    int gen = cJSON_IsBool(agp) ? cJSON_IsTrue(agp) : o->add_generation_prompt;
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(req, "tools");
    const cJSON *kw = cJSON_GetObjectItemCaseSensitive(req, "chat_template_kwargs"), *k;
    int rc = add_var(c, "messages", msgs, 1);
    if (!rc) rc = add_owned(c, "add_generation_prompt", cJSON_CreateBool(gen), 0);
    if (!rc)
        rc = add_owned(c, "bos_token", cJSON_CreateString(o->bos_token ? o->bos_token : ""), 0);
    if (!rc)
        rc = add_owned(c, "eos_token", cJSON_CreateString(o->eos_token ? o->eos_token : ""), 0);
    if (!rc) rc = add_owned(c, "enable_thinking", cJSON_CreateBool(t->thinking), 0);
    if (!rc) rc = add_dates(c, o->now);
    if (!rc && cJSON_IsArray(tools) && cJSON_GetArraySize(tools) > 0)
        rc = add_var(c, "tools", tools, 1);
    if (cJSON_IsObject(kw)) cJSON_ArrayForEach(k, kw) {
            if (!rc && k->string) rc = add_var(c, k->string, k, 1);
        }
    return rc;
}

int ul_chat_render(const ul_chat_tmpl_t *t, const cJSON *req, const ul_chat_opts_t *o,
                   ul_buf_t *out, ul_buf_t *plain, char *msg, size_t msgcap) {
    char dummy[8];
    if (!msg || !msgcap) {
        msg = dummy;
        msgcap = sizeof dummy;
    }
    msg[0] = 0;
    ul_chat_opts_t def;
    if (!o) {
        ul_chat_opts_init(&def);
        o = &def;
    }
    if (!cJSON_IsObject(req)) {
        snprintf(msg, msgcap, "the request must be a JSON object");
        return UL_EINVAL;
    }
    int rc;
    cJSON *msgs = normalize_messages(t, req, &rc, msg, msgcap);
    if (!msgs) return rc;
    ctx c = {.owned = cJSON_CreateArray()};
    rc = c.owned ? build_ctx(t, req, o, msgs, &c) : UL_ENOMEM;
    if (!rc) rc = ul_jinja_render(t->j, c.vars, c.n, o->now, NULL, out, plain, msg, msgcap);
    if (rc == UL_EFORMAT) rc = UL_EINVAL;
    cJSON_Delete(c.owned);
    if (msgs != cJSON_GetObjectItemCaseSensitive(req, "messages")) cJSON_Delete(msgs);
    return rc;
}
