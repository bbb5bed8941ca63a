/* Python-style printing: str() and repr() of values as Jinja2 prints them (None, True,
 * floats in Python's shortest round-trip form, ['a', 1], {'k': 'v'}, strings quoted the
 * way Python picks), and json.dumps as Hugging Face's tojson calls it (ensure_ascii=False,
 * ", " and ": " separators, indent, sort_keys). String parts keep their plain mask; the
 * quoting and escaping around them are template text, except that an escaped string from
 * the request is marked plain as a whole. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja_impl.h"

#define MAX_PRINT_DEPTH 64

/* Python's float repr: the shortest digits that round-trip, fixed notation for decimal
 * exponents in [-4, 16), else d.ddde+XX. */
void jj_fmt_float(double f, char *buf, size_t cap) {
    if (isnan(f)) {
        snprintf(buf, cap, "nan");
        return;
    }
    if (isinf(f)) {
        snprintf(buf, cap, f < 0 ? "-inf" : "inf");
        return;
    }
    char tmp[40];
    int prec = 1;
    for (; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, f);
        if (strtod(tmp, NULL) == f) break;
    }
    /* tmp: [-]d[.ddd]e[+-]XX */
    char digits[24];
    int nd = 0, neg = tmp[0] == '-';
    const char *q = tmp + neg;
    for (; *q && *q != 'e'; q++)
        if (*q != '.') digits[nd++] = *q;
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = 0;
    int exp10 = atoi(q + 1);
    char *o = buf;
    size_t left = cap;
#define PUT(...)                                                                                   \
    do {                                                                                           \
        int w_ = snprintf(o, left, __VA_ARGS__);                                                   \
        if (w_ < 0 || (size_t)w_ >= left) return;                                                  \
        o += w_;                                                                                   \
        left -= (size_t)w_;                                                                        \
    } while (0)
    if (neg) PUT("-");
    if (exp10 < -4 || exp10 >= 16) {
        PUT("%c", digits[0]);
        if (nd > 1) PUT(".%s", digits + 1);
        PUT("e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    } else if (exp10 < 0) {
        PUT("0.");
        for (int i = 0; i < -exp10 - 1; i++) PUT("0");
        PUT("%s", digits);
    } else {
        for (int i = 0; i <= exp10; i++) PUT("%c", i < nd ? digits[i] : '0');
        PUT(".");
        if (nd > exp10 + 1)
            PUT("%s", digits + exp10 + 1);
        else
            PUT("0");
    }
#undef PUT
}

static int put(jstate *st, jsink *s, const char *txt) {
    return jsink_put(st, s, txt, strlen(txt), NULL);
}

/* None, False and True as str(), tojson and a tojson key spell them. */
static const char *const py_words[] = {"None", "False", "True"};
static const char *const json_words[] = {"null", "false", "true"};
static const char *const json_key_words[] = {"\"null\"", "\"false\"", "\"true\""};

static int put_word(jstate *st, jsink *s, jv v, const char *const words[3]) {
    return put(st, s, v.t == JV_NONE ? words[0] : words[1 + (v.u.b != 0)]);
}

/* An int or a float as str() prints it; tojson prints them the same way (but NaN and the
 * infinities, which it spells as JavaScript does). */
static int put_number(jstate *st, jsink *s, jv v) {
    char buf[64];
    if (v.t == JV_INT)
        snprintf(buf, sizeof buf, "%lld", (long long)v.u.i);
    else
        jj_fmt_float(v.u.f, buf, sizeof buf);
    return put(st, s, buf);
}

static int print_scalar(jstate *st, jsink *s, jv v) {
    char buf[64];
    switch (v.t) {
    case JV_NONE:
    case JV_BOOL:
        return put_word(st, s, v, py_words);
    case JV_INT:
    case JV_FLOAT:
        return put_number(st, s, v);
    case JV_NS:
        return put(st, s, "<Namespace>");
    case JV_FUNC:
        if (v.u.fn->kind == JF_MACRO) { /* as jinja2.runtime.Macro.__repr__ */
            snprintf(buf, sizeof buf, "<Macro '%.40s'>", v.u.fn->name ? v.u.fn->name : "caller");
            return put(st, s, buf);
        }
        return put(st, s, "<function>");
    case JV_LOOP:
        return put(st, s, "<LoopContext>");
    default:
        return 0;
    }
}

