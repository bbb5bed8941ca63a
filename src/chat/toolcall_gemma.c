/* Gemma 4 tool calls: "<|tool_call>call:get_weather{location:<|"|>Paris<|"|>}<tool_call|>".
 * The arguments are a JSON-like object written by the template's format_argument macro:
 * bare or <|"|>-quoted keys, strings between <|"|> delimiters (no escaping inside),
 * true/false, numbers, nested {...} and [...]. Converted to JSON; an unquoted word that is
 * not a JSON literal becomes a string. */
#include <string.h>

#include "chat/toolcall_impl.h"
#include "uvllm/err.h"

#define Q "<|\"|>"
#define QN (sizeof Q - 1)
#define MAX_DEPTH 64

typedef struct {
    const char *s;
    size_t n, i;
    ul_buf_t *out;
} gm_t;

static int at(gm_t *c, const char *lit) {
    size_t m = strlen(lit);
    return c->n - c->i >= m && !memcmp(c->s + c->i, lit, m);
}

/* <|"|>text<|"|> as a JSON string. */
static int quoted(gm_t *c) {
    c->i += QN;
    const char *e = ul_tc_find(c->s + c->i, c->n - c->i, Q);
    if (!e) return UL_EFORMAT;
    size_t len = (size_t)(e - (c->s + c->i));
    int rc = ul_buf_append(c->out, "\"", 1);
    if (!rc) rc = ul_buf_append_json_str(c->out, c->s + c->i, len);
    if (!rc) rc = ul_buf_append(c->out, "\"", 1);
    c->i += len + QN;
    return rc;
}

/* A bare token up to a delimiter: true, false, null/None or a number. */
static int bare(gm_t *c, int key) {
    size_t s = c->i;
    while (c->i < c->n && !strchr(key ? ":" : ",}]", c->s[c->i]) && c->s[c->i]) c->i++;
    const char *w = c->s + s;
    size_t n = c->i - s;
    ul_tc_trim(&w, &n);
    if (key) {
        if (!n) return UL_EFORMAT;
        int rc = ul_buf_append(c->out, "\"", 1);
        if (!rc) rc = ul_buf_append_json_str(c->out, w, n);
        return rc ? rc : ul_buf_append(c->out, "\"", 1);
    }
    if (!n) return UL_EFORMAT;
    if (n == 4 && !memcmp(w, "None", 4)) return ul_buf_puts(c->out, "null");
    if (ul_tc_json_valid(w, n)) return ul_buf_append(c->out, w, n);
    int rc = ul_buf_append(c->out, "\"", 1); /* an unquoted string */
    if (!rc) rc = ul_buf_append_json_str(c->out, w, n);
    return rc ? rc : ul_buf_append(c->out, "\"", 1);
}

static int value(gm_t *c, int depth);

/* {k:v,...} or [v,...] after the opening bracket. */
static int container(gm_t *c, int obj, int depth) {
    char close = obj ? '}' : ']';
    int rc = ul_buf_append(c->out, obj ? "{" : "[", 1);
    for (int first = 1; !rc; first = 0) {
        if (c->i < c->n && c->s[c->i] == close) {
            c->i++;
            return ul_buf_append(c->out, &close, 1);
        }
        if (!first && (c->i >= c->n || c->s[c->i++] != ',')) return UL_EFORMAT;
        if (!first && (rc = ul_buf_append(c->out, ",", 1))) break;
        if (obj) {
            rc = at(c, Q) ? quoted(c) : bare(c, 1);
            if (!rc && (c->i >= c->n || c->s[c->i++] != ':')) rc = UL_EFORMAT;
            if (!rc) rc = ul_buf_append(c->out, ":", 1);
        }
        if (!rc) rc = value(c, depth + 1);
    }
    return rc;
}

static int value(gm_t *c, int depth) {
    if (depth > MAX_DEPTH || c->i >= c->n) return UL_EFORMAT;
    if (at(c, Q)) return quoted(c);
    char ch = c->s[c->i];
    if (ch == '{' || ch == '[') {
        c->i++;
        return container(c, ch == '{', depth);
    }
    return bare(c, 0);
}

int ul_tc_parse_gemma(const char *body, size_t n, ul_tc_calls_t *out) {
    ul_tc_trim(&body, &n);
    if (n < 5 || memcmp(body, "call:", 5)) return UL_EFORMAT;
    const char *br = memchr(body, '{', n);
    if (!br) return UL_EFORMAT;
    ul_buf_t args = {0};
    gm_t c = {body, n, (size_t)(br - body) + 1, &args};
    int rc = container(&c, 1, 0);
    if (!rc && c.i != n) rc = UL_EFORMAT;
    if (!rc) rc = ul_tc_calls_add_json(out, body + 5, (size_t)(br - body) - 5, args.p, args.len);
    ul_buf_free(&args);
    return rc;
}
