/* Jinja parser: tokens from jinja_lex.c to the syntax tree of jinja_impl.h, following
 * Jinja2's grammar and operator precedence (parser.py): conditional expression, or, and,
 * not, comparisons, + -, ~, * / // %, **, unary minus, then postfix (attribute, subscript,
 * call) and filters/tests. The tree and its literals live in the template's arena.
 * Nesting is bounded so that a hostile template cannot exhaust the stack. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja_impl.h"
#include "chat/jinja_lex.h"

#define MAX_NEST 200
/* Left-leaning chains (a+b+c..., x|f|g..., a.b.c...) are built by loops, not recursion, so
 * the parser's nesting count does not see them; their depth is bounded separately because
 * evaluation recurses along it. */
#define MAX_EXPR_DEPTH 256

typedef struct parser {
    ul_arena_t *arena;
    jtoks toks;
    size_t pos;
    int depth;
    int loops; /* enclosing for bodies (0 inside a macro): where break/continue may appear */
    char *err;
    size_t errcap;
} parser;

typedef struct vec {
    jnode **v;
    const char **s;
    int n, cap;
} vec;

/* The line of the token the parser stands on (the last one at the end). */
static int cur_line(const parser *p) {
    return p->toks.v[p->pos < p->toks.n ? p->pos : p->toks.n - 1].line;
}

#define pfail(p, ...) jj_fail_line((p)->err, (p)->errcap, cur_line(p), 200, __VA_ARGS__)

static jtok *cur(parser *p) { return &p->toks.v[p->pos]; }
static jtok *peek(parser *p, size_t k) {
    size_t i = p->pos + k;
    return &p->toks.v[i < p->toks.n ? i : p->toks.n - 1];
}
static void adv(parser *p) {
    if (p->pos + 1 < p->toks.n) p->pos++;
}
static int is_op(const jtok *t, const char *op) { return t->type == T_OP && !strcmp(t->op, op); }
static int is_name(const jtok *t, const char *n) { return t->type == T_NAME && !strcmp(t->s, n); }

static int expect_op(parser *p, const char *op) {
    if (!is_op(cur(p), op)) return pfail(p, "expected '%s'", op);
    adv(p);
    return 0;
}
static int expect_type(parser *p, jtok_type t, const char *what) {
    if (cur(p)->type != t) return pfail(p, "expected %s", what);
    adv(p);
    return 0;
}

static jnode *nn(parser *p, int kind) {
    jnode *n = ul_arena_alloc(p->arena, sizeof *n);
    if (!n) return NULL;
    memset(n, 0, sizeof *n);
    n->kind = (uint8_t)kind;
    n->line = cur(p)->line;
    return n;
}

static int depth_of(const jnode *n) { return n ? n->depth : 0; }

/* Sets n's depth from its children; fails when an expression is too deep to evaluate. */
static int seal(parser *p, jnode *n) {
    int d = depth_of(n->a);
    const jnode *c[] = {n->b, n->c, n->d};
    for (int i = 0; i < 3; i++)
        if (depth_of(c[i]) > d) d = depth_of(c[i]);
    for (int i = 0; i < n->nkids; i++)
        if (depth_of(n->kids[i]) > d) d = depth_of(n->kids[i]);
    for (int i = 0; i < n->nkids2; i++)
        if (depth_of(n->kids2[i]) > d) d = depth_of(n->kids2[i]);
    if (d + 1 > MAX_EXPR_DEPTH) return pfail(p, "expression nested too deeply");
    n->depth = (uint16_t)(d + 1);
    return 0;
}

static int vpush(parser *p, vec *v, jnode *n, const char *s) {
    if (v->n == v->cap) {
        int cap = v->cap ? v->cap * 2 : 4;
        jnode **nv =
            ul_arena_grow(p->arena, v->v, (size_t)v->n * sizeof *nv, (size_t)cap * sizeof *nv);
        const char **ns =
            ul_arena_grow(p->arena, v->s, (size_t)v->n * sizeof *ns, (size_t)cap * sizeof *ns);
        if (!nv || !ns) return UL_ENOMEM;
        v->v = nv;
        v->s = ns;
        v->cap = cap;
    }
    v->v[v->n] = n;
    v->s[v->n++] = s;
    return 0;
}

#define NEW(var, kind)                                                                             \
    jnode *var = nn(p, kind);                                                                      \
    if (!var) return UL_ENOMEM

