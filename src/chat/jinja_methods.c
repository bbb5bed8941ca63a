/* Python methods that templates call on values (str.strip/split/startswith/replace/...,
 * dict.items/keys/values/get, list.index/count) and the global functions (range,
 * namespace, dict, raise_exception, strftime_now). Methods that would mutate a list or dict
 * raise SecurityError, as in Jinja2's ImmutableSandboxedEnvironment. String results keep
 * the plain mask of the bytes they were cut from; case mapping is in jinja_case.c. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "chat/jinja_impl.h"

static const char *const str_methods[] = {
    "strip",   "lstrip",     "rstrip",  "split",   "rsplit",     "startswith", "endswith",
    "replace", "upper",      "lower",   "title",   "capitalize", "find",       "rfind",
    "count",   "join",       "isdigit", "isalpha", "isalnum",    "isspace",    "isupper",
    "islower", "splitlines", "format",  "index",   NULL};
static const char *const dict_methods[] = {"items",      "keys",  "values",  "get",
                                           "copy",       "pop",   "popitem", "update",
                                           "setdefault", "clear", NULL};
static const char *const list_methods[] = {"index",  "count",   "append", "pop",
                                           "extend", "insert",  "remove", "clear",
                                           "sort",   "reverse", "copy",   NULL};
static const char *const unsafe[] = {"pop",    "popitem", "update",  "setdefault",
                                     "clear",  "append",  "extend",  "insert",
                                     "remove", "sort",    "reverse", NULL};

static int in_set(const char *const *set, const char *name) {
    for (; *set; set++)
        if (!strcmp(*set, name)) return 1;
    return 0;
}

int jj_has_method(jv self, const char *name) {
    if (self.t == JV_STR) return in_set(str_methods, name);
    if (self.t == JV_DICT) return in_set(dict_methods, name);
    if (self.t == JV_LIST) return in_set(list_methods, name);
    return 0;
}

static int is_space(unsigned char c) {
    return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}

int jj_slice_str(jstate *st, const jstr *s, size_t cb, size_t ce, jv *out) {
    if (ce < cb) ce = cb;
    return jv_str(st, s->p + cb, ce - cb, s->plain ? s->plain + cb : NULL, out);
}

static int in_chars(const jstr *chars, const char *p, size_t n) {
    for (size_t i = 0; i + n <= chars->len;) {
        size_t w = 1;
        while (i + w < chars->len && ((unsigned char)chars->p[i + w] & 0xC0) == 0x80) w++;
        if (w == n && !memcmp(chars->p + i, p, n)) return 1;
        i += w;
    }
    return 0;
}

static size_t cp_len_at(const char *p, size_t n, size_t i) {
    size_t w = 1;
    while (i + w < n && ((unsigned char)p[i + w] & 0xC0) == 0x80) w++;
    return w;
}

static size_t cp_start_before(const char *p, size_t e) {
    size_t i = e - 1;
    while (i > 0 && ((unsigned char)p[i] & 0xC0) == 0x80) i--;
    return i;
}

int jj_strip(jstate *st, jv sv, const jv *chars, int left, int right, jv *out) {
    const jstr *s = sv.u.s, *cs = chars && chars->t == JV_STR ? chars->u.s : NULL;
    size_t b = 0, e = s->len;
    while (left && b < e) {
        size_t w = cp_len_at(s->p, e, b);
        if (cs ? !in_chars(cs, s->p + b, w) : !(w == 1 && is_space((unsigned char)s->p[b]))) break;
        b += w;
    }
    while (right && e > b) {
        size_t i = cp_start_before(s->p, e);
        if (i < b) i = b;
        if (cs ? !in_chars(cs, s->p + i, e - i) : !(e - i == 1 && is_space((unsigned char)s->p[i])))
            break;
        e = i;
    }
    return jj_slice_str(st, s, b, e, out);
}

static int need_str(jstate *st, const jv *args, int nargs, int i, const char *m) {
    if (i >= nargs || args[i].t != JV_STR)
        return jj_fail(st, UL_EFORMAT, "TypeError: %s() argument must be str", m);
    return 0;
}

static int str_split(jstate *st, jv self, const jv *args, int nargs, int from_right, jv *out) {
    const jstr *s = self.u.s;
    int64_t maxsplit = nargs > 1 && args[1].t == JV_INT ? args[1].u.i : -1;
    TRY(jv_newlist(st, 0, out));
    jv piece;
    if (nargs < 1 || args[0].t == JV_NONE) { /* runs of whitespace */
        size_t i = 0;
        while (i < s->len) {
            while (i < s->len && is_space((unsigned char)s->p[i])) i++;
            if (i >= s->len) break;
            size_t j = i;
            if (maxsplit >= 0 && (int64_t)out->u.l->n >= maxsplit)
                j = s->len;
            else
                while (j < s->len && !is_space((unsigned char)s->p[j])) j++;
            TRY(jj_slice_str(st, s, i, j, &piece));
            TRY(jl_push(st, out->u.l, piece));
            i = j;
        }
        return 0;
    }
    TRY(need_str(st, args, nargs, 0, "split"));
    const jstr *sep = args[0].u.s;
    if (!sep->len) return jj_fail(st, UL_EFORMAT, "ValueError: empty separator");
    if (from_right && maxsplit >= 0) {
        /* rsplit with a limit: cut from the end, then reverse */
        jv tmp;
        size_t e = s->len;
        TRY(jv_newlist(st, 0, &tmp));
        while ((int64_t)tmp.u.l->n < maxsplit) {
            size_t k = e;
            const char *hit = NULL;
            while (k >= sep->len) {
                if (!memcmp(s->p + k - sep->len, sep->p, sep->len)) {
                    hit = s->p + k - sep->len;
                    break;
                }
                k--;
            }
            if (!hit) break;
            TRY(jj_slice_str(st, s, (size_t)(hit - s->p) + sep->len, e, &piece));
            TRY(jl_push(st, tmp.u.l, piece));
            e = (size_t)(hit - s->p);
        }
        TRY(jj_slice_str(st, s, 0, e, &piece));
        TRY(jl_push(st, out->u.l, piece));
        for (size_t i = tmp.u.l->n; i > 0; i--) TRY(jl_push(st, out->u.l, tmp.u.l->v[i - 1]));
        return 0;
    }
    size_t i = 0;
    for (;;) {
        const char *hit = (maxsplit < 0 || (int64_t)out->u.l->n < maxsplit)
                              ? memmem(s->p + i, s->len - i, sep->p, sep->len)
                              : NULL;
        size_t e = hit ? (size_t)(hit - s->p) : s->len;
        TRY(jj_slice_str(st, s, i, e, &piece));
        TRY(jl_push(st, out->u.l, piece));
        if (!hit) return 0;
        i = e + sep->len;
        TRY(jj_step(st));
    }
}

