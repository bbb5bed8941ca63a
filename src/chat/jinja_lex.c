/* Jinja lexer: splits a template into text and tag tokens with Jinja2's whitespace rules
 * as Hugging Face sets them (trim_blocks: one newline after a block or comment tag is
 * dropped; lstrip_blocks: spaces and tabs before a block or comment tag on its own line are
 * dropped; `-` strips all whitespace on its side, `+` disables both), then the expressions
 * inside tags into names, literals and operators. Like Jinja2, newlines are normalised
 * to "\n" and one trailing newline of the template is dropped. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
#include "chat/jinja_lex.h"
#include "uvllm/err.h"

typedef struct lexer {
    ul_arena_t *arena;
    const char *s;
    size_t n, pos;
    int line;
    jtoks *out;
    char *err;
    size_t errcap;
} lexer;

int jj_fail_line(char *err, size_t cap, int line, size_t max, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, max < sizeof tmp ? max : sizeof tmp, fmt, ap);
    va_end(ap);
    if (err && cap) snprintf(err, cap, "line %d: %s", line, tmp);
    return UL_EFORMAT;
}

#define lfail(lx, ...) jj_fail_line((lx)->err, (lx)->errcap, (lx)->line, 256, __VA_ARGS__)

static int is_ws(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static jtok *push(lexer *lx, jtok_type t) {
    jtok *v = ul_grow(lx->out->v, &lx->out->cap, lx->out->n + 1, sizeof *v, 256);
    if (!v) return NULL;
    lx->out->v = v;
    jtok *k = &lx->out->v[lx->out->n++];
    memset(k, 0, sizeof *k);
    k->type = t;
    k->line = lx->line;
    return k;
}

static void count_lines(lexer *lx, size_t from, size_t to) {
    for (size_t i = from; i < to; i++)
        if (lx->s[i] == '\n') lx->line++;
}

static int emit_data(lexer *lx, const char *p, size_t n) {
    if (!n) return 0;
    jtok *k = push(lx, T_DATA);
    if (!k) return UL_ENOMEM;
    k->s = ul_arena_strndup(lx->arena, p, n);
    k->len = n;
    return k->s ? 0 : UL_ENOMEM;
}

/* Finds the next "{{", "{%" or "{#" at or after from; n when none. */
static size_t next_tag(const lexer *lx, size_t from) {
    for (size_t i = from; i + 1 < lx->n; i++)
        if (lx->s[i] == '{' && (lx->s[i + 1] == '{' || lx->s[i + 1] == '%' || lx->s[i + 1] == '#'))
            return i;
    return lx->n;
}

/* The text before a tag, with `-` and lstrip_blocks applied. */
static int data_before(lexer *lx, size_t start, size_t tag, int line_starting) {
    char kind = lx->s[tag + 1], mod = tag + 2 < lx->n ? lx->s[tag + 2] : 0;
    size_t end = tag;
    if (mod == '-') {
        while (end > start && is_ws(lx->s[end - 1])) end--;
    } else if (mod != '+' && (kind == '%' || kind == '#')) {
        size_t l = end;
        while (l > start && lx->s[l - 1] != '\n') l--;
        int only_ws = 1;
        for (size_t i = l; i < end; i++)
            if (!is_ws(lx->s[i])) only_ws = 0;
        if (only_ws && (l > start || line_starting)) end = l;
    }
    return emit_data(lx, lx->s + start, end - start);
}

/* After a tag's end marker at p (pointing past it): `-` strips whitespace, trim_blocks one
 * newline. Returns the new position. */
static size_t after_tag(lexer *lx, size_t p, char mod, int block) {
    if (mod == '-') {
        while (p < lx->n && is_ws(lx->s[p])) p++;
    } else if (mod != '+' && block && p < lx->n && lx->s[p] == '\n') {
        p++;
    }
    return p;
}