static int parse_expr(parser *p, jnode **out);
static int parse_or(parser *p, jnode **out);
static int parse_unary(parser *p, int with_filter, jnode **out);
static int parse_tuple(parser *p, int with_cond, int explicit_paren, jnode **out);

/* Parses an expression onto v, with a keyword argument's name (or NULL). */
static int push_expr(parser *p, vec *v, const char *name) {
    jnode *e;
    TRY(parse_expr(p, &e));
    return vpush(p, v, e, name);
}

/* Hands n the nodes of kids (and of kids2, when given) as its child lists. */
static void set_kids(jnode *n, const vec *kids, const vec *kids2) {
    n->kids = kids->v;
    n->nkids = kids->n;
    if (kids2) {
        n->kids2 = kids2->v;
        n->nkids2 = kids2->n;
    }
}

/* (args, name=kw) after '(' has been seen at cur. */
static int parse_call_args(parser *p, jnode *n) {
    vec a = {0}, kw = {0};
    TRY(expect_op(p, "("));
    while (!is_op(cur(p), ")")) {
        if (a.n || kw.n) TRY(expect_op(p, ","));
        if (is_op(cur(p), ")")) break;
        if (cur(p)->type == T_NAME && is_op(peek(p, 1), "=")) {
            const char *name = cur(p)->s;
            adv(p);
            adv(p);
            TRY(push_expr(p, &kw, name));
        } else {
            if (kw.n) return pfail(p, "positional argument after keyword argument");
            TRY(push_expr(p, &a, NULL));
        }
    }
    adv(p);
    set_kids(n, &a, &kw);
    n->names = kw.s;
    return 0;
}

static int parse_dotted_name(parser *p, const char **out) {
    if (cur(p)->type != T_NAME) return pfail(p, "expected a name");
    *out = cur(p)->s;
    adv(p);
    return 0;
}

static int parse_filter(parser *p, jnode *operand, jnode **out) {
    adv(p); /* | */
    NEW(n, N_FILTER);
    n->a = operand;
    TRY(parse_dotted_name(p, &n->name));
    if (is_op(cur(p), "(")) TRY(parse_call_args(p, n));
    *out = n;
    return seal(p, n);
}

static int parse_test(parser *p, jnode *operand, jnode **out) {
    adv(p); /* is */
    NEW(n, N_TEST);
    n->a = operand;
    if (is_name(cur(p), "not")) {
        n->op = 1;
        adv(p);
    }
    TRY(parse_dotted_name(p, &n->name));
    jtok *t = cur(p);
    if (is_op(t, "(")) {
        TRY(parse_call_args(p, n));
    } else if ((t->type == T_NAME || t->type == T_STRING || t->type == T_INT ||
                t->type == T_FLOAT || is_op(t, "[") || is_op(t, "{")) &&
               !is_name(t, "else") && !is_name(t, "or") && !is_name(t, "and")) {
        if (is_name(t, "is")) return pfail(p, "You cannot chain multiple tests with is");
        jnode *arg;
        TRY(parse_unary(p, 0, &arg)); /* primary + postfix */
        n->kids = ul_arena_alloc(p->arena, sizeof(jnode *));
        if (!n->kids) return UL_ENOMEM;
        n->kids[0] = arg;
        n->nkids = 1;
    }
    *out = n;
    return seal(p, n);
}

static int parse_list_like(parser *p, const char *close, int is_dict, jnode *n) {
    vec k = {0}, v = {0};
    adv(p);
    while (!is_op(cur(p), close)) {
        if (k.n) TRY(expect_op(p, ","));
        if (is_op(cur(p), close)) break;
        TRY(push_expr(p, &k, NULL));
        if (is_dict) {
            TRY(expect_op(p, ":"));
            TRY(push_expr(p, &v, NULL));
        }
    }
    adv(p);
    set_kids(n, &k, &v);
    return seal(p, n);
}

