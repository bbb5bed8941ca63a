/* Request bodies are checked before cJSON parses them, for what cJSON would pass on
 * silently: bytes that are not UTF-8 (they would come back raw in an echo, an error
 * message or a rendered prompt, and make the answer invalid JSON) and the \u0000 escape
 * (cJSON's strings are C strings: the value would end at the NUL, so a filter in front of
 * the server and the model would read different text). Either is a 400 whose param names
 * the field ("messages[2].content"), found by one pass that tracks where in the document
 * each string sits. Everything else about the JSON is left to cJSON. */
#include <stdio.h>
#include <string.h>

#include "api/gen.h"
#include "base/utf8.h"

#define DEPTH 32 /* deeper fields are named by their first 32 levels */

typedef struct frame_s {
    char kind; /* '{' or '[' */
    int idx;   /* array: element number */
    const char *key;
    size_t klen; /* object: the member being read (raw, as escaped in the body) */
    int want_key;
} frame_t;

/* "a.b[3].c" from the open containers (and the key just read when it is the culprit). */
static void path(const frame_t *f, int depth, char *out, size_t cap) {
    size_t n = 0;
    out[0] = '\0';
    for (int i = 0; i < depth && i < DEPTH && n + 1 < cap; i++) {
        int w = f[i].kind == '['
                    ? snprintf(out + n, cap - n, "[%d]", f[i].idx)
                    : snprintf(out + n, cap - n, "%s%.*s", n ? "." : "",
                               (int)(f[i].klen > 48 ? 48 : f[i].klen), f[i].key ? f[i].key : "");
        if (w < 0) break;
        n += (size_t)w < cap - n ? (size_t)w : cap - n - 1;
    }
}

/* The string starting after the quote at b[i]: returns the index after its closing quote
 * (or len), with *bad set to 1 for invalid UTF-8, 2 for \u0000. */
static size_t string_end(const char *b, size_t len, size_t i, int *bad) {
    while (i < len) {
        unsigned char ch = (unsigned char)b[i];
        if (ch == '"') return i + 1;
        if (ch == '\\') {
            if (i + 5 < len && b[i + 1] == 'u' && !memcmp(b + i + 2, "0000", 4)) {
                *bad = 2;
                return i;
            }
            i += 2;
            continue;
        }
        if (ch >= 0x80) {
            size_t l = ul_utf8_seq(b + i, len - i);
            if (!l) {
                *bad = 1;
                return i;
            }
            i += l;
            continue;
        }
        i++;
    }
    return len;
}

/* 0, or 1 (invalid UTF-8) / 2 (NUL) with the field's path in param and the byte offset. */
int ul_api_body_check(const char *b, size_t len, char *param, size_t cap, size_t *at) {
    frame_t f[DEPTH];
    int depth = 0;
    for (size_t i = 0; i < len;) {
        unsigned char ch = (unsigned char)b[i];
        frame_t *top = depth > 0 && depth <= DEPTH ? &f[depth - 1] : NULL;
        if (ch == '"') {
            int bad = 0;
            size_t e = string_end(b, len, i + 1, &bad);
            int is_key = top && top->kind == '{' && top->want_key;
            if (is_key) {
                top->key = b + i + 1;
                top->klen = (e > i + 1 ? e - i - 2 : 0);
                top->want_key = 0;
            }
            if (bad) {
                if (is_key) top->klen = e - i - 1; /* the key up to the culprit */
                path(f, depth, param, cap);
                *at = e;
                return bad;
            }
            i = e;
            continue;
        }
        if (ch == '{' || ch == '[') {
            if (depth < DEPTH) f[depth] = (frame_t){.kind = (char)ch, .want_key = ch == '{'};
            depth++;
        } else if ((ch == '}' || ch == ']') && depth > 0) {
            depth--;
        } else if (ch == ',' && top) {
            top->idx++;
            top->want_key = top->kind == '{';
        } else if (ch >= 0x80 && !ul_utf8_seq(b + i, len - i)) {
            path(f, depth, param, cap);
            *at = i;
            return 1;
        }
        i++;
    }
    return 0;
}

int ul_api_body_refuse(ul_api_t *a, ul_http_req_t *req, const char *body, size_t len) {
    ul_api_bad_t bad = {0};
    size_t at = 0;
    int rc = ul_api_body_check(body, len, bad.pbuf, sizeof bad.pbuf, &at);
    if (!rc) return 0;
    bad.param = bad.pbuf[0] ? bad.pbuf : NULL;
    bad.code = rc == 2 ? "nul_character" : "invalid_utf8";
    if (rc == 2)
        snprintf(bad.msg, sizeof bad.msg,
                 "%s%s%scontains \\u0000 (a NUL character), which this server does not accept",
                 bad.param ? "'" : "", bad.param ? bad.param : "", bad.param ? "' " : "the body ");
    else
        snprintf(bad.msg, sizeof bad.msg, "the request body is not valid UTF-8 (byte %zu%s%s%s)",
                 at, bad.param ? ", in '" : "", bad.param ? bad.param : "", bad.param ? "'" : "");
    ul_api_reject(a, req, &bad);
    return 1;
}