/* The escapes Python's repr and JSON share; NULL for any other byte. */
static const char *common_escape(unsigned char c) {
    switch (c) {
    case '\\':
        return "\\\\";
    case '\n':
        return "\\n";
    case '\r':
        return "\\r";
    case '\t':
        return "\\t";
    default:
        return NULL;
    }
}

/* Puts the text p[run, i) as it is (with its plain marks), then the escape `esc`. */
static int put_escape(jstate *st, jsink *s, const char *p, const uint8_t *plain, size_t run,
                      size_t i, const char *esc) {
    TRY(jsink_put(st, s, p + run, i - run, plain ? plain + run : NULL));
    return jsink_put_plain(st, s, esc, strlen(esc), plain != NULL);
}

/* Python's repr of a str: quote choice and escapes. */
static int repr_str(jstate *st, jsink *s, const jstr *str) {
    int has_sq = memchr(str->p, '\'', str->len) != NULL;
    int has_dq = memchr(str->p, '"', str->len) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    TRY(jsink_put(st, s, &q, 1, NULL));
    size_t run = 0;
    for (size_t i = 0; i < str->len; i++) {
        unsigned char c = (unsigned char)str->p[i];
        char esc[8] = {0};
        const char *e = common_escape(c);
        if (e)
            strcpy(esc, e);
        else if (c == (unsigned char)q)
            snprintf(esc, sizeof esc, "\\%c", q);
        else if (c < 0x20 || c == 0x7f)
            snprintf(esc, sizeof esc, "\\x%02x", c);
        else if (c == 0xC2 && i + 1 < str->len && (unsigned char)str->p[i + 1] <= 0xA0) {
            snprintf(esc, sizeof esc, "\\x%02x", (unsigned char)str->p[i + 1]);
            TRY(put_escape(st, s, str->p, str->plain, run, i, esc));
            run = i + 2;
            i++;
            continue;
        }
        if (!esc[0]) continue;
        TRY(put_escape(st, s, str->p, str->plain, run, i, esc));
        run = i + 1;
    }
    TRY(jsink_put(st, s, str->p + run, str->len - run, str->plain ? str->plain + run : NULL));
    return jsink_put(st, s, &q, 1, NULL);
}

static int repr_depth(jstate *st, jsink *s, jv v, int depth);

static int repr_container(jstate *st, jsink *s, jv v, int depth) {
    if (depth > MAX_PRINT_DEPTH)
        return jj_fail(st, UL_E2BIG, "LimitError: value nested too deeply to print");
    if (v.t == JV_LIST && v.gen == JG_GENERATOR) return put(st, s, "<generator object>");
    if (v.t == JV_LIST && v.gen) { /* dict_items([('a', 1)]) */
        jv plain = v;
        plain.gen = JG_LIST;
        TRY(put(st, s, jv_typename(v)));
        TRY(put(st, s, "("));
        TRY(repr_container(st, s, plain, depth));
        return put(st, s, ")");
    }
    if (v.t == JV_LIST) {
        TRY(put(st, s, v.tuple ? "(" : "["));
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i) TRY(put(st, s, ", "));
            TRY(repr_depth(st, s, v.u.l->v[i], depth + 1));
        }
        if (v.tuple && v.u.l->n == 1) TRY(put(st, s, ","));
        return put(st, s, v.tuple ? ")" : "]");
    }
    TRY(put(st, s, "{"));
    for (size_t i = 0; i < v.u.d->n; i++) {
        if (i) TRY(put(st, s, ", "));
        TRY(repr_depth(st, s, v.u.d->k[i], depth + 1));
        TRY(put(st, s, ": "));
        TRY(repr_depth(st, s, v.u.d->v[i], depth + 1));
    }
    return put(st, s, "}");
}

static int repr_depth(jstate *st, jsink *s, jv v, int depth) {
    TRY(jj_step(st));
    switch (v.t) {
    case JV_STR:
        return repr_str(st, s, v.u.s);
    case JV_UNDEF:
        return 0;
    case JV_LIST:
    case JV_DICT:
        return repr_container(st, s, v, depth);
    default:
        return print_scalar(st, s, v);
    }
}

