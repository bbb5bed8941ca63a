/* Python string formatting: `fmt % args` (printf-style: s r d i f F e E g G x X o c and %%,
 * with flags - 0 + space, width and precision, a tuple or a single value, or %(key)s with a
 * dict) and str.format with {} / {0} / {name} fields and !s / !r (no format specs). Text
 * from the arguments keeps its plain mask; the format's own text is the template's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja_impl.h"

typedef struct spec {
    char flags[8];
    int width, prec; /* -1: not given */
    char conv;
} spec;

static int pad_put(jstate *st, jsink *s, const spec *sp, jsink *tmp) {
    size_t n = utf8_count(tmp->p ? tmp->p : "", tmp->len);
    int left = strchr(sp->flags, '-') != NULL;
    size_t w = sp->width > 0 ? (size_t)sp->width : 0;
    for (size_t i = n; !left && i < w; i++) TRY(jsink_put(st, s, " ", 1, NULL));
    TRY(jsink_put(st, s, tmp->p, tmp->len, tmp->any_plain ? tmp->m : NULL));
    for (size_t i = n; left && i < w; i++) TRY(jsink_put(st, s, " ", 1, NULL));
    return 0;
}

static int fmt_number(jstate *st, jsink *s, const spec *sp, jv v) {
    char f[32], buf[400];
    if (v.t != JV_INT && v.t != JV_FLOAT && v.t != JV_BOOL)
        return jj_fail(st, UL_EFORMAT, "TypeError: %%%c format: a real number is required, not %s",
                       sp->conv, jv_typename(v));
    double d = v.t == JV_FLOAT ? v.u.f : (double)(v.t == JV_INT ? v.u.i : v.u.b);
    int w = sp->width > 100 ? 100 : sp->width, p = sp->prec > 100 ? 100 : sp->prec;
    if (strchr("dixXoc", sp->conv)) {
        long long x = v.t == JV_FLOAT ? (long long)d : v.t == JV_INT ? (long long)v.u.i : v.u.b;
        char c = sp->conv == 'i' ? 'd' : sp->conv;
        if (c == 'c') {
            snprintf(f, sizeof f, "%%%s%dc", sp->flags, w < 0 ? 0 : w);
        } else {
            snprintf(f, sizeof f, "%%%s%d%sll%c", sp->flags, w < 0 ? 0 : w, p >= 0 ? ".*" : "", c);
        }
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
        if (c == 'c')
            snprintf(buf, sizeof buf, f, (int)x);
        else if (p >= 0)
            snprintf(buf, sizeof buf, f, p, x);
        else
            snprintf(buf, sizeof buf, f, x);
    } else {
        snprintf(f, sizeof f, "%%%s%d.%d%c", sp->flags, w < 0 ? 0 : w, p < 0 ? 6 : p, sp->conv);
        snprintf(buf, sizeof buf, f, d);
#pragma GCC diagnostic pop
    }
    return jsink_put(st, s, buf, strlen(buf), NULL);
}

static int fmt_one(jstate *st, jsink *s, const spec *sp, jv v) {
    if (sp->conv == 's' || sp->conv == 'r') {
        jsink tmp;
        jsink_init(&tmp);
        TRY(sp->conv == 's' ? jj_str(st, &tmp, v) : jj_repr(st, &tmp, v));
        if (sp->prec >= 0 && tmp.len) /* precision cuts code points */
            tmp.len = utf8_offset(tmp.p, tmp.len, (size_t)sp->prec);
        return pad_put(st, s, sp, &tmp);
    }
    if (strchr("diouxXeEfFgGc", sp->conv)) return fmt_number(st, s, sp, v);
    return jj_fail(st, UL_EFORMAT, "ValueError: unsupported format character '%c'", sp->conv);
}

/* Parses "[(key)][flags][width][.prec]conv" at p; returns the position after it. */
static const char *parse_spec(const char *p, const char *e, spec *sp, const char **key,
                              size_t *keylen) {
    memset(sp, 0, sizeof *sp);
    sp->width = sp->prec = -1;
    *key = NULL;
    if (p < e && *p == '(') {
        const char *q = memchr(p, ')', (size_t)(e - p));
        if (!q) return NULL;
        *key = p + 1;
        *keylen = (size_t)(q - p - 1);
        p = q + 1;
    }
    size_t nf = 0;
    while (p < e && strchr("-0+ #", *p) && nf < sizeof sp->flags - 1) sp->flags[nf++] = *p++;
    if (p < e && *p >= '0' && *p <= '9') {
        sp->width = 0;
        while (p < e && *p >= '0' && *p <= '9' && sp->width < 10000)
            sp->width = sp->width * 10 + (*p++ - '0');
    }
    if (p < e && *p == '.') {
        p++;
        sp->prec = 0;
        while (p < e && *p >= '0' && *p <= '9' && sp->prec < 10000)
            sp->prec = sp->prec * 10 + (*p++ - '0');
    }
    if (p >= e) return NULL;
    sp->conv = *p++;
    return p;
}

