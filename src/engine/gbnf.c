/* GBNF text -> syntax tree (grammar_impl.h). The dialect is llama.cpp's: rules end at the
 * end of a line unless inside parentheses or right after '|'; literals and classes are
 * over code points; `.` is any code point. Errors name the line. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
#include "engine/gbnf_escape.h"
#include "engine/grammar_impl.h"
#include "uvllm/err.h"

#define MAX_NEST 256
#define MAX_REP 100000

typedef struct {
    const char *s, *e;
    int line, depth;
    ast_t *ast;
    char *err;
    size_t err_len;
    int nomem;
} gp_t;

__attribute__((format(printf, 2, 3))) static int fail(gp_t *p, const char *fmt, ...) {
    if (p->err_len && !p->err[0]) {
        int n = snprintf(p->err, p->err_len, "line %d: ", p->line);
        va_list ap;
        va_start(ap, fmt);
        if (n >= 0 && (size_t)n < p->err_len)
            vsnprintf(p->err + n, p->err_len - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return UL_EINVAL;
}

static int grow(gp_t *p, void **arr, size_t *cap, size_t n, size_t sz) {
    void *np = ul_grow(*arr, cap, n + 1, sz, 64);
    if (!np) return p->nomem = 1, UL_ENOMEM;
    *arr = np;
    return 0;
}

static int new_node(gp_t *p, int kind, int32_t *out) {
    ast_t *a = p->ast;
    if (grow(p, (void **)&a->nodes, &a->c_nodes, a->n_nodes, sizeof *a->nodes)) return UL_ENOMEM;
    a->nodes[a->n_nodes] = (anode_t){.kind = (uint8_t)kind, .first = -1, .next = -1, .ref = -1};
    *out = (int32_t)a->n_nodes++;
    return 0;
}

static int add_range(gp_t *p, uint32_t lo, uint32_t hi) {
    ast_t *a = p->ast;
    if (grow(p, (void **)&a->ranges, &a->c_ranges, a->n_ranges, sizeof *a->ranges))
        return UL_ENOMEM;
    a->ranges[a->n_ranges++] = (cprange_t){lo, hi};
    return 0;
}

static int rule_index(gp_t *p, const char *name, size_t n, int32_t *out) {
    ast_t *a = p->ast;
    for (size_t i = 0; i < a->n_rules; i++)
        if (strlen(a->rules[i].name) == n && !memcmp(a->rules[i].name, name, n))
            return *out = (int32_t)i, 0;
    if (grow(p, (void **)&a->rules, &a->c_rules, a->n_rules, sizeof *a->rules)) return UL_ENOMEM;
    char *nm = malloc(n + 1);
    if (!nm) return p->nomem = 1, UL_ENOMEM;
    memcpy(nm, name, n);
    nm[n] = 0;
    a->rules[a->n_rules] = (arule_t){.name = nm, .body = -1, .line = p->line};
    *out = (int32_t)a->n_rules++;
    return 0;
}

static int is_word(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
}

/* Skips spaces and comments; newlines only when nested. */
static void space(gp_t *p, int newlines) {
    while (p->s < p->e) {
        char c = *p->s;
        if (c == '#') {
            while (p->s < p->e && *p->s != '\n') p->s++;
        } else if (c == ' ' || c == '\t' || c == '\r') {
            p->s++;
        } else if (c == '\n' && newlines) {
            p->line++;
            p->s++;
        } else {
            break;
        }
    }
}

/* One UTF-8 code point (a raw byte >= 0x80 that is not valid UTF-8 stands for itself). */
static uint32_t utf8_next(gp_t *p) {
    const unsigned char *s = (const unsigned char *)p->s;
    size_t left = (size_t)(p->e - p->s);
    uint32_t c = s[0];
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if ((size_t)n > left) n = 1;
    if (n > 1) {
        uint32_t v = c & (0x7f >> n);
        for (int i = 1; i < n; i++) {
            if ((s[i] & 0xc0) != 0x80) {
                p->s++;
                return c;
            }
            v = v << 6 | (s[i] & 0x3f);
        }
        c = v;
    }
    p->s += n;
    return c;
}

