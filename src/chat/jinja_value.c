/* Jinja values with Python semantics: constructors, lists and insertion-ordered dicts,
 * truthiness, equality and ordering, iteration and len(), scopes, and the string builder
 * that carries the plain mask. Everything is allocated from the render's arena, whose
 * size is bounded (max_memory): an exhausted budget is UL_E2BIG, not a crash. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "chat/jinja_impl.h"

void *jj_alloc(jstate *st, size_t n) {
    if (st->arena->used > st->max_mem || n > st->max_mem) return NULL;
    return ul_arena_alloc(st->arena, n ? n : 1);
}

static int oom(jstate *st) {
    if (st->arena->used > st->max_mem)
        return jj_fail(st, UL_E2BIG, "LimitError: template used more than %zu bytes of memory",
                       st->max_mem);
    return jj_fail(st, UL_ENOMEM, "MemoryError: out of memory");
}

void *jj_grow(jstate *st, const void *old, size_t n, size_t cap, size_t size) {
    void *p = jj_alloc(st, cap * size);
    if (p && n) memcpy(p, old, n * size);
    return p;
}

jfunc *jj_new_func(jstate *st, int kind, const char *name, jv self) {
    jfunc *fn = jj_alloc(st, sizeof *fn);
    if (!fn) {
        jj_fail(st, UL_E2BIG, "LimitError: out of memory");
        return NULL;
    }
    memset(fn, 0, sizeof *fn);
    fn->kind = kind;
    fn->name = name;
    fn->self = self;
    return fn;
}

jv jv_undef(const char *name) { return (jv){.t = JV_UNDEF, .u.undef_name = name}; }
jv jv_none(void) { return (jv){.t = JV_NONE}; }
jv jv_bool(int b) { return (jv){.t = JV_BOOL, .u.b = !!b}; }
jv jv_int(int64_t i) { return (jv){.t = JV_INT, .u.i = i}; }
jv jv_float(double f) { return (jv){.t = JV_FLOAT, .u.f = f}; }
jv jv_strs(const jstr *s) { return (jv){.t = JV_STR, .u.s = s}; }

int jv_str(jstate *st, const char *p, size_t n, const uint8_t *plain, jv *out) {
    if (n > st->max_out)
        return jj_fail(st, UL_E2BIG, "LimitError: a string longer than %zu bytes", st->max_out);
    jstr *s = jj_alloc(st, sizeof *s);
    char *b = jj_alloc(st, n + 1);
    if (!s || !b) return oom(st);
    memcpy(b, p, n);
    b[n] = 0;
    s->len = n;
    s->p = b;
    s->plain = NULL;
    s->grow = NULL;
    if (plain) {
        for (size_t i = 0; i < n; i++)
            if (plain[i]) {
                uint8_t *m = jj_alloc(st, n);
                if (!m) return oom(st);
                memcpy(m, plain, n);
                s->plain = m;
                break;
            }
    }
    *out = jv_strs(s);
    return 0;
}

const char *jv_cstr(jstate *st, jv s) {
    if (s.t != JV_STR) return "";
    if (!s.u.s->p[s.u.s->len]) return s.u.s->p;
    char *c = jj_alloc(st, s.u.s->len + 1);
    if (!c) return "";
    memcpy(c, s.u.s->p, s.u.s->len);
    c[s.u.s->len] = 0;
    return c;
}

static int new_grow(jstate *st, const jstr *a, size_t need, jgrow **out) {
    size_t cap = need < 32 ? 64 : need * 2;
    jgrow *g = jj_alloc(st, sizeof *g);
    char *p = jj_alloc(st, cap + 1);
    uint8_t *m = jj_alloc(st, cap);
    if (!g || !p || !m) return oom(st);
    memcpy(p, a->p, a->len);
    if (a->plain)
        memcpy(m, a->plain, a->len);
    else
        memset(m, 0, a->len);
    *g = (jgrow){a->len, cap, p, m, a->plain != NULL};
    *out = g;
    return 0;
}

int jv_concat(jstate *st, const jstr *a, const jstr *b, jv *out) {
    size_t n = a->len + b->len;
    if (n > st->max_out)
        return jj_fail(st, UL_E2BIG, "LimitError: a string longer than %zu bytes", st->max_out);
    jgrow *g = a->grow;
    if (!g || g->used != a->len || g->cap - g->used < b->len) TRY(new_grow(st, a, n, &g));
    memcpy(g->p + g->used, b->p, b->len);
    if (b->plain)
        memcpy(g->m + g->used, b->plain, b->len);
    else
        memset(g->m + g->used, 0, b->len);
    g->any_plain |= b->plain != NULL;
    g->used = n;
    g->p[n] = 0;
    jstr *s = jj_alloc(st, sizeof *s);
    if (!s) return oom(st);
    *s = (jstr){n, g->p, g->any_plain ? g->m : NULL, g};
    *out = jv_strs(s);
    return 0;
}

int jv_from_bytes_any_plain(jstate *st, const char *p, size_t n, int plain, jv *out) {
    TRY(jv_str(st, p, n, NULL, out));
    if (plain && n) {
        uint8_t *m = jj_alloc(st, n);
        if (!m) return oom(st);
        memset(m, 1, n);
        ((jstr *)out->u.s)->plain = m;
    }
    return 0;
}

int jj_as_generator(jstate *st, int rc, jv *out) {
    if (rc != UL_EFORMAT || !st->msg || !st->msg[0] || st->raised) {
        if (!rc) out->gen = JG_GENERATOR;
        return rc;
    }
    size_t n = strlen(st->msg);
    char *saved = jj_alloc(st, n + 1);
    if (!saved) return rc;
    memcpy(saved, st->msg, n + 1);
    st->msg[0] = 0;
    TRY(jv_newlist(st, 0, out));
    out->gen = JG_GENERATOR;
    out->u.l->deferred = saved;
    return 0;
}

int jv_newlist(jstate *st, size_t cap, jv *out) {
    jlist *l = jj_alloc(st, sizeof *l);
    if (!l) return oom(st);
    l->deferred = NULL;
    l->n = 0;
    l->cap = cap;
    l->v = cap ? jj_alloc(st, cap * sizeof(jv)) : NULL;
    if (cap && !l->v) return oom(st);
    *out = (jv){.t = JV_LIST, .u.l = l};
    return 0;
}

int jv_newdict(jstate *st, size_t cap, jv *out) {
    jdict *d = jj_alloc(st, sizeof *d);
    if (!d) return oom(st);
    memset(d, 0, sizeof *d);
    *out = (jv){.t = JV_DICT, .u.d = d};
    (void)cap;
    return 0;
}

int jl_push(jstate *st, jlist *l, jv v) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        jv *nv = jj_grow(st, l->v, l->n, cap, sizeof *nv);
        if (!nv) return oom(st);
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = v;
    return 0;
}

static int key_eq(jv a, jv b) { return jv_eq(a, b); }

jv *jd_get(const jdict *d, jv k) {
    for (size_t i = 0; i < d->n; i++)
        if (key_eq(d->k[i], k)) return &d->v[i];
    return NULL;
}

jv *jd_gets(const jdict *d, const char *key) {
    size_t n = strlen(key);
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].t == JV_STR && d->k[i].u.s->len == n && !memcmp(d->k[i].u.s->p, key, n))
            return &d->v[i];
    return NULL;
}

int jd_set(jstate *st, jdict *d, jv k, jv v) {
    jv *e = jd_get(d, k);
    if (e) {
        *e = v;
        return 0;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4;
        jv *nk = jj_grow(st, d->k, d->n, cap, sizeof *nk);
        jv *nv = jj_grow(st, d->v, d->n, cap, sizeof *nv);
        if (!nk || !nv) return oom(st);
        d->k = nk;
        d->v = nv;
        d->cap = cap;
    }
    d->k[d->n] = k;
    d->v[d->n++] = v;
    return 0;
}

int jv_is_str(jv v) { return v.t == JV_STR; }

int jv_truthy(jv v) {
    switch (v.t) {
    case JV_UNDEF:
    case JV_NONE:
        return 0;
    case JV_BOOL:
        return v.u.b;
    case JV_INT:
        return v.u.i != 0;
    case JV_FLOAT:
        return v.u.f != 0.0;
    case JV_STR:
        return v.u.s->len != 0;
    case JV_LIST:
        return v.gen == JG_GENERATOR || v.u.l->n != 0;
    case JV_DICT:
        return v.u.d->n != 0;
    default:
        return 1;
    }
}

static int is_num(jv v) { return v.t == JV_BOOL || v.t == JV_INT || v.t == JV_FLOAT; }
static double num(jv v) {
    return v.t == JV_FLOAT ? v.u.f : v.t == JV_INT ? (double)v.u.i : (double)v.u.b;
}
static int64_t inum(jv v) { return v.t == JV_INT ? v.u.i : v.u.b; }

static int eq_depth(jv a, jv b, int depth);

/* Values nested deeper than JJ_MAX_VDEPTH (only a hostile template builds them) compare
 * unequal instead of exhausting the stack. */
