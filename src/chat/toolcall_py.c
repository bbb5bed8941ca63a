/* Pythonic tool calls (LFM2): "[get_weather(location='Paris'), f(n=1, xs=[1, 2])]". Keyword
 * arguments become a JSON object; values are Python literals (strings in either quote,
 * numbers, True/False/None, lists, tuples, dicts) converted to JSON. Anything else
 * (positional arguments, expressions) makes the section UL_EFORMAT. */
#include <string.h>

#include "chat/toolcall_impl.h"
#include "uvllm/err.h"

#define MAX_DEPTH 64

typedef struct {
    const char *s;
    size_t n, i;
    ul_buf_t *out;
} py_t;

static void skip_ws(py_t *c) {
    while (c->i < c->n && strchr(" \t\r\n", c->s[c->i]) && c->s[c->i]) c->i++;
}
static int peek(py_t *c) {
    skip_ws(c);
    return c->i < c->n ? (unsigned char)c->s[c->i] : -1;
}
static int eat(py_t *c, char ch) {
    if (peek(c) != (unsigned char)ch) return 0;
    c->i++;
    return 1;
}
static int is_ident(int ch) {
    return ch == '_' || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
           (ch >= '0' && ch <= '9') || ch == '.' || ch == '-';
}

static int value(py_t *c, int depth);

/* A double-quoted string that is valid JSON as it stands (a forced call's grammar writes
 * JSON values, \u escapes included): its length, else 0. */
static size_t json_string(const py_t *c) {
    size_t j = c->i + 1;
    while (j < c->n && c->s[j] != '"') j += c->s[j] == '\\' ? 2 : 1;
    if (j >= c->n || !ul_tc_json_valid(c->s + c->i, j + 1 - c->i)) return 0;
    return j + 1 - c->i;
}

/* 'text' or "text" -> JSON string. */
static int string(py_t *c) {
    size_t js = c->s[c->i] == '"' ? json_string(c) : 0;
    if (js) {
        c->i += js;
        return ul_buf_append(c->out, c->s + c->i - js, js);
    }
    char q = c->s[c->i++];
    ul_buf_t raw = {0};
    int rc = UL_EFORMAT;
    while (c->i < c->n) {
        char ch = c->s[c->i++];
        if (ch == q) {
            rc = ul_buf_append(c->out, "\"", 1);
            if (!rc) rc = ul_buf_append_json_str(c->out, raw.p, raw.len);
            if (!rc) rc = ul_buf_append(c->out, "\"", 1);
            break;
        }
        if (ch == '\\' && c->i < c->n) {
            char e = c->s[c->i++];
            ch = e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
        }
        if (ul_buf_append(&raw, &ch, 1)) {
            rc = UL_ENOMEM;
            break;
        }
    }
    ul_buf_free(&raw);
    return rc;
}

/* Items up to close, comma separated; dict: "key: value" pairs. */
static int items(py_t *c, char close, int dict, int depth) {
    for (int first = 1;; first = 0) {
        if (eat(c, close)) return 0;
        if (!first && !eat(c, ',')) return UL_EFORMAT;
        if (eat(c, close)) return 0; /* trailing comma */
        if (!first && ul_buf_append(c->out, ",", 1)) return UL_ENOMEM;
        int rc = value(c, depth + 1);
        if (!rc && dict) rc = eat(c, ':') ? ul_buf_append(c->out, ":", 1) : UL_EFORMAT;
        if (!rc && dict) rc = value(c, depth + 1);
        if (rc) return rc;
    }
}

static int word(py_t *c) {
    size_t s = c->i;
    while (c->i < c->n && is_ident((unsigned char)c->s[c->i]) && c->s[c->i] != '.') c->i++;
    while (c->i < c->n && strchr("0123456789.eE+-", c->s[c->i]) && c->s[c->i]) c->i++;
    size_t n = c->i - s;
    const char *w = c->s + s;
    if (n == 4 && !memcmp(w, "True", 4)) return ul_buf_puts(c->out, "true");
    if (n == 5 && !memcmp(w, "False", 5)) return ul_buf_puts(c->out, "false");
    if (n == 4 && !memcmp(w, "None", 4)) return ul_buf_puts(c->out, "null");
    if (!n || !ul_tc_json_valid(w, n)) return UL_EFORMAT; /* numbers */
    return ul_buf_append(c->out, w, n);
}

static int value(py_t *c, int depth) {
    int ch = peek(c);
    if (depth > MAX_DEPTH || ch < 0) return UL_EFORMAT;
    if (ch == '\'' || ch == '"') return string(c);
    if (ch == '[' || ch == '(' || ch == '{') {
        c->i++;
        int rc = ul_buf_append(c->out, ch == '{' ? "{" : "[", 1);
        if (!rc) rc = items(c, ch == '[' ? ']' : ch == '(' ? ')' : '}', ch == '{', depth);
        if (!rc) rc = ul_buf_append(c->out, ch == '{' ? "}" : "]", 1);
        return rc;
    }
    return word(c);
}

/* name(k=v, ...) */
static int call(py_t *c, ul_tc_calls_t *calls) {
    skip_ws(c);
    size_t s = c->i;
    while (c->i < c->n && is_ident((unsigned char)c->s[c->i])) c->i++;
    size_t nn = c->i - s;
    if (!nn || !eat(c, '(')) return UL_EFORMAT;
    ul_buf_t args = {0};
    c->out = &args;
    int rc = ul_buf_append(&args, "{", 1);
    for (int first = 1; !rc; first = 0) {
        if (eat(c, ')')) break;
        if (!first && !eat(c, ',')) rc = UL_EFORMAT;
        if (rc || eat(c, ')')) break;
        skip_ws(c);
        size_t ks = c->i;
        while (c->i < c->n && is_ident((unsigned char)c->s[c->i])) c->i++;
        size_t kn = c->i - ks;
        if (!kn || !eat(c, '=')) rc = UL_EFORMAT;
        if (!rc && !first) rc = ul_buf_append(&args, ",", 1);
        if (!rc) rc = ul_buf_append(&args, "\"", 1);
        if (!rc) rc = ul_buf_append_json_str(&args, c->s + ks, kn);
        if (!rc) rc = ul_buf_append(&args, "\":", 2);
        if (!rc) rc = value(c, 0);
    }
    if (!rc) rc = ul_buf_append(&args, "}", 1);
    if (!rc) rc = ul_tc_calls_add_json(calls, c->s + s, nn, args.p, args.len);
    ul_buf_free(&args);
    return rc;
}

int ul_tc_parse_pythonic(const char *body, size_t n, ul_tc_calls_t *out) {
    py_t c = {body, n, 0, NULL};
    int bracket = eat(&c, '[');
    for (int first = 1;; first = 0) {
        if (bracket && eat(&c, ']')) break;
        if (!bracket && peek(&c) < 0 && !first) break;
        if (!first && !eat(&c, ',')) return UL_EFORMAT;
        int rc = call(&c, out);
        if (rc) return rc;
    }
    return peek(&c) < 0 && out->n ? 0 : UL_EFORMAT;
}
