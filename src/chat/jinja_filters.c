/* Jinja2 filters (|length, |join, |default, |tojson, |selectattr, |map, |sort, ...) with the
 * behaviour of jinja2/filters.py, including on Undefined (most treat it as "" or empty),
 * and the HF tojson (json.dumps with ensure_ascii=False). Tests (`is defined`, `is string`,
 * ...) are in jinja_tests.c. Text filters keep the plain mask per byte where they only cut
 * or join (trim, join, first, last); others that rewrite text (indent, center, escape) mark
 * inserted bytes as template text and keep the rest. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja_filters.h"

int jj_arg(const jfargs *a, int pos, const char *name, jv *out) {
    for (int i = 0; i < a->nkw; i++)
        if (!strcmp(a->kwn[i], name)) {
            *out = a->kwv[i];
            return 1;
        }
    if (pos >= 0 && pos < a->n) {
        *out = a->args[pos];
        return 1;
    }
    return 0;
}

static int arg_or(const jfargs *a, int pos, const char *name, jv def, jv *out) {
    if (!jj_arg(a, pos, name, out)) *out = def;
    return 0;
}

static int fail_type(jstate *st, const char *filter, jv v) {
    if (v.t == JV_UNDEF && v.u.undef_name)
        return jj_fail(st, UL_EFORMAT, "UndefinedError: %s", v.u.undef_name);
    return jj_fail(st, UL_EFORMAT, "TypeError: filter '%s' got a %s", filter, jv_typename(v));
}

/* soft_str: Undefined prints as "" */
static int to_str(jstate *st, jv v, jv *out) {
    if (v.t == JV_UNDEF) return jv_str(st, "", 0, NULL, out);
    return jj_str_value(st, v, out);
}

static int f_join(jstate *st, jv v, const jfargs *a, jv *out) {
    jlist *l;
    jv sep, attr;
    TRY(jv_iter(st, v, &l));
    arg_or(a, 0, "d", jv_none(), &sep);
    int by_attr = jj_arg(a, 1, "attribute", &attr);
    jsink k;
    jsink_init(&k);
    for (size_t i = 0; i < l->n; i++) {
        jv e = l->v[i];
        if (by_attr) TRY(jj_getattr(st, e, attr.t == JV_STR ? jv_cstr(st, attr) : "", &e));
        if (i && sep.t == JV_STR) TRY(jsink_put(st, &k, sep.u.s->p, sep.u.s->len, sep.u.s->plain));
        TRY(jj_str(st, &k, e));
    }
    return jsink_str(st, &k, out);
}

static int f_tojson(jstate *st, jv v, const jfargs *a, jv *out) {
    jv ind, seps, sk, ea;
    char ibuf[64];
    const char *indent = NULL, *isep = NULL, *ksep = NULL;
    if (jj_arg(a, 1, "indent", &ind) && ind.t != JV_NONE) {
        if (ind.t == JV_INT) {
            int64_t n = ind.u.i < 0 ? 0 : ind.u.i > 32 ? 32 : ind.u.i;
            memset(ibuf, ' ', (size_t)n);
            ibuf[n] = 0;
            indent = ibuf;
        } else if (ind.t == JV_STR) {
            indent = jv_cstr(st, ind);
        }
    }
    if (jj_arg(a, 2, "separators", &seps) && seps.t == JV_LIST && seps.u.l->n == 2 &&
        seps.u.l->v[0].t == JV_STR && seps.u.l->v[1].t == JV_STR) {
        isep = jv_cstr(st, seps.u.l->v[0]);
        ksep = jv_cstr(st, seps.u.l->v[1]);
    }
    arg_or(a, 3, "sort_keys", jv_bool(0), &sk);
    arg_or(a, 0, "ensure_ascii", jv_bool(0), &ea);
    jsink k;
    jsink_init(&k);
    TRY(jj_tojson(st, &k, v, indent, isep, ksep, jv_truthy(sk), jv_truthy(ea)));
    return jsink_str(st, &k, out);
}

static int f_default(jstate *st, jv v, const jfargs *a, jv *out) {
    jv def, boolean;
    arg_or(a, 0, "default_value", jv_undef(NULL), &def);
    if (def.t == JV_UNDEF) TRY(jv_str(st, "", 0, NULL, &def));
    arg_or(a, 1, "boolean", jv_bool(0), &boolean);
    *out = (v.t == JV_UNDEF || (jv_truthy(boolean) && !jv_truthy(v))) ? def : v;
    return 0;
}