int jv_eq(jv a, jv b) { return eq_depth(a, b, 0); }

static int eq_depth(jv a, jv b, int depth) {
    if (depth > JJ_MAX_VDEPTH) return 0;
    if (is_num(a) && is_num(b)) {
        if (a.t != JV_FLOAT && b.t != JV_FLOAT) return inum(a) == inum(b);
        return num(a) == num(b);
    }
    if (a.t != b.t) return 0;
    switch (a.t) {
    case JV_UNDEF:
    case JV_NONE:
        return 1;
    case JV_STR:
        return a.u.s->len == b.u.s->len && !memcmp(a.u.s->p, b.u.s->p, a.u.s->len);
    case JV_LIST:
        if (a.gen || b.gen) return a.u.l == b.u.l;
        if (a.u.l->n != b.u.l->n || a.tuple != b.tuple) return 0;
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!eq_depth(a.u.l->v[i], b.u.l->v[i], depth + 1)) return 0;
        return 1;
    case JV_DICT:
        if (a.u.d->n != b.u.d->n) return 0;
        for (size_t i = 0; i < a.u.d->n; i++) {
            jv *o = jd_get(b.u.d, a.u.d->k[i]);
            if (!o || !eq_depth(a.u.d->v[i], *o, depth + 1)) return 0;
        }
        return 1;
    case JV_NS:
        return a.u.d == b.u.d;
    case JV_FUNC:
        return a.u.fn == b.u.fn;
    case JV_LOOP:
        return a.u.loop == b.u.loop;
    default:
        return 0;
    }
}

