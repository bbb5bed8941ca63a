/* Server set-up and tear-down: config validation, listen errors (bad address, port in use)
 * that still shut down cleanly, port 0 picking a real port, "localhost", shutdown before
 * listen, and shutdown while connections the loop has not read yet hold requests (the test
 * drives the loop itself, so "not read yet" is certain). Each test ends with
 * uv_loop_close == 0. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "net/http.h"
#include "uvllm/err.h"

static int g_closed;
static void on_closed(ul_http_server_t *s) { g_closed++; }

/* shutdown + run the loop until the callback; returns uv_loop_close's result */
static int finish(uv_loop_t *loop, ul_http_server_t *s) {
    g_closed = 0;
    ul_http_server_shutdown(s, 0, on_closed);
    uv_run(loop, UV_RUN_DEFAULT);
    cr_assert_eq(g_closed, 1, "shutdown callback ran %d times", g_closed);
    return uv_loop_close(loop);
}

/* A loop, a router and a server for host, port 0: initialised, not listening. */
static void open_server(uv_loop_t *loop, ul_router_t *r, ul_http_config_t *c, ul_http_server_t *s,
                        const char *host) {
    uv_loop_init(loop);
    ul_router_init(r);
    ul_http_config_default(c);
    c->port = 0;
    c->host = host;
    cr_assert_eq(ul_http_server_init(loop, s, c, r), 0);
}

Test(server, config_validation) {
    uv_loop_t loop;
    uv_loop_init(&loop);
    ul_router_t r;
    ul_router_init(&r);
    ul_http_server_t s;
    ul_http_config_t c;
    ul_http_config_default(&c);
    cr_assert_eq(c.max_header_bytes, 16384);
    cr_assert_eq(c.max_body, 8u << 20);
    cr_assert_eq(c.header_timeout_ms, 10000);
    cr_assert_eq(c.idle_timeout_ms, 75000);
    cr_assert_eq(c.stall_timeout_ms, 60000);
    cr_assert_eq(c.sse_ping_ms, 15000);
    cr_assert_geq(c.backlog, 1024);

    ul_http_config_t bad = c;
    bad.out_hard_limit = bad.out_soft_limit - 1;
    cr_assert_eq(ul_http_server_init(&loop, &s, &bad, &r), UL_EINVAL);
    bad = c;
    bad.port = 70000;
    cr_assert_eq(ul_http_server_init(&loop, &s, &bad, &r), UL_EINVAL);
    bad = c;
    bad.max_conns = 0;
    cr_assert_eq(ul_http_server_init(&loop, &s, &bad, &r), UL_EINVAL);
    bad = c;
    bad.header_timeout_ms = 0;
    cr_assert_eq(ul_http_server_init(&loop, &s, &bad, &r), UL_EINVAL);
    bad = c;
    bad.host = NULL;
    cr_assert_eq(ul_http_server_init(&loop, &s, &bad, &r), UL_EINVAL);
    /* a failed init holds no handles */
    cr_assert_eq(uv_loop_close(&loop), 0);
}

Test(server, port_zero_localhost_and_clean_close) {
    uv_loop_t loop;
    ul_router_t r;
    ul_http_config_t c;
    ul_http_server_t s;
    open_server(&loop, &r, &c, &s, "localhost");
    cr_assert_eq(ul_http_server_port(&s), 0);
    cr_assert_eq(ul_http_server_listen(&s), 0);
    cr_assert_gt(ul_http_server_port(&s), 0);
    cr_assert_eq(ul_http_server_listen(&s), UL_ESTATE);
    cr_assert_not(ul_http_server_draining(&s));
    /* a second server on the same port fails with EADDRINUSE and still closes cleanly */
    ul_http_server_t s2;
    c.port = ul_http_server_port(&s);
    c.host = "127.0.0.1";
    cr_assert_eq(ul_http_server_init(&loop, &s2, &c, &r), 0);
    cr_assert_eq(ul_http_server_listen(&s2), UV_EADDRINUSE);
    g_closed = 0;
    ul_http_server_shutdown(&s2, 0, on_closed);
    cr_assert(ul_http_server_draining(&s2));
    uv_run(&loop, UV_RUN_NOWAIT); /* s2's handles close; s keeps listening */
    cr_assert_eq(g_closed, 1);
    cr_assert_not(ul_http_server_draining(&s));
    cr_assert_eq(finish(&loop, &s), 0);
}

Test(server, bad_address_and_shutdown_before_listen) {
    uv_loop_t loop;
    ul_router_t r;
    ul_http_config_t c;
    ul_http_server_t s;
    open_server(&loop, &r, &c, &s, "not-an-address");
    cr_assert_eq(ul_http_server_listen(&s), UL_EINVAL);
    cr_assert_eq(finish(&loop, &s), 0);

    uv_loop_init(&loop);
    c.host = "::1";
    cr_assert_eq(ul_http_server_init(&loop, &s, &c, &r), 0);
    cr_assert_eq(finish(&loop, &s), 0); /* never listened */
}

