/* Tag-shaped tool-call bodies: Qwen3-Coder / Seed-OSS <function=N><parameter=K>V,
 * GLM-4.5/4.6 N<arg_key>K</arg_key><arg_value>V</arg_value>, MiniMax-M2 and DeepSeek
 * V3.2 (DSML) <invoke name="N"><parameter name="K">V, and the special-token formats of
 * DeepSeek R1/V3, Kimi-K2 and Solar Open. Parameter values that parse as JSON stay JSON,
 * anything else becomes a JSON string (as llama.cpp does). Every parser is strict: text it
 * does not expect makes the whole section UL_EFORMAT (it then stays content). */
#include <stdio.h>
#include <string.h>

#include "chat/toolcall_impl.h"
#include "uvllm/err.h"

/* A cursor over a section body. */
typedef struct {
    const char *s;
    size_t n, i;
} cur_t;

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static void skip_ws(cur_t *c) {
    while (c->i < c->n && is_ws(c->s[c->i])) c->i++;
}
static int at_end(cur_t *c) {
    skip_ws(c);
    return c->i >= c->n;
}
/* Consumes lit if the text continues with it. */
static int eat(cur_t *c, const char *lit) {
    size_t m = strlen(lit);
    if (c->n - c->i < m || memcmp(c->s + c->i, lit, m)) return 0;
    c->i += m;
    return 1;
}
/* Text up to the next stop (consumed too); 0 when stop does not occur. */
static int until(cur_t *c, const char *stop, const char **v, size_t *vn) {
    const char *e = ul_tc_find(c->s + c->i, c->n - c->i, stop);
    if (!e) return 0;
    *v = c->s + c->i;
    *vn = (size_t)(e - *v);
    c->i += *vn + strlen(stop);
    return 1;
}

/* Drops one newline on each side: "<parameter=k>\nV\n</parameter>". */
static void strip_nl(const char **v, size_t *n) {
    if (*n && (*v)[0] == '\n') (*v)++, (*n)--;
    if (*n && (*v)[*n - 1] == '\n') (*n)--;
}

/* The object under construction and its member count. */
typedef struct {
    ul_buf_t b;
    int n;
} obj_t;

static int obj_add(obj_t *o, const char *k, size_t kn, const char *v, size_t vn, int as_str) {
    if (!o->b.len && ul_buf_append(&o->b, "{", 1)) return UL_ENOMEM;
    ul_tc_trim(&k, &kn);
    if (!kn) return UL_EFORMAT;
    int rc = ul_tc_args_member(&o->b, o->n == 0, k, kn, v, vn, as_str);
    o->n++;
    return rc;
}

/* Closes the object and adds the call; frees the object's memory. */
static int obj_finish(obj_t *o, ul_tc_calls_t *out, const char *name, size_t nn) {
    int rc = o->b.len ? 0 : ul_buf_append(&o->b, "{", 1);
    if (!rc) rc = ul_buf_append(&o->b, "}", 1);
    if (!rc) rc = ul_tc_calls_add(out, name, nn, o->b.p, o->b.len);
    ul_buf_free(&o->b);
    o->n = 0;
    return rc;
}

static int xml_function_one(cur_t *c, ul_tc_calls_t *out) {
    const char *name, *k, *v;
    size_t nn, kn, vn;
    if (!eat(c, "<function=") || !until(c, ">", &name, &nn)) return UL_EFORMAT;
    obj_t o = {0};
    int rc = 0;
    for (;;) {
        skip_ws(c);
        if (eat(c, "</function>")) break;
        if (!eat(c, "<parameter=") || !until(c, ">", &k, &kn) ||
            !until(c, "</parameter>", &v, &vn)) {
            rc = UL_EFORMAT;
            break;
        }
        strip_nl(&v, &vn);
        if ((rc = obj_add(&o, k, kn, v, vn, 0))) break;
    }
    if (!rc) return obj_finish(&o, out, name, nn);
    ul_buf_free(&o.b);
    return rc;
}

int ul_tc_parse_xml_function(const char *body, size_t n, ul_tc_calls_t *out) {
    cur_t c = {body, n, 0};
    if (at_end(&c)) return UL_EFORMAT;
    while (!at_end(&c)) {
        int rc = xml_function_one(&c, out);
        if (rc) return rc;
    }
    return 0;
}

int ul_tc_parse_glm(const char *body, size_t n, ul_tc_calls_t *out) {
    const char *first = ul_tc_find(body, n, "<arg_key>");
    size_t nn = first ? (size_t)(first - body) : n;
    cur_t c = {body, n, nn};
    obj_t o = {0};
    int rc = 0;
    while (!rc && !at_end(&c)) {
        const char *k, *v;
        size_t kn, vn;
        if (!eat(&c, "<arg_key>") || !until(&c, "</arg_key>", &k, &kn)) rc = UL_EFORMAT;
        skip_ws(&c);
        if (!rc && (!eat(&c, "<arg_value>") || !until(&c, "</arg_value>", &v, &vn)))
            rc = UL_EFORMAT;
        if (!rc) rc = obj_add(&o, k, kn, v, vn, 0);
    }
    if (!rc) return obj_finish(&o, out, body, nn);
    ul_buf_free(&o.b);
    return rc;
}

/* <P invoke name="N"> (<P parameter name="K" [string="true"]>V</P parameter>)* </P invoke>,
 * where P is "" (MiniMax-M2) or "｜DSML｜" (DeepSeek V3.2). */