int jj_repr(jstate *st, jsink *s, jv v) { return repr_depth(st, s, v, 0); }

int jj_str(jstate *st, jsink *s, jv v) {
    if (v.t == JV_STR) return jsink_put(st, s, v.u.s->p, v.u.s->len, v.u.s->plain);
    return jj_repr(st, s, v);
}

int jj_str_value(jstate *st, jv v, jv *out) {
    if (v.t == JV_STR) {
        *out = v;
        return 0;
    }
    jsink s;
    jsink_init(&s);
    TRY(jj_str(st, &s, v));
    return jsink_str(st, &s, out);
}

/* ---- json.dumps ---- */

typedef struct jsonfmt {
    const char *indent, *isep, *ksep;
    int sort_keys, ensure_ascii;
} jsonfmt;

/* The code point of the UTF-8 sequence at p (n bytes left) and its length; an invalid
 * byte stands for itself. */
unsigned long jj_utf8_at(const unsigned char *p, size_t n, size_t *len) {
    int w = p[0] >= 0xF0 ? 4 : p[0] >= 0xE0 ? 3 : p[0] >= 0xC0 ? 2 : 1;
    unsigned long cp = w == 1 ? p[0] : p[0] & (0x3F >> (w - 1));
    if ((size_t)w > n) w = 1, cp = p[0];
    for (int k = 1; k < w; k++) {
        if ((p[k] & 0xC0) != 0x80) {
            *len = 1;
            return p[0];
        }
        cp = (cp << 6) | (p[k] & 0x3F);
    }
    *len = (size_t)w;
    return cp;
}

/* ensure_ascii: what Python writes for a code point outside ' '..'~'. */
static void ascii_escape(unsigned long cp, char *esc, size_t cap) {
    if (cp >= 0x10000) {
        cp -= 0x10000;
        snprintf(esc, cap, "\\u%04x\\u%04x", (unsigned)(0xD800 + ((cp >> 10) & 0x3FF)),
                 (unsigned)(0xDC00 + (cp & 0x3FF)));
    } else {
        snprintf(esc, cap, "\\u%04x", (unsigned)(cp & 0xFFFF));
    }
}

static int json_str(jstate *st, jsink *s, const char *p, size_t n, const uint8_t *plain,
                    int ensure_ascii) {
    TRY(put(st, s, "\""));
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        char esc[32] = {0};
        size_t w = 1;
        if (ensure_ascii && c >= 0x7f) {
            ascii_escape(jj_utf8_at((const unsigned char *)p + i, n - i, &w), esc, sizeof esc);
            TRY(put_escape(st, s, p, plain, run, i, esc));
            run = i + w;
            i += w - 1;
            continue;
        }
        const char *e = common_escape(c);
        if (e)
            strcpy(esc, e);
        else if (c == '"')
            strcpy(esc, "\\\"");
        else if (c == '\b')
            strcpy(esc, "\\b");
        else if (c == '\f')
            strcpy(esc, "\\f");
        else if (c < 0x20)
            snprintf(esc, sizeof esc, "\\u%04x", c);
        if (!esc[0]) continue;
        TRY(put_escape(st, s, p, plain, run, i, esc));
        run = i + 1;
    }
    TRY(jsink_put(st, s, p + run, n - run, plain ? plain + run : NULL));
    return put(st, s, "\"");
}

static int json_newline(jstate *st, jsink *s, const jsonfmt *f, int level) {
    TRY(put(st, s, "\n"));
    for (int i = 0; i < level; i++) TRY(put(st, s, f->indent));
    return 0;
}

static int json_val(jstate *st, jsink *s, jv v, const jsonfmt *f, int level);

