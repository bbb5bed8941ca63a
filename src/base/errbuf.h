/* A caller's error-message buffer: parsers and compilers that take (char *err, size_t cap)
 * write the first failure they meet into it, so the message a user sees names the cause
 * and not whatever failed on the way out. */
#ifndef UL_BASE_ERRBUF_H
#define UL_BASE_ERRBUF_H

#include <stddef.h>

/* Formats the message into err when err is non-NULL, cap > 0 and err is still empty
 * (the first failure wins); returns code, so a caller writes `return ul_errbuf_set(...)`. */
int ul_errbuf_set(char *err, size_t cap, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
