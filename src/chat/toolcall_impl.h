/* Internals of the tool-call parser shared by its files: the per-format section table the
 * streaming machine (toolcall.c) drives, the list of parsed calls, and the body parsers
 * (toolcall_json.c: JSON-shaped formats; toolcall_xml.c: tag-shaped formats;
 * toolcall_py.c: pythonic calls; toolcall_gemma.c: Gemma 4's). A body parser sees one complete
 * section and either returns every call in it or UL_EFORMAT, in which case the section stays
 * content. */
#ifndef UL_CHAT_TOOLCALL_IMPL_H
#define UL_CHAT_TOOLCALL_IMPL_H

#include <stddef.h>

#include "base/buf.h"
#include "chat/toolcall.h"

/* Parsed calls: records "name\0arguments\0", n of them. */
typedef struct ul_tc_calls_s {
    ul_buf_t b;
    int n;
} ul_tc_calls_t;

/* Adds a call; the name is trimmed and must be non-empty without NUL or whitespace inside
 * (UL_EFORMAT otherwise); args is compact JSON object text. */
int ul_tc_calls_add(ul_tc_calls_t *c, const char *name, size_t nlen, const char *args, size_t alen);

typedef int (*ul_tc_parse_fn)(const char *body, size_t n, ul_tc_calls_t *out);

enum {
    UL_TC_END_MARK, /* the section ends at close */
    UL_TC_END_JSON, /* at the end of the JSON value that follows open (or json_after) */
    UL_TC_END_EOF   /* at the end of the output */
};
enum {
    UL_TC_ANCHORED = 1, /* open counts only at the start of the output */
    UL_TC_KEEP_OPEN = 2 /* open is part of the body ("{" of Llama 3) */
};

typedef struct ul_tc_section_s {
    const char *open;
    const char *close; /* UL_TC_END_MARK */
    int end, flags;
    const char *json_after; /* UL_TC_END_JSON: the value starts after this marker if the
                             * body does not start with one ("NAME[ARGS]{...}") */
    ul_tc_parse_fn parse;   /* body: text between open and close (open included with
                             * KEEP_OPEN; for END_JSON up to the value's end) */
} ul_tc_section_t;

#define UL_TC_MAX_SECTIONS 3
typedef struct ul_tc_format_s {
    const char *name;
    ul_tc_section_t sec[UL_TC_MAX_SECTIONS];
} ul_tc_format_t;

/* NULL for UL_CHAT_TOOLS_NONE, HARMONY (handled by the machine) or out of range. */
const ul_tc_format_t *ul_tc_format(int fmt);

/* JSON helpers (toolcall_json.c). */
/* 1 when s[0..n) is exactly one JSON value (surrounding whitespace allowed). */
int ul_tc_json_valid(const char *s, size_t n);
/* Appends the value with whitespace outside strings removed; UL_EFORMAT if not valid. */
int ul_tc_json_minify(const char *s, size_t n, ul_buf_t *out);
/* Appends one "key":value member to an object being built (first: no comma). The value
 * stays JSON when it parses as JSON (unless as_string), else becomes a JSON string. */
int ul_tc_args_member(ul_buf_t *obj, int first, const char *k, size_t kn, const char *v, size_t vn,
                      int as_string);
/* Adds a call whose arguments are the JSON object text args (minified; UL_EFORMAT if it is
 * not an object). */
int ul_tc_calls_add_json(ul_tc_calls_t *c, const char *name, size_t nlen, const char *args,
                         size_t alen);
/* Trims ASCII whitespace from both ends of [*s, *s + *n). */
void ul_tc_trim(const char **s, size_t *n);
/* First occurrence of needle in s[0..n), or NULL. */
const char *ul_tc_find(const char *s, size_t n, const char *needle);

/* Streaming (toolcall_stream.c). */
/* Scans the new bytes of the section in p->buf[0..len) and emits what is decided. */
void ul_tc_stream_scan(ul_chat_parser_t *p, size_t len, ul_chat_ev_cb cb, void *ud);
/* A fresh call id ("call_" + 24 alphanumerics, NUL-terminated, 30 bytes). */
void ul_tc_call_id(ul_chat_parser_t *p, char *id);
/* Resets the scanner at the start of a section. */
void ul_tc_stream_reset(ul_chat_parser_t *p);

/* Body parsers. */
int ul_tc_parse_hermes(const char *body, size_t n, ul_tc_calls_t *out);
int ul_tc_parse_json_calls(const char *body, size_t n, ul_tc_calls_t *out);
int ul_tc_parse_python_tag(const char *body, size_t n, ul_tc_calls_t *out);
int ul_tc_parse_mistral_args(const char *body, size_t n, ul_tc_calls_t *out);
int ul_tc_parse_functionary(const char *body, size_t n, ul_tc_calls_t *out);
int ul_tc_parse_apertus(const char *body, size_t n, ul_tc_calls_t *out);
int ul_tc_parse_xml_function(const char *body, size_t n, ul_tc_calls_t *out);
int ul_tc_parse_glm(const char *body, size_t n, ul_tc_calls_t *out);
int ul_tc_parse_invoke(const char *body, size_t n, ul_tc_calls_t *out);
int ul_tc_parse_dsml(const char *body, size_t n, ul_tc_calls_t *out);
int ul_tc_parse_deepseek(const char *body, size_t n, ul_tc_calls_t *out);
int ul_tc_parse_kimi(const char *body, size_t n, ul_tc_calls_t *out);
int ul_tc_parse_solar(const char *body, size_t n, ul_tc_calls_t *out);
int ul_tc_parse_pythonic(const char *body, size_t n, ul_tc_calls_t *out);
int ul_tc_parse_gemma(const char *body, size_t n, ul_tc_calls_t *out);

#endif
