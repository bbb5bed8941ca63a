/* The server on 127.0.0.1:0 inside the test, driven by a blocking client thread: keep-alive,
 * pipelining, limits (431, 413, 400, 408, 503), 100-continue, chunked bodies, SSE on 1.1 and
 * 1.0, disconnect -> on_abort, backpressure and graceful shutdown. Every test ends with the
 * server shut down and uv_loop_close(loop) == 0. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client.h"
#include "uvllm/err.h"

static int get(cl_conn_t *c, const char *path, cl_resp_t *r) {
    char req[256];
    snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path);
    return cl_request(c, req, r);
}

#define GET_HEALTH "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"

/* client on the default config, with HARNESS_RUN's checks; the server's counters at the end. */
static ul_http_stats_t run_default(client_fn client) {
    harness_t h;
    harness_config(&h);
    HARNESS_RUN(&h, client);
    return h.srv.stats;
}

/* ---- keep-alive, routing, pipelining ---- */

static int keepalive_client(harness_t *h, char *msg, size_t cap) {
    cl_conn_t c;
    cl_resp_t r;
    CHECK(cl_connect(&c, h->port) == 0, "connect");
    for (int i = 0; i < 3; i++) {
        CHECK(get(&c, "/health", &r) == 0, "request %d failed", i);
        CHECK(r.status == 200, "status %d", r.status);
        CHECK(strcmp(r.body, "{\"status\":\"ok\"}") == 0, "body '%s'", r.body);
        char v[64];
        CHECK(cl_header(&r, "Content-Type", v, sizeof v) == 0 && strcmp(v, "application/json") == 0,
              "content-type");
        CHECK(cl_header(&r, "Connection", v, sizeof v) != 0, "unexpected Connection header");
        cl_resp_free(&r);
    }
    /* HTTP/1.0 with keep-alive is announced; without it the server closes. */
    CHECK(cl_send_str(&c, "GET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n") == 0, "s");
    CHECK(cl_read_response(&c, &r, 0) == 0 && r.status == 200, "1.0 keep-alive");
    char v[64];
    CHECK(cl_header(&r, "Connection", v, sizeof v) == 0 && strcasecmp(v, "keep-alive") == 0,
          "1.0 keep-alive header");
    cl_resp_free(&r);
    CHECK(cl_send_str(&c, "GET /health HTTP/1.0\r\n\r\n") == 0, "s");
    CHECK(cl_read_response(&c, &r, 0) == 0 && r.status == 200, "1.0 close");
    return cl_expect_closing(&c, &r, 3000, msg, cap); /* the server closes the 1.0 connection */
}

Test(loopback, keepalive_round_trip) {
    ul_http_stats_t st = run_default(keepalive_client);
    cr_assert_eq(st.requests_total, 5);
    cr_assert_eq(st.conns_total, 1);
    cr_assert_eq(st.conns_open, 0);
    cr_assert_gt(st.bytes_out, 5 * 50);
}

