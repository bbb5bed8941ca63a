/* Sequence filters of jinja2/filters.py: select/reject, selectattr/rejectattr, map, sort,
 * unique, dictsort, sum, min, max, batch, slice. Attribute paths ("a.b", "0") are looked
 * up item-first like Jinja2's make_attrgetter. Sorting is a stable merge sort whose
 * comparisons count as steps, and case-insensitive comparison lowercases ASCII letters. */
#include <stdlib.h>
#include <string.h>

#include "chat/jinja_filters.h"

static int attr_path(jstate *st, jv item, jv attr, jv *out) {
    if (attr.t == JV_INT) return jj_getitem(st, item, attr, out);
    if (attr.t != JV_STR) return jj_fail(st, UL_EFORMAT, "TypeError: attribute must be a string");
    const char *p = attr.u.s->p, *end = p + attr.u.s->len;
    *out = item;
    while (p <= end) {
        const char *dot = memchr(p, '.', (size_t)(end - p));
        size_t n = dot ? (size_t)(dot - p) : (size_t)(end - p);
        jv key;
        int digits = n > 0;
        for (size_t i = 0; i < n; i++) digits &= p[i] >= '0' && p[i] <= '9';
        if (digits)
            key = jv_int(strtoll(p, NULL, 10));
        else
            TRY(jv_str(st, p, n, NULL, &key));
        TRY(jj_getitem(st, *out, key, out));
        if (!dot) break;
        p = dot + 1;
    }
    return 0;
}

static int ci_cmp(jstate *st, jv a, jv b, int ci, int *r) {
    TRY(jj_step(st));
    if (ci && a.t == JV_STR && b.t == JV_STR) {
        size_t n = a.u.s->len < b.u.s->len ? a.u.s->len : b.u.s->len;
        for (size_t i = 0; i < n; i++) {
            unsigned char x = (unsigned char)a.u.s->p[i], y = (unsigned char)b.u.s->p[i];
            if (x >= 'A' && x <= 'Z') x = (unsigned char)(x + 32);
            if (y >= 'A' && y <= 'Z') y = (unsigned char)(y + 32);
            if (x != y) {
                *r = x < y ? -1 : 1;
                return 0;
            }
        }
        *r = (a.u.s->len > b.u.s->len) - (a.u.s->len < b.u.s->len);
        return 0;
    }
    return jv_cmp(st, a, b, r);
}

/* Stable merge sort of v[0..n) by keys k (parallel arrays). */
static int msort(jstate *st, jv *v, jv *k, size_t n, int ci, int rev, jv *tv, jv *tk) {
    if (n < 2) return 0;
    size_t h = n / 2;
    TRY(msort(st, v, k, h, ci, rev, tv, tk));
    TRY(msort(st, v + h, k + h, n - h, ci, rev, tv, tk));
    size_t i = 0, j = h, o = 0;
    while (i < h && j < n) {
        int r;
        TRY(ci_cmp(st, k[j], k[i], ci, &r));
        int take_right = rev ? r > 0 : r < 0;
        size_t s = take_right ? j++ : i++;
        tv[o] = v[s];
        tk[o++] = k[s];
    }
    while (i < h) {
        tv[o] = v[i];
        tk[o++] = k[i++];
    }
    while (j < n) {
        tv[o] = v[j];
        tk[o++] = k[j++];
    }
    memcpy(v, tv, n * sizeof *v);
    memcpy(k, tk, n * sizeof *k);
    return 0;
}

static int sort_list(jstate *st, jlist *items, jlist *keys, int ci, int rev, jv *out) {
    size_t n = items->n;
    jv *tv = jj_alloc(st, (n + 1) * sizeof *tv), *tk = jj_alloc(st, (n + 1) * sizeof *tk);
    jv *k = jj_alloc(st, (n + 1) * sizeof *k);
    if (!tv || !tk || !k) return jj_fail(st, UL_E2BIG, "LimitError: out of memory");
    TRY(jv_newlist(st, n, out));
    memcpy(out->u.l->v, items->v, n * sizeof(jv));
    out->u.l->n = n;
    memcpy(k, keys->v, n * sizeof(jv));
    return msort(st, out->u.l->v, k, n, ci, rev, tv, tk);
}

/* The items of v and their keys: with attribute= (argument attr_pos) each item's attribute,
 * else the items themselves. */
static int items_keyed(jstate *st, jv v, const jfargs *a, int attr_pos, jlist **l, jlist **keys) {
    jv attr;
    int has_attr = jj_arg(a, attr_pos, "attribute", &attr);
    TRY(jv_iter(st, v, l));
    if (!has_attr) {
        *keys = *l;
        return 0;
    }
    jv k;
    TRY(jv_newlist(st, (*l)->n, &k));
    for (size_t i = 0; i < (*l)->n; i++) TRY(attr_path(st, (*l)->v[i], attr, &k.u.l->v[i]));
    k.u.l->n = (*l)->n;
    *keys = k.u.l;
    return 0;
}

