/* The tool-call syntax of each output format as GBNF (toolcall.h): what a forced tool call
 * (tool_choice "required" or a named function) or a strict tool's call must look like, in
 * the exact shape the format's parser reads back. The arguments' rules come from the
 * caller (the api compiles each tool's parameters schema with the grammar engine), so this
 * file knows only the syntax around them. */
#include <stdio.h>
#include <string.h>

#include "chat/toolcall.h"
#include "uvllm/err.h"

/* One format: the calls are PRE C (SEP C)* POST, C built from the call template in which
 * "@N" is the function name and "@A" its arguments (a JSON object), or, in formats whose
 * arguments are one element per parameter, "@P" the parameters, each written by the
 * parameter template with "@K" its name and "@V" its value (a JSON value). */
typedef struct {
    const char *pre, *call, *sep, *post, *param, *trigger;
    int single;       /* one call only */
    const char *psep; /* between parameters (then the required ones come first), or NULL */
} tfmt_t;

static const tfmt_t g_tf[UL_CHAT_TOOLS_COUNT] = {
    [UL_CHAT_TOOLS_HERMES] = {"",
                              "<tool_call>\n{\"name\": \"@N\", \"arguments\": @A}\n</tool_call>",
                              "\n", "", NULL, "<tool_call>", 0},
    [UL_CHAT_TOOLS_QWEN3_CODER] = {"", "<tool_call>\n<function=@N>\n@P</function>\n</tool_call>",
                                   "\n", "", "<parameter=@K>\n@V\n</parameter>\n", "<tool_call>",
                                   0},
    [UL_CHAT_TOOLS_LLAMA3] = {"", "{\"name\": \"@N\", \"parameters\": @A}", "", "", NULL,
                              "{\"name\"", 1},
    [UL_CHAT_TOOLS_MISTRAL] = {"[TOOL_CALLS][", "{\"name\": \"@N\", \"arguments\": @A}", ", ", "]",
                               NULL, "[TOOL_CALLS]", 0},
    [UL_CHAT_TOOLS_MISTRAL_ARGS] = {"", "[TOOL_CALLS]@N[ARGS]@A", "", "", NULL, "[TOOL_CALLS]", 0},
    [UL_CHAT_TOOLS_FUNCTIONARY_V31] = {"", "<function=@N>@A</function>", "", "", NULL,
                                       "<function=", 0},
    [UL_CHAT_TOOLS_COMMAND_R] = {"Action: ```json\n[",
                                 "{\"tool_name\": \"@N\", \"parameters\": @A}", ",\n", "]\n```",
                                 NULL, "Action: ```json", 0},
    [UL_CHAT_TOOLS_COMMAND_A] = {"<|START_ACTION|>[", "{\"tool_name\": \"@N\", \"parameters\": @A}",
                                 ", ", "]<|END_ACTION|>", NULL, "<|START_ACTION|>", 0},
    [UL_CHAT_TOOLS_GRANITE] = {"<|tool_call|>[", "{\"name\": \"@N\", \"arguments\": @A}", ", ", "]",
                               NULL, "<|tool_call|>", 0},
    [UL_CHAT_TOOLS_DEEPSEEK_R1] = {"<｜tool▁calls▁begin｜>",
                                   "<｜tool▁call▁begin｜>function<｜tool▁sep｜>@N\n```json\n@A\n```"
                                   "<｜tool▁call▁end｜>",
                                   "\n", "<｜tool▁calls▁end｜>", NULL, "<｜tool▁calls▁begin｜>", 0},
    [UL_CHAT_TOOLS_DEEPSEEK_DSML] = {"<｜DSML｜function_calls>\n",
                                     "<｜DSML｜invoke name=\"@N\">\n@P</｜DSML｜invoke>\n", "",
                                     "</｜DSML｜function_calls>",
                                     "<｜DSML｜parameter name=\"@K\" string=\"false\">@V"
                                     "</｜DSML｜parameter>\n",
                                     "<｜DSML｜function_calls>", 0},
    [UL_CHAT_TOOLS_KIMI_K2] = {"<|tool_calls_section_begin|>",
                               "<|tool_call_begin|>functions.@N:0<|tool_call_argument_begin|>@A"
                               "<|tool_call_end|>",
                               "", "<|tool_calls_section_end|>", NULL,
                               "<|tool_calls_section_begin|>", 0},
    [UL_CHAT_TOOLS_GLM45] = {"", "<tool_call>@N\n@P</tool_call>", "\n", "",
                             "<arg_key>@K</arg_key>\n<arg_value>@V</arg_value>\n", "<tool_call>",
                             0},
    [UL_CHAT_TOOLS_HARMONY] = {"",
                               "<|channel|>commentary to=functions.@N <|constrain|>json"
                               "<|message|>@A<|call|>",
                               "", "", NULL, "<|channel|>commentary to=", 1},
    [UL_CHAT_TOOLS_MINIMAX_M2] = {"<minimax:tool_call>\n", "<invoke name=\"@N\">\n@P</invoke>\n",
                                  "", "</minimax:tool_call>",
                                  "<parameter name=\"@K\">@V</parameter>\n", "<minimax:tool_call>",
                                  0},
    [UL_CHAT_TOOLS_SEED_OSS] = {"<seed:tool_call>\n", "<function=@N>\n@P</function>\n", "",
                                "</seed:tool_call>", "<parameter=@K>\n@V\n</parameter>\n",
                                "<seed:tool_call>", 0},
    [UL_CHAT_TOOLS_FIREFUNCTION_V2] = {"functools[", "{\"name\": \"@N\", \"arguments\": @A}", ", ",
                                       "]", NULL, "functools", 0},
    [UL_CHAT_TOOLS_LFM2] = {"<|tool_call_start|>[", "@N(@P)", ", ", "]<|tool_call_end|>", "@K=@V",
                            "<|tool_call_start|>", 0, ", "},
    [UL_CHAT_TOOLS_APRIEL] = {"<tool_calls>[", "{\"name\": \"@N\", \"arguments\": @A}", ", ",
                              "]</tool_calls>", NULL, "<tool_calls>", 0},
    [UL_CHAT_TOOLS_APERTUS] = {"<|tools_prefix|>[", "{\"@N\": @A}", ", ", "]<|tools_suffix|>", NULL,
                               "<|tools_prefix|>", 0},
    [UL_CHAT_TOOLS_GIGACHAT3] = {"function call<|role_sep|>\n",
                                 "{\"name\": \"@N\", \"arguments\": @A}", "", "", NULL,
                                 "function call<|role_sep|>", 1},
    [UL_CHAT_TOOLS_SOLAR_OPEN] = {"<|tool_calls|>",
                                  "<|tool_call:begin|>call<|tool_call:name|>@N<|tool_call:args|>@A"
                                  "<|tool_call:end|>",
                                  "", "<|calls|>", NULL, "<|tool_calls|>", 0},
};