static int parse_primary(parser *p, jnode **out) {
    jtok *t = cur(p);
    if (t->type == T_NAME) {
        NEW(n, N_LIT);
        adv(p);
        if (!strcmp(t->s, "true") || !strcmp(t->s, "True"))
            n->lit = jv_bool(1);
        else if (!strcmp(t->s, "false") || !strcmp(t->s, "False"))
            n->lit = jv_bool(0);
        else if (!strcmp(t->s, "none") || !strcmp(t->s, "None"))
            n->lit = jv_none();
        else {
            n->kind = N_NAME;
            n->name = t->s;
        }
        *out = n;
        return 0;
    }
    if (t->type == T_STRING) {
        NEW(n, N_LIT);
        size_t len = 0, k = 0;
        while (peek(p, k)->type == T_STRING) len += peek(p, k++)->len;
        char *s = ul_arena_alloc(p->arena, len + 1);
        jstr *js = ul_arena_alloc(p->arena, sizeof *js);
        if (!s || !js) return UL_ENOMEM;
        len = 0;
        while (cur(p)->type == T_STRING) {
            memcpy(s + len, cur(p)->s, cur(p)->len);
            len += cur(p)->len;
            adv(p);
        }
        s[len] = 0;
        *js = (jstr){len, s, NULL, NULL};
        n->lit = jv_strs(js);
        *out = n;
        return 0;
    }
    if (t->type == T_INT || t->type == T_FLOAT) {
        NEW(n, N_LIT);
        n->lit = t->type == T_INT ? jv_int(t->i) : jv_float(t->f);
        adv(p);
        *out = n;
        return 0;
    }
    if (is_op(t, "(")) {
        adv(p);
        TRY(parse_tuple(p, 1, 1, out));
        return expect_op(p, ")");
    }
    if (is_op(t, "[") || is_op(t, "{")) {
        NEW(n, is_op(t, "[") ? N_LIST : N_DICT);
        TRY(parse_list_like(p, n->kind == N_LIST ? "]" : "}", n->kind == N_DICT, n));
        *out = n;
        return 0;
    }
    if (t->type == T_EOF) return pfail(p, "unexpected end of template");
    return pfail(p, "unexpected '%s'",
                 t->type == T_OP        ? t->op
                 : t->type == T_VAR_END ? "}}"
                                        : "%}");
}

/* One subscript: an expression or a slice. */
static int parse_subscribed(parser *p, jnode *obj, jnode **out) {
    jnode *parts[3] = {NULL, NULL, NULL};
    int is_slice = 0;
    if (!is_op(cur(p), ":")) TRY(parse_expr(p, &parts[0]));
    if (is_op(cur(p), ":")) {
        is_slice = 1;
        adv(p);
        if (!is_op(cur(p), ":") && !is_op(cur(p), "]")) TRY(parse_expr(p, &parts[1]));
        if (is_op(cur(p), ":")) {
            adv(p);
            if (!is_op(cur(p), "]")) TRY(parse_expr(p, &parts[2]));
        }
    }
    NEW(n, is_slice ? N_SLICE : N_ITEM);
    n->a = obj;
    if (is_slice) {
        n->kids = ul_arena_alloc(p->arena, 3 * sizeof(jnode *));
        if (!n->kids) return UL_ENOMEM;
        memcpy(n->kids, parts, sizeof parts);
        n->nkids = 3;
    } else {
        n->b = parts[0];
    }
    *out = n;
    TRY(seal(p, n));
    return expect_op(p, "]");
}

/* A call of *node, its arguments at cur; *node becomes the call. */
static int parse_call(parser *p, jnode **node) {
    NEW(n, N_CALL);
    n->a = *node;
    TRY(parse_call_args(p, n));
    TRY(seal(p, n));
    *node = n;
    return 0;
}

static int parse_postfix(parser *p, jnode **node) {
    for (;;) {
        jtok *t = cur(p);
        if (is_op(t, ".")) {
            adv(p);
            t = cur(p);
            if (t->type == T_NAME) {
                NEW(n, N_ATTR);
                n->a = *node;
                n->name = t->s;
                adv(p);
                TRY(seal(p, n));
                *node = n;
            } else if (t->type == T_INT) {
                NEW(n, N_ITEM);
                NEW(k, N_LIT);
                k->lit = jv_int(t->i);
                n->a = *node;
                n->b = k;
                adv(p);
                TRY(seal(p, n));
                *node = n;
            } else {
                return pfail(p, "expected name or number");
            }
        } else if (is_op(t, "[")) {
            adv(p);
            TRY(parse_subscribed(p, *node, node));
        } else if (is_op(t, "(")) {
            TRY(parse_call(p, node));
        } else {
            return 0;
        }
    }
}