/* A character of a literal or class, escapes decoded; -1 (error set) when malformed. */
static int64_t char_at(gp_t *p) {
    if (p->s >= p->e) return fail(p, "unexpected end of grammar"), -1;
    if (*p->s != '\\') return utf8_next(p);
    if (++p->s >= p->e) return fail(p, "unexpected end after '\\'"), -1;
    char c = *p->s++;
    int digits = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
    if (digits) {
        uint32_t v = 0;
        for (int i = 0; i < digits; i++) {
            int h = p->s < p->e ? ul_gbnf_hexval(*p->s) : -1;
            if (h < 0) return fail(p, "bad \\%c escape", c), -1;
            v = v << 4 | (uint32_t)h;
            p->s++;
        }
        if (v > 0x10ffff) return fail(p, "escape beyond U+10FFFF"), -1;
        return v;
    }
    int64_t ctl = ul_gbnf_ctl_escape(c);
    if (ctl >= 0) return ctl;
    switch (c) {
    case '\\':
    case '"':
    case '[':
    case ']':
    case '-':
    case '^':
    case '\'':
    case '/':
        return (unsigned char)c;
    default:
        return fail(p, "unknown escape '\\%c'", c), -1;
    }
}

static int append_child(gp_t *p, int32_t parent, int32_t *last, int32_t child) {
    if (*last < 0)
        p->ast->nodes[parent].first = child;
    else
        p->ast->nodes[*last].next = child;
    *last = child;
    return 0;
}

static int literal(gp_t *p, int32_t *out) {
    int32_t seq, last = -1;
    if (new_node(p, A_SEQ, &seq)) return UL_ENOMEM;
    p->s++; /* the quote */
    while (p->s < p->e && *p->s != '"') {
        if (*p->s == '\n') return fail(p, "newline inside a literal");
        int64_t c = char_at(p);
        if (c < 0) return UL_EINVAL;
        int32_t n;
        if (new_node(p, A_CLASS, &n)) return UL_ENOMEM;
        p->ast->nodes[n].r0 = (int32_t)p->ast->n_ranges;
        p->ast->nodes[n].nr = 1;
        if (add_range(p, (uint32_t)c, (uint32_t)c)) return UL_ENOMEM;
        append_child(p, seq, &last, n);
    }
    if (p->s >= p->e) return fail(p, "unterminated literal");
    p->s++;
    *out = seq;
    return 0;
}

static int cmp_range(const void *a, const void *b) {
    const cprange_t *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Sorts and merges ranges [r0, n_ranges), complementing them over [0, 0x10FFFF] if neg. */
static int normalize(gp_t *p, size_t r0, int neg, int32_t node) {
    ast_t *a = p->ast;
    size_t n = a->n_ranges - r0;
    if (n > 1) qsort(a->ranges + r0, n, sizeof *a->ranges, cmp_range); /* none: no array */
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        cprange_t r = a->ranges[r0 + i];
        if (m && r.lo <= a->ranges[r0 + m - 1].hi + 1) {
            if (r.hi > a->ranges[r0 + m - 1].hi) a->ranges[r0 + m - 1].hi = r.hi;
        } else {
            a->ranges[r0 + m++] = r;
        }
    }
    a->n_ranges = r0 + m;
    if (neg) {
        cprange_t *tmp = malloc((m + 1) * sizeof *tmp);
        if (!tmp) return p->nomem = 1, UL_ENOMEM;
        if (m) memcpy(tmp, a->ranges + r0, m * sizeof *tmp); /* ranges may be NULL: [^] */
        a->n_ranges = r0;
        uint32_t next = 0;
        int rc = 0;
        for (size_t i = 0; i < m && !rc; i++) {
            if (tmp[i].lo > next) rc = add_range(p, next, tmp[i].lo - 1);
            next = tmp[i].hi + 1;
        }
        if (!rc && next <= 0x10ffff) rc = add_range(p, next, 0x10ffff);
        free(tmp);
        if (rc) return rc;
    }
    a->nodes[node].r0 = (int32_t)r0;
    a->nodes[node].nr = (int32_t)(a->n_ranges - r0);
    return 0;
}

