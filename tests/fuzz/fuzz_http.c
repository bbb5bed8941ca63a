/* libFuzzer harness for the network input path: raw bytes go over a real TCP connection
 * into the HTTP server (llhttp + src/net limits, chunked bodies, pipelining, Expect,
 * keep-alive), through the router, to the OpenAI API handlers (JSON validation,
 * /v1/completions streaming and not) served by the scheduler on the null backend.
 *
 * The server is built by ul_server_init, as `uvllm serve` builds it (src/server: null
 * backend -> scheduler -> api with its chat template, ChatML -> router -> HTTP, readiness
 * canary included), on a libuv loop run from the fuzzer's thread. Timeouts are tens of
 * milliseconds so an incomplete request
 * ends fast. Per input a client socket connects, writes the input (split in two writes at
 * a point taken from the input, to exercise partial reads), shuts down its write side, and
 * reads until EOF (or, when the input's first byte says so, keeps it open until the
 * server's 20 ms idle/header timeout closes it, so complete answers are read). Then what a user
 * would notice is checked: the server closed the connection within the cap (no hang), its answer
 * (if any) starts with an HTTP/1.x status line, the open-connection count is back to 0, and no
 * sequence is left in the scheduler (a leaked sequence holds KV pages forever); every 128 inputs a
 * fresh GET /health must answer 200. ASan/UBSan/LeakSanitizer catch the rest.
 *
 * The parser is llhttp built strict (CMakeLists.txt); start-up checks that it is (a body
 * with junk after its chunk data and a folded header line must be answered 400), so the
 * harness never fuzzes a lenient parser by accident. The head check (on_head: the API key
 * hook, with a /metrics key so its 401 path is reached), a small memory budget and short
 * request deadlines are on, so those paths are fuzzed too. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "server/server.h"
#include "uvllm/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* How long one input may take end to end before it counts as a hang. Generous against a
 * noisy shared machine; the server's own timeouts are ~50x shorter. */
#ifndef CAP_MS
#define CAP_MS 3000
#endif

static struct {
    uv_loop_t loop;
    ul_server_t sv;
    int port;
    uint64_t n_inputs;
} g;

static void die(const char *what) {
    fprintf(stderr, "fuzz_http: %s\n", what);
    __builtin_trap();
}

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static long exchange(const uint8_t *data, size_t size, size_t split, int keep_open, char *head,
                     size_t cap);
static void settle(void);