static int parse_filter_expr(parser *p, jnode **node) {
    for (;;) {
        if (is_op(cur(p), "|")) {
            TRY(parse_filter(p, *node, node));
        } else if (is_name(cur(p), "is")) {
            TRY(parse_test(p, *node, node));
        } else if (is_op(cur(p), "(")) {
            TRY(parse_call(p, node));
        } else {
            return 0;
        }
    }
}

static int parse_unary(parser *p, int with_filter, jnode **out) {
    if (++p->depth > MAX_NEST) return pfail(p, "expression nested too deeply");
    jtok *t = cur(p);
    if (is_op(t, "-") || is_op(t, "+")) {
        NEW(n, N_NEG);
        n->op = (uint8_t)t->op[0];
        adv(p);
        TRY(parse_unary(p, 0, &n->a));
        TRY(seal(p, n));
        *out = n;
    } else {
        TRY(parse_primary(p, out));
    }
    TRY(parse_postfix(p, out));
    if (with_filter) TRY(parse_filter_expr(p, out));
    p->depth--;
    return 0;
}

static int bin(parser *p, int kind, int op, jnode *a, jnode *b, jnode **out) {
    NEW(n, kind);
    n->op = (uint8_t)op;
    n->a = a;
    n->b = b;
    *out = n;
    return seal(p, n);
}

static int parse_pow(parser *p, jnode **out) {
    TRY(parse_unary(p, 1, out));
    while (is_op(cur(p), "**")) {
        jnode *r;
        adv(p);
        TRY(parse_unary(p, 1, &r));
        TRY(bin(p, N_BIN, OP_POW, *out, r, out));
    }
    return 0;
}

static int parse_math2(parser *p, jnode **out) {
    TRY(parse_pow(p, out));
    for (;;) {
        jtok *t = cur(p);
        int op = is_op(t, "*")    ? OP_MUL
                 : is_op(t, "/")  ? OP_DIV
                 : is_op(t, "//") ? OP_FLOORDIV
                 : is_op(t, "%")  ? OP_MOD
                                  : 0;
        if (!op) return 0;
        jnode *r;
        adv(p);
        TRY(parse_pow(p, &r));
        TRY(bin(p, N_BIN, op, *out, r, out));
    }
}

static int parse_concat(parser *p, jnode **out) {
    TRY(parse_math2(p, out));
    while (is_op(cur(p), "~")) {
        jnode *r;
        adv(p);
        TRY(parse_math2(p, &r));
        TRY(bin(p, N_BIN, OP_CONCAT, *out, r, out));
    }
    return 0;
}

static int parse_math1(parser *p, jnode **out) {
    TRY(parse_concat(p, out));
    for (;;) {
        int op = is_op(cur(p), "+") ? OP_ADD : is_op(cur(p), "-") ? OP_SUB : 0;
        if (!op) return 0;
        jnode *r;
        adv(p);
        TRY(parse_concat(p, &r));
        TRY(bin(p, N_BIN, op, *out, r, out));
    }
}

static int cmp_op(parser *p) {
    jtok *t = cur(p);
    static const struct {
        const char *s;
        int op;
    } ops[] = {{"==", OP_EQ}, {"!=", OP_NE}, {"<", OP_LT},
               {"<=", OP_LE}, {">", OP_GT},  {">=", OP_GE}};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (is_op(t, ops[i].s)) {
            adv(p);
            return ops[i].op;
        }
    if (is_name(t, "in")) {
        adv(p);
        return OP_IN;
    }
    if (is_name(t, "not") && is_name(peek(p, 1), "in")) {
        adv(p);
        adv(p);
        return OP_NOTIN;
    }
    return 0;
}

static int parse_compare(parser *p, jnode **out) {
    TRY(parse_math1(p, out));
    vec v = {0};
    uint8_t opsbuf[64];
    int op;
    while ((op = cmp_op(p))) {
        if (v.n >= 64) return pfail(p, "comparison chain too long");
        opsbuf[v.n] = (uint8_t)op;
        jnode *r;
        TRY(parse_math1(p, &r));
        TRY(vpush(p, &v, r, NULL));
    }
    if (!v.n) return 0;
    NEW(n, N_CMP);
    uint8_t *ops = ul_arena_alloc(p->arena, (size_t)v.n);
    if (!ops) return UL_ENOMEM;
    memcpy(ops, opsbuf, (size_t)v.n);
    n->a = *out;
    set_kids(n, &v, NULL);
    n->ops = ops;
    *out = n;
    return seal(p, n);
}