static int char_class(gp_t *p, int32_t *out) {
    int32_t n;
    if (new_node(p, A_CLASS, &n)) return UL_ENOMEM;
    size_t r0 = p->ast->n_ranges;
    p->s++; /* '[' */
    int neg = p->s < p->e && *p->s == '^';
    if (neg) p->s++;
    while (p->s < p->e && *p->s != ']') {
        int64_t lo = char_at(p), hi;
        if (lo < 0) return UL_EINVAL;
        hi = lo;
        if (p->s + 1 < p->e && *p->s == '-' && p->s[1] != ']') {
            p->s++;
            if ((hi = char_at(p)) < 0) return UL_EINVAL;
            if (hi < lo) return fail(p, "class range out of order");
        }
        if (add_range(p, (uint32_t)lo, (uint32_t)hi)) return UL_ENOMEM;
    }
    if (p->s >= p->e) return fail(p, "unterminated character class");
    p->s++;
    int rc = normalize(p, r0, neg, n);
    *out = n;
    return rc;
}

static int alternates(gp_t *p, int32_t *out);

static int number(gp_t *p, int32_t *v) {
    const char *s = p->s;
    long x = 0;
    while (p->s < p->e && *p->s >= '0' && *p->s <= '9' && x <= MAX_REP)
        x = x * 10 + (*p->s++ - '0');
    if (p->s == s) return fail(p, "expected a number in {}");
    if (x > MAX_REP) return fail(p, "repetition count above %d", MAX_REP);
    *v = (int32_t)x;
    return 0;
}

/* {m}, {m,}, {m,n} after an item. */
static int braces(gp_t *p, int32_t *mn, int32_t *mx) {
    p->s++;
    space(p, 1);
    if (number(p, mn)) return UL_EINVAL;
    space(p, 1);
    *mx = *mn;
    if (p->s < p->e && *p->s == ',') {
        p->s++;
        space(p, 1);
        *mx = -1;
        if (p->s < p->e && *p->s != '}' && number(p, mx)) return UL_EINVAL;
        space(p, 1);
    }
    if (p->s >= p->e || *p->s != '}') return fail(p, "expected '}'");
    p->s++;
    if (*mx >= 0 && *mx < *mn) return fail(p, "repetition {%d,%d} out of order", *mn, *mx);
    return 0;
}

static int postfix(gp_t *p, int32_t *item) {
    while (p->s < p->e && strchr("*+?{", *p->s)) {
        int32_t mn = 0, mx = -1, r;
        char c = *p->s;
        if (c == '{') {
            if (braces(p, &mn, &mx)) return UL_EINVAL;
        } else {
            p->s++;
            mn = c == '+';
            mx = c == '?' ? 1 : -1;
        }
        if (new_node(p, A_REP, &r)) return UL_ENOMEM;
        p->ast->nodes[r].first = *item;
        p->ast->nodes[r].min = mn;
        p->ast->nodes[r].max = mx;
        *item = r;
        space(p, p->depth > 0);
    }
    return 0;
}

static int item(gp_t *p, int32_t *out) {
    char c = *p->s;
    int rc;
    if (c == '"') {
        rc = literal(p, out);
    } else if (c == '[') {
        rc = char_class(p, out);
    } else if (c == '.') {
        p->s++;
        if ((rc = new_node(p, A_CLASS, out))) return rc;
        size_t r0 = p->ast->n_ranges;
        rc = add_range(p, 0, 0x10ffff);
        if (!rc) rc = normalize(p, r0, 0, *out);
    } else if (c == '(') {
        if (++p->depth > MAX_NEST) return fail(p, "groups nested too deeply");
        p->s++;
        space(p, 1);
        rc = alternates(p, out);
        if (rc) return rc;
        if (p->s >= p->e || *p->s != ')') return fail(p, "expected ')'");
        p->s++;
        p->depth--;
    } else if (is_word(c)) {
        const char *w = p->s;
        while (p->s < p->e && is_word(*p->s)) p->s++;
        int32_t r;
        if ((rc = rule_index(p, w, (size_t)(p->s - w), &r))) return rc;
        if ((rc = new_node(p, A_REF, out))) return rc;
        p->ast->nodes[*out].ref = r;
    } else {
        return fail(p, "unexpected '%c'", c);
    }
    if (rc) return rc;
    space(p, p->depth > 0);
    return postfix(p, out);
}