static int h_hello(ul_http_req_t *req, void *data) {
    return ul_http_respond(req, 200, "text/plain", "hello", 5);
}

/* A blocking client socket connected to 127.0.0.1:port (the kernel completes the handshake
 * whether or not the server's loop runs), with a 5 s receive timeout. */
static int connect_to(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(fd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0, "connect: %s", strerror(errno));
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

static void send_str(int fd, const char *s) {
    cr_assert_eq(send(fd, s, strlen(s), MSG_NOSIGNAL), (ssize_t)strlen(s));
}

/* Everything the server sends until it closes; asserts the close was a FIN, not a reset. */
static void read_to_close(int fd, char *out, size_t cap, const char *who) {
    size_t n = 0;
    for (;;) {
        ssize_t r = recv(fd, out + n, cap - 1 - n, 0);
        cr_assert_geq(r, 0, "%s: %s after %zu bytes (the request was lost)", who, strerror(errno),
                      n);
        if (r == 0) break;
        n += (size_t)r;
        cr_assert_lt(n, cap - 1);
    }
    out[n] = '\0';
}

static const char hello_req[] = "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n";

Test(server, shutdown_answers_requests_the_loop_had_not_read) {
    uv_loop_t loop;
    uv_loop_init(&loop);
    ul_router_t r;
    ul_router_init(&r);
    cr_assert_eq(ul_router_add(&r, UL_HTTP_GET, "/hello", h_hello, NULL), 0);
    ul_http_config_t c;
    ul_http_config_default(&c);
    c.port = 0;
    c.access_log = 0;
    c.linger_ms = 100; /* the client reads its answers only after the loop is done */
    ul_http_server_t s;
    cr_assert_eq(ul_http_server_init(&loop, &s, &c, &r), 0);
    cr_assert_eq(ul_http_server_listen(&s), 0);
    int port = ul_http_server_port(&s);

    char buf[4096];
    /* waiting: a kept-alive connection whose second request sits unread in its socket */
    int waiting = connect_to(port);
    send_str(waiting, hello_req);
    for (int i = 0; i < 1000 && s.stats.requests_total < 1; i++) uv_run(&loop, UV_RUN_NOWAIT);
    cr_assert_eq(s.stats.requests_total, 1);
    cr_assert_gt(recv(waiting, buf, sizeof buf, 0), 0);
    /* idle: a kept-alive connection with nothing more to say, closed at once */
    int idle = connect_to(port);
    send_str(idle, hello_req);
    for (int i = 0; i < 1000 && s.stats.requests_total < 2; i++) uv_run(&loop, UV_RUN_NOWAIT);
    cr_assert_eq(s.stats.requests_total, 2);
    cr_assert_gt(recv(idle, buf, sizeof buf, 0), 0);
    /* fresh: accepted by the loop, nothing sent before the shutdown */
    int fresh = connect_to(port);
    for (int i = 0; i < 1000 && s.stats.conns_open < 3; i++) uv_run(&loop, UV_RUN_NOWAIT);
    cr_assert_eq(s.stats.conns_open, 3);
    /* From here the loop does not run until the shutdown. waiting's second request reaches
     * its socket; queued's handshake is completed by the kernel, its request sent, and the
     * loop never accepted it. */
    send_str(waiting, hello_req);
    int queued = connect_to(port);
    send_str(queued, hello_req);
    usleep(20000); /* loopback delivers both */

    g_closed = 0;
    ul_http_server_shutdown(&s, 5000, on_closed);
    send_str(fresh, hello_req); /* after the shutdown began */
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_assert_eq(g_closed, 1);

    struct {
        int fd;
        const char *who;
    } answered[] = {{fresh, "fresh"}, {queued, "queued"}, {waiting, "waiting"}};
    for (size_t i = 0; i < sizeof answered / sizeof answered[0]; i++) {
        read_to_close(answered[i].fd, buf, sizeof buf, answered[i].who);
        cr_assert(strncmp(buf, "HTTP/1.1 200", 12) == 0, "%s: %.40s", answered[i].who, buf);
        cr_assert(strstr(buf, "Connection: close\r\n"), "%s: not the last answer: %s",
                  answered[i].who, buf);
        cr_assert(strstr(buf, "\r\n\r\nhello"), "%s: %s", answered[i].who, buf);
        close(answered[i].fd);
    }
    read_to_close(idle, buf, sizeof buf, "idle");
    cr_assert_eq(buf[0], '\0', "idle connection got more: %s", buf);
    close(idle);
    cr_assert_eq(s.stats.requests_total, 5);
    cr_assert_eq(uv_loop_close(&loop), 0);
}