static int f_first_last(jstate *st, jv v, int last, jv *out) {
    if (v.t == JV_STR) {
        const jstr *s = v.u.s;
        if (!s->len) {
            *out = jv_undef("No first item, sequence was empty.");
            return 0;
        }
        size_t n = utf8_count(s->p, s->len);
        size_t b = utf8_offset(s->p, s->len, last ? n - 1 : 0);
        size_t e = utf8_offset(s->p, s->len, last ? n : 1);
        return jj_slice_str(st, s, b, e, out);
    }
    jlist *l;
    TRY(jv_iter(st, v, &l));
    *out = l->n ? l->v[last ? l->n - 1 : 0] : jv_undef("No first item, sequence was empty.");
    return 0;
}

/* Jinja's |title (not str.title): a letter after - whitespace ( { [ < or at the start is
 * upper-cased, every other letter lower-cased ("they're" -> "They're"). */
static int f_title(jstate *st, jv v, jv *out) {
    jv s;
    TRY(to_str(st, v, &s));
    return jj_case(st, s.u.s, "jtitle", out);
}

static int f_indent(jstate *st, jv v, const jfargs *a, jv *out) {
    jv w, first, blank, s;
    if (v.t == JV_UNDEF) return fail_type(st, "indent", v);
    if (v.t != JV_STR) /* do_indent does s += "\n" */
        return jj_fail(st, UL_EFORMAT,
                       "TypeError: unsupported operand type(s) for +=: '%s' and 'str'",
                       jv_typename(v));
    arg_or(a, 0, "width", jv_int(4), &w);
    arg_or(a, 1, "first", jv_bool(0), &first);
    arg_or(a, 2, "blank", jv_bool(0), &blank);
    TRY(to_str(st, v, &s));
    char ibuf[256];
    const char *ind = ibuf;
    size_t il;
    if (w.t == JV_STR) {
        ind = jv_cstr(st, w);
        il = w.u.s->len;
    } else {
        il = w.t == JV_INT && w.u.i > 0 ? (size_t)(w.u.i > 255 ? 255 : w.u.i) : 0;
        memset(ibuf, ' ', il);
    }
    const jstr *str = s.u.s;
    jsink k;
    jsink_init(&k);
    if (jv_truthy(first)) TRY(jsink_put(st, &k, ind, il, NULL));
    /* lines after the first are indented unless blank (and blank is false) */
    for (size_t i = 0; i < str->len; i++) {
        TRY(jsink_put(st, &k, str->p + i, 1, str->plain ? str->plain + i : NULL));
        if (str->p[i] != '\n') continue;
        int next_blank = i + 1 >= str->len || str->p[i + 1] == '\n';
        if (!next_blank || jv_truthy(blank)) TRY(jsink_put(st, &k, ind, il, NULL));
    }
    return jsink_str(st, &k, out);
}

int jj_escape(jstate *st, jv v, jv *out) {
    jv s;
    TRY(to_str(st, v, &s));
    const jstr *str = s.u.s;
    jsink k;
    jsink_init(&k);
    for (size_t i = 0; i < str->len; i++) {
        const char *rep = NULL;
        switch (str->p[i]) {
        case '&':
            rep = "&amp;";
            break;
        case '<':
            rep = "&lt;";
            break;
        case '>':
            rep = "&gt;";
            break;
        case '"':
            rep = "&#34;";
            break;
        case '\'':
            rep = "&#39;";
            break;
        default:
            break;
        }
        if (rep)
            TRY(jsink_put_plain(st, &k, rep, strlen(rep), str->plain && str->plain[i]));
        else
            TRY(jsink_put(st, &k, str->p + i, 1, str->plain ? str->plain + i : NULL));
    }
    TRY(jsink_str(st, &k, out));
    out->markup = 1;
    return 0;
}

