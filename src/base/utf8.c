/* UTF-8 validation and replacement (base/utf8.h). */
#include "base/utf8.h"

#include <string.h>

size_t ul_utf8_seq(const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    if (n == 0) return 0;
    unsigned char c = s[0];
    size_t len = c < 0x80                 ? 1
                 : c >= 0xC2 && c <= 0xDF ? 2
                 : c >= 0xE0 && c <= 0xEF ? 3
                 : c >= 0xF0 && c <= 0xF4 ? 4
                                          : 0;
    if (len == 0 || len > n) return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    /* overlong three- and four-byte forms, surrogates, and code points past U+10FFFF */
    if (len == 3 && ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] > 0x9F))) return 0;
    if (len == 4 && ((c == 0xF0 && s[1] < 0x90) || (c == 0xF4 && s[1] > 0x8F))) return 0;
    return len;
}

size_t ul_utf8_check(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        if ((unsigned char)s[i] < 0x80) { /* ASCII runs are the common case */
            i++;
            continue;
        }
        size_t l = ul_utf8_seq(s + i, n - i);
        if (!l) return i;
        i += l;
    }
    return n;
}

size_t ul_utf8_bad_len(const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    if (n == 0) return 0;
    unsigned char c = s[0];
    size_t need = c >= 0xC2 && c <= 0xDF   ? 2
                  : c >= 0xE0 && c <= 0xEF ? 3
                  : c >= 0xF0 && c <= 0xF4 ? 4
                                           : 1;
    /* the allowed range of the second byte narrows after E0, ED, F0 and F4 */
    unsigned char lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
    unsigned char hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
    size_t k = 1;
    while (k < need && k < n && s[k] >= (k == 1 ? lo : 0x80) && s[k] <= (k == 1 ? hi : 0xBF)) k++;
    return k;
}

size_t ul_utf8_sanitized_len(const char *s, size_t n) {
    size_t w = 0;
    for (size_t i = 0; i < n;) {
        size_t l = ul_utf8_seq(s + i, n - i);
        w += l ? l : 3;
        i += l ? l : ul_utf8_bad_len(s + i, n - i);
    }
    return w;
}

size_t ul_utf8_sanitize(const char *s, size_t n, char *out) {
    size_t w = 0;
    for (size_t i = 0; i < n;) {
        size_t l = ul_utf8_seq(s + i, n - i);
        if (l) {
            memcpy(out + w, s + i, l);
            w += l;
            i += l;
        } else {
            memcpy(out + w, "\xef\xbf\xbd", 3);
            w += 3;
            i += ul_utf8_bad_len(s + i, n - i);
        }
    }
    return w;
}
