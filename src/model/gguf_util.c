/* Small pieces of GGUF validation used by the reader and the writer: value sizes, strict
 * UTF-8 and a linear-time duplicate-name check. */
#include <stdlib.h>
#include <string.h>

#include "model/gguf_util.h"
#include "uvllm/err.h"

size_t ul_gguf_scalar_size(uint32_t type) {
    switch (type) {
    case UL_GGUF_UINT8:
    case UL_GGUF_INT8:
    case UL_GGUF_BOOL:
        return 1;
    case UL_GGUF_UINT16:
    case UL_GGUF_INT16:
        return 2;
    case UL_GGUF_UINT32:
    case UL_GGUF_INT32:
    case UL_GGUF_FLOAT32:
        return 4;
    case UL_GGUF_UINT64:
    case UL_GGUF_INT64:
    case UL_GGUF_FLOAT64:
        return 8;
    default:
        return 0;
    }
}

int ul_utf8_valid(const char *str, size_t len) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < len) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        int n;
        unsigned min, cp;
        if ((c & 0xe0) == 0xc0)
            n = 1, min = 0x80, cp = c & 0x1f;
        else if ((c & 0xf0) == 0xe0)
            n = 2, min = 0x800, cp = c & 0x0f;
        else if ((c & 0xf8) == 0xf0)
            n = 3, min = 0x10000, cp = c & 0x07;
        else
            return 0;
        if (len - i <= (size_t)n) return 0;
        for (int k = 1; k <= n; k++) {
            if ((s[i + k] & 0xc0) != 0x80) return 0;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
        i += (size_t)n + 1;
    }
    return 1;
}

int ul_str_eq(ul_str_t s, const char *z) {
    size_t n = strlen(z);
    return s.len == n && memcmp(s.ptr, z, n) == 0;
}

void ul_sanitize_line(char *s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) *s = '?';
}

static uint64_t hash(ul_str_t s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (uint64_t i = 0; i < s.len; i++) h = (h ^ (unsigned char)s.ptr[i]) * 1099511628211ull;
    return h;
}

int ul_find_duplicate(const ul_str_t *s, uint64_t n, int64_t *first, int64_t *second) {
    if (n < 2) return 0;
    uint64_t cap = 4;
    while (cap < 2 * n) cap <<= 1;
    int64_t *slot = malloc(cap * sizeof *slot);
    if (!slot) return UL_ENOMEM;
    memset(slot, 0xff, cap * sizeof *slot); /* -1: empty */
    int found = 0;
    for (uint64_t i = 0; i < n && !found; i++) {
        uint64_t h = hash(s[i]) & (cap - 1);
        for (; slot[h] >= 0; h = (h + 1) & (cap - 1)) {
            const ul_str_t *o = &s[slot[h]];
            if (o->len == s[i].len && !memcmp(o->ptr, s[i].ptr, s[i].len)) {
                *first = slot[h];
                *second = (int64_t)i;
                found = 1;
                break;
            }
        }
        slot[h] = (int64_t)i;
    }
    free(slot);
    return found;
}
