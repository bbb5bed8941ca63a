/* What operators read: the "listening on http://HOST:PORT" line with the real port (tests
 * and scripts parse it) and one access-log line per request in the documented shape
 * "conn=ID req=N METHOD PATH status=S bytes=B dur_ms=D", including requests net rejects
 * itself. stderr is redirected to a file around the server's run. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"

static int log_client(harness_t *h, char *msg, size_t cap) {
    cl_conn_t c;
    CHECK(cl_connect_send(&c, h->port,
                          "GET /health HTTP/1.1\r\n\r\nPOST /echo HTTP/1.1\r\n"
                          "Content-Length: 4\r\n\r\nabcd") == 0,
          "send");
    int rc = cl_expect_read(&c, 200, msg, cap) || cl_expect_read(&c, 200, msg, cap) ||
             cl_expect_status(&c, "NOT HTTP\r\n\r\n", 400, msg, cap);
    cl_close(&c);
    return rc ? -1 : 0;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

Test(accesslog, listening_line_and_one_line_per_request) {
    char path[] = "/tmp/ul_net_log_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    int saved = dup(2);
    dup2(fd, 2);
    harness_t h;
    harness_config(&h);
    int rc = harness_run(&h, log_client);
    dup2(saved, 2);
    close(saved);
    close(fd);
    cr_assert_eq(h.client_rc, 0, "client: %s", h.msg);
    cr_assert_eq(rc, 0);
    char *log = slurp(path);
    unlink(path);
    cr_assert_not_null(log);

    char want[128];
    snprintf(want, sizeof want, " info  listening on http://127.0.0.1:%d\n", h.port);
    cr_assert_not_null(strstr(log, want), "no '%s' in:\n%s", want, log);

    const char *lines[] = {
        "conn=1 req=1 GET /health status=200 bytes=", "conn=1 req=2 POST /echo status=200 bytes=",
        "conn=1 req=3 - - status=400 bytes="};
    for (size_t i = 0; i < 3; i++) {
        const char *p = strstr(log, lines[i]);
        cr_assert_not_null(p, "missing '%s' in:\n%s", lines[i], log);
        unsigned long long bytes;
        double ms;
        const char *tail = p + strlen(lines[i]);
        cr_assert_eq(sscanf(tail, "%llu dur_ms=%lf", &bytes, &ms), 2, "line %zu: '%.60s'", i, tail);
        cr_assert_gt(bytes, 60, "bytes counts the head and body");
        cr_assert(ms >= 0 && ms < 5000);
    }
    /* exactly one line per request */
    int n = 0;
    for (const char *p = log; (p = strstr(p, " status=")); p++) n++;
    cr_assert_eq(n, 3, "access lines: %d\n%s", n, log);
}
