/* Levelled logging: one formatted line, one write(2), so lines from the loop thread and
 * worker threads never interleave mid-line. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "uvllm/err.h"
#include "uvllm/log.h"

static _Atomic int g_level = UL_LOG_LEVEL_INFO;
static const char *const g_names[] = {"debug", "info", "warn", "error", "off"};

void ul_log_set_level(ul_log_level_t level) { atomic_store(&g_level, (int)level); }
ul_log_level_t ul_log_get_level(void) { return (ul_log_level_t)atomic_load(&g_level); }

int ul_log_parse_level(const char *s, ul_log_level_t *out) {
    for (int i = 0; i <= UL_LOG_LEVEL_OFF; i++) {
        if (strcmp(s, g_names[i]) == 0) {
            *out = (ul_log_level_t)i;
            return 0;
        }
    }
    return UL_EINVAL;
}

void ul_log_write(ul_log_level_t level, const char *fmt, ...) {
    char line[4096];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     ts.tv_nsec / 1000000, g_names[level]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (m < 0) m = 0;
    size_t len = (size_t)n + (size_t)m;
    if (len > sizeof line - 2) len = sizeof line - 2;
    line[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
}

void ul_assert_fail(const char *expr, const char *file, int line) {
    fprintf(stderr, "uvllm: assertion failed: %s (%s:%d)\n", expr, file, line);
    abort();
}
