/* Expression evaluation with Jinja2's sandboxed semantics: names resolve through the
 * scopes, then the context, then the built-in globals; attribute lookup tries methods then
 * items (items then methods for a subscript); a failed lookup gives Undefined, and using
 * an Undefined beyond printing, testing or iterating it raises UndefinedError. Operators
 * follow Python (true division, floor division and modulo signs, int overflow refused
 * instead of promoted to a big integer). Every node evaluated counts against max_steps. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "chat/jinja_impl.h"

int jj_step(jstate *st) {
    if (++st->steps > st->max_steps)
        return jj_fail(st, UL_E2BIG, "LimitError: template took more than %llu steps",
                       (unsigned long long)st->max_steps);
    return 0;
}

static int undef_err(jstate *st, jv v) {
    if (v.u.undef_name) return jj_fail(st, UL_EFORMAT, "UndefinedError: %s", v.u.undef_name);
    return jj_fail(st, UL_EFORMAT, "UndefinedError: value is undefined");
}

/* An Undefined for a missing attribute/key, with jinja2's hint text. */
static jv missing(jstate *st, jv obj, const char *what, int is_attr) {
    char buf[200];
    const char *tn = obj.t == JV_DICT ? "dict" : jv_typename(obj);
    if (is_attr)
        snprintf(buf, sizeof buf, "'%s object' has no attribute '%s'", tn, what);
    else
        snprintf(buf, sizeof buf, "'%s object' has no attribute '%s'", tn, what);
    char *s = jj_alloc(st, strlen(buf) + 1);
    if (s) strcpy(s, buf);
    return jv_undef(s);
}

static int loop_attr(jstate *st, jv obj, const char *name, jv *out) {
    jloop *l = obj.u.loop;
    int64_t n = (int64_t)l->items->n, i = (int64_t)l->i;
    if (!strcmp(name, "index"))
        *out = jv_int(i + 1);
    else if (!strcmp(name, "index0"))
        *out = jv_int(i);
    else if (!strcmp(name, "revindex"))
        *out = jv_int(n - i);
    else if (!strcmp(name, "revindex0"))
        *out = jv_int(n - i - 1);
    else if (!strcmp(name, "first"))
        *out = jv_bool(i == 0);
    else if (!strcmp(name, "last"))
        *out = jv_bool(i == n - 1);
    else if (!strcmp(name, "length"))
        *out = jv_int(n);
    else if (!strcmp(name, "depth"))
        *out = jv_int(1);
    else if (!strcmp(name, "depth0"))
        *out = jv_int(0);
    else if (!strcmp(name, "previtem"))
        *out = i > 0 ? l->items->v[i - 1] : jv_undef("there is no previous item");
    else if (!strcmp(name, "nextitem"))
        *out = i + 1 < n ? l->items->v[i + 1] : jv_undef("there is no next item");
    else if (!strcmp(name, "cycle")) {
        jfunc *fn = jj_new_func(st, JF_CYCLE, NULL, obj);
        if (!fn) return UL_E2BIG;
        *out = (jv){.t = JV_FUNC, .u.fn = fn};
    } else
        *out = missing(st, obj, name, 1);
    return 0;
}

static int bound_method(jstate *st, jv obj, const char *name, jv *out) {
    jfunc *fn = jj_new_func(st, JF_METHOD, name, obj);
    if (!fn) return UL_E2BIG;
    *out = (jv){.t = JV_FUNC, .u.fn = fn};
    return 0;
}

int jj_getattr(jstate *st, jv obj, const char *name, jv *out) {
    switch (obj.t) {
    case JV_UNDEF:
        return undef_err(st, obj);
    case JV_LOOP:
        return loop_attr(st, obj, name, out);
    case JV_NS: {
        jv *v = jd_gets(obj.u.d, name);
        *out = v ? *v : missing(st, obj, name, 1);
        return 0;
    }
    case JV_DICT: {
        if (jj_has_method(obj, name)) return bound_method(st, obj, name, out);
        jv *v = jd_gets(obj.u.d, name);
        *out = v ? *v : missing(st, obj, name, 1);
        return 0;
    }
    default:
        if (jj_has_method(obj, name)) return bound_method(st, obj, name, out);
        *out = missing(st, obj, name, 1);
        return 0;
    }
}