static int parse_not(parser *p, jnode **out) {
    if (is_name(cur(p), "not")) {
        if (++p->depth > MAX_NEST) return pfail(p, "expression nested too deeply");
        NEW(n, N_NOT);
        adv(p);
        TRY(parse_not(p, &n->a));
        TRY(seal(p, n));
        p->depth--;
        *out = n;
        return 0;
    }
    return parse_compare(p, out);
}

/* operand (word operand)*, left-associative: `and` and `or`. */
static int parse_word_chain(parser *p, const char *word, int kind,
                            int (*operand)(parser *, jnode **), jnode **out) {
    TRY(operand(p, out));
    while (is_name(cur(p), word)) {
        jnode *r;
        adv(p);
        TRY(operand(p, &r));
        TRY(bin(p, kind, 0, *out, r, out));
    }
    return 0;
}

static int parse_and(parser *p, jnode **out) {
    return parse_word_chain(p, "and", N_AND, parse_not, out);
}

static int parse_or(parser *p, jnode **out) {
    return parse_word_chain(p, "or", N_OR, parse_and, out);
}

static int parse_cond(parser *p, int with_cond, jnode **out) {
    if (++p->depth > MAX_NEST) return pfail(p, "expression nested too deeply");
    TRY(parse_or(p, out));
    while (with_cond && is_name(cur(p), "if")) {
        NEW(n, N_COND);
        adv(p);
        n->b = *out;
        TRY(parse_or(p, &n->a));
        if (is_name(cur(p), "else")) {
            adv(p);
            TRY(parse_cond(p, 1, &n->c));
        }
        TRY(seal(p, n));
        *out = n;
    }
    p->depth--;
    return 0;
}

static int parse_expr(parser *p, jnode **out) { return parse_cond(p, 1, out); }

static int tuple_end(parser *p) {
    jtok *t = cur(p);
    return t->type == T_VAR_END || t->type == T_BLOCK_END || t->type == T_EOF || is_op(t, ")");
}

static int parse_tuple(parser *p, int with_cond, int explicit_paren, jnode **out) {
    vec v = {0};
    int is_tuple = 0;
    for (;;) {
        if (v.n) TRY(expect_op(p, ","));
        if (tuple_end(p)) break;
        jnode *e;
        TRY(parse_cond(p, with_cond, &e));
        TRY(vpush(p, &v, e, NULL));
        if (is_op(cur(p), ","))
            is_tuple = 1;
        else
            break;
    }
    if (!is_tuple) {
        if (v.n) {
            *out = v.v[0];
            return 0;
        }
        if (!explicit_paren) return pfail(p, "expected an expression");
    }
    NEW(n, N_TUPLE);
    set_kids(n, &v, NULL);
    *out = n;
    return seal(p, n);
}

/* ---- statements ---- */

static int parse_body(parser *p, const char *const *stops, jnode **out);

/* A macro's or call block's body: a function in Python, so loops around it do not count. */
static int parse_function_body(parser *p, const char *const *stops, jnode **out) {
    int loops = p->loops;
    p->loops = 0;
    int rc = parse_body(p, stops, out);
    p->loops = loops;
    return rc;
}

static int end_block(parser *p) { return expect_type(p, T_BLOCK_END, "end of block ('%}')"); }

/* After a body stopped at {% name: consumes "name %}". */
static int close_tag(parser *p) {
    adv(p);
    return end_block(p);
}

static int parse_if(parser *p, jnode **out) {
    static const char *const stops[] = {"elif", "else", "endif", NULL};
    static const char *const end[] = {"endif", NULL};
    NEW(n, N_IF);
    adv(p);
    TRY(parse_tuple(p, 1, 0, &n->a));
    TRY(end_block(p));
    TRY(parse_body(p, stops, &n->b));
    if (is_name(cur(p), "elif")) {
        NEW(body, N_BODY);
        body->kids = ul_arena_alloc(p->arena, sizeof(jnode *));
        if (!body->kids) return UL_ENOMEM;
        body->nkids = 1;
        n->c = body;
        *out = n;
        return parse_if(p, &body->kids[0]);
    }
    if (is_name(cur(p), "else")) {
        TRY(close_tag(p));
        TRY(parse_body(p, end, &n->c));
    }
    *out = n;
    return close_tag(p);
}