static int f_int(jstate *st, jv v, const jfargs *a, jv *out) {
    jv def;
    if (v.t == JV_UNDEF) return fail_type(st, "int", v); /* int(Undefined) raises */
    arg_or(a, 0, "default", jv_int(0), &def);
    if (v.t == JV_INT)
        *out = v;
    else if (v.t == JV_BOOL)
        *out = jv_int(v.u.b);
    else if (v.t == JV_FLOAT && isfinite(v.u.f) && fabs(v.u.f) < 9.2e18)
        *out = jv_int((int64_t)v.u.f);
    else if (v.t == JV_STR) {
        char *end;
        errno = 0;
        const char *cs = jv_cstr(st, v);
        long long x = strtoll(cs, &end, 10);
        while (*end == ' ' || *end == '\n' || *end == '\t') end++;
        if (errno || end == cs || *end) {
            double d = strtod(cs, &end);
            *out = (end != cs && !*end && fabs(d) < 9.2e18) ? jv_int((int64_t)d) : def;
        } else {
            *out = jv_int(x);
        }
    } else
        *out = def;
    return 0;
}

static int f_float(jstate *st, jv v, const jfargs *a, jv *out) {
    jv def;
    if (v.t == JV_UNDEF) return fail_type(st, "float", v);
    arg_or(a, 0, "default", jv_float(0), &def);
    if (v.t == JV_FLOAT)
        *out = v;
    else if (v.t == JV_INT || v.t == JV_BOOL)
        *out = jv_float(v.t == JV_INT ? (double)v.u.i : v.u.b);
    else if (v.t == JV_STR) {
        char *end;
        const char *cs = jv_cstr(st, v);
        double d = strtod(cs, &end);
        *out = end != cs && !*end ? jv_float(d) : def;
    } else
        *out = def;
    (void)st;
    return 0;
}

static int f_round(jstate *st, jv v, const jfargs *a, jv *out) {
    jv prec, method;
    arg_or(a, 0, "precision", jv_int(0), &prec);
    arg_or(a, 1, "method", jv_none(), &method);
    if (v.t == JV_INT || v.t == JV_BOOL) { /* Python's round() keeps an int an int */
        *out = v.t == JV_INT ? v : jv_int(v.u.b);
        return 0;
    }
    if (v.t != JV_FLOAT) return fail_type(st, "round", v);
    double p = pow(10, prec.t == JV_INT ? (double)prec.u.i : 0), x = v.u.f * p;
    const char *m = method.t == JV_STR ? jv_cstr(st, method) : "common";
    if (!strcmp(m, "ceil"))
        x = ceil(x);
    else if (!strcmp(m, "floor"))
        x = floor(x);
    else {
        char buf[64];
        snprintf(buf, sizeof buf, "%.*f",
                 (int)(prec.t == JV_INT && prec.u.i > 0 && prec.u.i < 20 ? prec.u.i : 0), v.u.f);
        *out = jv_float(strtod(buf, NULL));
        return 0;
    }
    *out = jv_float(x / p);
    return 0;
}

static int f_items(jstate *st, jv v, jv *out) {
    if (v.t == JV_UNDEF) return jv_newlist(st, 0, out);
    if (v.t != JV_DICT && v.t != JV_NS)
        return jj_fail(st, UL_EFORMAT, "TypeError: Can only get item pairs from a mapping.");
    jv self = v;
    self.t = JV_DICT;
    TRY(jj_method(st, self, "items", NULL, 0, NULL, NULL, 0, out));
    out->gen = JG_GENERATOR; /* an iterator in Jinja2 3.1 */
    return 0;
}

static int f_list(jstate *st, jv v, jv *out) {
    jlist *l;
    TRY(jv_iter(st, v, &l));
    TRY(jv_newlist(st, l->n, out));
    for (size_t i = 0; i < l->n; i++) out->u.l->v[out->u.l->n++] = l->v[i];
    return 0;
}

static int f_reverse(jstate *st, jv v, jv *out) {
    if (v.t == JV_STR) {
        jv sv[3] = {jv_none(), jv_none(), jv_int(-1)};
        jlist *l;
        (void)sv;
        TRY(jv_iter(st, v, &l));
        jsink k;
        jsink_init(&k);
        for (size_t i = l->n; i > 0; i--) TRY(jj_str(st, &k, l->v[i - 1]));
        return jsink_str(st, &k, out);
    }
    jlist *l;
    TRY(jv_iter(st, v, &l));
    TRY(jv_newlist(st, l->n, out));
    for (size_t i = l->n; i > 0; i--) out->u.l->v[out->u.l->n++] = l->v[i - 1];
    if (v.t == JV_LIST && !v.gen) out->gen = JG_GENERATOR; /* reversed(list): an iterator */
    return 0;
}