static int norm_index(int64_t i, int64_t n, int64_t *out) {
    if (i < 0) i += n;
    if (i < 0 || i >= n) return -1;
    *out = i;
    return 0;
}

int jj_getitem(jstate *st, jv obj, jv key, jv *out) {
    int64_t i;
    if (obj.t == JV_UNDEF) return undef_err(st, obj);
    if ((obj.t == JV_DICT || obj.t == JV_NS)) {
        jv *v = jd_get(obj.u.d, key);
        if (v) {
            *out = *v;
            return 0;
        }
    } else if (obj.t == JV_LIST && !obj.gen && (key.t == JV_INT || key.t == JV_BOOL)) {
        if (!norm_index(key.t == JV_INT ? key.u.i : key.u.b, (int64_t)obj.u.l->n, &i)) {
            *out = obj.u.l->v[i];
            return 0;
        }
    } else if (obj.t == JV_STR && key.t == JV_INT) {
        const jstr *s = obj.u.s;
        if (!norm_index(key.u.i, (int64_t)utf8_count(s->p, s->len), &i)) {
            size_t b = utf8_offset(s->p, s->len, (size_t)i);
            size_t e = utf8_offset(s->p, s->len, (size_t)i + 1);
            return jj_slice_str(st, s, b, e, out);
        }
    }
    if (key.t == JV_STR && obj.t != JV_DICT) return jj_getattr(st, obj, jv_cstr(st, key), out);
    if (key.t == JV_STR && jj_has_method(obj, jv_cstr(st, key)))
        return jj_getattr(st, obj, jv_cstr(st, key), out);
    *out = missing(st, obj, key.t == JV_STR ? jv_cstr(st, key) : "[]", 0);
    return 0;
}

/* Python slice indices (start, stop, step) over n elements into a list of positions. */
static int slice_positions(jstate *st, int64_t n, const jv *sv, int64_t **pos, int64_t *count) {
    int64_t step = sv[2].t == JV_INT ? sv[2].u.i : 1;
    if (step == 0) return jj_fail(st, UL_EFORMAT, "ValueError: slice step cannot be zero");
    int64_t lo = step > 0 ? 0 : -1, hi = step > 0 ? n : n - 1;
    int64_t b = step > 0 ? lo : hi, e = step > 0 ? hi : lo;
    for (int k = 0; k < 2; k++) {
        if (sv[k].t != JV_INT) continue;
        int64_t x = sv[k].u.i;
        if (x < 0) x += n;
        if (x < lo) x = lo;
        if (x > hi) x = hi;
        if (k == 0)
            b = x;
        else
            e = x;
    }
    int64_t c = 0;
    *pos = jj_alloc(st, (size_t)(n > 0 ? n : 1) * sizeof(int64_t));
    if (!*pos) return jj_fail(st, UL_E2BIG, "LimitError: out of memory");
    /* x + step may leave int64 ([1::9223372036854775807]): the slice ends there */
    for (int64_t x = b; (step > 0 ? x < e : x > e) && c < n;) {
        (*pos)[c++] = x;
        if (__builtin_add_overflow(x, step, &x)) break;
    }
    *count = c;
    return 0;
}