static int parse_targets(parser *p, jnode *n) {
    vec v = {0};
    int paren = is_op(cur(p), "(");
    if (paren) adv(p);
    do {
        if (v.n) adv(p);
        if (cur(p)->type != T_NAME) return pfail(p, "expected a name to assign to");
        TRY(vpush(p, &v, NULL, cur(p)->s));
        adv(p);
    } while (is_op(cur(p), ",") && v.n < 200);
    if (paren) TRY(expect_op(p, ")"));
    n->names = v.s;
    n->nnames = (uint8_t)v.n;
    return 0;
}

static int parse_for(parser *p, jnode **out) {
    static const char *const stops[] = {"endfor", "else", NULL};
    static const char *const end[] = {"endfor", NULL};
    NEW(n, N_FOR);
    adv(p);
    TRY(parse_targets(p, n));
    if (!is_name(cur(p), "in")) return pfail(p, "expected 'in'");
    adv(p);
    TRY(parse_tuple(p, 0, 0, &n->a));
    if (is_name(cur(p), "if")) {
        adv(p);
        TRY(parse_expr(p, &n->c));
    }
    if (is_name(cur(p), "recursive")) return pfail(p, "recursive loops are not supported");
    TRY(end_block(p));
    p->loops++;
    TRY(parse_body(p, stops, &n->b));
    p->loops--;
    if (is_name(cur(p), "else")) {
        TRY(close_tag(p));
        TRY(parse_body(p, end, &n->d));
    }
    *out = n;
    return close_tag(p);
}

/* Filters of a {% filter %} or {% set x | f %} block: a chain whose innermost operand is NULL. */
static int parse_filter_chain(parser *p, int first_has_pipe, jnode **out) {
    jnode *chain = NULL;
    if (!first_has_pipe) {
        NEW(n, N_FILTER);
        TRY(parse_dotted_name(p, &n->name));
        if (is_op(cur(p), "(")) TRY(parse_call_args(p, n));
        chain = n;
    }
    while (is_op(cur(p), "|")) TRY(parse_filter(p, chain, &chain));
    *out = chain;
    return 0;
}

static int parse_set(parser *p, jnode **out) {
    static const char *const end[] = {"endset", NULL};
    NEW(n, N_SET);
    adv(p);
    if (cur(p)->type == T_NAME && is_op(peek(p, 1), ".")) {
        n->name = cur(p)->s;
        adv(p);
        adv(p);
        if (cur(p)->type != T_NAME) return pfail(p, "expected an attribute name");
        n->attr = cur(p)->s;
        adv(p);
    } else {
        TRY(parse_targets(p, n));
    }
    if (is_op(cur(p), "=")) {
        adv(p);
        TRY(parse_tuple(p, 1, 0, &n->a));
        *out = n;
        return end_block(p);
    }
    if (n->attr || n->nnames != 1) return pfail(p, "expected '='");
    n->kind = N_SETBLOCK;
    if (is_op(cur(p), "|")) TRY(parse_filter_chain(p, 1, &n->c));
    TRY(end_block(p));
    TRY(parse_body(p, end, &n->b));
    *out = n;
    return close_tag(p);
}

static int parse_params(parser *p, jnode *n) {
    vec names = {0}, defs = {0};
    if (!is_op(cur(p), "(")) return 0;
    adv(p);
    while (!is_op(cur(p), ")")) {
        if (names.n) TRY(expect_op(p, ","));
        if (cur(p)->type != T_NAME) return pfail(p, "expected a parameter name");
        const char *name = cur(p)->s;
        jnode *def = NULL;
        adv(p);
        if (is_op(cur(p), "=")) {
            adv(p);
            TRY(parse_expr(p, &def));
        } else if (defs.n && defs.v[defs.n - 1]) {
            return pfail(p, "non-default argument follows default argument");
        }
        TRY(vpush(p, &names, NULL, name));
        TRY(vpush(p, &defs, def, NULL));
        if (names.n > 200) return pfail(p, "too many parameters");
    }
    adv(p);
    n->names = names.s;
    n->nnames = (uint8_t)names.n;
    n->kids2 = defs.v;
    n->nkids2 = defs.n;
    return 0;
}

static int parse_macro(parser *p, jnode **out) {
    static const char *const end[] = {"endmacro", NULL};
    NEW(n, N_MACRO);
    adv(p);
    TRY(parse_dotted_name(p, &n->name));
    if (!is_op(cur(p), "(")) return pfail(p, "expected '('");
    TRY(parse_params(p, n));
    TRY(end_block(p));
    TRY(parse_function_body(p, end, &n->b));
    *out = n;
    return close_tag(p);
}

