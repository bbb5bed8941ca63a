/* ECMA-262 regular expressions (the subset JSON Schema's pattern and vLLM's regex use) as
 * GBNF expressions (json_gbnf.h). Characters and classes become sets of code points; in
 * JSON mode a set is written as the characters a JSON string may hold raw plus the escapes
 * of the others (\" \\ \n ...), so the decoded string matches the expression. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errbuf.h"
#include "engine/gbnf_escape.h"
#include "engine/json_gbnf.h"
#include "uvllm/err.h"

#define MAX_SET 512
#define MAX_DEPTH 64

typedef struct {
    uint32_t lo, hi;
} rg_t;

typedef struct {
    rg_t r[MAX_SET];
    int n;
} set_t;

typedef struct {
    const char *s, *e;
    int json, depth;
    ul_buf_t *out;
    char *err;
    size_t err_len;
} rx_t;

/* The first failure's message into the caller's buffer; returns UL_EINVAL. */
#define fail(x, ...) ul_errbuf_set((x)->err, (x)->err_len, UL_EINVAL, __VA_ARGS__)

static int put(rx_t *x, const char *s) { return ul_buf_puts(x->out, s) ? UL_ENOMEM : 0; }

static int add(set_t *s, uint32_t lo, uint32_t hi) {
    if (s->n >= MAX_SET) return -1;
    s->r[s->n++] = (rg_t){lo, hi};
    return 0;
}