static int affix(jstate *st, jv self, const jv *args, int nargs, int end, jv *out) {
    const jstr *s = self.u.s;
    if (nargs < 1) return jj_fail(st, UL_EFORMAT, "TypeError: startswith takes an argument");
    const jv *opts = &args[0];
    size_t n = 1;
    if (args[0].t == JV_LIST) {
        opts = args[0].u.l->v;
        n = args[0].u.l->n;
    }
    for (size_t i = 0; i < n; i++) {
        if (opts[i].t != JV_STR)
            return jj_fail(st, UL_EFORMAT,
                           "TypeError: startswith first arg must be str or a tuple of str");
        const jstr *a = opts[i].u.s;
        if (a->len <= s->len && !memcmp(end ? s->p + s->len - a->len : s->p, a->p, a->len)) {
            *out = jv_bool(1);
            return 0;
        }
    }
    *out = jv_bool(0);
    return 0;
}

/* str.replace: unchanged bytes keep their mask, inserted ones take the replacement's. */
static int str_replace(jstate *st, jv self, const jv *args, int nargs, jv *out) {
    TRY(need_str(st, args, nargs, 0, "replace"));
    TRY(need_str(st, args, nargs, 1, "replace"));
    const jstr *s = self.u.s, *old = args[0].u.s, *rep = args[1].u.s;
    int64_t count = nargs > 2 && args[2].t == JV_INT ? args[2].u.i : -1;
    jsink k;
    jsink_init(&k);
    size_t i = 0;
    int64_t done = 0;
    while (i <= s->len && (count < 0 || done < count)) {
        size_t at;
        if (!old->len) {
            at = i;
        } else {
            const char *hit = memmem(s->p + i, s->len - i, old->p, old->len);
            if (!hit) break;
            at = (size_t)(hit - s->p);
        }
        TRY(jsink_put(st, &k, s->p + i, at - i, s->plain ? s->plain + i : NULL));
        TRY(jsink_put(st, &k, rep->p, rep->len, rep->plain));
        done++;
        if (!old->len) {
            if (at >= s->len) {
                i = s->len + 1;
                break;
            }
            size_t w = cp_len_at(s->p, s->len, at);
            TRY(jsink_put(st, &k, s->p + at, w, s->plain ? s->plain + at : NULL));
            i = at + w;
        } else {
            i = at + old->len;
        }
        TRY(jj_step(st));
    }
    if (i < s->len) TRY(jsink_put(st, &k, s->p + i, s->len - i, s->plain ? s->plain + i : NULL));
    return jsink_str(st, &k, out);
}