static int parse_call_block(parser *p, jnode **out) {
    static const char *const end[] = {"endcall", NULL};
    NEW(n, N_CALLBLOCK);
    adv(p);
    TRY(parse_params(p, n));
    TRY(parse_expr(p, &n->a));
    if (n->a->kind != N_CALL) return pfail(p, "expected a call expression");
    TRY(end_block(p));
    TRY(parse_function_body(p, end, &n->b));
    *out = n;
    return close_tag(p);
}

static int parse_stmt(parser *p, jnode **out) {
    jtok *t = cur(p);
    if (t->type != T_NAME) return pfail(p, "tag name expected");
    const char *s = t->s;
    if (!strcmp(s, "if")) return parse_if(p, out);
    if (!strcmp(s, "for")) return parse_for(p, out);
    if (!strcmp(s, "set")) return parse_set(p, out);
    if (!strcmp(s, "macro")) return parse_macro(p, out);
    if (!strcmp(s, "call")) return parse_call_block(p, out);
    if (!strcmp(s, "break") || !strcmp(s, "continue")) {
        if (!p->loops) /* Python refuses these when compiling the template */
            return pfail(p,
                         s[0] == 'b' ? "'break' outside loop" : "'continue' not properly in loop");
        NEW(n, s[0] == 'b' ? N_BREAK : N_CONTINUE);
        adv(p);
        *out = n;
        return end_block(p);
    }
    if (!strcmp(s, "filter")) {
        static const char *const end[] = {"endfilter", NULL};
        NEW(n, N_FILTERBLOCK);
        adv(p);
        TRY(parse_filter_chain(p, 0, &n->c));
        TRY(end_block(p));
        TRY(parse_body(p, end, &n->b));
        *out = n;
        return close_tag(p);
    }
    if (!strcmp(s, "generation")) {
        static const char *const end[] = {"endgeneration", NULL};
        adv(p);
        TRY(end_block(p));
        TRY(parse_body(p, end, out));
        return close_tag(p);
    }
    return pfail(p, "Encountered unknown tag '%s'.", s);
}

static int is_stop(const jtok *t, const char *const *stops) {
    if (!stops || t->type != T_NAME) return 0;
    for (; *stops; stops++)
        if (!strcmp(t->s, *stops)) return 1;
    return 0;
}

/* Statements until {% <one of stops> (left at the stop name) or the end (stops NULL). */
static int parse_body(parser *p, const char *const *stops, jnode **out) {
    if (++p->depth > MAX_NEST) return pfail(p, "blocks nested too deeply");
    vec v = {0};
    NEW(body, N_BODY);
    for (;;) {
        jtok *t = cur(p);
        jnode *n = NULL;
        if (t->type == T_EOF) {
            if (stops) return pfail(p, "unexpected end of template, expected '%s'", stops[0]);
            break;
        }
        if (t->type == T_DATA) {
            NEW(d, N_DATA);
            jstr *js = ul_arena_alloc(p->arena, sizeof *js);
            if (!js) return UL_ENOMEM;
            *js = (jstr){t->len, t->s, NULL, NULL};
            d->lit = jv_strs(js);
            adv(p);
            n = d;
        } else if (t->type == T_VAR_BEGIN) {
            NEW(e, N_EMIT);
            adv(p);
            TRY(parse_tuple(p, 1, 0, &e->a));
            TRY(expect_type(p, T_VAR_END, "end of print statement ('}}')"));
            n = e;
        } else if (t->type == T_BLOCK_BEGIN) {
            adv(p);
            if (is_stop(cur(p), stops)) break;
            TRY(parse_stmt(p, &n));
        } else {
            return pfail(p, "unexpected token");
        }
        TRY(vpush(p, &v, n, NULL));
    }
    set_kids(body, &v, NULL);
    *out = body;
    p->depth--;
    return 0;
}

static int parse_template(parser *p, jnode **out) { return parse_body(p, NULL, out); }

int jj_parse(ul_jinja_t *t, const char *src, size_t len, char *err, size_t errcap) {
    parser p = {.arena = &t->arena, .err = err, .errcap = errcap};
    int rc = jj_lex(&t->arena, src, len, &p.toks, err, errcap);
    if (!rc) rc = parse_template(&p, &t->root);
    free(p.toks.v);
    return rc;
}