static int cmp_rg(const void *a, const void *b) {
    const rg_t *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static void norm(set_t *s) {
    qsort(s->r, (size_t)s->n, sizeof *s->r, cmp_rg);
    int m = 0;
    for (int i = 0; i < s->n; i++) {
        if (m && s->r[i].lo <= s->r[m - 1].hi + 1) {
            if (s->r[i].hi > s->r[m - 1].hi) s->r[m - 1].hi = s->r[i].hi;
        } else {
            s->r[m++] = s->r[i];
        }
    }
    s->n = m;
}

static void complement(set_t *s) {
    norm(s);
    set_t c = {.n = 0};
    uint32_t next = 0;
    for (int i = 0; i < s->n; i++) {
        if (s->r[i].lo > next) add(&c, next, s->r[i].lo - 1);
        next = s->r[i].hi + 1;
    }
    if (next <= 0x10ffff) add(&c, next, 0x10ffff);
    *s = c;
}

static int has(const set_t *s, uint32_t c) {
    for (int i = 0; i < s->n; i++)
        if (c >= s->r[i].lo && c <= s->r[i].hi) return 1;
    return 0;
}

/* \d \w \s and their negations into s. */
static int class_escape(char c, set_t *s) {
    static const rg_t sp[] = {
        {9, 13},          {32, 32},         {0xa0, 0xa0},     {0x1680, 0x1680}, {0x2000, 0x200a},
        {0x2028, 0x2029}, {0x202f, 0x202f}, {0x205f, 0x205f}, {0x3000, 0x3000}, {0xfeff, 0xfeff}};
    set_t t = {.n = 0};
    switch (c | 0x20) {
    case 'd':
        add(&t, '0', '9');
        break;
    case 'w':
        add(&t, '0', '9'), add(&t, 'A', 'Z'), add(&t, 'a', 'z'), add(&t, '_', '_');
        break;
    case 's':
        for (size_t i = 0; i < sizeof sp / sizeof *sp; i++) add(&t, sp[i].lo, sp[i].hi);
        break;
    default:
        return 0;
    }
    if (c >= 'A' && c <= 'Z') complement(&t);
    for (int i = 0; i < t.n; i++)
        if (add(s, t.r[i].lo, t.r[i].hi)) return -1;
    return 1;
}

static uint32_t utf8_cp(rx_t *x) {
    const unsigned char *u = (const unsigned char *)x->s;
    uint32_t c = u[0];
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (x->e - x->s < n) n = 1;
    if (n > 1) {
        c &= 0x7fu >> n;
        for (int i = 1; i < n; i++) c = c << 6 | (u[i] & 0x3f);
    }
    x->s += n;
    return c;
}

/* An escape after '\' (x->s at the letter): a code point (>= 0), a set added to s (-2),
 * or an error (-1, err set). */
static int64_t escape(rx_t *x, set_t *s) {
    if (x->s >= x->e) return fail(x, "pattern ends with '\\'"), -1;
    char c = *x->s++;
    int k = class_escape(c, s);
    if (k) return k < 0 ? (fail(x, "pattern class too large"), -1) : -2;
    int64_t ctl = ul_gbnf_ctl_escape(c);
    if (ctl >= 0) return ctl;
    switch (c) {
    case 'f':
        return '\f';
    case 'v':
        return '\v';
    case 'b':
    case 'B':
        return fail(x, "pattern: word boundaries ('\\%c') are not supported", c), -1;
    case 'x':
    case 'u': {
        int n = c == 'x' ? 2 : 4;
        uint32_t v = 0;
        if (c == 'u' && x->s < x->e && *x->s == '{') {
            x->s++;
            while (x->s < x->e && *x->s != '}' && ul_gbnf_hexval(*x->s) >= 0 && v <= 0x10ffff)
                v = v << 4 | (uint32_t)ul_gbnf_hexval(*x->s++);
            if (x->s >= x->e || *x->s != '}' || v > 0x10ffff)
                return fail(x, "pattern: bad \\u{...} escape"), -1;
            x->s++;
            return v;
        }
        for (int i = 0; i < n; i++) {
            if (x->s >= x->e || ul_gbnf_hexval(*x->s) < 0)
                return fail(x, "pattern: bad \\%c escape", c), -1;
            v = v << 4 | (uint32_t)ul_gbnf_hexval(*x->s++);
        }
        return v;
    }
    default:
        if (c >= '1' && c <= '9')
            return fail(x, "pattern: backreferences ('\\%c') are not supported", c), -1;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
            return fail(x, "pattern: escape '\\%c' is not supported", c), -1;
        return (unsigned char)c;
    }
}

static int bracket(rx_t *x, set_t *s) {
    int neg = x->s < x->e && *x->s == '^';
    if (neg) x->s++;
    int first = 1;
    while (x->s < x->e && (*x->s != ']' || first)) {
        first = 0;
        int64_t lo;
        if (*x->s == '\\') {
            x->s++;
            if (x->s < x->e && *x->s == 'b') { /* backspace inside a class */
                x->s++;
                lo = 8;
            } else if ((lo = escape(x, s)) == -1)
                return UL_EINVAL;
            if (lo == -2) continue;
        } else {
            lo = utf8_cp(x);
        }
        int64_t hi = lo;
        if (x->s + 1 < x->e && *x->s == '-' && x->s[1] != ']') {
            x->s++;
            if (*x->s == '\\') {
                x->s++;
                set_t dummy = {.n = 0};
                if ((hi = escape(x, &dummy)) < 0)
                    return hi == -2 ? fail(x, "pattern: a class escape cannot end a range")
                                    : UL_EINVAL;
            } else {
                hi = utf8_cp(x);
            }
            if (hi < lo) return fail(x, "pattern: class range out of order");
        }
        if (add(s, (uint32_t)lo, (uint32_t)hi)) return fail(x, "pattern class too large");
    }
    if (x->s >= x->e) return fail(x, "pattern: unterminated '['");
    x->s++;
    if (neg) complement(s);
    norm(s);
    return 0;
}

static int put_cp_class(rx_t *x, uint32_t c) {
    char b[16];
    snprintf(b, sizeof b, c <= 0xffff ? "\\u%04X" : "\\U%08X", c);
    return put(x, b);
}

/* Writes a set as a GBNF alternation: raw characters in one class, escaped ones (JSON
 * mode) as literals. */
static int emit_set(rx_t *x, set_t *s) {
    norm(s);
    set_t raw = {.n = 0};
    for (int i = 0; i < s->n; i++) {
        uint32_t lo = s->r[i].lo, hi = s->r[i].hi;
        if (hi > 0x10ffff) hi = 0x10ffff;
        if (!x->json) {
            add(&raw, lo, hi);
            continue;
        }
        /* JSON: raw from 0x20 up, except '"' and '\\' */
        if (lo < 0x20) lo = 0x20;
        for (uint32_t a = lo; a <= hi && lo <= hi;) {
            uint32_t b = hi;
            if (a <= 0x22 && b >= 0x22)
                b = a == 0x22 ? 0x22 : 0x21;
            else if (a <= 0x5c && b >= 0x5c)
                b = a == 0x5c ? 0x5c : 0x5b;
            if (a != 0x22 && a != 0x5c) add(&raw, a, b);
            a = b + 1;
            if (!a) break;
        }
    }
    int alts = 0, rc = put(x, "(");
    if (raw.n) {
        rc = rc ? rc : put(x, "[");
        for (int i = 0; i < raw.n && !rc; i++) {
            rc = put_cp_class(x, raw.r[i].lo);
            if (!rc && raw.r[i].hi != raw.r[i].lo)
                rc = put(x, "-") ? UL_ENOMEM : put_cp_class(x, raw.r[i].hi);
        }
        rc = rc ? rc : put(x, "]");
        alts++;
    }
    if (x->json) {
        static const struct {
            uint32_t c;
            const char *lit;
        } esc[] = {{'"', "\"\\\\\\\"\""}, {'\\', "\"\\\\\\\\\""}, {'\n', "\"\\\\n\""},
                   {'\r', "\"\\\\r\""},   {'\t', "\"\\\\t\""},    {'\b', "\"\\\\b\""},
                   {'\f', "\"\\\\f\""}};
        for (size_t i = 0; i < sizeof esc / sizeof *esc && !rc; i++)
            if (has(s, esc[i].c)) {
                rc = put(x, alts++ ? " | " : "");
                if (!rc) rc = put(x, esc[i].lit);
            }
    }
    if (!alts) return fail(x, "pattern: a class matches no character a JSON string can hold");
    return rc ? rc : put(x, ")");
}

static int alternation(rx_t *x);

static int quantifier(rx_t *x) {
    if (x->s >= x->e) return 0;
    char c = *x->s;
    int rc = 0;
    if (c == '*' || c == '+' || c == '?') {
        x->s++;
        char q[2] = {c, 0};
        rc = put(x, q);
    } else if (c == '{') {
        const char *p = x->s + 1;
        long mn = 0, mx = -1;
        int digits = 0;
        while (p < x->e && *p >= '0' && *p <= '9' && mn < 100000)
            mn = mn * 10 + (*p++ - '0'), digits++;
        if (!digits) return 0; /* a literal '{' (annex B) */
        mx = mn;
        if (p < x->e && *p == ',') {
            p++;
            mx = -1;
            if (p < x->e && *p >= '0' && *p <= '9') {
                mx = 0;
                while (p < x->e && *p >= '0' && *p <= '9' && mx < 100000)
                    mx = mx * 10 + (*p++ - '0');
            }
        }
        if (p >= x->e || *p != '}') return 0;
        if (mn > 10000 || mx > 10000) return fail(x, "pattern: repetition count above 10000");
        if (mx >= 0 && mx < mn)
            return fail(x, "pattern: repetition {%ld,%ld} out of order", mn, mx);
        x->s = p + 1;
        char b[48];
        if (mx < 0)
            snprintf(b, sizeof b, "{%ld,}", mn);
        else
            snprintf(b, sizeof b, "{%ld,%ld}", mn, mx);
        rc = put(x, b);
    } else {
        return 0;
    }
    if (!rc && x->s < x->e && (*x->s == '?' || *x->s == '+')) x->s++; /* lazy: same language */
    if (!rc && x->s < x->e && strchr("*+?", *x->s)) return fail(x, "pattern: nothing to repeat");
    return rc;
}

static int atom(rx_t *x) {
    char c = *x->s;
    set_t s = {.n = 0};
    if (c == '(') {
        x->s++;
        if (x->e - x->s >= 2 && x->s[0] == '?') {
            if (x->s[1] == ':')
                x->s += 2;
            else if (x->s[1] == '<' && x->e - x->s >= 3 && x->s[2] != '=' && x->s[2] != '!') {
                const char *g = memchr(x->s, '>', (size_t)(x->e - x->s)); /* named group */
                if (!g) return fail(x, "pattern: bad group name");
                x->s = g + 1;
            } else {
                return fail(x, "pattern: lookaround ('(%.3s') is not supported", x->s);
            }
        }
        if (++x->depth > MAX_DEPTH) return fail(x, "pattern nests too deeply");
        int rc = put(x, "(");
        if (!rc) rc = alternation(x);
        if (rc) return rc;
        if (x->s >= x->e || *x->s != ')') return fail(x, "pattern: missing ')'");
        x->s++;
        x->depth--;
        return put(x, ")");
    }
    if (c == '[') {
        x->s++;
        int rc = bracket(x, &s);
        return rc ? rc : emit_set(x, &s);
    }
    if (c == '.') {
        x->s++;
        add(&s, '\n', '\n'), add(&s, '\r', '\r'), add(&s, 0x2028, 0x2029);
        complement(&s);
        return emit_set(x, &s);
    }
    if (c == '^' || c == '$')
        return fail(x, "pattern: '%c' is only supported at the start or end", c);
    if (c == ')' || c == '*' || c == '+' || c == '?') return fail(x, "pattern: unexpected '%c'", c);
    int64_t cp;
    if (c == '\\') {
        x->s++;
        if ((cp = escape(x, &s)) == -1) return UL_EINVAL;
        if (cp == -2) return emit_set(x, &s);
    } else {
        cp = utf8_cp(x);
    }
    add(&s, (uint32_t)cp, (uint32_t)cp);
    return emit_set(x, &s);
}

static int sequence(rx_t *x) {
    int rc = put(x, "(\"\"");
    while (!rc && x->s < x->e && *x->s != '|' && *x->s != ')') {
        if (*x->s == '$' && x->s + 1 == x->e && x->depth == 0) break;
        rc = put(x, " ");
        if (!rc) rc = atom(x);
        if (!rc) rc = quantifier(x);
    }
    return rc ? rc : put(x, ")");
}

static int alternation(rx_t *x) {
    int rc = sequence(x);
    while (!rc && x->s < x->e && *x->s == '|') {
        x->s++;
        rc = put(x, " | ");
        if (!rc) rc = sequence(x);
    }
    return rc;
}

int ul_regex_gbnf(const char *re, size_t len, int json, ul_buf_t *out, char *err, size_t err_len) {
    rx_t x = {.s = re, .e = re + len, .json = json, .out = out, .err = err, .err_len = err_len};
    if (err_len) err[0] = 0;
    int start = len && re[0] == '^';
    if (start) x.s++;
    int end = len > (size_t)start && re[len - 1] == '$' && (len < 2 || re[len - 2] != '\\');
    set_t any = {.n = 0};
    add(&any, '\n', '\n'), add(&any, '\r', '\r'), add(&any, 0x2028, 0x2029);
    complement(&any);
    int rc = put(&x, "(");
    if (!rc && !start) { /* unanchored: anything may come before */
        rc = emit_set(&x, &any);
        if (!rc) rc = put(&x, "* ");
    }
    if (!rc) rc = put(&x, "(");
    if (!rc) rc = alternation(&x);
    if (!rc && x.s < x.e && !(end && *x.s == '$' && x.s + 1 == x.e))
        rc = fail(&x, "pattern: unexpected '%c'", *x.s);
    if (!rc) rc = put(&x, ")");
    if (!rc && !end) {
        if (!(rc = put(&x, " "))) rc = emit_set(&x, &any);
        if (!rc) rc = put(&x, "*");
    }
    if (!rc) rc = put(&x, ")");
    return rc;
}