static int f_center(jstate *st, jv v, const jfargs *a, jv *out) {
    jv w, s;
    arg_or(a, 0, "width", jv_int(80), &w);
    TRY(to_str(st, v, &s));
    int64_t n = (int64_t)utf8_count(s.u.s->p, s.u.s->len), width = w.t == JV_INT ? w.u.i : 80;
    if (width > (int64_t)st->max_out) return jj_fail(st, UL_E2BIG, "LimitError: center width");
    if (width <= n) {
        *out = s;
        return 0;
    }
    int64_t marg = width - n, left = marg / 2 + (marg & width & 1);
    jsink k;
    jsink_init(&k);
    for (int64_t i = 0; i < left; i++) TRY(jsink_put(st, &k, " ", 1, NULL));
    TRY(jsink_put(st, &k, s.u.s->p, s.u.s->len, s.u.s->plain));
    for (int64_t i = 0; i < marg - left; i++) TRY(jsink_put(st, &k, " ", 1, NULL));
    return jsink_str(st, &k, out);
}

static int f_truncate(jstate *st, jv v, const jfargs *a, jv *out) {
    jv len, kill, end, leeway, s;
    arg_or(a, 0, "length", jv_int(255), &len);
    arg_or(a, 1, "killwords", jv_bool(0), &kill);
    arg_or(a, 2, "end", jv_none(), &end);
    arg_or(a, 3, "leeway", jv_int(5), &leeway);
    if (end.t != JV_STR) TRY(jv_str(st, "...", 3, NULL, &end));
    TRY(to_str(st, v, &s));
    int64_t n = (int64_t)utf8_count(s.u.s->p, s.u.s->len);
    int64_t L = len.t == JV_INT ? len.u.i : 255, lw = leeway.t == JV_INT ? leeway.u.i : 5;
    int64_t most, keep;
    if (__builtin_add_overflow(L, lw, &most)) most = L > 0 ? INT64_MAX : INT64_MIN;
    if (n <= most) {
        *out = s;
        return 0;
    }
    if (__builtin_sub_overflow(L, (int64_t)utf8_count(end.u.s->p, end.u.s->len), &keep)) keep = 0;
    if (keep < 0) keep = 0;
    size_t cut = utf8_offset(s.u.s->p, s.u.s->len, (size_t)keep);
    if (!jv_truthy(kill)) {
        size_t sp = cut;
        while (sp > 0 && s.u.s->p[sp - 1] != ' ') sp--;
        if (sp > 0) cut = sp - 1;
    }
    jv head;
    TRY(jj_slice_str(st, s.u.s, 0, cut, &head));
    return jj_binop(st, OP_ADD, head, end, out);
}

static int f_wordcount(jstate *st, jv v, jv *out) {
    jv s;
    TRY(to_str(st, v, &s));
    int64_t c = 0;
    int in = 0;
    for (size_t i = 0; i < s.u.s->len; i++) {
        unsigned char ch = (unsigned char)s.u.s->p[i];
        int w = isalnum(ch) || ch == '_' || ch >= 0x80;
        if (w && !in) c++;
        in = w;
    }
    *out = jv_int(c);
    return 0;
}

static int f_striptags(jstate *st, jv v, jv *out) {
    jv s;
    TRY(to_str(st, v, &s));
    jsink k;
    jsink_init(&k);
    int in_tag = 0, space = 0, any = 0;
    for (size_t i = 0; i < s.u.s->len; i++) {
        char c = s.u.s->p[i];
        if (c == '<')
            in_tag = 1;
        else if (c == '>' && in_tag)
            in_tag = 0;
        else if (!in_tag) {
            if (c == ' ' || c == '\n' || c == '\t' || c == '\r') {
                space = 1;
                continue;
            }
            if (space && any) TRY(jsink_put(st, &k, " ", 1, NULL));
            space = 0;
            any = 1;
            TRY(jsink_put(st, &k, &c, 1, s.u.s->plain ? s.u.s->plain + i : NULL));
        }
    }
    return jsink_str(st, &k, out);
}