static int do_slice(jstate *st, jv obj, const jv *sv, jv *out) {
    int64_t n, *pos, c;
    if (obj.t == JV_UNDEF) return undef_err(st, obj);
    if (obj.t == JV_DICT || obj.t == JV_NS)
        return jj_fail(st, UL_EFORMAT, "TypeError: unhashable type: 'slice'");
    if ((obj.t != JV_LIST && obj.t != JV_STR) || obj.gen)
        return jj_fail(st, UL_EFORMAT, "TypeError: '%s' object is not subscriptable",
                       jv_typename(obj));
    TRY(jv_len(st, obj, &n));
    TRY(slice_positions(st, n, sv, &pos, &c));
    if (obj.t == JV_LIST) {
        TRY(jv_newlist(st, (size_t)c, out));
        out->tuple = obj.tuple;
        for (int64_t k = 0; k < c; k++) out->u.l->v[out->u.l->n++] = obj.u.l->v[pos[k]];
        return 0;
    }
    const jstr *s = obj.u.s;
    if (c > 0 && (sv[2].t != JV_INT || sv[2].u.i == 1)) /* contiguous: keep bytes and mask */
        return jj_slice_str(st, s, utf8_offset(s->p, s->len, (size_t)pos[0]),
                            utf8_offset(s->p, s->len, (size_t)pos[c - 1] + 1), out);
    jsink sk;
    jsink_init(&sk);
    for (int64_t k = 0; k < c; k++) {
        size_t b = utf8_offset(s->p, s->len, (size_t)pos[k]);
        size_t e = utf8_offset(s->p, s->len, (size_t)pos[k] + 1);
        TRY(jsink_put(st, &sk, s->p + b, e - b, s->plain ? s->plain + b : NULL));
    }
    return jsink_str(st, &sk, out);
}

static int type_err(jstate *st, const char *op, jv a, jv b) {
    if (a.t == JV_UNDEF) return undef_err(st, a);
    if (b.t == JV_UNDEF) return undef_err(st, b);
    return jj_fail(st, UL_EFORMAT, "TypeError: unsupported operand type(s) for %s: '%s' and '%s'",
                   op, jv_typename(a), jv_typename(b));
}

static int is_intlike(jv v) { return v.t == JV_INT || v.t == JV_BOOL; }
static int64_t ival(jv v) { return v.t == JV_INT ? v.u.i : v.u.b; }
static double fval(jv v) { return v.t == JV_FLOAT ? v.u.f : (double)ival(v); }

static int overflow(jstate *st) {
    return jj_fail(st, UL_EFORMAT, "OverflowError: integer result too large");
}

static int repeat(jstate *st, jv seq, int64_t times, jv *out) {
    if (times < 0) times = 0;
    if (seq.t == JV_STR) {
        if (seq.u.s->len && (uint64_t)times > st->max_out / seq.u.s->len)
            return jj_fail(st, UL_E2BIG, "LimitError: string repetition too large");
        jsink s;
        jsink_init(&s);
        for (int64_t i = 0; i < times; i++)
            TRY(jsink_put(st, &s, seq.u.s->p, seq.u.s->len, seq.u.s->plain));
        return jsink_str(st, &s, out);
    }
    if (seq.u.l->n && (uint64_t)times > st->max_range / seq.u.l->n)
        return jj_fail(st, UL_E2BIG, "LimitError: list repetition too large");
    TRY(jv_newlist(st, seq.u.l->n * (size_t)times, out));
    for (int64_t i = 0; i < times; i++)
        for (size_t k = 0; k < seq.u.l->n; k++) out->u.l->v[out->u.l->n++] = seq.u.l->v[k];
    return 0;
}

static int concat(jstate *st, jv a, jv b, jv *out) {
    if (a.t == JV_STR) return jv_concat(st, a.u.s, b.u.s, out);
    TRY(jv_newlist(st, a.u.l->n + b.u.l->n, out));
    for (size_t i = 0; i < a.u.l->n; i++) out->u.l->v[out->u.l->n++] = a.u.l->v[i];
    for (size_t i = 0; i < b.u.l->n; i++) out->u.l->v[out->u.l->n++] = b.u.l->v[i];
    out->tuple = a.tuple;
    return 0;
}

