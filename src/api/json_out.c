/* JSON mode: the byte acceptor, the vocabulary table and the token filter (json_out.h). */
#include "api/json_out.h"

#include <stdlib.h>
#include <string.h>

enum {
    M_TOP = UL_JSON_M_TOP,
    M_VALUE = UL_JSON_M_VALUE,
    M_VALUE_OR_CLOSE = UL_JSON_M_VALUE_OR_CLOSE,
    M_KEY = UL_JSON_M_KEY,
    M_KEY_OR_CLOSE = UL_JSON_M_KEY_OR_CLOSE,
    M_COLON = UL_JSON_M_COLON,
    M_AFTER = UL_JSON_M_AFTER,
    M_STRING = UL_JSON_M_STRING,
    M_KEYSTR = UL_JSON_M_KEYSTR,
    M_NUMBER = UL_JSON_M_NUMBER,
    M_LITERAL = UL_JSON_M_LITERAL,
    M_DONE = UL_JSON_M_DONE,
};

/* Number states (sub in M_NUMBER). */
enum { N_MINUS, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP };

static const char *const literals[3] = {"true", "false", "null"};

void ul_json_acc_init(ul_json_acc_t *a) { memset(a, 0, sizeof *a); }

void ul_json_acc_init_any(ul_json_acc_t *a) {
    memset(a, 0, sizeof *a);
    a->any_top = 1;
}

int ul_json_acc_done(const ul_json_acc_t *a) {
    if (a->mode == M_NUMBER && !a->depth) /* a top-level number (any_top): complete? */
        return a->sub == N_ZERO || a->sub == N_INT || a->sub == N_FRAC || a->sub == N_EXP;
    return a->mode == M_DONE;
}

