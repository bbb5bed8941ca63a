/* Hostile clients against net (issue 23): what the strict parser refuses, trailers that
 * must not count as headers, credentials checked before a body is read, deadlines for slow
 * bodies, the memory budget and backpressure for answers nobody reads, the shutdown
 * deadline's last words, and the descriptor limit. Each test fails on a server without
 * the matching defence. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client.h"
#include "uvllm/err.h"

/* ---- strict HTTP ---------------------------------------------------------------------- */

static int strict_client(harness_t *h, char *msg, size_t cap) {
    static const struct {
        const char *req;
        int status;
    } cases[] = {
        /* obsolete line folding, even inside Content-Length */
        {"POST /echo HTTP/1.1\r\nContent-Length:\r\n 5\r\n\r\nhello", 400},
        {"GET /health HTTP/1.1\r\nX-A: a\r\n  b\r\n\r\n", 400},
        {"GET /health HTTP/1.1\r\nX-A: a\r\n\tb\r\n\r\n", 400},
        /* junk after chunk data */
        {"POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloJUNK\r\n0\r\n\r\n",
         400},
        /* a space in a header name */
        {"GET /health HTTP/1.1\r\nX Bad: 1\r\n\r\n", 400},
        /* transfer codings other than exactly chunked */
        {"POST /echo HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
         501},
        {"POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n", 400},
        {"POST /echo HTTP/1.1\r\nTransfer-Encoding: identity\r\n\r\n", 501},
        /* bare LF line ends */
        {"GET /health HTTP/1.1\nHost: x\n\n", 400},
        /* and what stays accepted */
        {"POST /echo HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 200},
        {"GET /health HTTP/1.1\r\nX-Spaced:   a b  \r\n\r\n", 200},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int st = cl_status_of(h, cases[i].req, NULL);
        CHECK(st == cases[i].status, "case %zu: status %d, want %d", i, st, cases[i].status);
    }
    return 0;
}

HARNESS_TEST(hostile, strict_http, strict_client)

/* ---- trailers ------------------------------------------------------------------------- */

static int trailer_client(harness_t *h, char *msg, size_t cap) {
    cl_resp_t r;
    /* a trailer field is not a header: the handler asking for X-Secret finds none */
    int st = cl_status_of(h,
                          "POST /echo HTTP/1.1\r\nX-Echo-Header: x-secret\r\n"
                          "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n"
                          "X-Secret: from-the-trailer\r\n\r\n",
                          &r);
    CHECK(st == 200, "status %d", st);
    CHECK(!strcmp(r.body, "[(none)]"), "a trailer reached the handler as a header: %s", r.body);
    cl_resp_free(&r);
    /* a flood of tiny trailer fields is cut at the header limit, not buffered */
    cl_conn_t c;
    CHECK(cl_connect_send(&c, h->port,
                          "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                          "5\r\nhello\r\n0\r\n") == 0,
          "send");
    static char flood[64 * 1024];
    for (size_t i = 0; i + 4 <= sizeof flood; i += 4) memcpy(flood + i, "a:\r\n", 4);
    int sent = 0;
    for (int i = 0; i < 64 && cl_send(&c, flood, sizeof flood) == 0; i++) sent++;
    CHECK(cl_read_response(&c, &r, 0) == 0 && r.status == 431, "trailer flood: %d after %d KiB",
          r.status, sent * 64);
    cl_resp_free(&r);
    cl_close(&c);
    return 0;
}

HARNESS_TEST(hostile, trailers_are_dropped_and_bounded, trailer_client)

/* ---- credentials at the head ---------------------------------------------------------- */

static int deny_head(ul_http_req_t *req, void *data) {
    if (!ul_http_req_header(req, "x-deny")) return 0;
    cr_assert_eq(req->body_len, 0, "on_head runs before the body is read");
    ul_http_respond_error(req, 401, "invalid_request_error", "invalid_api_key", "no");
    return 1;
}

static int head_client(harness_t *h, char *msg, size_t cap) {
    cl_conn_t c;
    cl_resp_t r;
    /* Expect: 100-continue without credentials: 401 at once, no 100 Continue first */
    CHECK(cl_connect_send(&c, h->port,
                          "POST /echo HTTP/1.1\r\nX-Deny: 1\r\nContent-Length: 5\r\n"
                          "Expect: 100-continue\r\n\r\n") == 0,
          "send");
    CHECK(cl_read_head(&c, &r) == 0, "no answer");
    CHECK(r.status == 401, "status %d (100 Continue before the check?)", r.status);
    cl_close(&c);
    /* a body sent anyway is never read; the connection ends after the 401 */
    CHECK(cl_connect_send(&c, h->port,
                          "POST /echo HTTP/1.1\r\nX-Deny: 1\r\nContent-Length: 5\r\n\r\nhello"
                          "GET /health HTTP/1.1\r\n\r\n") == 0,
          "send");
    CHECK(cl_read_response(&c, &r, 0) == 0 && r.status == 401, "status %d", r.status);
    char v[32];
    CHECK(cl_header(&r, "Connection", v, sizeof v) == 0 && !strcmp(v, "close"), "keep-alive");
    cl_resp_free(&r);
    CHECK(cl_wait_closed(&c, 3000), "connection kept after a refused head");
    cl_close(&c);
    /* allowed heads go on: 100 Continue, then the body */
    CHECK(cl_connect(&c, h->port) == 0, "connect");
    if (cl_expect_continue(&c, CONTINUE_HEAD, "hello", msg, cap)) return -1;
    cl_close(&c);
    return 0;
}

HARNESS_TEST(hostile, credentials_checked_before_the_body, head_client, h.cfg.on_head = deny_head)

/* ---- slow bodies ---------------------------------------------------------------------- */

/* Trickles a body byte by byte every gap_ms until the server answers; the answer's status
 * and how long it took. */
static int trickle(harness_t *h, int gap_ms, int *ms) {
    cl_conn_t c;
    cl_resp_t r;
    if (cl_connect(&c, h->port)) return -1;
    cl_send_str(&c, "POST /echo HTTP/1.1\r\nContent-Length: 100000\r\n\r\n");
    int waited = 0, st = 0;
    for (; waited < 8000; waited += gap_ms) {
        struct pollfd p = {.fd = c.fd, .events = POLLIN};
        if (poll(&p, 1, gap_ms) > 0) break;
        if (cl_send(&c, "x", 1)) break;
    }
    st = cl_read_response(&c, &r, 0) == 0 ? r.status : 0;
    if (st) cl_resp_free(&r);
    cl_close(&c);
    *ms = waited;
    return st;
}

static int slow_client(harness_t *h, char *msg, size_t cap) {
    int ms;
    /* each byte comes well within the idle gap, yet the body averages 20 B/s */
    int st = trickle(h, 50, &ms);
    CHECK(st == 408, "trickled body: status %d after %d ms", st, ms);
    CHECK(ms < 4000, "cut only after %d ms", ms);
    return 0;
}

Test(hostile, slow_body_is_cut_by_rate) {
    harness_t h;
    harness_config(&h);
    h.cfg.header_timeout_ms = 300; /* the grace before the rate counts, and the idle gap */
    h.cfg.min_body_rate = 1000;
    HARNESS_RUN(&h, slow_client);
    cr_assert_geq(h.srv.stats.timeouts, 1);
}

static int deadline_client(harness_t *h, char *msg, size_t cap) {
    int ms;
    int st = trickle(h, 20, &ms); /* 50 B/s: over the rate, but the deadline comes */
    CHECK(st == 408, "body past the request deadline: status %d after %d ms", st, ms);
    CHECK(ms >= 700 && ms < 3000, "cut after %d ms (deadline 1000)", ms);
    return 0;
}

HARNESS_TEST(hostile, request_deadline, deadline_client, h.cfg.request_timeout_ms = 1000,
             h.cfg.min_body_rate = 10)

/* ---- memory: backpressure and the budget ---------------------------------------------- */

/* Pipelines many requests with large answers and reads none: the server must stop parsing
 * once out_soft_limit of answers wait, not build every answer. */
static int unread_client(harness_t *h, char *msg, size_t cap) {
    cl_conn_t c;
    CHECK(cl_connect(&c, h->port) == 0, "connect");
    int rcv = 4096;
    setsockopt(c.fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof rcv);
    static char reqs[200 * 40];
    size_t n = 0;
    for (int i = 0; i < 200; i++)
        n += (size_t)sprintf(reqs + n, "GET /big?100000 HTTP/1.1\r\n\r\n");
    CHECK(cl_send(&c, reqs, n) == 0, "send");
    usleep(500 * 1000);
    ul_http_stats_t st;
    CHECK(harness_stats(h, &st) == 0, "stats");
    CHECK(st.requests_total < 20, "%llu answers built for a client that reads none",
          (unsigned long long)st.requests_total);
    CHECK(st.mem_buffered < 2u << 20, "%llu bytes held", (unsigned long long)st.mem_buffered);
    cl_close(&c);
    return 0;
}

HARNESS_TEST(hostile, unread_answers_stop_the_parser, unread_client)

/* An answer of /take: n bytes, byte i 'a' + i % 23. */
static int take_body_ok(const cl_resp_t *r, size_t n) {
    if (r->status != 200 || r->body_len != n) return 0;
    for (size_t i = 0; i < n; i++)
        if (r->body[i] != (char)('a' + i % 23)) return 0;
    return 1;
}

/* Answers handed over whole (ul_http_respond_buf: the tokenizer's and chat jobs' large
 * answers, sent from the job's buffer with no copy on the loop) leave byte for byte and in
 * order with the answers pipelined behind them, to a client that reads late (the socket
 * takes a part of 3 MB, the rest waits in libuv while the next answers are queued). */
static int take_client(harness_t *h, char *msg, size_t cap) {
    static const size_t sizes[] = {3000000, 100, 70000, 2000000, 65536};
    cl_conn_t c;
    cl_resp_t r;
    CHECK(cl_connect(&c, h->port) == 0, "connect");
    char reqs[512];
    size_t n = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        n += (size_t)sprintf(reqs + n, "GET /take?%zu HTTP/1.1\r\n\r\n", sizes[i]);
    n += (size_t)sprintf(reqs + n, "GET /health HTTP/1.1\r\n\r\n");
    CHECK(cl_send(&c, reqs, n) == 0, "send");
    usleep(300 * 1000);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        CHECK(cl_read_response(&c, &r, 0) == 0, "answer %zu missing", i);
        int ok = take_body_ok(&r, sizes[i]);
        size_t got = r.body_len;
        int st = r.status;
        cl_resp_free(&r);
        CHECK(ok, "answer %zu: status %d, %zu bytes, expected %zu in order", i, st, got, sizes[i]);
    }
    CHECK(cl_read_response(&c, &r, 0) == 0 && r.status == 200 && strstr(r.body, "ok"),
          "the health answer after them");
    cl_resp_free(&r);
    cl_close(&c);
    /* over one connection's budget: 413, as for a copied answer */
    int st = cl_status_of(h, "GET /take?12000000 HTTP/1.1\r\n\r\n", NULL);
    CHECK(st == 413, "a taken answer over the connection budget: %d", st);
    return 0;
}

/* Runs fn under a memory budget of total_mib MiB in all and 10 MiB a connection, a reader
 * stalled after evict_ms (< 0: the default); the accounting must return to 0 after. Returns
 * how many requests and answers the budget refused. */
static uint64_t run_budget(client_fn fn, size_t total_mib, int64_t evict_ms) {
    harness_t h;
    harness_config(&h);
    h.cfg.max_buffered_mem = total_mib << 20;
    h.cfg.max_conn_mem = 10u << 20;
    if (evict_ms >= 0) h.cfg.mem_evict_after_ms = (uint64_t)evict_ms;
    HARNESS_RUN(&h, fn);
    cr_assert_eq(h.srv.stats.mem_buffered, 0, "accounting must return to 0: %llu",
                 (unsigned long long)h.srv.stats.mem_buffered);
    return h.srv.stats.mem_refused;
}

Test(hostile, answers_handed_over_whole_keep_their_bytes_and_order) {
    run_budget(take_client, 40, -1);
}

/* A stalled reader: of an 8 MB answer the kernel takes a few MB, the rest stays in the
 * server. Then 8 MB to a GET route (405 once the whole body is in: echoing it would double
 * it), a body that fits one connection's budget but not the total beside the reader. */
static char big_body[8100000];

static int stall_a_reader(harness_t *h, cl_conn_t *a, char *msg, size_t cap) {
    CHECK(cl_connect(a, h->port) == 0, "connect");
    int rcv = 4096;
    setsockopt(a->fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof rcv);
    CHECK(cl_send_str(a, "GET /big?8000000 HTTP/1.1\r\n\r\n") == 0, "send");
    /* the loop may be slow to get to it on a loaded machine: wait up to 5 s */
    ul_http_stats_t hs = {0};
    for (int i = 0; i < 500 && !harness_stats(h, &hs) && hs.mem_buffered <= 6000000; i++)
        usleep(10 * 1000);
    CHECK(hs.mem_buffered > 6000000, "held %llu", (unsigned long long)hs.mem_buffered);
    return 0;
}

static size_t big_request(void) {
    int hn = sprintf(big_body, "POST /health HTTP/1.1\r\nContent-Length: %d\r\n\r\n", 8000000);
    memset(big_body + hn, 'x', 8000000);
    return (size_t)hn + 8000000;
}

/* A stalled reader a, then the 8 MB body on a new connection b, answered with status. With
 * must_send the whole body must go out; else the server may stop reading half-way. */
static int big_beside_stalled(harness_t *h, cl_conn_t *a, cl_conn_t *b, int status, int must_send,
                              char *msg, size_t cap) {
    if (stall_a_reader(h, a, msg, cap)) return -1;
    size_t n = big_request();
    CHECK(cl_connect(b, h->port) == 0, "connect");
    int sent = cl_send(b, big_body, n);
    CHECK(!must_send || sent == 0, "send");
    return cl_expect_read(b, status, msg, cap);
}

/* The server has evicted n stalled readers so far. */
static int evictions_are(harness_t *h, uint64_t n, char *msg, size_t cap) {
    ul_http_stats_t hs = {0};
    CHECK(harness_stats(h, &hs) == 0 && hs.mem_evicted == n, "evictions %llu, want %llu",
          (unsigned long long)hs.mem_evicted, (unsigned long long)n);
    return 0;
}

/* The reader has not stalled for mem_evict_after_ms yet (an hour here): the body is a 503
 * and the reader is kept. */
static int refuse_client(harness_t *h, char *msg, size_t cap) {
    cl_conn_t a, b;
    if (big_beside_stalled(h, &a, &b, 503, 0, msg, cap)) return -1; /* over the total */
    cl_close(&b);
    if (evictions_are(h, 0, msg, cap)) return -1;
    cl_close(&a);
    CHECK(cl_status_of(h, "GET /health HTTP/1.1\r\n\r\n", NULL) == 200, "health");
    return 0;
}

Test(hostile, memory_budget_refuses_beside_a_reader_not_yet_stalled) {
    cr_assert_geq(run_budget(refuse_client, 20, 3600 * 1000), 1);
}

/* The reader counts as stalled at once (mem_evict_after_ms 0): it is closed, with a reset,
 * to make room, and the body goes in. An answer over one connection's budget is a 413. */
static int evict_client(harness_t *h, char *msg, size_t cap) {
    cl_conn_t a, b;
    cl_resp_t r;
    if (big_beside_stalled(h, &a, &b, 405, 1, msg, cap)) return -1; /* after eviction */
    if (evictions_are(h, 1, msg, cap)) return -1;
    /* the stalled reader's connection is reset: what the kernel held for it is gone too */
    char sink[65536];
    ssize_t k;
    size_t got = 0;
    while ((k = recv(a.fd, sink, sizeof sink, 0)) > 0) got += (size_t)k;
    CHECK(k < 0 && errno == ECONNRESET && got < 8000000,
          "the stalled reader's connection ended with %zd (%s) after %zu bytes, not a reset", k,
          k < 0 ? strerror(errno) : "EOF", got);
    cl_close(&a);
    cl_close(&b);
    int st = cl_status_of(h, "GET /big?12000000 HTTP/1.1\r\n\r\n", &r);
    CHECK(st == 413, "answer over the connection budget: %d", st);
    cl_resp_free(&r);
    CHECK(cl_status_of(h, "GET /health HTTP/1.1\r\n\r\n", NULL) == 200, "health");
    return 0;
}

Test(hostile, memory_budget_evicts_stalled_readers) {
    cr_assert_geq(run_budget(evict_client, 20, 0), 1);
}

Test(hostile, too_many_header_fields) {
    harness_t h;
    harness_config(&h);
    h.cfg.max_headers = 8;
    h.client = NULL;
    HARNESS_RUN(&h, ({
        int f(harness_t * hh, char *msg, size_t cap) {
            char req[1024];
            int n = sprintf(req, "GET /health HTTP/1.1\r\n");
            for (int i = 0; i < 9; i++) n += sprintf(req + n, "X-%d: 1\r\n", i);
            sprintf(req + n, "\r\n");
            int st = cl_status_of(hh, req, NULL);
            CHECK(st == 431, "9 fields: %d", st);
            return 0;
        }
        f;
    }));
}

/* ---- the shutdown deadline ------------------------------------------------------------ */

static int cut_client(harness_t *h, char *msg, size_t cap) {
    cl_conn_t s, q;
    cl_resp_t r;
    CHECK(cl_connect_send(&s, h->port, "GET /silent HTTP/1.1\r\n\r\n") == 0, "send");
    CHECK(cl_read_head(&s, &r) == 0 && r.status == 200, "stream head");
    CHECK(cl_connect_send(&q, h->port, "GET /hang HTTP/1.1\r\n\r\n") == 0, "send");
    for (int i = 0; i < 200 && atomic_load(&h->async_pending) == 0; i++) usleep(1000);
    harness_shutdown(h);
    /* the unanswered request gets a 503 */
    CHECK(cl_read_response(&q, &r, 0) == 0 && r.status == 503, "hang: %d", r.status);
    CHECK(strstr(r.body, "shutting_down"), "503 body %s", r.body);
    cl_resp_free(&r);
    cl_close(&q);
    /* the stream: an error event, then the end without the terminating chunk */
    char all[4096];
    size_t n = 0;
    memcpy(all, s.buf, s.len);
    n = s.len;
    for (;;) {
        ssize_t k = recv(s.fd, all + n, sizeof all - 1 - n, 0);
        if (k <= 0) break;
        n += (size_t)k;
    }
    all[n] = '\0';
    CHECK(strstr(all, "data: {\"error\":") && strstr(all, "\"code\":\"shutting_down\""),
          "no error event: '%s'", all);
    CHECK(!strstr(all, "0\r\n\r\n") && !strstr(all, "[DONE]"), "stream ended cleanly: '%s'", all);
    cl_close(&s);
    return 0;
}

Test(hostile, shutdown_deadline_cuts_with_last_words) {
    char path[] = "/tmp/ul_net_cut_XXXXXX";
    int fd = mkstemp(path);
    int saved = dup(2);
    dup2(fd, 2);
    harness_t h;
    harness_config(&h);
    h.shutdown_grace_ms = 100;
    int rc = harness_run(&h, cut_client);
    dup2(saved, 2);
    close(saved);
    char log[16384];
    ssize_t n = pread(fd, log, sizeof log - 1, 0);
    log[n > 0 ? n : 0] = '\0';
    close(fd);
    unlink(path);
    cr_assert_eq(h.client_rc, 0, "client: %s", h.msg);
    cr_assert_eq(rc, 0);
    cr_assert(strstr(log, "GET /silent status=200") && strstr(log, "cut=shutdown"), "%s", log);
    cr_assert(strstr(log, "GET /hang status=503"), "%s", log);
    cr_assert_eq(atomic_load(&h.aborts), 2, "owners hear on_abort");
}

/* ---- descriptors ---------------------------------------------------------------------- */

Test(hostile, max_conns_fits_the_descriptor_limit) {
    struct rlimit rl = {.rlim_cur = 200, .rlim_max = 200};
    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0); /* this test's process only */
    uv_loop_t loop;
    uv_loop_init(&loop);
    ul_router_t router;
    ul_router_init(&router);
    ul_http_config_t cfg;
    ul_http_config_default(&cfg);
    cfg.port = 0;
    ul_http_server_t s;
    cr_assert_eq(ul_http_server_init(&loop, &s, &cfg, &router), 0);
    cr_assert_eq(ul_http_server_listen(&s), 0);
    cr_assert_eq(s.cfg.max_conns, 136, "4096 connections cannot have descriptors under 200");
    ul_http_server_shutdown(&s, 0, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_assert_eq(uv_loop_close(&loop), 0);
}
