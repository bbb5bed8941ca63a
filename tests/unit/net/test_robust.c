/* Hostile input smoke test (a fixed-seed, in-process cousin of a fuzzer): hundreds of
 * connections send mutated, truncated and re-sliced requests, some read what comes back,
 * most vanish mid-request. The server must answer every reply with a well-formed status
 * line, keep serving /health, and still close every handle at shutdown (run it under
 * ASan to catch memory errors on these paths). */
#include <criterion/criterion.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client.h"

static const char *const g_seeds[] = {
    "GET /health HTTP/1.1\r\nHost: x\r\n\r\n",
    "POST /echo HTTP/1.1\r\nContent-Length: 11\r\n\r\nhello world",
    "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    "POST /echo HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc",
    "GET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /async HTTP/1.0\r\n\r\n",
    "GET /echo?x=1 HTTP/1.1\r\nX-Echo-Query: 1\r\n\r\nGET /health HTTP/1.1\r\n\r\n",
    "GET /stream HTTP/1.1\r\n\r\n",
    "GET /hang HTTP/1.1\r\n\r\n",
};

static unsigned g_rng = 12345;
static unsigned rnd(unsigned n) {
    g_rng = g_rng * 1103515245u + 12345u;
    return (g_rng >> 8) % n;
}

static size_t mutate(char *out, size_t cap) {
    const char *seed = g_seeds[rnd(sizeof g_seeds / sizeof g_seeds[0])];
    size_t n = strlen(seed);
    memcpy(out, seed, n);
    int ops = (int)rnd(4);
    for (int k = 0; k < ops && n > 0; k++) {
        size_t at = rnd((unsigned)n);
        switch (rnd(5)) {
        case 0:
            out[at] = (char)rnd(256);
            break; /* flip */
        case 1:
            n = at;
            break; /* truncate */
        case 2:    /* insert */
            if (n + 1 < cap) {
                memmove(out + at + 1, out + at, n - at);
                out[at] = "\r\n: \t\0x0"[rnd(7)];
                n++;
            }
            break;
        case 3: /* duplicate the tail (pipelining and repeated headers) */
            if (2 * n - at < cap) {
                memcpy(out + n, out + at, n - at);
                n += n - at;
            }
            break;
        default:
            memmove(out + at, out + at + 1, n - at - 1);
            n--; /* delete */
        }
    }
    return n;
}

static int robust_client(harness_t *h, char *msg, size_t cap) {
    char buf[1024];
    for (int i = 0; i < 400; i++) {
        cl_conn_t c;
        CHECK(cl_connect(&c, h->port) == 0, "connect %d", i);
        size_t n = mutate(buf, sizeof buf);
        /* send in random slices so the parser sees every split point */
        for (size_t off = 0; off < n;) {
            size_t k = 1 + rnd((unsigned)(n - off));
            if (cl_send(&c, buf + off, k)) break;
            off += k;
        }
        if (i % 8 == 0) {
            /* read whatever comes within 50 ms: each reply must start with a status line */
            struct pollfd p = {.fd = c.fd, .events = POLLIN};
            if (poll(&p, 1, 50) > 0) {
                ssize_t got = recv(c.fd, c.buf, sizeof c.buf - 1, MSG_DONTWAIT);
                if (got > 0) {
                    c.buf[got] = '\0';
                    CHECK(strncmp(c.buf, "HTTP/1.1 ", 9) == 0, "input %d: bad reply '%.40s'", i,
                          c.buf);
                }
            }
        }
        cl_close(&c);
    }
    int st = cl_status_of(h, "GET /health HTTP/1.1\r\n\r\n", NULL);
    CHECK(st == 200, "health after abuse: %d", st);
    return 0;
}

Test(robust, mutated_requests_never_break_the_server) {
    harness_t h;
    harness_config(&h);
    h.cfg.header_timeout_ms = 300;
    h.cfg.max_body = 4096;
    HARNESS_RUN(&h, robust_client);
    cr_assert_eq(h.srv.stats.conns_open, 0);
    cr_assert_eq(h.srv.stats.streams_active, 0);
    cr_assert_eq(h.srv.stats.conns_total, 401);
}