/* upper/lower/title/capitalize: Unicode case mapping in jinja_case.c. */
static int str_case(jstate *st, jv self, const char *m, jv *out) {
    return jj_case(st, self.u.s, m, out);
}

static int str_find(jstate *st, jv self, const jv *args, int nargs, const char *m, jv *out) {
    TRY(need_str(st, args, nargs, 0, m));
    const jstr *s = self.u.s, *sub = args[0].u.s;
    if (!strcmp(m, "count")) {
        int64_t c = 0;
        if (!sub->len)
            c = (int64_t)utf8_count(s->p, s->len) + 1;
        else
            for (const char *q = s->p;
                 (q = memmem(q, s->len - (size_t)(q - s->p), sub->p, sub->len)); q += sub->len)
                c++;
        *out = jv_int(c);
        return 0;
    }
    const char *hit = NULL;
    if (!strcmp(m, "rfind")) {
        for (size_t k = s->len + 1; k-- > 0 && !hit;)
            if (k + sub->len <= s->len && !memcmp(s->p + k, sub->p, sub->len)) hit = s->p + k;
    } else {
        hit = sub->len ? memmem(s->p, s->len, sub->p, sub->len) : s->p;
    }
    if (!hit && !strcmp(m, "index"))
        return jj_fail(st, UL_EFORMAT, "ValueError: substring not found");
    *out = jv_int(hit ? (int64_t)utf8_count(s->p, (size_t)(hit - s->p)) : -1);
    return 0;
}

static int str_join(jstate *st, jv self, const jv *args, int nargs, jv *out) {
    jlist *l;
    if (nargs < 1) return jj_fail(st, UL_EFORMAT, "TypeError: join() takes one argument");
    TRY(jv_iter(st, args[0], &l));
    jsink k;
    jsink_init(&k);
    for (size_t i = 0; i < l->n; i++) {
        if (l->v[i].t != JV_STR)
            return jj_fail(st, UL_EFORMAT,
                           "TypeError: sequence item %zu: expected str instance, %s found", i,
                           jv_typename(l->v[i]));
        if (i) TRY(jsink_put(st, &k, self.u.s->p, self.u.s->len, self.u.s->plain));
        TRY(jsink_put(st, &k, l->v[i].u.s->p, l->v[i].u.s->len, l->v[i].u.s->plain));
    }
    return jsink_str(st, &k, out);
}

static int str_pred(const jstr *s, const char *m) {
    if (!s->len) return 0;
    int has_cased = 0;
    for (size_t i = 0; i < s->len; i++) {
        unsigned char c = (unsigned char)s->p[i];
        if (!strcmp(m, "isdigit") && !isdigit(c)) return 0;
        if (!strcmp(m, "isalpha") && !isalpha(c)) return 0;
        if (!strcmp(m, "isalnum") && !isalnum(c)) return 0;
        if (!strcmp(m, "isspace") && !is_space(c)) return 0;
        if (!strcmp(m, "isupper") && islower(c)) return 0;
        if (!strcmp(m, "islower") && isupper(c)) return 0;
        if (isalpha(c)) has_cased = 1;
    }
    return strcmp(m, "isupper") && strcmp(m, "islower") ? 1 : has_cased;
}