const char *jv_typename(jv v) {
    static const char *names[] = {"Undefined", "NoneType", "bool",       "int",
                                  "float",     "str",      "list",       "dict",
                                  "Namespace", "function", "LoopContext"};
    static const char *gens[] = {"list", "generator", "dict_items", "dict_keys", "dict_values"};
    if (v.t == JV_LIST && v.gen && v.gen <= JG_VALUES) return gens[v.gen];
    if (v.t == JV_LIST && v.tuple) return "tuple";
    return v.t <= JV_LOOP ? names[v.t] : "object";
}

static int cmp_depth(jstate *st, jv a, jv b, int *r, int depth);

int jv_cmp(jstate *st, jv a, jv b, int *r) { return cmp_depth(st, a, b, r, 0); }

static int cmp_depth(jstate *st, jv a, jv b, int *r, int depth) {
    if (depth > JJ_MAX_VDEPTH)
        return jj_fail(st, UL_E2BIG, "LimitError: values nested too deeply to compare");
    if (is_num(a) && is_num(b)) {
        if (a.t != JV_FLOAT && b.t != JV_FLOAT)
            *r = (inum(a) > inum(b)) - (inum(a) < inum(b));
        else
            *r = (num(a) > num(b)) - (num(a) < num(b));
        return 0;
    }
    if (a.t == JV_STR && b.t == JV_STR) {
        size_t n = a.u.s->len < b.u.s->len ? a.u.s->len : b.u.s->len;
        int c = memcmp(a.u.s->p, b.u.s->p, n);
        *r = c ? (c > 0 ? 1 : -1) : (a.u.s->len > b.u.s->len) - (a.u.s->len < b.u.s->len);
        return 0;
    }
    if (a.t == JV_LIST && b.t == JV_LIST && !a.gen && !b.gen && a.tuple == b.tuple) {
        size_t n = a.u.l->n < b.u.l->n ? a.u.l->n : b.u.l->n;
        for (size_t i = 0; i < n; i++) {
            if (jv_eq(a.u.l->v[i], b.u.l->v[i])) continue;
            return cmp_depth(st, a.u.l->v[i], b.u.l->v[i], r, depth + 1);
        }
        *r = (a.u.l->n > b.u.l->n) - (a.u.l->n < b.u.l->n);
        return 0;
    }
    if (a.t == JV_UNDEF || b.t == JV_UNDEF)
        return jj_fail(st, UL_EFORMAT, "UndefinedError: '%s' is undefined",
                       a.t == JV_UNDEF && a.u.undef_name ? a.u.undef_name
                       : b.u.undef_name                  ? b.u.undef_name
                                                         : "value");
    return jj_fail(st, UL_EFORMAT,
                   "TypeError: '<' not supported between instances of '%s' and '%s'",
                   jv_typename(a), jv_typename(b));
}

size_t utf8_count(const char *p, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)p[i] & 0xC0) != 0x80) c++;
    return c;
}

/* Byte offset of code point cp (n when cp is past the end). */
size_t utf8_offset(const char *p, size_t n, size_t cp) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)p[i] & 0xC0) != 0x80) {
            if (c == cp) return i;
            c++;
        }
    return n;
}