static int invoke_one(cur_t *c, const char *p, ul_tc_calls_t *out) {
    char t_inv[48], t_inv_end[48], t_par[48], t_par_end[48];
    snprintf(t_inv, sizeof t_inv, "<%sinvoke name=\"", p);
    snprintf(t_inv_end, sizeof t_inv_end, "</%sinvoke>", p);
    snprintf(t_par, sizeof t_par, "<%sparameter name=\"", p);
    snprintf(t_par_end, sizeof t_par_end, "</%sparameter>", p);
    const char *name, *k, *attrs, *v;
    size_t nn, kn, an, vn;
    if (!eat(c, t_inv) || !until(c, "\">", &name, &nn)) return UL_EFORMAT;
    obj_t o = {0};
    int rc = 0;
    for (;;) {
        skip_ws(c);
        if (eat(c, t_inv_end)) break;
        if (!eat(c, t_par) || !until(c, "\"", &k, &kn) || !until(c, ">", &attrs, &an) ||
            !until(c, t_par_end, &v, &vn)) {
            rc = UL_EFORMAT;
            break;
        }
        int as_str = ul_tc_find(attrs, an, "string=\"true\"") != NULL;
        if ((rc = obj_add(&o, k, kn, v, vn, as_str))) break;
    }
    if (!rc) return obj_finish(&o, out, name, nn);
    ul_buf_free(&o.b);
    return rc;
}

static int parse_invokes(const char *body, size_t n, const char *p, ul_tc_calls_t *out) {
    cur_t c = {body, n, 0};
    if (at_end(&c)) return UL_EFORMAT;
    while (!at_end(&c)) {
        int rc = invoke_one(&c, p, out);
        if (rc) return rc;
    }
    return 0;
}

int ul_tc_parse_invoke(const char *body, size_t n, ul_tc_calls_t *out) {
    return parse_invokes(body, n, "", out);
}

int ul_tc_parse_dsml(const char *body, size_t n, ul_tc_calls_t *out) {
    return parse_invokes(body, n, "｜DSML｜", out);
}

/* One DeepSeek call: "function<｜tool▁sep｜>NAME\n```json\nARGS\n```" (R1, V3) or
 * "NAME<｜tool▁sep｜>ARGS" (V3.1). */
static int deepseek_one(const char *s, size_t n, ul_tc_calls_t *out) {
    cur_t c = {s, n, 0};
    const char *a, *b;
    size_t an, bn;
    if (!until(&c, "<｜tool▁sep｜>", &a, &an)) return UL_EFORMAT;
    b = s + c.i;
    bn = n - c.i;
    ul_tc_trim(&a, &an);
    if (an != 8 || memcmp(a, "function", 8)) return ul_tc_calls_add_json(out, a, an, b, bn);
    const char *name;
    size_t nn;
    if (!until(&c, "```", &name, &nn)) return UL_EFORMAT;
    eat(&c, "json");
    const char *args;
    size_t argn;
    if (!until(&c, "```", &args, &argn) || !at_end(&c)) return UL_EFORMAT;
    return ul_tc_calls_add_json(out, name, nn, args, argn);
}

/* Repeated OPEN ... CLOSE blocks with only whitespace between them; each block's inside
 * goes to one(). */
static int blocks(const char *body, size_t n, const char *open, const char *close,
                  int (*one)(const char *, size_t, ul_tc_calls_t *), ul_tc_calls_t *out) {
    cur_t c = {body, n, 0};
    if (at_end(&c)) return UL_EFORMAT;
    while (!at_end(&c)) {
        const char *v;
        size_t vn;
        if (!eat(&c, open) || !until(&c, close, &v, &vn)) return UL_EFORMAT;
        int rc = one(v, vn, out);
        if (rc) return rc;
    }
    return 0;
}

int ul_tc_parse_deepseek(const char *body, size_t n, ul_tc_calls_t *out) {
    return blocks(body, n, "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", deepseek_one, out);
}

/* "functions.NAME:IDX<|tool_call_argument_begin|>ARGS" */
static int kimi_one(const char *s, size_t n, ul_tc_calls_t *out) {
    cur_t c = {s, n, 0};
    const char *id;
    size_t idn;
    if (!until(&c, "<|tool_call_argument_begin|>", &id, &idn)) return UL_EFORMAT;
    ul_tc_trim(&id, &idn);
    const char *colon = memrchr(id, ':', idn);
    if (colon) idn = (size_t)(colon - id);
    const char *dot = memchr(id, '.', idn);
    if (dot) idn -= (size_t)(dot + 1 - id), id = dot + 1;
    return ul_tc_calls_add_json(out, id, idn, s + c.i, n - c.i);
}

int ul_tc_parse_kimi(const char *body, size_t n, ul_tc_calls_t *out) {
    return blocks(body, n, "<|tool_call_begin|>", "<|tool_call_end|>", kimi_one, out);
}

/* "ID<|tool_call:name|>NAME<|tool_call:args|>ARGS" */
static int solar_one(const char *s, size_t n, ul_tc_calls_t *out) {
    cur_t c = {s, n, 0};
    const char *id, *name;
    size_t idn, nn;
    if (!until(&c, "<|tool_call:name|>", &id, &idn) || !until(&c, "<|tool_call:args|>", &name, &nn))
        return UL_EFORMAT;
    return ul_tc_calls_add_json(out, name, nn, s + c.i, n - c.i);
}

int ul_tc_parse_solar(const char *body, size_t n, ul_tc_calls_t *out) {
    return blocks(body, n, "<|tool_call:begin|>", "<|tool_call:end|>", solar_one, out);
}