static int str_method(jstate *st, jv self, const char *m, const jv *args, int nargs,
                      const char **kwn, const jv *kwv, int nkw, jv *out) {
    const jv *chars = nargs > 0 && args[0].t != JV_NONE ? &args[0] : NULL;
    if (chars && chars->t != JV_STR &&
        (!strcmp(m, "strip") || !strcmp(m, "lstrip") || !strcmp(m, "rstrip")))
        return jj_fail(st, UL_EFORMAT, "TypeError: %s arg must be None or str", m);
    if (!strcmp(m, "strip")) return jj_strip(st, self, chars, 1, 1, out);
    if (!strcmp(m, "lstrip")) return jj_strip(st, self, chars, 1, 0, out);
    if (!strcmp(m, "rstrip")) return jj_strip(st, self, chars, 0, 1, out);
    if (!strcmp(m, "split")) return str_split(st, self, args, nargs, 0, out);
    if (!strcmp(m, "rsplit")) return str_split(st, self, args, nargs, 1, out);
    if (!strcmp(m, "startswith")) return affix(st, self, args, nargs, 0, out);
    if (!strcmp(m, "endswith")) return affix(st, self, args, nargs, 1, out);
    if (!strcmp(m, "replace")) return str_replace(st, self, args, nargs, out);
    if (!strcmp(m, "upper") || !strcmp(m, "lower") || !strcmp(m, "title") ||
        !strcmp(m, "capitalize"))
        return str_case(st, self, m, out);
    if (!strcmp(m, "find") || !strcmp(m, "rfind") || !strcmp(m, "count") || !strcmp(m, "index"))
        return str_find(st, self, args, nargs, m, out);
    if (!strcmp(m, "join")) return str_join(st, self, args, nargs, out);
    if (!strcmp(m, "format")) return jj_str_format(st, self, args, nargs, kwn, kwv, nkw, out);
    if (!strncmp(m, "is", 2)) {
        *out = jv_bool(str_pred(self.u.s, m));
        return 0;
    }
    if (!strcmp(m, "splitlines")) {
        jv nl;
        TRY(jv_str(st, "\n", 1, NULL, &nl));
        TRY(str_split(st, self, &nl, 1, 0, out));
        if (out->u.l->n && out->u.l->v[out->u.l->n - 1].u.s->len == 0) out->u.l->n--;
        return 0;
    }
    return jj_fail(st, UL_EFORMAT, "TemplateError: str.%s() is not supported", m);
}

static int dict_method(jstate *st, jv self, const char *m, const jv *args, int nargs, jv *out) {
    jdict *d = self.u.d;
    if (!strcmp(m, "get")) {
        if (nargs < 1)
            return jj_fail(st, UL_EFORMAT, "TypeError: get expected at least 1 argument");
        jv *v = jd_get(d, args[0]);
        *out = v ? *v : nargs > 1 ? args[1] : jv_none();
        return 0;
    }
    if (!strcmp(m, "copy")) {
        TRY(jv_newdict(st, d->n, out));
        for (size_t i = 0; i < d->n; i++) TRY(jd_set(st, out->u.d, d->k[i], d->v[i]));
        return 0;
    }
    TRY(jv_newlist(st, d->n, out));
    for (size_t i = 0; i < d->n; i++) {
        jv e = !strcmp(m, "keys") ? d->k[i] : d->v[i];
        if (!strcmp(m, "items")) {
            TRY(jv_newlist(st, 2, &e));
            e.tuple = 1;
            e.u.l->v[0] = d->k[i];
            e.u.l->v[1] = d->v[i];
            e.u.l->n = 2;
        }
        out->u.l->v[out->u.l->n++] = e;
    }
    out->gen = !strcmp(m, "items") ? JG_ITEMS : !strcmp(m, "keys") ? JG_KEYS : JG_VALUES;
    return 0;
}

int jj_method(jstate *st, jv self, const char *name, const jv *args, int nargs, const char **kwn,
              const jv *kwv, int nkw, jv *out) {

    if (self.t != JV_STR && in_set(unsafe, name))
        return jj_fail(st, UL_EFORMAT,
                       "SecurityError: access to attribute '%s' of '%s' object is unsafe.", name,
                       jv_typename(self));
    if (self.t == JV_STR) return str_method(st, self, name, args, nargs, kwn, kwv, nkw, out);
    if (self.t == JV_DICT) return dict_method(st, self, name, args, nargs, out);
    if (self.t == JV_LIST && !strcmp(name, "copy")) {
        TRY(jv_newlist(st, self.u.l->n, out));
        for (size_t i = 0; i < self.u.l->n; i++) out->u.l->v[out->u.l->n++] = self.u.l->v[i];
        return 0;
    }
    if (self.t == JV_LIST && nargs > 0) {
        int64_t c = 0, at = -1;
        for (size_t i = 0; i < self.u.l->n; i++)
            if (jv_eq(self.u.l->v[i], args[0])) {
                c++;
                if (at < 0) at = (int64_t)i;
            }
        if (!strcmp(name, "count"))
            *out = jv_int(c);
        else if (at < 0)
            return jj_fail(st, UL_EFORMAT, "ValueError: value is not in list");
        else
            *out = jv_int(at);
        return 0;
    }
    return jj_fail(st, UL_EFORMAT, "TypeError: bad call of %s.%s()", jv_typename(self), name);
}

