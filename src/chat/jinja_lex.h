/* Tokens of a Jinja template, as the lexer in jinja_lex.c produces them for the parser. */
#ifndef UL_CHAT_JINJA_LEX_H
#define UL_CHAT_JINJA_LEX_H

#include <stddef.h>

#include "base/arena.h"

typedef enum {
    T_EOF,
    T_DATA,        /* text between tags (whitespace control already applied) */
    T_VAR_BEGIN,   /* {{ */
    T_VAR_END,     /* }} */
    T_BLOCK_BEGIN, /* {% */
    T_BLOCK_END,   /* %} */
    T_NAME,
    T_STRING, /* unescaped */
    T_INT,
    T_FLOAT,
    T_OP, /* op[] holds the operator text */
} jtok_type;

typedef struct jtok {
    jtok_type type;
    int line;
    char op[4];
    const char *s; /* T_DATA, T_NAME, T_STRING: NUL-terminated copy in the template arena */
    size_t len;
    long long i;
    double f;
} jtok;

typedef struct jtoks {
    jtok *v;
    size_t n, cap;
} jtoks;

/* Tokenizes src with trim_blocks and lstrip_blocks on (as Hugging Face configures Jinja2).
 * Token text lives in arena; the token array is malloc'd (free v). */
/* A lexer's or parser's error, "line N: message", into err (cap bytes), the message cut to
 * max - 1 bytes (at most 255); returns UL_EFORMAT. */
int jj_fail_line(char *err, size_t cap, int line, size_t max, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

int jj_lex(ul_arena_t *arena, const char *src, size_t len, jtoks *out, char *err, size_t errcap);

#endif