static int routing_client(harness_t *h, char *msg, size_t cap) {
    cl_conn_t c;
    cl_resp_t r;
    char v[128];
    CHECK(cl_connect(&c, h->port) == 0, "connect");
    CHECK(get(&c, "/nope", &r) == 0 && r.status == 404, "404 expected, got %d", r.status);
    CHECK(strstr(r.body, "\"error\"") && strstr(r.body, "\"param\":null"), "404 body %s", r.body);
    cl_resp_free(&r);
    CHECK(get(&c, "/only-post", &r) == 0 && r.status == 405, "405 expected, got %d", r.status);
    CHECK(cl_header(&r, "Allow", v, sizeof v) == 0 && strcmp(v, "POST") == 0, "Allow '%s'", v);
    cl_resp_free(&r);
    /* query split from the path */
    CHECK(cl_send_str(&c, "GET /echo?a=1&b=2 HTTP/1.1\r\nX-Echo-Query: 1\r\n\r\n") == 0, "s");
    CHECK(cl_read_response(&c, &r, 0) == 0 && r.status == 200, "echo query %d", r.status);
    CHECK(strcmp(r.body, "a=1&b=2") == 0, "query '%s'", r.body);
    cl_resp_free(&r);
    /* header values: trimmed, empty ones read as "", lookup ignores case */
    const char *hreqs[][2] = {
        {"GET /echo HTTP/1.1\r\nX-Echo-Header: x-empty\r\nX-Empty:\r\nX-Next: n\r\n\r\n", "[]"},
        {"GET /echo HTTP/1.1\r\nX-Echo-Header: X-SPACED\r\nx-spaced:   a b  \t\r\n\r\n", "[a b]"},
        {"GET /echo HTTP/1.1\r\nX-Empty:\r\nX-Echo-Header: x-next\r\nX-Next: n\r\n\r\n", "[n]"},
        {"GET /echo HTTP/1.1\r\nX-Echo-Header: x-missing\r\n\r\n", "[(none)]"},
    };
    for (size_t i = 0; i < sizeof hreqs / sizeof hreqs[0]; i++) {
        CHECK(cl_send_str(&c, hreqs[i][0]) == 0, "s");
        CHECK(cl_read_response(&c, &r, 0) == 0 && r.status == 200, "header echo %zu", i);
        CHECK(strcmp(r.body, hreqs[i][1]) == 0, "header echo %zu: '%s'", i, r.body);
        cl_resp_free(&r);
    }
    /* HEAD on a GET route: headers with the length, no body */
    CHECK(cl_send_str(&c, "HEAD /health HTTP/1.1\r\n\r\n") == 0, "s");
    CHECK(cl_read_head(&c, &r) == 0 && r.status == 200, "HEAD");
    CHECK(cl_header(&r, "Content-Length", v, sizeof v) == 0 && strcmp(v, "15") == 0, "HEAD len");
    /* handler error -> 500, connection still usable */
    CHECK(get(&c, "/fail", &r) == 0 && r.status == 500, "500 expected, got %d", r.status);
    cl_resp_free(&r);
    CHECK(get(&c, "/health", &r) == 0 && r.status == 200, "after HEAD/500: %d", r.status);
    cl_resp_free(&r);
    cl_close(&c);
    return 0;
}

HARNESS_TEST(loopback, routing_404_405_head_query, routing_client)

static int pipeline_client(harness_t *h, char *msg, size_t cap) {
    cl_conn_t c;
    cl_resp_t r;
    CHECK(cl_connect(&c, h->port) == 0, "connect");
    /* The async request in the middle answers 30 ms later; order must hold. */
    const char *reqs = "POST /echo HTTP/1.1\r\nContent-Length: 3\r\n\r\none"
                       "GET /async HTTP/1.1\r\n\r\n"
                       "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                       "3\r\nthr\r\n2\r\nee\r\n0\r\n\r\n"
                       "GET /health HTTP/1.1\r\n\r\n";
    CHECK(cl_send_str(&c, reqs) == 0, "send");
    const char *want[] = {"one", "async", "three", "{\"status\":\"ok\"}"};
    for (int i = 0; i < 4; i++) {
        CHECK(cl_read_response(&c, &r, 0) == 0, "response %d missing", i);
        CHECK(r.status == 200 && strcmp(r.body, want[i]) == 0, "response %d: %d '%s'", i, r.status,
              r.body);
        cl_resp_free(&r);
    }
    cl_close(&c);
    return 0;
}

static int pipeline_many_client(harness_t *h, char *msg, size_t cap) {
    cl_conn_t c;
    cl_resp_t r;
    CHECK(cl_connect(&c, h->port) == 0, "connect");
    static char reqs[200 * 64];
    size_t n = 0;
    for (int i = 0; i < 200; i++)
        n += (size_t)snprintf(reqs + n, sizeof reqs - n,
                              "GET /echo?%d HTTP/1.1\r\nX-Echo-Query: 1\r\n\r\n", i);
    CHECK(cl_send(&c, reqs, n) == 0, "send");
    for (int i = 0; i < 200; i++) {
        char want[16];
        snprintf(want, sizeof want, "%d", i);
        CHECK(cl_read_response(&c, &r, 0) == 0, "response %d missing", i);
        CHECK(r.status == 200 && strcmp(r.body, want) == 0, "response %d: '%s'", i, r.body);
        cl_resp_free(&r);
    }
    cl_close(&c);
    return 0;
}

Test(loopback, pipelined_200_in_one_write) {
    cr_assert_eq(run_default(pipeline_many_client).requests_total, 200);
}

/* A client that half-closes after its requests still gets every answer, then EOF; an
 * open (async) request at EOF counts as a disconnect. */