/* ---- globals ---- */

static const char *const builtins[] = {"range",           "namespace",    "dict",
                                       "raise_exception", "strftime_now", NULL};

int jj_is_builtin(const char *name) { return in_set(builtins, name); }

static int do_range(jstate *st, const jv *args, int nargs, jv *out) {
    int64_t a[3] = {0, 0, 1};
    if (nargs < 1 || nargs > 3)
        return jj_fail(st, UL_EFORMAT, "TypeError: range expected 1 to 3 arguments");
    for (int i = 0; i < nargs; i++) {
        if (args[i].t != JV_INT && args[i].t != JV_BOOL)
            return jj_fail(st, UL_EFORMAT,
                           "TypeError: '%s' object cannot be interpreted as an integer",
                           jv_typename(args[i]));
        a[nargs == 1 ? 1 : i] = args[i].t == JV_INT ? args[i].u.i : args[i].u.b;
    }
    if (!a[2]) return jj_fail(st, UL_EFORMAT, "ValueError: range() arg 3 must not be zero");
    __int128 span = (__int128)a[1] - a[0], step = a[2];
    __int128 n = span / step + (span % step != 0); /* exact element count when positive */
    if (n > (__int128)st->max_range)
        return jj_fail(st, UL_E2BIG, "LimitError: range() longer than %zu", st->max_range);
    TRY(jv_newlist(st, n > 0 ? (size_t)n : 0, out));
    for (int64_t x = a[0]; a[2] > 0 ? x < a[1] : x > a[1];) {
        TRY(jl_push(st, out->u.l, jv_int(x)));
        if (__builtin_add_overflow(x, a[2], &x)) break; /* range(2**63 - 9, 2**63 - 1, 5) */
    }
    return 0;
}

static int do_dict(jstate *st, int ns, const jv *args, int nargs, const char **kwn, const jv *kwv,
                   int nkw, jv *out) {
    TRY(jv_newdict(st, (size_t)nkw, out));
    if (nargs > 0 && (args[0].t == JV_DICT || args[0].t == JV_NS))
        for (size_t i = 0; i < args[0].u.d->n; i++)
            TRY(jd_set(st, out->u.d, args[0].u.d->k[i], args[0].u.d->v[i]));
    for (int i = 0; i < nkw; i++) {
        jv k;
        TRY(jv_str(st, kwn[i], strlen(kwn[i]), NULL, &k));
        TRY(jd_set(st, out->u.d, k, kwv[i]));
    }
    if (ns) out->t = JV_NS;
    return 0;
}

static int do_strftime(jstate *st, const jv *args, int nargs, jv *out) {
    if (nargs < 1 || args[0].t != JV_STR)
        return jj_fail(st, UL_EFORMAT, "TypeError: strftime_now() needs a format string");
    time_t t = (time_t)st->now;
    struct tm tm;
    gmtime_r(&t, &tm);
    char buf[512];
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    /* the format is the template's (Python's strftime takes any string too) */
    size_t n = args[0].u.s->len ? strftime(buf, sizeof buf, jv_cstr(st, args[0]), &tm) : 0;
#pragma GCC diagnostic pop
    return jv_str(st, buf, n, NULL, out);
}

int jj_builtin(jstate *st, const char *name, const jv *args, int nargs, const char **kwn,
               const jv *kwv, int nkw, jv *out) {
    if (!strcmp(name, "range")) return do_range(st, args, nargs, out);
    if (!strcmp(name, "namespace") || !strcmp(name, "dict"))
        return do_dict(st, name[0] == 'n', args, nargs, kwn, kwv, nkw, out);
    if (!strcmp(name, "strftime_now")) return do_strftime(st, args, nargs, out);
    /* raise_exception */
    jv m = nargs > 0 ? args[0] : jv_undef(NULL);
    jsink s;
    jsink_init(&s);
    TRY(jj_str(st, &s, m));
    TRY(jsink_put(st, &s, "", 1, NULL));
    st->raised = 1;
    return jj_fail(st, UL_EFORMAT, "%s", s.p);
}