static int f_sort(jstate *st, jv v, const jfargs *a, jv *out) {
    jv rev = jv_bool(0), cs = jv_bool(0);
    jlist *l, *keys;
    jj_arg(a, 0, "reverse", &rev);
    jj_arg(a, 1, "case_sensitive", &cs);
    TRY(items_keyed(st, v, a, 2, &l, &keys));
    return sort_list(st, l, keys, !jv_truthy(cs), jv_truthy(rev), out);
}

static int f_dictsort(jstate *st, jv v, const jfargs *a, jv *out) {
    jv cs = jv_bool(0), by = jv_none(), rev = jv_bool(0), items, keys;
    jj_arg(a, 0, "case_sensitive", &cs);
    jj_arg(a, 1, "by", &by);
    jj_arg(a, 2, "reverse", &rev);
    if (v.t != JV_DICT && v.t != JV_NS)
        return jj_fail(st, UL_EFORMAT, "TypeError: dictsort needs a mapping, not %s",
                       jv_typename(v));
    int pos = by.t == JV_STR && !strcmp(jv_cstr(st, by), "value");
    jv self = v;
    self.t = JV_DICT;
    TRY(jj_method(st, self, "items", NULL, 0, NULL, NULL, 0, &items));
    TRY(jv_newlist(st, items.u.l->n, &keys));
    for (size_t i = 0; i < items.u.l->n; i++)
        keys.u.l->v[keys.u.l->n++] = items.u.l->v[i].u.l->v[pos];
    return sort_list(st, items.u.l, keys.u.l, !jv_truthy(cs), jv_truthy(rev), out);
}

/* select/reject/selectattr/rejectattr */
static int f_select(jstate *st, const char *name, jv v, const jfargs *a, jv *out) {
    int by_attr = strstr(name, "attr") != NULL, reject = name[0] == 'r';
    int first_test = by_attr ? 1 : 0;
    jlist *l;
    TRY(jv_newlist(st, 0, out));
    if (!jv_truthy(v)) return 0; /* Jinja2 checks `if value:` before iterating */
    TRY(jv_iter(st, v, &l));
    if (by_attr && a->n < 1) return jj_fail(st, UL_EFORMAT, "TypeError: missing attribute");
    for (size_t i = 0; i < l->n; i++) {
        jv item = l->v[i], x = item;
        int r;
        if (by_attr) TRY(attr_path(st, item, a->args[0], &x));
        if (a->n > first_test) {
            if (a->args[first_test].t != JV_STR)
                return jj_fail(st, UL_EFORMAT, "TypeError: test name must be a string");
            TRY(jj_test(st, a->f, jv_cstr(st, a->args[first_test]), x, a->args + first_test + 1,
                        a->n - first_test - 1, &r));
        } else {
            r = jv_truthy(x);
        }
        if (r != reject) TRY(jl_push(st, out->u.l, item));
    }
    return 0;
}

static int f_map(jstate *st, jv v, const jfargs *a, jv *out) {
    jlist *l;
    jv attr, def;
    if (!jv_truthy(v)) return jv_newlist(st, 0, out); /* `if value:` as in Jinja2 */
    TRY(jv_iter(st, v, &l));
    TRY(jv_newlist(st, l->n, out));
    int by_attr = 0;
    for (int i = 0; i < a->nkw; i++)
        if (!strcmp(a->kwn[i], "attribute")) by_attr = 1;
    if (by_attr) {
        jj_arg(a, -1, "attribute", &attr);
        int has_def = jj_arg(a, -1, "default", &def);
        for (size_t i = 0; i < l->n; i++) {
            jv x;
            TRY(attr_path(st, l->v[i], attr, &x));
            if (has_def && x.t == JV_UNDEF) x = def;
            out->u.l->v[out->u.l->n++] = x;
        }
        return 0;
    }
    if (a->n < 1 || a->args[0].t != JV_STR)
        return jj_fail(st, UL_EFORMAT, "TypeError: map needs a filter name or attribute=");
    for (size_t i = 0; i < l->n; i++)
        TRY(jj_filter(st, a->f, jv_cstr(st, a->args[0]), l->v[i], a->args + 1, a->n - 1, a->kwn,
                      a->kwv, a->nkw, &out->u.l->v[out->u.l->n++]));
    return 0;
}

/* unique, min and max: the items of v, their keys (attribute=) and whether case is ignored
 * (case_sensitive=, False by default). */
static int items_cased(jstate *st, jv v, const jfargs *a, jlist **l, jlist **keys, int *ci) {
    jv cs = jv_bool(0);
    jj_arg(a, 0, "case_sensitive", &cs);
    *ci = !jv_truthy(cs);
    return items_keyed(st, v, a, 1, l, keys);
}