static int half_close_client(harness_t *h, char *msg, size_t cap) {
    enum { N = 3000 }; /* ~80 KB of requests: more than one read buffer */
    static char reqs[N * 32];
    size_t n = 0;
    for (int i = 0; i < N; i++)
        n += (size_t)snprintf(reqs + n, sizeof reqs - n, "GET /health HTTP/1.1\r\n\r\n");
    cl_conn_t c;
    cl_resp_t r;
    CHECK(cl_connect_send(&c, h->port, reqs) == 0, "send");
    shutdown(c.fd, SHUT_WR);
    for (int i = 0; i < N; i++) {
        CHECK(cl_read_response(&c, &r, 0) == 0 && r.status == 200, "response %d of %d", i, N);
        cl_resp_free(&r);
    }
    CHECK(cl_wait_closed(&c, 3000), "no EOF after the last answer");
    cl_close(&c);

    CHECK(cl_connect_send(&c, h->port, "GET /hang HTTP/1.1\r\n\r\n") == 0, "send");
    for (int i = 0; i < 200 && atomic_load(&h->async_pending) == 0; i++) usleep(1000);
    shutdown(c.fd, SHUT_WR);
    for (int i = 0; i < 300 && atomic_load(&h->aborts) == 0; i++) usleep(10 * 1000);
    CHECK(atomic_load(&h->aborts) == 1, "half-close did not abort the open request");
    CHECK(cl_wait_closed(&c, 3000), "connection not closed");
    cl_close(&c);
    return 0;
}

Test(loopback, half_close_answers_pipeline_then_closes) {
    cr_assert_eq(run_default(half_close_client).requests_total, 3001);
}

Test(loopback, pipelined_in_order_with_async_and_chunked) {
    cr_assert_eq(run_default(pipeline_client).requests_total, 4);
}

/* ---- limits ---- */

static int limits_client(harness_t *h, char *msg, size_t cap) {
    cl_conn_t c;
    /* 431: headers just over the limit */
    static char big[20000];
    int n = snprintf(big, sizeof big, "GET /health HTTP/1.1\r\nX-Big: ");
    memset(big + n, 'a', 16384);
    strcpy(big + n + 16384, "\r\n\r\n");
    if (cl_refused(h, big, 431, msg, cap)) return -1;
    /* headers exactly under the limit pass */
    CHECK(cl_connect(&c, h->port) == 0, "connect");
    n = snprintf(big, sizeof big, "GET /health HTTP/1.1\r\nX-Big: ");
    size_t fill = h->cfg.max_header_bytes - (size_t)n - 4;
    memset(big + n, 'a', fill);
    strcpy(big + n + fill, "\r\n\r\n");
    CHECK(strlen(big) == h->cfg.max_header_bytes, "test setup");
    CHECK(cl_send_str(&c, big) == 0, "send");
    cl_resp_t r;
    CHECK(cl_read_response(&c, &r, 0) == 0 && r.status == 200, "16 KiB head: %d", r.status);
    cl_resp_free(&r);
    cl_close(&c);
    /* 413 by Content-Length, answered without reading the body */
    if (cl_refused(h, "POST /echo HTTP/1.1\r\nContent-Length: 2000\r\n\r\n", 413, msg, cap))
        return -1;
    /* 413 by a chunked body that grows over the limit */
    CHECK(cl_connect_send(&c, h->port,
                          "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n") == 0,
          "s");
    static char chunk[800];
    memset(chunk, 'b', sizeof chunk);
    for (int i = 0; i < 2; i++) {
        CHECK(cl_send_str(&c, "320\r\n") == 0 && cl_send(&c, chunk, sizeof chunk) == 0 &&
                  cl_send_str(&c, "\r\n") == 0,
              "chunk");
    }
    if (cl_expect_error_close(&c, 413, msg, cap)) return -1;
    /* 400: not HTTP */
    if (cl_refused(h, "HELLO WORLD\r\n\r\n", 400, msg, cap)) return -1;
    /* 400: bad header syntax after a good request on the same connection */
    CHECK(cl_connect_send(
              &c, h->port,
              "GET /health HTTP/1.1\r\n\r\nGET /health HTTP/1.1\r\nBad Header\r\n\r\n") == 0,
          "s");
    CHECK(cl_read_response(&c, &r, 0) == 0 && r.status == 200, "first of two");
    cl_resp_free(&r);
    if (cl_expect_error_close(&c, 400, msg, cap)) return -1;
    return 0;
}

HARNESS_TEST(loopback, limits_431_413_400, limits_client, h.cfg.max_body = 1024)

