/* Growable byte buffers: connection input and output, header storage, response and SSE
 * frames. They grow geometrically and are reused (only len is reset), so a keep-alive
 * connection or a long stream stops allocating after its first few uses. Sized by user
 * input, so growth returns UL_ENOMEM rather than aborting. */
#ifndef UL_BASE_BUF_H
#define UL_BASE_BUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Growable byte buffer, reused across requests (len reset, memory kept). */
typedef struct ul_buf_s {
    char *p;
    size_t len, cap;
} ul_buf_t;

/* Ensures room for extra more bytes; UL_ENOMEM on overflow or malloc failure. */
int ul_buf_reserve(ul_buf_t *b, size_t extra);
int ul_buf_append(ul_buf_t *b, const void *p, size_t n);
/* Like ul_buf_reserve, but a buffer that must grow gets exactly what is asked (one large
 * answer into an empty buffer: doubling would hold up to twice its size). */
int ul_buf_reserve_exact(ul_buf_t *b, size_t extra);
/* The capacity b would have after ul_buf_reserve(b, extra) (b->cap when it fits). */
size_t ul_buf_grown_cap(const ul_buf_t *b, size_t extra);
/* Appends printf-formatted text of any length; UL_ENOMEM, or UL_EINVAL for a bad format. */
int ul_buf_printf(ul_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int ul_buf_vprintf(ul_buf_t *b, const char *fmt, va_list ap);
/* Appends the decimal / lowercase-hex form of v. */
int ul_buf_append_u64(ul_buf_t *b, uint64_t v);
int ul_buf_append_hex(ul_buf_t *b, uint64_t v);
/* Appends s as the inside of a JSON string (quotes not included). Bytes that are not valid
 * UTF-8 become U+FFFD, so the result is always valid JSON text. */
int ul_buf_append_json_str(ul_buf_t *b, const char *s, size_t n);
/* Appends an OpenAI-style error body, {"error":{"message","type","param","code"}}, the one
 * builder of it: the HTTP layer's 4xx, the api's validation errors and a stream's error
 * event. type NULL: "server_error"; param and code NULL: null. UL_ENOMEM. */
int ul_buf_error_body(ul_buf_t *b, const char *type, const char *param, const char *code,
                      const char *message);
/* Drops the first n bytes. */
void ul_buf_consume(ul_buf_t *b, size_t n);
void ul_buf_free(ul_buf_t *b);
static inline int ul_buf_puts(ul_buf_t *b, const char *s) { return ul_buf_append(b, s, strlen(s)); }
/* NUL-terminates the contents (not counted in len) and returns them; NULL on ENOMEM. */
const char *ul_buf_cstr(ul_buf_t *b);

#endif