static int f_unique(jstate *st, jv v, const jfargs *a, jv *out) {
    jlist *l, *keys;
    int ci;
    TRY(items_cased(st, v, a, &l, &keys, &ci));
    TRY(jv_newlist(st, 0, out));
    for (size_t i = 0; i < l->n; i++) {
        int dup = 0;
        for (size_t j = 0; j < i && !dup; j++) {
            int r = 1;
            if (jv_eq(keys->v[i], keys->v[j]))
                r = 0;
            else if (ci && keys->v[i].t == JV_STR && keys->v[j].t == JV_STR)
                TRY(ci_cmp(st, keys->v[i], keys->v[j], 1, &r));
            TRY(jj_step(st));
            dup = r == 0;
        }
        if (!dup) TRY(jl_push(st, out->u.l, l->v[i]));
    }
    return 0;
}

static int f_minmax(jstate *st, jv v, const jfargs *a, int want_max, jv *out) {
    jlist *l, *keys;
    int ci;
    TRY(items_cased(st, v, a, &l, &keys, &ci));
    if (!l->n) {
        *out = jv_undef("No aggregated item, sequence was empty.");
        return 0;
    }
    size_t best = 0;
    for (size_t i = 1; i < l->n; i++) {
        int r;
        TRY(ci_cmp(st, keys->v[i], keys->v[best], ci, &r));
        if (want_max ? r > 0 : r < 0) best = i;
    }
    *out = l->v[best];
    return 0;
}

static int f_sum(jstate *st, jv v, const jfargs *a, jv *out) {
    jv start = jv_int(0);
    jlist *l, *keys;
    jj_arg(a, 1, "start", &start);
    TRY(items_keyed(st, v, a, 0, &l, &keys));
    *out = start;
    for (size_t i = 0; i < keys->n; i++) TRY(jj_binop(st, OP_ADD, *out, keys->v[i], out));
    return 0;
}

/* batch(linecount, fill_with) and slice(slices, fill_with) */
static int f_batch(jstate *st, jv v, const jfargs *a, int is_slice, jv *out) {
    jv cnt, fill;
    jlist *l;
    int has_fill = jj_arg(a, 1, "fill_with", &fill);
    if (!jj_arg(a, 0, is_slice ? "slices" : "linecount", &cnt) || cnt.t != JV_INT || cnt.u.i < 1)
        return jj_fail(st, UL_EFORMAT, "TypeError: %s needs a positive count",
                       is_slice ? "slice" : "batch");
    if (cnt.u.i > (int64_t)st->max_range)
        return jj_fail(st, UL_E2BIG, "LimitError: count too large");
    TRY(jv_iter(st, v, &l));
    TRY(jv_newlist(st, 0, out));
    size_t n = l->n, c = (size_t)cnt.u.i;
    if (!is_slice) {
        for (size_t i = 0; i < n; i += c) {
            jv row;
            TRY(jv_newlist(st, c, &row));
            for (size_t j = i; j < i + c && j < n; j++) row.u.l->v[row.u.l->n++] = l->v[j];
            while (has_fill && row.u.l->n < c) row.u.l->v[row.u.l->n++] = fill;
            TRY(jl_push(st, out->u.l, row));
        }
        return 0;
    }
    size_t per = n / c, extra = n % c, off = 0;
    for (size_t s = 0; s < c; s++) {
        size_t start = off, end = off + per + (s < extra);
        jv row;
        TRY(jv_newlist(st, per + 2, &row));
        for (size_t j = start; j < end; j++) row.u.l->v[row.u.l->n++] = l->v[j];
        if (has_fill && s >= extra && extra) row.u.l->v[row.u.l->n++] = fill;
        off = end;
        TRY(jl_push(st, out->u.l, row));
    }
    return 0;
}

/* The filters that return a generator in Jinja2. */
#define as_gen(call, out) jj_as_generator(st, (call), (out))

int jj_filter_seq(jstate *st, const char *name, jv v, const jfargs *a, jv *out) {
    if (!strcmp(name, "select") || !strcmp(name, "reject") || !strcmp(name, "selectattr") ||
        !strcmp(name, "rejectattr"))
        return as_gen(f_select(st, name, v, a, out), out);
    if (!strcmp(name, "map")) return as_gen(f_map(st, v, a, out), out);
    if (!strcmp(name, "sort")) return f_sort(st, v, a, out);
    if (!strcmp(name, "dictsort")) return f_dictsort(st, v, a, out);
    if (!strcmp(name, "unique")) return as_gen(f_unique(st, v, a, out), out);
    if (!strcmp(name, "min") || !strcmp(name, "max"))
        return f_minmax(st, v, a, name[1] == 'a', out);
    if (!strcmp(name, "sum")) return f_sum(st, v, a, out);
    if (!strcmp(name, "batch") || !strcmp(name, "slice"))
        return as_gen(f_batch(st, v, a, name[0] == 's', out), out);
    return jj_fail(st, UL_EFORMAT, "TemplateRuntimeError: No filter named '%s' found.", name);
}