/* Does the text continue with a new rule ("name ::=")? */
static int at_rule_start(const gp_t *p) {
    const char *s = p->s;
    while (s < p->e && is_word(*s)) s++;
    if (s == p->s) return 0;
    while (s < p->e && (*s == ' ' || *s == '\t')) s++;
    return p->e - s >= 3 && !memcmp(s, "::=", 3);
}

static int sequence(gp_t *p, int32_t *out) {
    int32_t seq, last = -1;
    if (new_node(p, A_SEQ, &seq)) return UL_ENOMEM;
    while (p->s < p->e && *p->s != '|' && *p->s != ')' && *p->s != '\n') {
        if (p->depth == 0 && at_rule_start(p)) break;
        int32_t it;
        int rc = item(p, &it);
        if (rc) return rc;
        append_child(p, seq, &last, it);
    }
    *out = seq;
    return 0;
}

static int alternates(gp_t *p, int32_t *out) {
    int32_t alt, last = -1, s;
    if (new_node(p, A_ALT, &alt)) return UL_ENOMEM;
    for (;;) {
        int rc = sequence(p, &s);
        if (rc) return rc;
        append_child(p, alt, &last, s);
        if (p->s >= p->e || *p->s != '|') break;
        p->s++;
        space(p, 1);
    }
    *out = alt;
    return 0;
}

static int rule(gp_t *p) {
    const char *w = p->s;
    while (p->s < p->e && is_word(*p->s)) p->s++;
    if (p->s == w) return fail(p, "expected a rule name");
    int32_t r;
    int rc = rule_index(p, w, (size_t)(p->s - w), &r);
    if (rc) return rc;
    space(p, 0);
    if (p->e - p->s < 3 || memcmp(p->s, "::=", 3)) return fail(p, "expected '::='");
    p->s += 3;
    space(p, 1);
    arule_t *ar = &p->ast->rules[r];
    if (ar->defined) return fail(p, "rule '%.60s' is defined twice", ar->name);
    int32_t body;
    if ((rc = alternates(p, &body))) return rc;
    ar = &p->ast->rules[r];
    ar->defined = 1;
    ar->body = body;
    ar->line = p->line;
    if (p->s < p->e && *p->s == ')') return fail(p, "unmatched ')'");
    return 0;
}

int ul_gbnf_parse(const char *src, size_t len, ast_t *ast, char *err, size_t err_len) {
    memset(ast, 0, sizeof *ast);
    gp_t p = {.s = src, .e = src + len, .line = 1, .ast = ast, .err = err, .err_len = err_len};
    if (err_len) err[0] = 0;
    int rc = 0;
    for (;;) {
        space(&p, 1);
        if (p.s >= p.e) break;
        if ((rc = rule(&p))) break;
    }
    if (!rc && memchr(src, 0, len)) rc = fail(&p, "NUL byte in the grammar");
    for (size_t i = 0; !rc && i < ast->n_rules; i++)
        if (!ast->rules[i].defined) {
            p.line = ast->rules[i].line;
            rc = fail(&p, "undefined rule '%.60s'", ast->rules[i].name);
        }
    if (!rc) {
        int32_t root = -1;
        for (size_t i = 0; i < ast->n_rules; i++)
            if (!strcmp(ast->rules[i].name, "root")) root = (int32_t)i;
        if (root < 0) {
            p.line = 1;
            rc = fail(&p, "no rule named 'root'");
        }
    }
    if (p.nomem) rc = UL_ENOMEM;
    return rc;
}

void ul_gbnf_free(ast_t *ast) {
    for (size_t i = 0; i < ast->n_rules; i++) free(ast->rules[i].name);
    free(ast->rules);
    free(ast->nodes);
    free(ast->ranges);
    memset(ast, 0, sizeof *ast);
}