static int int_op(jstate *st, int op, int64_t x, int64_t y, jv *out) {
    int64_t r;
    switch (op) {
    case OP_ADD:
        if (__builtin_add_overflow(x, y, &r)) return overflow(st);
        break;
    case OP_SUB:
        if (__builtin_sub_overflow(x, y, &r)) return overflow(st);
        break;
    case OP_MUL:
        if (__builtin_mul_overflow(x, y, &r)) return overflow(st);
        break;
    case OP_FLOORDIV:
    case OP_MOD:
        if (!y)
            return jj_fail(st, UL_EFORMAT, "ZeroDivisionError: integer division or modulo by zero");
        if (x == INT64_MIN && y == -1) return overflow(st);
        r = op == OP_FLOORDIV ? x / y : x % y;
        if (op == OP_FLOORDIV && (x % y) && ((x < 0) != (y < 0))) r--;
        if (op == OP_MOD && r && ((r < 0) != (y < 0))) r += y;
        break;
    case OP_POW:
        if (y < 0) {
            *out = jv_float(pow((double)x, (double)y));
            return 0;
        }
        r = 1;
        for (int64_t k = 0; k < y; k++) {
            if (__builtin_mul_overflow(r, x, &r)) return overflow(st);
            if (r == 0 || r == 1) break;
            if (r == -1) {
                r = ((y - k - 1) % 2) ? -r : r;
                break;
            }
        }
        break;
    default:
        return jj_fail(st, UL_EFORMAT, "TypeError: bad operator");
    }
    *out = jv_int(r);
    return 0;
}

/* CPython's float_divmod: floor division and modulo that agree (1 // 0.1 == 9.0). */
static int float_divmod(int op, double x, double y, jv *out) {
    double mod = fmod(x, y), div = (x - mod) / y, fd;
    if (mod != 0) {
        if ((y < 0) != (mod < 0)) {
            mod += y;
            div -= 1.0;
        }
    } else {
        mod = copysign(0.0, y);
    }
    if (div != 0) {
        fd = floor(div);
        if (div - fd > 0.5) fd += 1.0;
    } else {
        fd = copysign(0.0, x / y);
    }
    *out = jv_float(op == OP_FLOORDIV ? fd : mod);
    return 0;
}

static int float_op(jstate *st, int op, double x, double y, jv *out) {
    double r;
    switch (op) {
    case OP_ADD:
        r = x + y;
        break;
    case OP_SUB:
        r = x - y;
        break;
    case OP_MUL:
        r = x * y;
        break;
    case OP_DIV:
    case OP_FLOORDIV:
    case OP_MOD:
        if (y == 0) return jj_fail(st, UL_EFORMAT, "ZeroDivisionError: float division by zero");
        if (op == OP_DIV) {
            r = x / y;
            break;
        }
        return float_divmod(op, x, y, out);
    case OP_POW:
        r = pow(x, y);
        break;
    default:
        return jj_fail(st, UL_EFORMAT, "TypeError: bad operator");
    }
    *out = jv_float(r);
    return 0;
}

int jj_binop(jstate *st, int op, jv a, jv b, jv *out) {
    static const char *names[] = {"", "+", "-", "*", "/", "//", "%", "**", "~"};
    if (op == OP_CONCAT) {
        jv x, y;
        TRY(jj_str_value(st, a, &x));
        TRY(jj_str_value(st, b, &y));
        return concat(st, x, y, out);
    }
    int na = a.t == JV_INT || a.t == JV_BOOL || a.t == JV_FLOAT;
    int nb = b.t == JV_INT || b.t == JV_BOOL || b.t == JV_FLOAT;
    if (na && nb) {
        if (is_intlike(a) && is_intlike(b) && op != OP_DIV)
            return int_op(st, op, ival(a), ival(b), out);
        return float_op(st, op, fval(a), fval(b), out);
    }
    if (op == OP_MOD && a.t == JV_STR) return jj_percent(st, a, b, out);
    if (op == OP_ADD && a.t == JV_STR && b.t == JV_STR && (a.markup || b.markup)) {
        /* Markup + str escapes the str (functionary's "..."|safe + x|tojson relies on it) */
        jv x = a, y = b;
        if (!x.markup) TRY(jj_escape(st, x, &x));
        if (!y.markup) TRY(jj_escape(st, y, &y));
        TRY(concat(st, x, y, out));
        out->markup = 1;
        return 0;
    }
    if (op == OP_ADD && a.t == b.t && (a.t == JV_STR || (a.t == JV_LIST && !a.gen && !b.gen)))
        return concat(st, a, b, out);
    if (op == OP_MUL && (a.t == JV_STR || (a.t == JV_LIST && !a.gen)) && is_intlike(b))
        return repeat(st, a, ival(b), out);
    if (op == OP_MUL && (b.t == JV_STR || (b.t == JV_LIST && !b.gen)) && is_intlike(a))
        return repeat(st, b, ival(a), out);
    if (op == OP_ADD && a.t == JV_STR && b.t != JV_UNDEF)
        return jj_fail(st, UL_EFORMAT, "TypeError: can only concatenate str (not \"%s\") to str",
                       jv_typename(b));
    return type_err(st, names[op], a, b);
}