static int lex_comment(lexer *lx, size_t tag, size_t *next) {
    size_t i = tag + 2;
    for (; i + 1 < lx->n; i++)
        if (lx->s[i] == '#' && lx->s[i + 1] == '}') break;
    if (i + 1 >= lx->n) return lfail(lx, "missing end of comment tag");
    char mod = i > tag + 2 && (lx->s[i - 1] == '-' || lx->s[i - 1] == '+') ? lx->s[i - 1] : 0;
    *next = after_tag(lx, i + 2, mod, 1);
    return 0;
}

static int put_utf8(char *o, unsigned long cp) {
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    if (cp > 0x10FFFF) cp = 0xFFFD;
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

static int hexval(const char *p, int n, unsigned long *out) {
    unsigned long v = 0;
    for (int i = 0; i < n; i++) {
        if (!isxdigit((unsigned char)p[i])) return -1;
        v = v * 16 +
            (unsigned long)(isdigit((unsigned char)p[i]) ? p[i] - '0' : (tolower(p[i]) - 'a' + 10));
    }
    *out = v;
    return 0;
}

/* One escape after a backslash at s[*i] (pointing at the char after '\'); Python rules. */
static int unescape_one(const char *s, size_t e, size_t *i, char *o) {
    char c = s[*i];
    unsigned long cp;
    int w = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
    const char *simple = "n\nt\tr\r\\\\''\"\"a\ab\bf\fv\v";
    for (const char *q = simple; *q; q += 2)
        if (c == q[0]) {
            (*i)++;
            o[0] = q[1];
            return 1;
        }
    if (c == '\n') {
        (*i)++;
        return 0;
    }
    if (w && *i + 1 + (size_t)w <= e && !hexval(s + *i + 1, w, &cp)) {
        *i += 1 + (size_t)w;
        return put_utf8(o, cp);
    }
    if (c >= '0' && c <= '7') {
        cp = 0;
        for (int k = 0; k < 3 && *i < e && s[*i] >= '0' && s[*i] <= '7'; k++)
            cp = cp * 8 + (unsigned long)(s[(*i)++] - '0');
        return put_utf8(o, cp);
    }
    o[0] = '\\';
    return 1;
}

static int lex_string(lexer *lx, size_t *p) {
    char q = lx->s[*p];
    size_t i = *p + 1, start = i;
    while (i < lx->n && lx->s[i] != q) {
        if (lx->s[i] == '\\' && i + 1 < lx->n) i++;
        i++;
    }
    if (i >= lx->n) return lfail(lx, "unexpected end of string");
    size_t e = i;
    char *o = ul_arena_alloc(lx->arena, (e - start) + 1);
    if (!o) return UL_ENOMEM;
    size_t n = 0;
    for (size_t j = start; j < e;) {
        if (lx->s[j] == '\\' && j + 1 < e) {
            j++;
            n += (size_t)unescape_one(lx->s, e, &j, o + n);
        } else {
            o[n++] = lx->s[j++];
        }
    }
    o[n] = 0;
    jtok *k = push(lx, T_STRING);
    if (!k) return UL_ENOMEM;
    k->s = o;
    k->len = n;
    count_lines(lx, *p, e);
    *p = e + 1;
    return 0;
}

static int lex_number(lexer *lx, size_t *p) {
    size_t i = *p;
    int is_float = 0;
    while (i < lx->n && (isdigit((unsigned char)lx->s[i]) || lx->s[i] == '_')) i++;
    if (i + 1 < lx->n && lx->s[i] == '.' && isdigit((unsigned char)lx->s[i + 1])) {
        is_float = 1;
        i++;
        while (i < lx->n && (isdigit((unsigned char)lx->s[i]) || lx->s[i] == '_')) i++;
    }
    if (i < lx->n && (lx->s[i] == 'e' || lx->s[i] == 'E')) {
        size_t j = i + 1;
        if (j < lx->n && (lx->s[j] == '+' || lx->s[j] == '-')) j++;
        if (j < lx->n && isdigit((unsigned char)lx->s[j])) {
            is_float = 1;
            i = j;
            while (i < lx->n && isdigit((unsigned char)lx->s[i])) i++;
        }
    }
    char buf[64];
    size_t m = 0;
    for (size_t j = *p; j < i && m + 1 < sizeof buf; j++)
        if (lx->s[j] != '_') buf[m++] = lx->s[j];
    buf[m] = 0;
    jtok *k = push(lx, is_float ? T_FLOAT : T_INT);
    if (!k) return UL_ENOMEM;
    if (is_float) {
        k->f = strtod(buf, NULL);
    } else {
        errno = 0;
        k->i = strtoll(buf, NULL, 10);
        if (errno) return lfail(lx, "integer literal too large");
    }
    *p = i;
    return 0;
}

static int lex_op(lexer *lx, size_t *p) {
    static const char *two[] = {"//", "**", "==", "!=", "<=", ">=", NULL};
    static const char one[] = "+-*/%~<>=()[]{},.:|";
    jtok *k;
    for (int j = 0; two[j]; j++)
        if (*p + 1 < lx->n && !memcmp(lx->s + *p, two[j], 2)) {
            if (!(k = push(lx, T_OP))) return UL_ENOMEM;
            memcpy(k->op, two[j], 2);
            *p += 2;
            return 0;
        }
    if (!strchr(one, lx->s[*p]) || !lx->s[*p]) return lfail(lx, "unexpected char '%c'", lx->s[*p]);
    if (!(k = push(lx, T_OP))) return UL_ENOMEM;
    k->op[0] = lx->s[(*p)++];
    return 0;
}

/* At p: "[-+]? ws* word ws* [-+]? %}"; returns the position after it (0: no match), *mods
 * the modifiers before and after. */
static size_t match_tag(const lexer *lx, size_t p, const char *word, char mods[2]) {
    size_t wl = strlen(word);
    mods[0] = mods[1] = 0;
    if (p < lx->n && (lx->s[p] == '-' || lx->s[p] == '+')) mods[0] = lx->s[p++];
    while (p < lx->n && is_ws(lx->s[p])) p++;
    if (p + wl > lx->n || memcmp(lx->s + p, word, wl)) return 0;
    p += wl;
    if (p < lx->n && (isalnum((unsigned char)lx->s[p]) || lx->s[p] == '_')) return 0;
    while (p < lx->n && is_ws(lx->s[p])) p++;
    if (p < lx->n && (lx->s[p] == '-' || lx->s[p] == '+')) mods[1] = lx->s[p++];
    return p + 1 < lx->n && lx->s[p] == '%' && lx->s[p + 1] == '}' ? p + 2 : 0;
}

/* {% raw %}...{% endraw %} at tag: the body is text. As in Jinja2, no newline is trimmed
 * after the opening tag, while the closing tag gets lstrip and trim like any block.
 * Returns 1 when it was a raw block (*next set), 0 when not, negative on error. */
static int lex_raw(lexer *lx, size_t tag, size_t *next) {
    char mods[2], emods[2];
    size_t body = match_tag(lx, tag + 2, "raw", mods), end = 0, e;
    if (!body) return 0;
    body = after_tag(lx, body, mods[1], 0);
    for (e = body; e + 1 < lx->n; e++)
        if (lx->s[e] == '{' && lx->s[e + 1] == '%' && (end = match_tag(lx, e + 2, "endraw", emods)))
            break;
    if (!end) return lfail(lx, "missing end of raw directive");
    size_t stop = e;
    if (emods[0] == '-') {
        while (stop > body && is_ws(lx->s[stop - 1])) stop--;
    } else if (emods[0] != '+') {
        size_t l = stop;
        while (l > body && lx->s[l - 1] != '\n' && (lx->s[l - 1] == ' ' || lx->s[l - 1] == '\t'))
            l--;
        if (l == body ? (l > 0 && lx->s[l - 1] == '\n') : lx->s[l - 1] == '\n') stop = l;
    }
    if (emit_data(lx, lx->s + body, stop - body)) return UL_ENOMEM;
    count_lines(lx, tag, end);
    *next = after_tag(lx, end, emods[1], 1);
    return 1;
}

/* Tokens inside {{ }} or {% %} up to the end marker; *next: position after the tag. */
static int lex_tag(lexer *lx, size_t tag, size_t *next) {
    char close = lx->s[tag + 1] == '{' ? '}' : '%';
    int block = close == '%';
    size_t p = tag + 2;
    if (p < lx->n && (lx->s[p] == '-' || lx->s[p] == '+')) p++;
    jtok *k = push(lx, block ? T_BLOCK_BEGIN : T_VAR_BEGIN);
    if (!k) return UL_ENOMEM;
    for (;;) {
        while (p < lx->n && is_ws(lx->s[p])) {
            if (lx->s[p] == '\n') lx->line++;
            p++;
        }
        if (p >= lx->n) return lfail(lx, "unexpected end of template inside a tag");
        char c = lx->s[p];
        char mod = (c == '-' || c == '+') ? c : 0;
        size_t m = p + (mod ? 1 : 0);
        if (m + 1 < lx->n && lx->s[m] == close && lx->s[m + 1] == '}') {
            if (!(k = push(lx, block ? T_BLOCK_END : T_VAR_END))) return UL_ENOMEM;
            *next = after_tag(lx, m + 2, mod == '-' ? '-' : mod, block);
            return 0;
        }
        int rc;
        if (c == '"' || c == '\'') {
            rc = lex_string(lx, &p);
        } else if (isdigit((unsigned char)c)) {
            rc = lex_number(lx, &p);
        } else if (isalpha((unsigned char)c) || c == '_') {
            size_t s = p;
            while (p < lx->n && (isalnum((unsigned char)lx->s[p]) || lx->s[p] == '_')) p++;
            if (!(k = push(lx, T_NAME))) return UL_ENOMEM;
            k->s = ul_arena_strndup(lx->arena, lx->s + s, p - s);
            k->len = p - s;
            rc = k->s ? 0 : UL_ENOMEM;
        } else {
            rc = lex_op(lx, &p);
        }
        if (rc) return rc;
    }
}

/* Newlines to "\n", one trailing newline dropped (Jinja2's keep_trailing_newline=False). */
static char *normalize(ul_arena_t *a, const char *src, size_t len, size_t *outn) {
    char *o = ul_arena_alloc(a, len + 1);
    if (!o) return NULL;
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            o[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else {
            o[n++] = src[i];
        }
    }
    if (n && o[n - 1] == '\n') n--;
    o[n] = 0;
    *outn = n;
    return o;
}

int jj_lex(ul_arena_t *arena, const char *src, size_t len, jtoks *out, char *err, size_t errcap) {
    lexer lx = {.arena = arena, .line = 1, .out = out, .err = err, .errcap = errcap};
    memset(out, 0, sizeof *out);
    lx.s = normalize(arena, src, len, &lx.n);
    if (!lx.s) return UL_ENOMEM;
    int line_starting = 1;
    while (lx.pos < lx.n) {
        size_t tag = next_tag(&lx, lx.pos), next = lx.n;
        if (tag >= lx.n) {
            if (emit_data(&lx, lx.s + lx.pos, lx.n - lx.pos)) return UL_ENOMEM;
            break;
        }
        int rc = data_before(&lx, lx.pos, tag, line_starting);
        if (rc) return rc;
        count_lines(&lx, lx.pos, tag);
        rc = lx.s[tag + 1] == '%' ? lex_raw(&lx, tag, &next) : 0;
        if (rc < 0) return rc;
        if (rc == 0)
            rc = lx.s[tag + 1] == '#' ? lex_comment(&lx, tag, &next) : lex_tag(&lx, tag, &next);
        else
            rc = 0;
        if (rc) return rc;
        if (lx.s[tag + 1] == '#')
            count_lines(&lx, tag, next);
        else if (next > 0) {
            /* whitespace after the end marker that was consumed */
            size_t q = next;
            while (q > tag && lx.s[q - 1] != '}') q--;
            count_lines(&lx, q, next);
        }
        line_starting = next > 0 && lx.s[next - 1] == '\n';
        lx.pos = next;
    }
    jtok *k = push(&lx, T_EOF);
    return k ? 0 : UL_ENOMEM;
}