static int is_ws(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static int is_digit(uint8_t c) { return c >= '0' && c <= '9'; }
static int is_hex(uint8_t c) {
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
static int top_is_array(const ul_json_acc_t *a) { return (int)((a->stack >> (a->depth - 1)) & 1); }

static int push(ul_json_acc_t *a, int array) {
    if (a->depth >= UL_JSON_MAX_DEPTH) return -1;
    a->stack = (a->stack & ~(1ULL << a->depth)) | ((uint64_t)array << a->depth);
    a->depth++;
    a->mode = array ? M_VALUE_OR_CLOSE : M_KEY_OR_CLOSE;
    return 0;
}

/* A value (or container) just ended. */
static void value_done(ul_json_acc_t *a) { a->mode = a->depth ? M_AFTER : M_DONE; }

static int close_container(ul_json_acc_t *a, uint8_t c) {
    if (!a->depth || top_is_array(a) != (c == ']')) return -1;
    a->depth--;
    value_done(a);
    return 0;
}

static int start_value(ul_json_acc_t *a, uint8_t c) {
    a->sub = a->n = a->utf8 = 0;
    switch (c) {
    case '{':
        return push(a, 0);
    case '[':
        return push(a, 1);
    case '"':
        a->mode = M_STRING;
        return 0;
    case 't':
    case 'f':
    case 'n':
        a->mode = M_LITERAL;
        a->sub = c == 't' ? 0 : c == 'f' ? 1 : 2;
        a->n = 1;
        return 0;
    case '-':
        a->mode = M_NUMBER;
        a->sub = N_MINUS;
        a->n = 1;
        return 0;
    default:
        if (!is_digit(c)) return -1;
        a->mode = M_NUMBER;
        a->sub = c == '0' ? N_ZERO : N_INT;
        a->n = 1;
        return 0;
    }
}

/* 1: c continues the number; 0: the number ended before c (a complete number); -1: bad. */
static int number_byte(ul_json_acc_t *a, uint8_t c) {
    int next = -1;
    switch (a->sub) {
    case N_MINUS:
        next = c == '0' ? N_ZERO : is_digit(c) ? N_INT : -1;
        break;
    case N_ZERO:
    case N_INT:
        if (is_digit(c) && a->sub == N_INT)
            next = N_INT;
        else if (c == '.')
            next = N_DOT;
        else if (c == 'e' || c == 'E')
            next = N_E;
        else if (is_digit(c))
            return -1; /* no leading zeros */
        else
            return 0;
        break;
    case N_DOT:
        next = is_digit(c) ? N_FRAC : -1;
        break;
    case N_FRAC:
        if (is_digit(c))
            next = N_FRAC;
        else if (c == 'e' || c == 'E')
            next = N_E;
        else
            return 0;
        break;
    case N_E:
        next = c == '+' || c == '-' ? N_ESIGN : is_digit(c) ? N_EXP : -1;
        break;
    case N_ESIGN:
        next = is_digit(c) ? N_EXP : -1;
        break;
    case N_EXP:
        if (!is_digit(c)) return 0;
        next = N_EXP;
        break;
    }
    if (next < 0 || a->n >= UL_JSON_MAX_NUM) return -1;
    /* '.', 'e', a sign: a digit must follow, so the limit must leave room for it */
    if ((next == N_DOT || next == N_E || next == N_ESIGN) && a->n + 1 >= UL_JSON_MAX_NUM) return -1;
    a->sub = (uint8_t)next;
    a->n++;
    return 1;
}

static int hex_value(uint8_t c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; }

/* A hex digit of \\uXXXX (sub 2..5). Surrogates only in pairs, refused at the first digit
 * that decides: a high one (D800-DBFF) must be followed by \\u and a low one (DC00-DFFF),
 * and a low one cannot stand alone. */
static int unicode_escape(ul_json_acc_t *a, uint8_t c) {
    if (!is_hex(c)) return -1;
    a->hex = (uint16_t)(a->hex << 4 | hex_value(c));
    int digits = a->sub - 1; /* 1..4 */
    if (digits == 1 && a->surr && a->hex != 0xd) return -1;
    if (digits == 2 && (a->hex >> 4) == 0xd) {
        int low = (a->hex & 0xc) == 0xc, high = (a->hex & 0xc) == 0x8;
        if (a->surr ? !low : low) return -1;
        if (high) a->surr = 2; /* decided: this one opens a pair */
    }
    if (digits < 4) {
        a->sub++;
        return 0;
    }
    a->sub = 0;
    a->surr = a->surr == 2 ? 1 : 0; /* a high half waits for its low half; a low one closes */
    return 0;
}

/* One byte inside a string: escapes, control characters, well-formed UTF-8. */
static int string_byte(ul_json_acc_t *a, uint8_t c) {
    if (a->utf8) {
        if (c < a->utf8_lo || c > a->utf8_hi) return -1;
        a->utf8--;
        a->utf8_lo = 0x80;
        a->utf8_hi = 0xbf;
        return 0;
    }
    if (a->sub == 1) { /* after a backslash */
        if (c == 'u')
            a->sub = 2;
        else if (c && strchr("\"\\/bfnrt", c) && !a->surr)
            a->sub = 0;
        else
            return -1;
        a->hex = 0;
        return 0;
    }
    if (a->sub >= 2) return unicode_escape(a, c);
    if (a->surr && c != '\\') return -1; /* a high surrogate's low half must follow */
    if (c == '"') {
        if (a->mode == M_KEYSTR)
            a->mode = M_COLON;
        else
            value_done(a);
        return 0;
    }
    if (c == '\\') {
        a->sub = 1;
        return 0;
    }
    if (c < 0x20) return -1;
    if (c < 0x80) return 0;
    a->utf8_lo = 0x80;
    a->utf8_hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf)
        a->utf8 = 1;
    else if (c >= 0xe0 && c <= 0xef) {
        a->utf8 = 2;
        if (c == 0xe0) a->utf8_lo = 0xa0; /* no overlong forms */
        if (c == 0xed) a->utf8_hi = 0x9f; /* no surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        a->utf8 = 3;
        if (c == 0xf0) a->utf8_lo = 0x90;
        if (c == 0xf4) a->utf8_hi = 0x8f; /* nothing past U+10FFFF */
    } else
        return -1;
    return 0;
}

/* Between tokens of structure: one space, or one newline and up to UL_JSON_MAX_WS spaces or
 * tabs of indentation (llama.cpp's json.gbnf), so a model cannot loop on blank lines; none
 * before the top-level object. ws: 0 none yet, 1 + indentation after a newline, 0xff
 * after a space. */
static int whitespace(ul_json_acc_t *a, uint8_t c) {
    if (a->mode == M_TOP) return -1;
    if (c == '\n' && a->ws == 0)
        a->ws = 1;
    else if (c == ' ' && a->ws == 0)
        a->ws = 0xff;
    else if ((c == ' ' || c == '\t') && a->ws >= 1 && a->ws <= UL_JSON_MAX_WS)
        a->ws++;
    else
        return -1;
    return 0;
}

int ul_json_acc_feed(ul_json_acc_t *a, uint8_t c) {
    switch (a->mode) {
    case M_STRING:
    case M_KEYSTR:
        return string_byte(a, c);
    case M_NUMBER: {
        int r = number_byte(a, c);
        if (r) return r > 0 ? 0 : -1;
        if (!a->depth) return -1; /* a top-level number (any_top): nothing may follow */
        value_done(a);            /* M_AFTER */
        break;                    /* c is the next structural byte */
    }
    case M_LITERAL: {
        const char *lit = literals[a->sub];
        if ((uint8_t)lit[a->n] != c) return -1;
        if (!lit[++a->n]) value_done(a);
        return 0;
    }
    case M_DONE:
        return -1;
    default:
        break;
    }
    if (is_ws(c)) return whitespace(a, c);
    a->ws = 0;
    switch (a->mode) {
    case M_TOP:
        if (a->any_top) return start_value(a, c);
        return c == '{' ? push(a, 0) : -1;
    case M_VALUE_OR_CLOSE:
        if (c == ']') return close_container(a, c);
        return start_value(a, c);
    case M_VALUE:
        return start_value(a, c);
    case M_KEY_OR_CLOSE:
        if (c == '}') return close_container(a, c);
        /* fall through */
    case M_KEY:
        if (c != '"') return -1;
        a->mode = M_KEYSTR;
        a->sub = a->utf8 = 0;
        return 0;
    case M_COLON:
        if (c != ':') return -1;
        a->mode = M_VALUE;
        return 0;
    case M_AFTER:
        if (c == ',') {
            a->mode = top_is_array(a) ? M_VALUE : M_KEY;
            return 0;
        }
        if (c == ']' || c == '}') return close_container(a, c);
        return -1;
    default:
        return -1;
    }
}

int ul_json_acc_feed_n(ul_json_acc_t *a, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (ul_json_acc_feed(a, (uint8_t)s[i])) return -1;
    return 0;
}

/* ---- the vocabulary and the filter ---------------------------------------------------- */

struct ul_json_vocab_s {
    int32_t n;
    uint32_t *off; /* [n + 1]: token i's bytes are blob[off[i] .. off[i + 1]) */
    uint8_t *eog;  /* [n] */
    char *blob;
};

void ul_json_vocab_free(ul_json_vocab_t *v) {
    if (!v) return;
    free(v->off);
    free(v->eog);
    free(v->blob);
    free(v);
}

ul_json_vocab_t *ul_json_vocab_new(const ul_codec_t *c) {
    ul_json_vocab_t *v = calloc(1, sizeof *v);
    if (!v) return NULL;
    v->n = c->n_vocab;
    v->off = malloc(((size_t)v->n + 1) * sizeof *v->off);
    v->eog = calloc((size_t)v->n, 1);
    size_t cap = (size_t)v->n * 8 + 64, len = 0;
    v->blob = malloc(cap);
    if (!v->off || !v->eog || !v->blob) goto fail;
    for (int32_t i = 0; i < v->n; i++) {
        v->off[i] = (uint32_t)len;
        v->eog[i] = i == c->eos_id || (c->is_eog && c->vocab && c->is_eog((void *)c->vocab, i));
        char piece[256];
        int k = c->token_piece ? c->token_piece(c, i, 0, 0, piece, (int)sizeof piece) : 0;
        if (k <= 0 || v->eog[i]) continue; /* control tokens, pieces past 256 bytes: never */
        if (len + (size_t)k > cap || len + (size_t)k > UINT32_MAX) {
            char *nb = len + (size_t)k <= UINT32_MAX ? realloc(v->blob, cap * 2 + (size_t)k) : NULL;
            if (!nb) goto fail;
            v->blob = nb;
            cap = cap * 2 + (size_t)k;
        }
        memcpy(v->blob + len, piece, (size_t)k);
        len += (size_t)k;
    }
    v->off[v->n] = (uint32_t)len;
    return v;
fail:
    ul_json_vocab_free(v);
    return NULL;
}

const char *ul_json_vocab_piece(const ul_json_vocab_t *v, int32_t id, uint32_t *n) {
    *n = v->off[id + 1] - v->off[id];
    return v->blob + v->off[id];
}

int ul_json_vocab_is_eog(const ul_json_vocab_t *v, int32_t id) { return v->eog[id]; }

int32_t ul_json_vocab_size(const ul_json_vocab_t *v) { return v->n; }

static int filter_allows(const ul_token_filter_t *base, int32_t id) {
    const ul_json_filter_t *f = (const ul_json_filter_t *)base;
    const ul_json_vocab_t *v = f->vocab;
    if (id < 0 || id >= v->n) return 0;
    if (v->eog[id]) return ul_json_acc_done(&f->acc);
    uint32_t n = v->off[id + 1] - v->off[id];
    if (!n) return 0;
    ul_json_acc_t a = f->acc;
    return ul_json_acc_feed_n(&a, v->blob + v->off[id], n) == 0;
}

static void filter_accept(ul_token_filter_t *base, int32_t id) {
    ul_json_filter_t *f = (ul_json_filter_t *)base;
    const ul_json_vocab_t *v = f->vocab;
    if (id < 0 || id >= v->n || v->eog[id]) return;
    (void)ul_json_acc_feed_n(&f->acc, v->blob + v->off[id], v->off[id + 1] - v->off[id]);
}

void ul_json_filter_init(ul_json_filter_t *f, const ul_json_vocab_t *v) {
    f->base.allows = filter_allows;
    f->base.accept = filter_accept;
    f->vocab = v;
    ul_json_acc_init(&f->acc);
}