static int put(ul_buf_t *b, const char *s, size_t n) { return ul_buf_append(b, s, n); }

/* A GBNF literal of s[0..n) (nothing when n is 0). */
static int lit(ul_buf_t *b, const char *s, size_t n) {
    if (!n) return 0;
    int rc = put(b, " \"", 2);
    for (size_t i = 0; i < n && !rc; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            rc = put(b, (char[]){'\\', (char)c}, 2);
        else if (c == '\n')
            rc = put(b, "\\n", 2);
        else
            rc = put(b, (const char *)&c, 1);
    }
    return rc ? rc : put(b, "\" ", 2);
}

/* Writes template t: literal text, with @X placeholders replaced by sub(X). */
typedef int (*sub_fn)(ul_buf_t *b, char x, void *ctx);

static int expand(ul_buf_t *b, const char *t, sub_fn sub, void *ctx) {
    int rc = 0;
    while (*t && !rc) {
        const char *at = strchr(t, '@');
        size_t n = at ? (size_t)(at - t) : strlen(t);
        rc = lit(b, t, n);
        if (!at || rc) break;
        rc = sub(b, at[1], ctx);
        t = at + 2;
    }
    return rc;
}

static const cJSON *fn_of(const cJSON *tool) {
    return cJSON_GetObjectItemCaseSensitive(tool, "function");
}

static int valid_name(const char *s) {
    size_t n = strlen(s);
    if (!n || n > 64) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-' || s[i] == '.'))
            return 0;
    return 1;
}

typedef struct {
    const tfmt_t *f;
    int tool; /* index in tools */
    const char *name;
    const cJSON *props; /* the parameters' properties, for @P */
    const cJSON *req;
    int param; /* for @K / @V */
    const char *key;
} cctx_t;

static int sub_param(ul_buf_t *b, char x, void *v) {
    cctx_t *c = v;
    char r[48];
    if (x == 'K') return lit(b, c->key, strlen(c->key));
    snprintf(r, sizeof r, " tool-arg-%d-%d ", c->tool, c->param);
    return put(b, r, strlen(r));
}

static int is_required(const cJSON *req, const char *k) {
    const cJSON *it;
    cJSON_ArrayForEach(it, req) if (cJSON_IsString(it) && !strcmp(it->valuestring, k)) return 1;
    return 0;
}

/* The j-th property (0-based) by the parameter template, preceded by psep when sep. */
static int one_param(ul_buf_t *b, cctx_t *c, int j, int sep) {
    const cJSON *p = c->props ? c->props->child : NULL;
    for (int k = 0; k < j && p; k++) p = p->next;
    c->param = j;
    c->key = p->string;
    int rc = sep ? lit(b, c->f->psep, strlen(c->f->psep)) : 0;
    return rc ? rc : expand(b, c->f->param, sub_param, c);
}

/* @P with a separator (keyword arguments): the required properties joined by it, then the
 * optional ones each optional; with none required, a non-empty run of the optional ones
 * starts at any of them, or none at all. */