static int json_key(jstate *st, jsink *s, jv k, const jsonfmt *f) {
    char buf[64];
    switch (k.t) {
    case JV_STR:
        return json_str(st, s, k.u.s->p, k.u.s->len, k.u.s->plain, f->ensure_ascii);
    case JV_NONE:
    case JV_BOOL:
        return put_word(st, s, k, json_key_words);
    case JV_INT:
        snprintf(buf, sizeof buf, "\"%lld\"", (long long)k.u.i);
        return put(st, s, buf);
    case JV_FLOAT:
        buf[0] = '"';
        jj_fmt_float(k.u.f, buf + 1, sizeof buf - 2);
        strcat(buf, "\"");
        return put(st, s, buf);
    default:
        return jj_fail(st, UL_EFORMAT,
                       "TypeError: keys must be str, int, float, bool or None, not %s",
                       jv_typename(k));
    }
}

static int sorted_order(jstate *st, const jdict *d, size_t *idx) {
    for (size_t i = 0; i < d->n; i++) idx[i] = i;
    for (size_t i = 1; i < d->n; i++) /* insertion sort: dicts in templates are small */
        for (size_t j = i; j > 0; j--) {
            int r;
            TRY(jv_cmp(st, d->k[idx[j - 1]], d->k[idx[j]], &r));
            if (r <= 0) break;
            size_t t = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = t;
        }
    return 0;
}

static int json_dict(jstate *st, jsink *s, const jdict *d, const jsonfmt *f, int level) {
    if (!d->n) return put(st, s, "{}");
    size_t *idx = jj_alloc(st, d->n * sizeof *idx);
    if (!idx) return jj_fail(st, UL_E2BIG, "LimitError: out of memory");
    if (f->sort_keys)
        TRY(sorted_order(st, d, idx));
    else
        for (size_t i = 0; i < d->n; i++) idx[i] = i;
    TRY(put(st, s, "{"));
    for (size_t i = 0; i < d->n; i++) {
        if (i) TRY(put(st, s, f->isep));
        if (f->indent) TRY(json_newline(st, s, f, level + 1));
        TRY(json_key(st, s, d->k[idx[i]], f));
        TRY(put(st, s, f->ksep));
        TRY(json_val(st, s, d->v[idx[i]], f, level + 1));
    }
    if (f->indent) TRY(json_newline(st, s, f, level));
    return put(st, s, "}");
}

static int json_list(jstate *st, jsink *s, const jlist *l, const jsonfmt *f, int level) {
    if (!l->n) return put(st, s, "[]");
    TRY(put(st, s, "["));
    for (size_t i = 0; i < l->n; i++) {
        if (i) TRY(put(st, s, f->isep));
        if (f->indent) TRY(json_newline(st, s, f, level + 1));
        TRY(json_val(st, s, l->v[i], f, level + 1));
    }
    if (f->indent) TRY(json_newline(st, s, f, level));
    return put(st, s, "]");
}

static int json_val(jstate *st, jsink *s, jv v, const jsonfmt *f, int level) {
    TRY(jj_step(st));
    if (level > MAX_PRINT_DEPTH)
        return jj_fail(st, UL_E2BIG, "LimitError: value nested too deeply for tojson");
    switch (v.t) {
    case JV_NONE:
    case JV_BOOL:
        return put_word(st, s, v, json_words);
    case JV_FLOAT:
        if (isnan(v.u.f)) return put(st, s, "NaN");
        if (isinf(v.u.f)) return put(st, s, v.u.f < 0 ? "-Infinity" : "Infinity");
        return put_number(st, s, v);
    case JV_INT:
        return put_number(st, s, v);
    case JV_STR:
        return json_str(st, s, v.u.s->p, v.u.s->len, v.u.s->plain, f->ensure_ascii);
    case JV_LIST:
        if (v.gen) break;
        return json_list(st, s, v.u.l, f, level);
    case JV_DICT:
        return json_dict(st, s, v.u.d, f, level);
    default:
        break;
    }
    return jj_fail(st, UL_EFORMAT, "TypeError: Object of type %s is not JSON serializable",
                   jv_typename(v));
}

int jj_tojson(jstate *st, jsink *s, jv v, const char *indent, const char *isep, const char *ksep,
              int sort_keys, int ensure_ascii) {
    jsonfmt f = {indent,
                 isep     ? isep
                 : indent ? ","
                          : ", ",
                 ksep ? ksep : ": ", sort_keys, ensure_ascii};
    return json_val(st, s, v, &f, 0);
}