int jj_percent(jstate *st, jv fmt, jv args, jv *out) {
    const jstr *f = fmt.u.s;
    const char *p = f->p, *e = f->p + f->len;
    jsink s;
    jsink_init(&s);
    size_t argi = 0;
    int tuple = args.t == JV_LIST && args.tuple;
    while (p < e) {
        const char *q = memchr(p, '%', (size_t)(e - p));
        size_t run = (size_t)((q ? q : e) - p);
        TRY(jsink_put(st, &s, p, run, f->plain ? f->plain + (p - f->p) : NULL));
        if (!q) break;
        if (q + 1 < e && q[1] == '%') {
            TRY(jsink_put(st, &s, "%", 1, NULL));
            p = q + 2;
            continue;
        }
        spec sp;
        const char *key;
        size_t keylen = 0;
        p = parse_spec(q + 1, e, &sp, &key, &keylen);
        if (!p) return jj_fail(st, UL_EFORMAT, "ValueError: incomplete format");
        jv v;
        if (key) {
            jv k;
            TRY(jv_str(st, key, keylen, NULL, &k));
            jv *found = args.t == JV_DICT ? jd_get(args.u.d, k) : NULL;
            if (!found) return jj_fail(st, UL_EFORMAT, "KeyError: '%.*s'", (int)keylen, key);
            v = *found;
        } else if (tuple) {
            if (argi >= args.u.l->n)
                return jj_fail(st, UL_EFORMAT, "TypeError: not enough arguments for format string");
            v = args.u.l->v[argi++];
        } else {
            if (argi++)
                return jj_fail(st, UL_EFORMAT, "TypeError: not enough arguments for format string");
            v = args;
        }
        TRY(fmt_one(st, &s, &sp, v));
    }
    /* like Python: an unused argument is an error unless it supports [] (mapping-like) */
    int mapping = args.t == JV_DICT || args.t == JV_NS || args.t == JV_UNDEF ||
                  (args.t == JV_LIST && !args.tuple && !args.gen);
    if ((tuple && argi < args.u.l->n) || (!tuple && !argi && !mapping))
        return jj_fail(st, UL_EFORMAT,
                       "TypeError: not all arguments converted during string formatting");
    return jsink_str(st, &s, out);
}

/* str.format: {} {0} {name} {0!r}; "{{" and "}}" are braces. */
int jj_str_format(jstate *st, jv fmt, const jv *args, int nargs, const char **kwn, const jv *kwv,
                  int nkw, jv *out) {
    const jstr *f = fmt.u.s;
    jsink s;
    jsink_init(&s);
    int auto_i = 0;
    for (size_t i = 0; i < f->len; i++) {
        char c = f->p[i];
        if ((c == '{' || c == '}') && i + 1 < f->len && f->p[i + 1] == c) {
            TRY(jsink_put(st, &s, &c, 1, NULL));
            i++;
            continue;
        }
        if (c == '}')
            return jj_fail(st, UL_EFORMAT, "ValueError: Single '}' encountered in format string");
        if (c != '{') {
            TRY(jsink_put(st, &s, f->p + i, 1, f->plain ? f->plain + i : NULL));
            continue;
        }
        const char *end = memchr(f->p + i, '}', f->len - i);
        if (!end) return jj_fail(st, UL_EFORMAT, "ValueError: expected '}' before end of string");
        const char *name = f->p + i + 1, *bang = memchr(name, '!', (size_t)(end - name));
        if (memchr(name, ':', (size_t)(end - name)))
            return jj_fail(st, UL_EFORMAT,
                           "TemplateError: format specs in str.format are not supported");
        size_t nl = (size_t)((bang ? bang : end) - name);
        jv v = jv_undef(NULL);
        if (nl == 0 || (name[0] >= '0' && name[0] <= '9')) {
            int idx = nl ? atoi(name) : auto_i++;
            if (idx >= nargs)
                return jj_fail(st, UL_EFORMAT, "IndexError: Replacement index %d out of range",
                               idx);
            v = args[idx];
        } else {
            int found = 0;
            for (int k = 0; k < nkw; k++)
                if (strlen(kwn[k]) == nl && !memcmp(kwn[k], name, nl)) {
                    v = kwv[k];
                    found = 1;
                }
            if (!found) return jj_fail(st, UL_EFORMAT, "KeyError: '%.*s'", (int)nl, name);
        }
        TRY(bang && bang[1] == 'r' ? jj_repr(st, &s, v) : jj_str(st, &s, v));
        i = (size_t)(end - f->p);
    }
    return jsink_str(st, &s, out);
}
