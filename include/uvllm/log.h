/* Levelled logging to stderr. Thread-safe (one write(2) per line).
 * Request-path lines carry conn= and req= ids by convention. */
#ifndef UVLLM_LOG_H
#define UVLLM_LOG_H

typedef enum {
    UL_LOG_LEVEL_DEBUG,
    UL_LOG_LEVEL_INFO,
    UL_LOG_LEVEL_WARN,
    UL_LOG_LEVEL_ERROR,
    UL_LOG_LEVEL_OFF
} ul_log_level_t;

void ul_log_set_level(ul_log_level_t level);
ul_log_level_t ul_log_get_level(void);
/* Parses "debug|info|warn|error|off"; returns 0 or UL_EINVAL. */
int ul_log_parse_level(const char *s, ul_log_level_t *out);
/* Writes one line; control characters in the formatted text are written as \xNN, so no
 * value can start a line of its own. */
void ul_log_write(ul_log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A value a client controls (a path, a request id, a user name) as one logfmt field value:
 * bare when it is non-empty and made only of URL-safe characters, else in double quotes with
 * '"', '\\', control and non-ASCII bytes escaped (\", \\, \xNN), so it can neither end
 * the line nor pose as another field. Cut with "..." to fit cap (at least 8). Returns out. */
const char *ul_log_field(const char *s, size_t n, char *out, size_t cap);

#define UL_LOG_(lvl, ...)                                                                          \
    do {                                                                                           \
        if ((lvl) >= ul_log_get_level()) ul_log_write((lvl), __VA_ARGS__);                         \
    } while (0)
#define UL_LOG_DEBUG(...) UL_LOG_(UL_LOG_LEVEL_DEBUG, __VA_ARGS__)
#define UL_LOG_INFO(...) UL_LOG_(UL_LOG_LEVEL_INFO, __VA_ARGS__)
#define UL_LOG_WARN(...) UL_LOG_(UL_LOG_LEVEL_WARN, __VA_ARGS__)
#define UL_LOG_ERROR(...) UL_LOG_(UL_LOG_LEVEL_ERROR, __VA_ARGS__)

/* Always on, independent of NDEBUG: guards invariants, never input validation. */
#define UL_ASSERT(x)                                                                               \
    do {                                                                                           \
        if (!(x)) ul_assert_fail(#x, __FILE__, __LINE__);                                          \
    } while (0)
_Noreturn void ul_assert_fail(const char *expr, const char *file, int line);

#endif