static int continue_client(harness_t *h, char *msg, size_t cap) {
    cl_conn_t c;
    CHECK(cl_connect(&c, h->port) == 0, "connect");
    if (cl_expect_continue(&c, CONTINUE_HEAD, "hello", msg, cap)) return -1;
    /* too large: 413 straight away, no 100 */
    CHECK(cl_send_str(&c, "POST /echo HTTP/1.1\r\nContent-Length: 5000\r\n"
                          "Expect: 100-continue\r\n\r\n") == 0,
          "s");
    if (cl_expect_error_close(&c, 413, msg, cap)) return -1;
    return 0;
}

HARNESS_TEST(loopback, expect_100_continue, continue_client, h.cfg.max_body = 1024)

static int timeout_client(harness_t *h, char *msg, size_t cap) {
    cl_conn_t c;
    if (cl_refused(h, "GET /health HTTP/1.1\r\nHost: slow", 408, msg, cap)) return -1;
    /* slowloris: a byte every 20 ms keeps the connection busy but not alive */
    CHECK(cl_connect(&c, h->port) == 0, "connect");
    const char *slow =
        "GET /health HTTP/1.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    int closed_at = -1;
    for (int i = 0; slow[i]; i++) {
        if (cl_send(&c, slow + i, 1) != 0) {
            closed_at = i;
            break;
        }
        usleep(20 * 1000);
        struct pollfd pf = {.fd = c.fd, .events = POLLIN};
        if (poll(&pf, 1, 0) > 0) {
            closed_at = i;
            break;
        }
    }
    CHECK(closed_at > 0 && closed_at < 40, "trickling client not cut off (at %d)", closed_at);
    if (cl_expect_error_close(&c, 408, msg, cap)) return -1;
    /* an idle keep-alive connection is closed after idle_timeout */
    CHECK(cl_connect(&c, h->port) == 0, "connect");
    if (cl_expect_status(&c, GET_HEALTH, 200, msg, cap)) return -1;
    CHECK(cl_wait_closed(&c, 3000), "idle connection not closed");
    cl_close(&c);
    return 0;
}

HARNESS_TEST(loopback, header_and_idle_timeouts, timeout_client, h.cfg.header_timeout_ms = 200,
             h.cfg.idle_timeout_ms = 300)

static int maxconns_client(harness_t *h, char *msg, size_t cap) {
    cl_conn_t a, b;
    CHECK(cl_connect(&a, h->port) == 0, "connect a");
    if (cl_expect_status(&a, GET_HEALTH, 200, msg, cap)) return -1;
    CHECK(cl_connect(&b, h->port) == 0, "connect b");
    if (cl_expect_error_close(&b, 503, msg, cap)) return -1;
    if (cl_expect_status(&a, GET_HEALTH, 200, msg, cap)) return -1;
    cl_close(&a);
    return 0;
}

Test(loopback, max_conns_503) {
    harness_t h;
    harness_config(&h);
    h.cfg.max_conns = 1;
    HARNESS_RUN(&h, maxconns_client);
    cr_assert_eq(h.srv.stats.conns_rejected, 1);
}

/* ---- SSE ---- */

static int sse_client(harness_t *h, char *msg, size_t cap) {
    cl_conn_t c;
    cl_resp_t r;
    char v[64];
    const char *want = "data: {\"i\":0}\n\ndata: {\"i\":1}\n\ndata: {\"i\":2}\n\ndata: [DONE]\n\n";
    CHECK(cl_connect(&c, h->port) == 0, "connect");
    CHECK(get(&c, "/stream", &r) == 0 && r.status == 200, "stream status %d", r.status);
    CHECK(r.chunked, "1.1 stream not chunked");
    CHECK(cl_header(&r, "Content-Type", v, sizeof v) == 0 && strcmp(v, "text/event-stream") == 0,
          "content type");
    CHECK(cl_header(&r, "Cache-Control", v, sizeof v) == 0 && strcmp(v, "no-cache") == 0, "cc");
    CHECK(cl_header(&r, "X-Accel-Buffering", v, sizeof v) == 0 && strcmp(v, "no") == 0, "xab");
    CHECK(strcmp(r.body, want) == 0, "events '%s'", r.body);
    cl_resp_free(&r);
    /* keep-alive after the stream */
    if (cl_expect_status(&c, GET_HEALTH, 200, msg, cap)) return -1;
    cl_close(&c);
    /* HTTP/1.0: no chunking, close-delimited */
    CHECK(cl_connect_send(&c, h->port, "GET /stream HTTP/1.0\r\n\r\n") == 0, "s");
    CHECK(cl_read_response(&c, &r, 1) == 0 && r.status == 200, "1.0 stream");
    CHECK(!r.chunked && cl_header(&r, "Transfer-Encoding", v, sizeof v) != 0, "1.0 chunked");
    CHECK(cl_header(&r, "Connection", v, sizeof v) == 0 && strcmp(v, "close") == 0, "1.0 conn");
    CHECK(strcmp(r.body, want) == 0, "1.0 events '%s'", r.body);
    cl_resp_free(&r);
    cl_close(&c);
    return 0;
}

