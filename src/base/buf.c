/* Growable byte buffers (base/buf.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/buf.h"
#include "base/utf8.h"
#include "uvllm/err.h"

size_t ul_buf_grown_cap(const ul_buf_t *b, size_t extra) {
    if (extra > SIZE_MAX - b->len) return SIZE_MAX;
    size_t need = b->len + extra;
    if (need <= b->cap) return b->cap;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) {
        if (cap > SIZE_MAX / 2) return need;
        cap *= 2;
    }
    return cap;
}

int ul_buf_reserve(ul_buf_t *b, size_t extra) {
    if (extra > SIZE_MAX - b->len) return UL_ENOMEM;
    if (b->len + extra <= b->cap) return 0;
    size_t cap = ul_buf_grown_cap(b, extra);
    char *p = realloc(b->p, cap);
    if (!p) return UL_ENOMEM;
    b->p = p;
    b->cap = cap;
    return 0;
}

int ul_buf_reserve_exact(ul_buf_t *b, size_t extra) {
    if (extra > SIZE_MAX - b->len) return UL_ENOMEM;
    if (b->len + extra <= b->cap) return 0;
    char *p = realloc(b->p, b->len + extra);
    if (!p) return UL_ENOMEM;
    b->p = p;
    b->cap = b->len + extra;
    return 0;
}

int ul_buf_append(ul_buf_t *b, const void *p, size_t n) {
    if (n == 0) return 0;
    int rc = ul_buf_reserve(b, n);
    if (rc) return rc;
    memcpy(b->p + b->len, p, n);
    b->len += n;
    return 0;
}

int ul_buf_vprintf(ul_buf_t *b, const char *fmt, va_list ap) {
    va_list again;
    va_copy(again, ap);
    /* Formatted straight into the free space; only a buffer too small formats twice. */
    size_t room = b->cap - b->len;
    int n = vsnprintf(room ? b->p + b->len : NULL, room, fmt, ap);
    int rc = n < 0 ? UL_EINVAL : 0;
    if (!rc && (size_t)n >= room) {
        rc = ul_buf_reserve(b, (size_t)n + 1);
        if (!rc) vsnprintf(b->p + b->len, (size_t)n + 1, fmt, again);
    }
    if (!rc) b->len += (size_t)n;
    va_end(again);
    return rc;
}

int ul_buf_printf(ul_buf_t *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = ul_buf_vprintf(b, fmt, ap);
    va_end(ap);
    return rc;
}

int ul_buf_append_u64(ul_buf_t *b, uint64_t v) {
    char tmp[24];
    size_t i = sizeof tmp;
    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return ul_buf_append(b, tmp + i, sizeof tmp - i);
}

int ul_buf_append_hex(ul_buf_t *b, uint64_t v) {
    static const char digits[] = "0123456789abcdef";
    char tmp[20];
    size_t i = sizeof tmp;
    do {
        tmp[--i] = digits[v & 15];
        v >>= 4;
    } while (v);
    return ul_buf_append(b, tmp + i, sizeof tmp - i);
}

int ul_buf_append_json_str(ul_buf_t *b, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    /* worst case every byte becomes \u00XX (an invalid byte's U+FFFD takes 3) */
    if (n > (SIZE_MAX - b->len) / 6) return UL_ENOMEM;
    int rc = ul_buf_reserve(b, n * 6);
    if (rc) return rc;
    char *o = b->p + b->len;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 0x80) { /* JSON text is UTF-8: a byte outside a valid sequence is U+FFFD */
            size_t l = ul_utf8_seq(s + i, n - i);
            if (l) {
                memcpy(o, s + i, l);
                o += l;
                i += l - 1;
            } else { /* one U+FFFD per maximal invalid subpart, as decoders do */
                memcpy(o, "\xef\xbf\xbd", 3);
                o += 3;
                i += ul_utf8_bad_len(s + i, n - i) - 1;
            }
        } else if (ch == '"' || ch == '\\') {
            *o++ = '\\';
            *o++ = (char)ch;
        } else if (ch == '\n') {
            *o++ = '\\';
            *o++ = 'n';
        } else if (ch == '\r') {
            *o++ = '\\';
            *o++ = 'r';
        } else if (ch == '\t') {
            *o++ = '\\';
            *o++ = 't';
        } else if (ch < 0x20 || ch == 0x7f) {
            memcpy(o, "\\u00", 4);
            o[4] = hex[ch >> 4];
            o[5] = hex[ch & 15];
            o += 6;
        } else {
            *o++ = (char)ch;
        }
    }
    b->len = (size_t)(o - b->p);
    return 0;
}

void ul_buf_consume(ul_buf_t *b, size_t n) {
    if (n >= b->len) {
        b->len = 0;
        return;
    }
    memmove(b->p, b->p + n, b->len - n);
    b->len -= n;
}

void ul_buf_free(ul_buf_t *b) {
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

const char *ul_buf_cstr(ul_buf_t *b) {
    if (ul_buf_reserve(b, 1)) return NULL;
    b->p[b->len] = '\0';
    return b->p;
}

/* "s" as a JSON string, or null. */
static int json_str_or_null(ul_buf_t *b, const char *s) {
    if (!s) return ul_buf_puts(b, "null");
    int rc = ul_buf_puts(b, "\"");
    rc |= ul_buf_append_json_str(b, s, strlen(s));
    return rc | ul_buf_puts(b, "\"");
}

int ul_buf_error_body(ul_buf_t *b, const char *type, const char *param, const char *code,
                      const char *message) {
    int rc = ul_buf_puts(b, "{\"error\":{\"message\":");
    rc |= json_str_or_null(b, message ? message : "");
    rc |= ul_buf_puts(b, ",\"type\":");
    rc |= json_str_or_null(b, type ? type : "server_error");
    rc |= ul_buf_puts(b, ",\"param\":");
    rc |= json_str_or_null(b, param);
    rc |= ul_buf_puts(b, ",\"code\":");
    rc |= json_str_or_null(b, code);
    rc |= ul_buf_puts(b, "}}");
    return rc ? UL_ENOMEM : 0;
}