static int contains(jstate *st, jv hay, jv needle, int *r) {
    if (hay.t == JV_STR) {
        if (needle.t != JV_STR)
            return jj_fail(st, UL_EFORMAT,
                           "TypeError: 'in <string>' requires string as left operand, not %s",
                           jv_typename(needle));
        *r = needle.u.s->len == 0 ||
             memmem(hay.u.s->p, hay.u.s->len, needle.u.s->p, needle.u.s->len) != NULL;
        return 0;
    }
    if (hay.t == JV_DICT || hay.t == JV_NS) {
        *r = jd_get(hay.u.d, needle) != NULL;
        return 0;
    }
    if (hay.t == JV_LIST) {
        *r = 0;
        for (size_t i = 0; i < hay.u.l->n && !*r; i++) *r = jv_eq(hay.u.l->v[i], needle);
        return 0;
    }
    if (hay.t == JV_UNDEF) {
        *r = 0;
        return 0;
    }
    return jj_fail(st, UL_EFORMAT, "TypeError: argument of type '%s' is not iterable",
                   jv_typename(hay));
}

static int compare(jstate *st, int op, jv a, jv b, int *r) {
    int c;
    switch (op) {
    case OP_EQ:
        *r = jv_eq(a, b);
        return 0;
    case OP_NE:
        *r = !jv_eq(a, b);
        return 0;
    case OP_IN:
        return contains(st, b, a, r);
    case OP_NOTIN:
        TRY(contains(st, b, a, r));
        *r = !*r;
        return 0;
    default:
        break;
    }
    TRY(jv_cmp(st, a, b, &c));
    *r = op == OP_LT ? c < 0 : op == OP_LE ? c <= 0 : op == OP_GT ? c > 0 : c >= 0;
    return 0;
}

static int eval_cmp(jstate *st, jframe *f, const jnode *n, jv *out) {
    jv a, b;
    TRY(jj_eval(st, f, n->a, &a));
    for (int i = 0; i < n->nkids; i++) {
        int r;
        TRY(jj_eval(st, f, n->kids[i], &b));
        TRY(compare(st, n->ops[i], a, b, &r));
        if (!r) {
            *out = jv_bool(0);
            return 0;
        }
        a = b;
    }
    *out = jv_bool(1);
    return 0;
}

/* Arguments of a call/filter/test node: positional into args, keyword into kwv. */
typedef struct jargs {
    jv pos[16], kw[16];
    jv *args, *kwv;
    int n, nkw;
} jargs;

static int eval_args(jstate *st, jframe *f, const jnode *n, jargs *a) {
    a->args = n->nkids <= 16 ? a->pos : jj_alloc(st, (size_t)n->nkids * sizeof(jv));
    a->kwv = n->nkids2 <= 16 ? a->kw : jj_alloc(st, (size_t)n->nkids2 * sizeof(jv));
    if (!a->args || !a->kwv) return jj_fail(st, UL_E2BIG, "LimitError: out of memory");
    a->n = n->nkids;
    a->nkw = n->nkids2;
    for (int i = 0; i < n->nkids; i++) TRY(jj_eval(st, f, n->kids[i], &a->args[i]));
    for (int i = 0; i < n->nkids2; i++) TRY(jj_eval(st, f, n->kids2[i], &a->kwv[i]));
    return 0;
}