/* Inputs a lenient parser accepts: the strict one answers 400. */
static void strict_check(void) {
    static const char *const lenient[] = {
        "POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
        "2\r\n{}JUNK\r\n0\r\n\r\n",
        "GET /health HTTP/1.1\r\nX-A: a\r\n b\r\n\r\n",
        "GET /health HTTP/1.1\r\nX Bad: 1\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof lenient / sizeof lenient[0]; i++) {
        char head[32] = "";
        long n =
            exchange((const uint8_t *)lenient[i], strlen(lenient[i]), 0, 1, head, sizeof head - 1);
        if (n < 12 || memcmp(head, "HTTP/1.1 400", 12)) {
            fprintf(stderr, "fuzz_http: the HTTP parser is not strict: input %zu got '%.31s'\n", i,
                    head);
            __builtin_trap();
        }
        settle();
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    ul_log_set_level(UL_LOG_LEVEL_OFF);
    signal(SIGPIPE, SIG_IGN); /* the client may go away while the server writes */
    if (uv_loop_init(&g.loop)) die("uv_loop_init failed");
    ul_server_config_t cfg;
    ul_server_config_default(&cfg);
    /* A short context bounds what a fuzzed max_tokens can make the null backend generate. */
    cfg.null_ctx = 256;
    cfg.max_seqs = 64;
    cfg.port = 0;
    cfg.max_body = 64 << 10; /* small, so mutated Content-Lengths reach the 413 path */
    cfg.header_timeout = cfg.idle_timeout = 0.020;
    cfg.linger_ms = 20;
    cfg.no_access_log = 1;
    /* CORS on, so preflights and the Origin/X-Request-Id paths are fuzzed too */
    cfg.cors.v[cfg.cors.n++] = "https://ui.example";
    cfg.metrics_key = "fuzz-key"; /* the head check's 401 path */
    cfg.request_timeout = 0.060;
    cfg.max_buffered_mem = 16 << 20; /* mutated bodies and answers reach the budget's paths */
    cfg.max_conn_mem = 1 << 20;
    static char err[512];
    if (ul_server_config_check(&cfg, err, sizeof err)) die(err);
    if (ul_server_init(&g.loop, &g.sv, &cfg)) die(g.sv.err);
    g.port = ul_server_port(&g.sv);
    if (g.port <= 0) die("no port");
    strict_check();
    return 0;
}

/* Runs the server's loop without blocking, then waits (at most a few ms) until either the
 * loop or the client socket has something to do. */
static void pump(int cfd, short cevents) {
    uv_run(&g.loop, UV_RUN_NOWAIT);
    int t = uv_backend_timeout(&g.loop);
    if (t < 0 || t > 5) t = 5;
    struct pollfd p[2] = {{.fd = uv_backend_fd(&g.loop), .events = POLLIN},
                          {.fd = cfd, .events = cevents}};
    poll(p, cfd >= 0 ? 2 : 1, t);
}

/* Sends data (two writes split at `split`) on a fresh connection, half-closes unless
 * keep_open (then the server's idle or header timeout ends the connection), reads the
 * answer until EOF. Returns bytes received (first `cap` kept in `head`), or -1 when the
 * server did not close within CAP_MS. */
static long exchange(const uint8_t *data, size_t size, size_t split, int keep_open, char *head,
                     size_t cap) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) die("socket failed");
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)g.port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) && errno != EINPROGRESS)
        die("connect failed");
    uint64_t t0 = now_ms();
    size_t off = 0;
    long got = 0;
    int wr_done = 0, first_done = split == 0 || split >= size;
    char buf[16384];
    for (;;) {
        if (now_ms() - t0 > CAP_MS) {
            close(fd);
            return -1;
        }
        if (!wr_done) {
            size_t end = first_done ? size : split;
            if (off < end) {
                ssize_t n = send(fd, data + off, end - off, MSG_NOSIGNAL);
                if (n > 0)
                    off += (size_t)n;
                else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOTCONN)
                    wr_done = 1; /* server closed (error answer); read what it said */
            }
            if (!wr_done && off >= end) {
                if (!first_done) {
                    /* let the server see the first part on its own */
                    first_done = 1;
                    uv_run(&g.loop, UV_RUN_NOWAIT);
                } else {
                    if (!keep_open) shutdown(fd, SHUT_WR);
                    wr_done = 1;
                }
            }
        }
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n == 0) break;
        if (n > 0) {
            if ((size_t)got < cap)
                memcpy(head + got, buf,
                       (size_t)n < cap - (size_t)got ? (size_t)n : cap - (size_t)got);
            got += n;
            continue;
        }
        if (errno == ECONNRESET || errno == EPIPE) break; /* closed with input unread */
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOTCONN) break;
        pump(fd, (short)(POLLIN | (wr_done ? 0 : POLLOUT)));
    }
    close(fd);
    return got;
}

/* After the client saw EOF the server may still be closing its handle: let it finish. */
static void settle(void) {
    uint64_t t0 = now_ms();
    while (g.sv.http.stats.conns_open || ul_sched_n_active(&g.sv.sched)) {
        if (now_ms() - t0 > CAP_MS) {
            fprintf(
                stderr,
                "fuzz_http: after the client left: %llu connections open, %d sequences active\n",
                (unsigned long long)g.sv.http.stats.conns_open,
                (int)ul_sched_n_active(&g.sv.sched));
            __builtin_trap();
        }
        pump(-1, 0);
    }
}

static void check_health(void) {
    static const char req[] = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    char head[32] = "";
    long n = exchange((const uint8_t *)req, sizeof req - 1, 0, 1, head, sizeof head - 1);
    if (n < 12 || memcmp(head, "HTTP/1.1 200", 12)) {
        fprintf(stderr, "fuzz_http: GET /health did not answer 200 (got %ld bytes: %.31s)\n", n,
                head);
        __builtin_trap();
    }
    settle();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* The first byte: bit 0 keeps the client's write side open (a client that waits for
     * its answers; otherwise it half-closes at once, which the server treats as the client
     * leaving), bits 1-7 pick where the input is split into two writes (0: one write). */
    size_t split = 0;
    int keep_open = 0;
    if (size > 1) {
        keep_open = data[0] & 1;
        split = (size_t)(data[0] >> 1) * (size - 1) / 127;
        data++;
        size--;
    }
    char head[64];
    long got = exchange(data, size, split, keep_open, head, sizeof head);
    if (got < 0) {
        fprintf(stderr, "fuzz_http: the server did not close the connection within %d ms\n",
                CAP_MS);
        __builtin_trap();
    }
    /* whatever the input, the server's first bytes (if any) are an HTTP/1.x status line */
    if (got > 0 && (got < 9 || memcmp(head, "HTTP/1.", 7))) {
        fprintf(stderr, "fuzz_http: answer does not start with a status line: %.*s\n",
                (int)(got < 64 ? got : 64), head);
        __builtin_trap();
    }
    settle();
    if (++g.n_inputs % 128 == 0) check_health();
    return 0;
}