Test(loopback, sse_chunked_and_http10) { cr_assert_eq(run_default(sse_client).streams_active, 0); }

static int disconnect_client(harness_t *h, char *msg, size_t cap) {
    cl_conn_t c;
    CHECK(cl_connect_send(&c, h->port, "GET /hang HTTP/1.1\r\n\r\n") == 0, "s");
    usleep(200 * 1000);
    CHECK(atomic_load(&h->aborts) == 0, "aborted early");
    cl_close(&c); /* disconnect while the request is open */
    for (int i = 0; i < 300 && atomic_load(&h->aborts) == 0; i++) usleep(10 * 1000);
    CHECK(atomic_load(&h->aborts) == 1, "on_abort not called after disconnect");
    CHECK(atomic_load(&h->last_abort_reason) == UL_ECLOSED, "reason %d",
          atomic_load(&h->last_abort_reason));
    return 0;
}

Test(loopback, disconnect_aborts_open_request) {
    cr_assert_eq(run_default(disconnect_client).conns_open, 0);
}

static int ping_client(harness_t *h, char *msg, size_t cap) {
    cl_conn_t c;
    cl_resp_t r;
    CHECK(cl_connect_send(&c, h->port, "GET /silent HTTP/1.1\r\n\r\n") == 0, "s");
    CHECK(cl_read_head(&c, &r) == 0 && r.status == 200, "head");
    /* nothing is sent by the handler; within ~3 ping periods a ping chunk must arrive */
    char line[64];
    size_t got = 0;
    while (got < sizeof line - 1) {
        ssize_t n = recv(c.fd, line + got, sizeof line - 1 - got, 0);
        CHECK(n > 0, "no ping received");
        got += (size_t)n;
        line[got] = '\0';
        if (strstr(line, ": ping\n\n")) break;
    }
    CHECK(strstr(line, ": ping\n\n") != NULL, "got '%s'", line);
    cl_close(&c);
    for (int i = 0; i < 300 && atomic_load(&h->aborts) == 0; i++) usleep(10 * 1000);
    CHECK(atomic_load(&h->aborts) == 1, "on_abort not called");
    return 0;
}

HARNESS_TEST(loopback, sse_ping_on_silence, ping_client, h.cfg.sse_ping_ms = 100)

static int backpressure_client(harness_t *h, char *msg, size_t cap) {
    cl_conn_t c;
    cl_resp_t r;
    CHECK(cl_connect_send(&c, h->port, "GET /flood HTTP/1.1\r\n\r\n") == 0, "s");
    /* not reading: the producer must stop at the soft limit */
    usleep(300 * 1000);
    int before = atomic_load(&h->stream_events);
    usleep(200 * 1000);
    CHECK(atomic_load(&h->stream_events) == before, "producer kept going: %d -> %d", before,
          atomic_load(&h->stream_events));
    CHECK(before < 2000, "never backpressured");
    /* draining lets it finish */
    CHECK(cl_read_response(&c, &r, 0) == 0 && r.status == 200, "stream");
    CHECK(atomic_load(&h->drains) > 0, "on_drain never called");
    CHECK(r.body_len > 2000 * 4096, "short stream %zu", r.body_len);
    cl_resp_free(&r);
    cl_close(&c);
    /* a producer that ignores backpressure gets UL_EFULL and the connection is closed */
    CHECK(cl_connect_send(&c, h->port, "GET /flood-ignore HTTP/1.1\r\n\r\n") == 0, "s");
    for (int i = 0; i < 500 && atomic_load(&h->aborts) == 0; i++) usleep(10 * 1000);
    CHECK(atomic_load(&h->efull) == 1, "no UL_EFULL");
    CHECK(atomic_load(&h->aborts) == 1, "no on_abort after the hard limit");
    CHECK(atomic_load(&h->last_abort_reason) == UL_EFULL, "reason %d",
          atomic_load(&h->last_abort_reason));
    cl_close(&c);
    return 0;
}