int jj_call(jstate *st, jframe *f, jv fn, const jv *args, int nargs, const char **kwn,
            const jv *kwv, int nkw, jv *out) {
    if (fn.t == JV_UNDEF) return undef_err(st, fn);
    if (fn.t != JV_FUNC)
        return jj_fail(st, UL_EFORMAT, "TypeError: '%s' object is not callable", jv_typename(fn));
    jfunc *fu = fn.u.fn;
    switch (fu->kind) {
    case JF_BUILTIN:
        return jj_builtin(st, fu->name, args, nargs, kwn, kwv, nkw, out);
    case JF_METHOD:
        return jj_method(st, fu->self, fu->name, args, nargs, kwn, kwv, nkw, out);
    case JF_CYCLE:
        if (!nargs) return jj_fail(st, UL_EFORMAT, "TypeError: no items for cycling given");
        *out = args[fu->self.u.loop->i % (size_t)nargs];
        return 0;
    default:
        return jj_call_macro(st, fu, args, nargs, kwn, kwv, nkw, out);
    }
}

static int eval_call(jstate *st, jframe *f, const jnode *n, jv *out) {
    jv fn;
    jargs a;
    TRY(jj_eval(st, f, n->a, &fn));
    TRY(eval_args(st, f, n, &a));
    return jj_call(st, f, fn, a.args, a.n, n->names, a.kwv, a.nkw, out);
}

static int eval_filter(jstate *st, jframe *f, const jnode *n, jv *out) {
    jv v;
    jargs a;
    TRY(jj_eval(st, f, n->a, &v));
    TRY(eval_args(st, f, n, &a));
    return jj_filter(st, f, n->name, v, a.args, a.n, n->names, a.kwv, a.nkw, out);
}

static int eval_test(jstate *st, jframe *f, const jnode *n, jv *out) {
    jv v;
    jargs a;
    int r;
    TRY(jj_eval(st, f, n->a, &v));
    TRY(eval_args(st, f, n, &a));
    TRY(jj_test(st, f, n->name, v, a.args, a.n, &r));
    *out = jv_bool(n->op ? !r : r);
    return 0;
}

static int eval_name(jstate *st, jframe *f, const jnode *n, jv *out) {
    jv *v = jf_lookup(f, n->name);
    if (!v && st->globals) v = jd_gets(st->globals, n->name);
    if (v) {
        *out = *v;
        return 0;
    }
    if (jj_is_builtin(n->name)) {
        jfunc *fn = jj_new_func(st, JF_BUILTIN, n->name, (jv){0});
        if (!fn) return UL_E2BIG;
        *out = (jv){.t = JV_FUNC, .u.fn = fn};
        return 0;
    }
    char buf[160];
    snprintf(buf, sizeof buf, "'%s' is undefined", n->name);
    char *s = jj_alloc(st, strlen(buf) + 1);
    if (s) strcpy(s, buf);
    *out = jv_undef(s);
    return 0;
}

static int eval_seq(jstate *st, jframe *f, const jnode *n, jv *out) {
    if (n->kind == N_DICT) {
        TRY(jv_newdict(st, (size_t)n->nkids, out));
        for (int i = 0; i < n->nkids; i++) {
            jv k, v;
            TRY(jj_eval(st, f, n->kids[i], &k));
            TRY(jj_eval(st, f, n->kids2[i], &v));
            TRY(jd_set(st, out->u.d, k, v));
        }
        return 0;
    }
    TRY(jv_newlist(st, (size_t)n->nkids, out));
    out->tuple = n->kind == N_TUPLE;
    for (int i = 0; i < n->nkids; i++) TRY(jj_eval(st, f, n->kids[i], &out->u.l->v[i]));
    out->u.l->n = (size_t)n->nkids;
    return 0;
}

