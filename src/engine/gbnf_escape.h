/* What GBNF grammars (gbnf.c) and the JSON Schema patterns converted to GBNF (regex_gbnf.c)
 * read alike in their backslash escapes. Private to src/engine. */
#ifndef UL_ENGINE_GBNF_ESCAPE_H
#define UL_ENGINE_GBNF_ESCAPE_H

#include <stdint.h>

/* The value of a hex digit, or -1. */
static inline int ul_gbnf_hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') return (c | 0x20) - 'a' + 10;
    return -1;
}

/* The character \n, \r, \t or \0 names, or -1 for any other letter after the backslash. */
static inline int64_t ul_gbnf_ctl_escape(char c) {
    switch (c) {
    case 'n':
        return '\n';
    case 'r':
        return '\r';
    case 't':
        return '\t';
    case '0':
        return 0;
    default:
        return -1;
    }
}

#endif