HARNESS_TEST(loopback, sse_backpressure_and_hard_limit, backpressure_client,
             h.cfg.out_soft_limit = 64 * 1024, h.cfg.out_hard_limit = 1024 * 1024)

/* ---- graceful shutdown ---- */

/* client on the default config but a shutdown grace of grace_ms (and linger_ms, 0: the
 * default), with HARNESS_RUN's checks; h stays for the test to read. */
static void run_grace(harness_t *h, uint64_t grace_ms, uint64_t linger_ms, client_fn client) {
    harness_config(h);
    h->shutdown_grace_ms = grace_ms;
    if (linger_ms) h->cfg.linger_ms = linger_ms;
    HARNESS_RUN(h, client);
}

/* client sockets left open across the shutdown, closed by the test afterwards */
static int g_fds[2] = {-1, -1};
static void close_fds(void) {
    for (int i = 0; i < 2; i++)
        if (g_fds[i] >= 0) close(g_fds[i]);
    g_fds[0] = g_fds[1] = -1;
}

static int shutdown_client(harness_t *h, char *msg, size_t cap) {
    cl_conn_t idle, busy;
    CHECK(cl_connect(&idle, h->port) == 0, "connect");
    if (cl_expect_status(&idle, GET_HEALTH, 200, msg, cap)) return -1;
    CHECK(cl_connect_send(&busy, h->port, "GET /async HTTP/1.1\r\n\r\n") == 0, "s");
    for (int i = 0; i < 100 && atomic_load(&h->async_pending) == 0; i++) usleep(1000);
    /* the harness shuts down as soon as this returns; the rest is checked below */
    g_fds[0] = idle.fd;
    g_fds[1] = busy.fd;
    return 0;
}

Test(loopback, shutdown_force_closes_everything) {
    harness_t h;
    /* the client returns with two connections still open (one with an open request):
     * shutdown(0) must close both, call on_abort and still let the loop close */
    run_grace(&h, 0, 0, shutdown_client);
    cr_assert_eq(h.srv.stats.conns_open, 0);
    cr_assert_eq(atomic_load(&h.aborts), 1);
    close_fds();
}

static int graceful_client(harness_t *h, char *msg, size_t cap) {
    cl_conn_t busy;
    cl_resp_t r;
    CHECK(cl_connect_send(&busy, h->port, "GET /stream HTTP/1.1\r\n\r\n") == 0, "s");
    CHECK(cl_read_head(&busy, &r) == 0 && r.status == 200, "stream head");
    g_fds[0] = busy.fd;
    return 0; /* shutdown (grace 2 s) begins while the stream is running */
}

static int drain_client(harness_t *h, char *msg, size_t cap) {
    cl_conn_t idle, busy, late;
    cl_resp_t r;
    CHECK(cl_connect(&idle, h->port) == 0, "connect");
    if (cl_expect_status(&idle, GET_HEALTH, 200, msg, cap)) return -1;
    CHECK(cl_connect_send(&busy, h->port, "GET /async HTTP/1.1\r\n\r\n") == 0, "s");
    for (int i = 0; i < 100 && atomic_load(&h->async_pending) == 0; i++) usleep(1000);
    CHECK(atomic_load(&h->async_pending) == 1, "async request not started");
    harness_shutdown(h);
    /* the listener is closed: new connections are refused */
    CHECK(cl_connect(&late, h->port) != 0, "connected to a draining server");
    /* the idle keep-alive connection is closed at once */
    CHECK(cl_wait_closed(&idle, 1000), "idle connection survived shutdown");
    cl_close(&idle);
    /* the in-flight request still gets its answer, marked as the last one */
    CHECK(cl_read_response(&busy, &r, 0) == 0 && r.status == 200, "in-flight answer");
    CHECK(strcmp(r.body, "async") == 0, "body '%s'", r.body);
    return cl_expect_closing(&busy, &r, 1000, msg, cap); /* while draining */
}

Test(loopback, shutdown_drains_refuses_and_answers_in_flight) {
    harness_t h;
    run_grace(&h, 5000, 0, drain_client);
    cr_assert_eq(atomic_load(&h.aborts), 0);
    cr_assert_eq(h.srv.stats.requests_total, 2);
}

Test(loopback, shutdown_lets_streams_finish) {
    harness_t h;
    run_grace(&h, 2000, 100, graceful_client); /* linger 100 ms: the client keeps its socket */
    cr_assert_eq(atomic_load(&h.aborts), 0, "stream was cut instead of finishing");
    cr_assert_eq(h.srv.stats.requests_total, 1);
    close_fds();
}
