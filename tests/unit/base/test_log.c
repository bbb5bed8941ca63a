/* Log lines a client cannot forge: control characters in a line are escaped, and values a
 * client controls are written as one logfmt value (quoted and escaped unless plain). */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "uvllm/log.h"

/* Runs one log call with stderr sent to a file; returns what was written (static). */
static const char *captured(const char *user, const char *rid) {
    static char text[8192];
    char path[] = "/tmp/ul_log_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    int saved = dup(2);
    dup2(fd, 2);
    char q1[128], q2[128];
    UL_LOG_INFO("user=%s request_id=%s status=200", ul_log_field(user, strlen(user), q1, sizeof q1),
                ul_log_field(rid, strlen(rid), q2, sizeof q2));
    UL_LOG_INFO("raw %s", user);
    dup2(saved, 2);
    close(saved);
    lseek(fd, 0, SEEK_SET);
    ssize_t n = read(fd, text, sizeof text - 1);
    text[n > 0 ? n : 0] = '\0';
    close(fd);
    unlink(path);
    return text;
}

static int lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

Test(log, client_values_cannot_forge_lines_or_fields) {
    ul_log_set_level(UL_LOG_LEVEL_INFO);
    const char *t = captured("bob\n2026-01-01T00:00:00.000Z info  forged", "abc status=500");
    cr_assert_eq(lines(t), 2, "two calls, two lines: %s", t);
    cr_assert(strstr(t, "user=\"bob\\x0a2026-01-01T00:00:00.000Z info  forged\""), "%s", t);
    cr_assert(strstr(t, "request_id=\"abc status=500\" status=200"), "%s", t);
    cr_assert(strstr(t, "raw bob\\x0a2026"), "control bytes escaped in any line: %s", t);
}

Test(log, field_quoting) {
    char b[64];
    cr_assert_str_eq(ul_log_field("/v1/models", 10, b, sizeof b), "/v1/models");
    cr_assert_str_eq(ul_log_field("req-7_a.b", 9, b, sizeof b), "req-7_a.b");
    cr_assert_str_eq(ul_log_field("", 0, b, sizeof b), "\"\"");
    cr_assert_str_eq(ul_log_field("a\"b\\c", 5, b, sizeof b), "\"a\\\"b\\\\c\"");
    cr_assert_str_eq(ul_log_field("x=1", 3, b, sizeof b), "\"x=1\"");
    cr_assert_str_eq(ul_log_field("\xc3\xa9", 2, b, sizeof b), "\"\\xc3\\xa9\"");
    char small[12];
    cr_assert_str_eq(ul_log_field("a b c d e f g h", 15, small, sizeof small), "\"a b c ...\"");
}