static int params_sep(ul_buf_t *b, cctx_t *c) {
    int n = cJSON_GetArraySize(c->props), n_req = 0, put_req = 0, rc = 0, j = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, c->props) n_req += is_required(c->req, p->string);
    cJSON_ArrayForEach(p, c->props) {
        int k = j++;
        if (is_required(c->req, p->string) && !rc) rc = one_param(b, c, k, put_req++ > 0);
    }
    for (int first = 0; !rc && first < n; first++) { /* the optional ones */
        int i = 0, lead = 0;
        cJSON_ArrayForEach(p, c->props) {
            int k = i++;
            if (is_required(c->req, p->string) || rc || (!n_req && k < first)) continue;
            if (!n_req && !lead) { /* this alternative starts at property `first` */
                if (k != first) break;
                rc = first ? put(b, " | ", 3) : put(b, " (", 2);
                if (!rc) rc = one_param(b, c, k, 0);
                lead = 1;
                continue;
            }
            rc = put(b, " (", 2);
            if (!rc) rc = one_param(b, c, k, 1);
            if (!rc) rc = put(b, ")? ", 3);
        }
        if (n_req) break; /* one pass: after the required ones */
    }
    if (!rc && !n_req && n > 0) rc = put(b, ")? ", 3);
    return rc;
}

static int sub_call(ul_buf_t *b, char x, void *v) {
    cctx_t *c = v;
    char r[48];
    if (x == 'N') return lit(b, c->name, strlen(c->name));
    if (x == 'A') {
        snprintf(r, sizeof r, " tool-args-%d ", c->tool);
        return put(b, r, strlen(r));
    }
    if (c->f->psep) return params_sep(b, c);
    /* @P: every property in order, the optional ones optional */
    int rc = 0, j = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, c->props) {
        int req = is_required(c->req, p->string);
        c->param = j++;
        c->key = p->string;
        if (!req) rc = put(b, " (", 2);
        if (!rc) rc = expand(b, c->f->param, sub_param, c);
        if (!rc && !req) rc = put(b, ")? ", 3);
        if (rc) break;
    }
    return rc;
}

/* A property name a keyword argument cannot carry, or NULL. */
static const char *bad_keyword(const cJSON *params) {
    const cJSON *k;
    cJSON_ArrayForEach(k, cJSON_GetObjectItemCaseSensitive(
                              params, "properties")) if (!valid_name(k->string)) return k->string;
    return NULL;
}

int ul_chat_tool_fmt_per_param(int fmt) {
    return fmt > 0 && fmt < UL_CHAT_TOOLS_COUNT && g_tf[fmt].param != NULL;
}

int ul_chat_tool_gbnf(int fmt, const cJSON *tools, const char *only, int parallel, ul_buf_t *out,
                      const char **trigger, char *err, size_t err_len) {
    const tfmt_t *f = fmt > 0 && fmt < UL_CHAT_TOOLS_COUNT ? &g_tf[fmt] : NULL;
    if (!f || !f->call) {
        snprintf(err, err_len, "tool calls cannot be constrained in the '%s' format",
                 ul_chat_tool_fmt_name(fmt));
        return UL_ENOTSUP;
    }
    int rc = ul_buf_puts(out, "tool-call ::= "), n = 0, i = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn_of(t), "name");
        int idx = i++;
        if (rc || !cJSON_IsString(name) || (only && strcmp(only, name->valuestring))) continue;
        if (!valid_name(name->valuestring)) {
            snprintf(err, err_len, "tool name '%.64s' must be letters, digits, '_', '-' or '.'",
                     name->valuestring);
            return UL_EINVAL;
        }
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn_of(t), "parameters");
        const char *bad = f->psep ? bad_keyword(params) : NULL;
        if (bad) {
            snprintf(err, err_len, "parameter '%.64s' of '%.64s' cannot be a keyword argument", bad,
                     name->valuestring);
            return UL_EINVAL;
        }
        cctx_t c = {.f = f,
                    .tool = idx,
                    .name = name->valuestring,
                    .props = cJSON_GetObjectItemCaseSensitive(params, "properties"),
                    .req = cJSON_GetObjectItemCaseSensitive(params, "required")};
        if (n++) rc = put(out, " | ", 3);
        if (!rc) rc = put(out, "(", 1);
        if (!rc) rc = expand(out, f->call, sub_call, &c);
        if (!rc) rc = put(out, ")", 1);
    }
    if (!rc && !n) {
        snprintf(err, err_len, "no tool to call");
        return UL_EINVAL;
    }
    if (!rc) rc = put(out, "\ntool-calls ::=", 15);
    if (!rc) rc = lit(out, f->pre, strlen(f->pre));
    if (!rc) rc = put(out, " tool-call ", 11);
    if (!rc && parallel && !f->single) {
        rc = put(out, "(", 1);
        if (!rc) rc = lit(out, f->sep, strlen(f->sep));
        if (!rc) rc = put(out, " tool-call)*", 12);
    }
    if (!rc) rc = lit(out, f->post, strlen(f->post));
    if (!rc) rc = put(out, "\n", 1);
    *trigger = f->trigger;
    return rc;
}
