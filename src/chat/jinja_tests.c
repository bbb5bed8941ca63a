/* Jinja2 tests (`x is defined`, `is string`, `is mapping`, `is divisibleby(3)`, ...) with
 * the isinstance checks of jinja2/tests.py: bool counts as a number but not as an integer,
 * Undefined is iterable (and empty), a dict is a sequence. */
#include <string.h>

#include "chat/jinja_filters.h"

static int is_num(jv v) { return v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL; }

static int cmp_test(jstate *st, const char *name, jv v, const jv *args, int nargs, int *out) {
    static const struct {
        const char *name;
        int op;
    } ops[] = {{"eq", OP_EQ}, {"equalto", OP_EQ},     {"==", OP_EQ},       {"ne", OP_NE},
               {"!=", OP_NE}, {"lt", OP_LT},          {"lessthan", OP_LT}, {"<", OP_LT},
               {"gt", OP_GT}, {"greaterthan", OP_GT}, {">", OP_GT},        {"le", OP_LE},
               {"<=", OP_LE}, {"ge", OP_GE},          {">=", OP_GE},       {"in", OP_IN}};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        if (strcmp(ops[i].name, name)) continue;
        if (nargs < 1)
            return jj_fail(st, UL_EFORMAT, "TypeError: test '%s' needs an argument", name);
        jv a = v, b = args[0];
        int r;
        if (ops[i].op == OP_EQ || ops[i].op == OP_NE) {
            r = jv_eq(a, b);
            *out = ops[i].op == OP_EQ ? r : !r;
            return 0;
        }
        if (ops[i].op == OP_IN) {
            jv res;
            jv hay = b;
            if (hay.t == JV_STR && a.t == JV_STR) {
                *out =
                    memmem(hay.u.s->p, hay.u.s->len, a.u.s->p, a.u.s->len) != NULL || !a.u.s->len;
                return 0;
            }
            TRY(jv_newlist(st, 0, &res));
            jlist *l;
            TRY(jv_iter(st, hay, &l));
            *out = 0;
            for (size_t k = 0; k < l->n && !*out; k++) *out = jv_eq(l->v[k], a);
            return 0;
        }
        TRY(jv_cmp(st, a, b, &r));
        *out = ops[i].op == OP_LT   ? r < 0
               : ops[i].op == OP_LE ? r <= 0
               : ops[i].op == OP_GT ? r > 0
                                    : r >= 0;
        return 0;
    }
    return 1;
}

static int case_test(jv v, int upper) {
    if (v.t != JV_STR) return 0;
    int cased = 0;
    for (size_t i = 0; i < v.u.s->len; i++) {
        char c = v.u.s->p[i];
        if (upper ? (c >= 'a' && c <= 'z') : (c >= 'A' && c <= 'Z')) return 0;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) cased = 1;
    }
    return cased;
}

static int int_test(jstate *st, const char *name, jv v, const jv *args, int nargs, int *out) {
    /* Python: value % 2 == 1, value % 2 == 0, value % num == 0 (floats too) */
    jv div = jv_int(2), r;
    if (!strcmp(name, "divisibleby")) {
        if (nargs < 1) return jj_fail(st, UL_EFORMAT, "TypeError: divisibleby needs an argument");
        div = args[0];
    }
    TRY(jj_binop(st, OP_MOD, v, div, &r));
    *out = jv_eq(r, jv_int(!strcmp(name, "odd") ? 1 : 0));
    return 0;
}

int jj_test(jstate *st, jframe *f, const char *name, jv v, const jv *args, int nargs, int *out) {
    (void)f;
    TRY(jj_step(st));
    int r = cmp_test(st, name, v, args, nargs, out);
    if (r <= 0) return r;
    if (!strcmp(name, "defined"))
        *out = v.t != JV_UNDEF;
    else if (!strcmp(name, "undefined"))
        *out = v.t == JV_UNDEF;
    else if (!strcmp(name, "none"))
        *out = v.t == JV_NONE;
    else if (!strcmp(name, "string"))
        *out = v.t == JV_STR;
    else if (!strcmp(name, "number"))
        *out = is_num(v);
    else if (!strcmp(name, "integer"))
        *out = v.t == JV_INT;
    else if (!strcmp(name, "float"))
        *out = v.t == JV_FLOAT;
    else if (!strcmp(name, "boolean"))
        *out = v.t == JV_BOOL;
    else if (!strcmp(name, "true"))
        *out = v.t == JV_BOOL && v.u.b;
    else if (!strcmp(name, "false"))
        *out = v.t == JV_BOOL && !v.u.b;
    else if (!strcmp(name, "mapping"))
        *out = v.t == JV_DICT;
    else if (!strcmp(name, "iterable"))
        *out = v.t == JV_STR || v.t == JV_LIST || v.t == JV_DICT || v.t == JV_UNDEF;
    else if (!strcmp(name, "sequence"))
        *out = v.t == JV_STR || (v.t == JV_LIST && !v.gen) || v.t == JV_DICT || v.t == JV_UNDEF;
    else if (!strcmp(name, "callable"))
        *out = v.t == JV_FUNC || v.t == JV_UNDEF; /* Undefined has __call__ */
    else if (!strcmp(name, "sameas")) {
        if (nargs < 1) return jj_fail(st, UL_EFORMAT, "TypeError: sameas needs an argument");
        jv b = args[0];
        *out = v.t == b.t &&
               (v.t == JV_NONE || v.t == JV_UNDEF || (v.t == JV_BOOL && v.u.b == b.u.b) ||
                (v.t == JV_INT && v.u.i == b.u.i && v.u.i >= -5 && v.u.i <= 256) ||
                (v.t == JV_STR && v.u.s == b.u.s) || (v.t == JV_LIST && v.u.l == b.u.l) ||
                ((v.t == JV_DICT || v.t == JV_NS) && v.u.d == b.u.d) ||
                (v.t == JV_FUNC && v.u.fn == b.u.fn));
    } else if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
        jv s; /* str(value).islower() */
        TRY(jj_str_value(st, v, &s));
        *out = case_test(s, name[0] == 'u');
    } else if (!strcmp(name, "odd") || !strcmp(name, "even") || !strcmp(name, "divisibleby"))
        return int_test(st, name, v, args, nargs, out);
    else if (!strcmp(name, "escaped"))
        *out = 0;
    else
        return jj_fail(st, UL_EFORMAT, "TemplateRuntimeError: No test named '%s' found.", name);
    return 0;
}
