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

/* Control bytes in a line (a client's newline in a logged field would start a forged line)
 * become \xNN; the line is cut where the escapes no longer fit. Returns the new length. */
static size_t escape_controls(const char *in, size_t n, char *out, size_t cap) {
    static const char hex[] = "0123456789abcdef";
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)in[i];
        int ctl = ch < 0x20 || ch == 0x7f;
        if (w + (ctl ? 4 : 1) > cap) break;
        if (!ctl) {
            out[w++] = (char)ch;
            continue;
        }
        out[w++] = '\\';
        out[w++] = 'x';
        out[w++] = hex[ch >> 4];
        out[w++] = hex[ch & 15];
    }
    return w;
}

void ul_log_write(ul_log_level_t level, const char *fmt, ...) {
    char msg[4096], line[4096 + 64];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     ts.tv_nsec / 1000000, g_names[level]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (m < 0) m = 0;
    size_t mlen = (size_t)m < sizeof msg ? (size_t)m : sizeof msg - 1;
    size_t len = (size_t)n + escape_controls(msg, mlen, line + n, sizeof line - (size_t)n - 1);
    line[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
}

/* logfmt's rule: bare when every byte is one of these (no space, quote, '=' or '\\'). */
static int bare_ok(unsigned char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           (ch && strchr("-._~/:%@!$&'()*+,;?[]", ch));
}

const char *ul_log_field(const char *s, size_t n, char *out, size_t cap) {
    static const char hex[] = "0123456789abcdef";
    if (cap < 8) return "\"\"";
    if (!s) s = "", n = 0;
    int bare = n > 0;
    for (size_t i = 0; i < n && bare; i++) bare = bare_ok((unsigned char)s[i]);
    size_t w = 0, room = cap - 5; /* closing quote, "...", NUL */
    if (!bare) out[w++] = '"';
    size_t i = 0;
    for (; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        int esc = !bare && (ch < 0x20 || ch >= 0x7f || ch == '"' || ch == '\\');
        size_t need = esc ? (ch == '"' || ch == '\\' ? 2 : 4) : 1;
        if (w + need > room) break;
        if (!esc) {
            out[w++] = (char)ch;
        } else if (ch == '"' || ch == '\\') {
            out[w++] = '\\';
            out[w++] = (char)ch;
        } else {
            out[w++] = '\\';
            out[w++] = 'x';
            out[w++] = hex[ch >> 4];
            out[w++] = hex[ch & 15];
        }
    }
    if (i < n) {
        memcpy(out + w, "...", 3);
        w += 3;
    }
    if (!bare) out[w++] = '"';
    out[w] = '\0';
    return out;
}

void ul_assert_fail(const char *expr, const char *file, int line) {
    fprintf(stderr, "uvllm: assertion failed: %s (%s:%d)\n", expr, file, line);
    abort();
}