static int eval_neg(jstate *st, jframe *f, const jnode *n, jv *out) {
    jv v;
    TRY(jj_eval(st, f, n->a, &v));
    if (n->op == '+' && (v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL)) {
        *out = v.t == JV_BOOL ? jv_int(v.u.b) : v;
        return 0;
    }
    if (v.t == JV_FLOAT)
        *out = jv_float(-v.u.f);
    else if (v.t == JV_INT || v.t == JV_BOOL) {
        int64_t x = v.t == JV_INT ? v.u.i : v.u.b;
        if (x == INT64_MIN) return overflow(st);
        *out = jv_int(-x);
    } else if (v.t == JV_UNDEF)
        return undef_err(st, v);
    else
        return jj_fail(st, UL_EFORMAT, "TypeError: bad operand type for unary -: '%s'",
                       jv_typename(v));
    return 0;
}

static int eval_node(jstate *st, jframe *f, const jnode *n, jv *out);

int jj_eval(jstate *st, jframe *f, const jnode *n, jv *out) {
    TRY(jj_step(st));
    if (++st->rdepth > JJ_MAX_RDEPTH)
        return jj_fail(st, UL_E2BIG, "LimitError: evaluation nested deeper than %d", JJ_MAX_RDEPTH);
    int rc = eval_node(st, f, n, out);
    st->rdepth--;
    return rc;
}

static int eval_node(jstate *st, jframe *f, const jnode *n, jv *out) {
    jv a, b;
    switch (n->kind) {
    case N_LIT:
        *out = n->lit;
        return 0;
    case N_NAME:
        return eval_name(st, f, n, out);
    case N_ATTR:
        TRY(jj_eval(st, f, n->a, &a));
        return jj_getattr(st, a, n->name, out);
    case N_ITEM:
        TRY(jj_eval(st, f, n->a, &a));
        TRY(jj_eval(st, f, n->b, &b));
        return jj_getitem(st, a, b, out);
    case N_SLICE: {
        jv sv[3];
        TRY(jj_eval(st, f, n->a, &a));
        for (int i = 0; i < 3; i++) {
            sv[i] = jv_none();
            if (n->kids[i]) TRY(jj_eval(st, f, n->kids[i], &sv[i]));
        }
        return do_slice(st, a, sv, out);
    }
    case N_CALL:
        return eval_call(st, f, n, out);
    case N_FILTER:
        return eval_filter(st, f, n, out);
    case N_TEST:
        return eval_test(st, f, n, out);
    case N_BIN:
        TRY(jj_eval(st, f, n->a, &a));
        TRY(jj_eval(st, f, n->b, &b));
        return jj_binop(st, n->op, a, b, out);
    case N_NEG:
        return eval_neg(st, f, n, out);
    case N_AND:
        TRY(jj_eval(st, f, n->a, &a));
        return jv_truthy(a) ? jj_eval(st, f, n->b, out) : (*out = a, 0);
    case N_OR:
        TRY(jj_eval(st, f, n->a, &a));
        return jv_truthy(a) ? (*out = a, 0) : jj_eval(st, f, n->b, out);
    case N_NOT:
        TRY(jj_eval(st, f, n->a, &a));
        *out = jv_bool(!jv_truthy(a));
        return 0;
    case N_COND:
        TRY(jj_eval(st, f, n->a, &a));
        if (jv_truthy(a)) return jj_eval(st, f, n->b, out);
        if (n->c) return jj_eval(st, f, n->c, out);
        *out = jv_undef(
            "the inline if-expression evaluated to false and no else section was defined.");
        return 0;
    case N_LIST:
    case N_TUPLE:
    case N_DICT:
        return eval_seq(st, f, n, out);
    case N_CMP:
        return eval_cmp(st, f, n, out);
    default:
        return jj_fail(st, UL_EFORMAT, "TemplateError: bad expression node");
    }
}