int jv_iter(jstate *st, jv v, jlist **out) {
    jv l;
    switch (v.t) {
    case JV_UNDEF:
    case JV_NONE:
        if (v.t == JV_NONE)
            return jj_fail(st, UL_EFORMAT, "TypeError: 'NoneType' object is not iterable");
        TRY(jv_newlist(st, 0, &l));
        break;
    case JV_LIST:
        if (v.u.l->deferred) return jj_fail(st, UL_EFORMAT, "%s", v.u.l->deferred);
        *out = v.u.l;
        return 0;
    case JV_DICT:
    case JV_NS:
        TRY(jv_newlist(st, v.u.d->n, &l));
        for (size_t i = 0; i < v.u.d->n; i++) l.u.l->v[l.u.l->n++] = v.u.d->k[i];
        break;
    case JV_STR: {
        const jstr *s = v.u.s;
        TRY(jv_newlist(st, 0, &l));
        for (size_t i = 0; i < s->len;) {
            size_t j = i + 1;
            while (j < s->len && ((unsigned char)s->p[j] & 0xC0) == 0x80) j++;
            jv c;
            TRY(jv_str(st, s->p + i, j - i, s->plain ? s->plain + i : NULL, &c));
            TRY(jl_push(st, l.u.l, c));
            i = j;
        }
        break;
    }
    default:
        return jj_fail(st, UL_EFORMAT, "TypeError: '%s' object is not iterable", jv_typename(v));
    }
    *out = l.u.l;
    return 0;
}

int jv_len(jstate *st, jv v, int64_t *n) {
    switch (v.t) {
    case JV_UNDEF:
        *n = 0;
        return 0;
    case JV_STR:
        *n = (int64_t)utf8_count(v.u.s->p, v.u.s->len);
        return 0;
    case JV_LIST:
        if (v.gen == JG_GENERATOR) break;
        *n = (int64_t)v.u.l->n;
        return 0;
    case JV_DICT:
    case JV_NS:
        *n = (int64_t)v.u.d->n;
        return 0;
    default:
        break;
    }
    return jj_fail(st, UL_EFORMAT, "TypeError: object of type '%s' has no len()", jv_typename(v));
}

int jf_new(jstate *st, jframe *parent, jframe **out) {
    jframe *f = jj_alloc(st, sizeof *f);
    if (!f) return oom(st);
    memset(f, 0, sizeof *f);
    f->parent = parent;
    *out = f;
    return 0;
}

jv *jf_lookup(jframe *f, const char *name) {
    for (; f; f = f->parent)
        for (size_t i = 0; i < f->n; i++)
            if (!strcmp(f->names[i], name)) return &f->vals[i];
    return NULL;
}

int jf_set(jstate *st, jframe *f, const char *name, jv v) {
    for (size_t i = 0; i < f->n; i++)
        if (!strcmp(f->names[i], name)) {
            f->vals[i] = v;
            return 0;
        }
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 8;
        const char **nn = jj_grow(st, f->names, f->n, cap, sizeof *nn);
        jv *nv = jj_grow(st, f->vals, f->n, cap, sizeof *nv);
        if (!nn || !nv) return oom(st);
        f->names = nn;
        f->vals = nv;
        f->cap = cap;
    }
    f->names[f->n] = name;
    f->vals[f->n++] = v;
    return 0;
}

void jsink_init(jsink *s) { memset(s, 0, sizeof *s); }

static int sink_grow(jstate *st, jsink *s, size_t n) {
    if (s->len + n > st->max_out)
        return jj_fail(st, UL_E2BIG, "LimitError: output longer than %zu bytes", st->max_out);
    if (s->len + n <= s->cap) return 0;
    size_t cap = s->cap ? s->cap * 2 : 256;
    while (cap < s->len + n) cap *= 2;
    char *p = jj_grow(st, s->p, s->len, cap, 1);
    uint8_t *m = jj_grow(st, s->m, s->len, cap, 1);
    if (!p || !m) return oom(st);
    s->p = p;
    s->m = m;
    s->cap = cap;
    return 0;
}

int jsink_put(jstate *st, jsink *s, const char *p, size_t n, const uint8_t *plain) {
    if (!n) return 0;
    TRY(sink_grow(st, s, n));
    memcpy(s->p + s->len, p, n);
    if (plain) {
        memcpy(s->m + s->len, plain, n);
        for (size_t i = 0; i < n && !s->any_plain; i++) s->any_plain = plain[i] != 0;
    } else {
        memset(s->m + s->len, 0, n);
    }
    s->len += n;
    return 0;
}

int jsink_put_plain(jstate *st, jsink *s, const char *p, size_t n, int plain) {
    if (!n) return 0;
    TRY(sink_grow(st, s, n));
    memcpy(s->p + s->len, p, n);
    memset(s->m + s->len, plain ? 1 : 0, n);
    if (plain) s->any_plain = 1;
    s->len += n;
    return 0;
}

int jsink_str(jstate *st, jsink *s, jv *out) {
    jstr *js = jj_alloc(st, sizeof *js);
    if (!js) return oom(st);
    TRY(sink_grow(st, s, 1));
    s->p[s->len] = 0;
    *js = (jstr){s->len, s->p, s->any_plain ? s->m : NULL, NULL};
    *out = jv_strs(js);
    return 0;
}