static int f_abs(jstate *st, jv v, jv *out) {
    if (v.t == JV_INT && v.u.i == INT64_MIN) /* Python's is 2**63: no int64 holds it */
        return jj_fail(st, UL_EFORMAT, "OverflowError: integer result too large");
    if (v.t == JV_INT)
        *out = jv_int(v.u.i < 0 ? -v.u.i : v.u.i);
    else if (v.t == JV_BOOL)
        *out = jv_int(v.u.b);
    else if (v.t == JV_FLOAT)
        *out = jv_float(fabs(v.u.f));
    else
        return fail_type(st, "abs", v);
    return 0;
}

static int f_attr(jstate *st, jv v, const jfargs *a, jv *out) {
    jv name;
    if (!jj_arg(a, 0, "name", &name) || name.t != JV_STR) return fail_type(st, "attr", name);
    if (v.t == JV_DICT && !jj_has_method(v, jv_cstr(st, name))) { /* getattr only, no item lookup */
        *out = jv_undef("'dict object' has no attribute");
        return 0;
    }
    return jj_getattr(st, v, jv_cstr(st, name), out);
}

int jj_filter(jstate *st, jframe *f, const char *name, jv v, const jv *args, int nargs,
              const char **kwn, const jv *kwv, int nkw, jv *out) {
    jfargs a = {args, nargs, kwn, kwv, nkw, f};
    int64_t n;
    jv s;
    TRY(jj_step(st));
    if (!strcmp(name, "length") || !strcmp(name, "count")) {
        TRY(jv_len(st, v, &n));
        *out = jv_int(n);
        return 0;
    }
    if (!strcmp(name, "tojson")) return f_tojson(st, v, &a, out);
    if (!strcmp(name, "trim")) {
        jv chars;
        int has = jj_arg(&a, 0, "chars", &chars);
        TRY(to_str(st, v, &s));
        return jj_strip(st, s, has ? &chars : NULL, 1, 1, out);
    }
    if (!strcmp(name, "default") || !strcmp(name, "d")) return f_default(st, v, &a, out);
    if (!strcmp(name, "string")) return to_str(st, v, out);
    if (!strcmp(name, "safe")) {
        TRY(to_str(st, v, out));
        out->markup = 1;
        return 0;
    }
    if (!strcmp(name, "join")) return f_join(st, v, &a, out);
    if (!strcmp(name, "items")) return jj_as_generator(st, f_items(st, v, out), out);
    if (!strcmp(name, "first")) return f_first_last(st, v, 0, out);
    if (!strcmp(name, "last")) return f_first_last(st, v, 1, out);
    if (!strcmp(name, "title")) return f_title(st, v, out);
    if (!strcmp(name, "upper") || !strcmp(name, "lower") || !strcmp(name, "capitalize")) {
        TRY(to_str(st, v, &s));
        return jj_method(st, s, name, NULL, 0, NULL, NULL, 0, out);
    }
    if (!strcmp(name, "replace")) {
        TRY(to_str(st, v, &s));
        return jj_method(st, s, "replace", args, nargs, NULL, NULL, 0, out);
    }
    if (!strcmp(name, "indent")) return f_indent(st, v, &a, out);
    if (!strcmp(name, "list")) return f_list(st, v, out);
    if (!strcmp(name, "int")) return f_int(st, v, &a, out);
    if (!strcmp(name, "float")) return f_float(st, v, &a, out);
    if (!strcmp(name, "abs")) return f_abs(st, v, out);
    if (!strcmp(name, "round")) return f_round(st, v, &a, out);
    if (!strcmp(name, "reverse")) return f_reverse(st, v, out);
    if ((!strcmp(name, "e") || !strcmp(name, "escape")) && v.t == JV_STR && v.markup) {
        *out = v; /* already safe */
        return 0;
    }
    if (!strcmp(name, "e") || !strcmp(name, "escape") || !strcmp(name, "forceescape"))
        return jj_escape(st, v, out);
    if (!strcmp(name, "center")) return f_center(st, v, &a, out);
    if (!strcmp(name, "truncate")) return f_truncate(st, v, &a, out);
    if (!strcmp(name, "wordcount")) return f_wordcount(st, v, out);
    if (!strcmp(name, "striptags")) return f_striptags(st, v, out);
    if (!strcmp(name, "attr")) return f_attr(st, v, &a, out);
    return jj_filter_seq(st, name, v, &a, out);
}
