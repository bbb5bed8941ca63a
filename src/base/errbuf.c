/* The first-failure-wins error message (errbuf.h). */
#include <stdarg.h>
#include <stdio.h>

#include "base/errbuf.h"

int ul_errbuf_set(char *err, size_t cap, int code, const char *fmt, ...) {
    if (err && cap && !err[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, cap, fmt, ap);
        va_end(ap);
    }
    return code;
}
