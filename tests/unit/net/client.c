/* Blocking loopback client and the server harness for the net tests (see client.h). */
#include "client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "uvllm/err.h"

/* ---- client ------------------------------------------------------------------------- */

int cl_connect(cl_conn_t *c, int port) {
    c->len = 0;
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    if (c->fd < 0) return -1;
    struct timeval tv = {.tv_sec = 5};
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(c->fd);
        c->fd = -1;
        return -1;
    }
    return 0;
}

int cl_send(cl_conn_t *c, const char *data, size_t n) {
    while (n) {
        ssize_t w = send(c->fd, data, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        data += w;
        n -= (size_t)w;
    }
    return 0;
}

int cl_send_str(cl_conn_t *c, const char *s) { return cl_send(c, s, strlen(s)); }

/* Reads more bytes into the buffer; 0 on EOF, -1 on error/timeout, else bytes read. */
static ssize_t fill(cl_conn_t *c) {
    if (c->len == sizeof c->buf) return -1;
    for (;;) {
        ssize_t n = recv(c->fd, c->buf + c->len, sizeof c->buf - c->len, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n > 0) c->len += (size_t)n;
        return n;
    }
}

static void consume(cl_conn_t *c, size_t n) {
    memmove(c->buf, c->buf + n, c->len - n);
    c->len -= n;
}

int cl_read_head(cl_conn_t *c, cl_resp_t *r) {
    memset(r, 0, sizeof *r);
    for (;;) {
        char *end = memmem(c->buf, c->len, "\r\n\r\n", 4);
        if (end) {
            size_t n = (size_t)(end - c->buf) + 4;
            if (n >= sizeof r->head) return -1;
            memcpy(r->head, c->buf, n);
            r->head[n] = '\0';
            consume(c, n);
            if (sscanf(r->head, "HTTP/1.%*d %d", &r->status) != 1) return -1;
            return 0;
        }
        if (fill(c) <= 0) return -1;
    }
}

int cl_header(const cl_resp_t *r, const char *name, char *out, size_t cap) {
    size_t nl = strlen(name);
    const char *p = strstr(r->head, "\r\n");
    while (p && p[2] != '\r') {
        p += 2;
        if (strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
            const char *v = p + nl + 1;
            while (*v == ' ') v++;
            const char *e = strstr(v, "\r\n");
            size_t n = (size_t)(e - v);
            if (n >= cap) n = cap - 1;
            memcpy(out, v, n);
            out[n] = '\0';
            return 0;
        }
        p = strstr(p, "\r\n");
    }
    return -1;
}

/* Grows geometrically: a stream of many small chunks is not copied once per chunk. */
static int body_append(cl_resp_t *r, const char *p, size_t n) {
    char *b = r->body;
    if (r->body_len + n + 1 > r->body_cap) {
        size_t cap = r->body_cap ? r->body_cap : 4096;
        while (cap < r->body_len + n + 1) cap *= 2;
        if (!(b = realloc(r->body, cap))) return -1;
        r->body_cap = cap;
    }
    memcpy(b + r->body_len, p, n);
    r->body = b;
    r->body_len += n;
    b[r->body_len] = '\0';
    return 0;
}

static int read_exact(cl_conn_t *c, cl_resp_t *r, size_t n) {
    while (n) {
        if (c->len == 0 && fill(c) <= 0) return -1;
        size_t k = c->len < n ? c->len : n;
        if (body_append(r, c->buf, k)) return -1;
        consume(c, k);
        n -= k;
    }
    return 0;
}

static int read_line(cl_conn_t *c, char *out, size_t cap) {
    for (;;) {
        char *e = memmem(c->buf, c->len, "\r\n", 2);
        if (e) {
            size_t n = (size_t)(e - c->buf);
            if (n >= cap) return -1;
            memcpy(out, c->buf, n);
            out[n] = '\0';
            consume(c, n + 2);
            return 0;
        }
        if (fill(c) <= 0) return -1;
    }
}

int cl_read_response(cl_conn_t *c, cl_resp_t *r, int until_close) {
    if (cl_read_head(c, r)) return -1;
    if (body_append(r, "", 0)) return -1;
    char v[64];
    if (r->status == 100) return 0;
    if (cl_header(r, "Transfer-Encoding", v, sizeof v) == 0 && strcasecmp(v, "chunked") == 0) {
        r->chunked = 1;
        for (;;) {
            char line[64];
            if (read_line(c, line, sizeof line)) return -1;
            size_t n = strtoul(line, NULL, 16);
            if (n == 0) return read_line(c, line, sizeof line); /* final CRLF */
            if (read_exact(c, r, n) || read_line(c, line, sizeof line) || line[0]) return -1;
        }
    }
    if (cl_header(r, "Content-Length", v, sizeof v) == 0)
        return read_exact(c, r, strtoul(v, NULL, 10));
    if (!until_close) return 0;
    for (;;) {
        if (c->len) {
            if (body_append(r, c->buf, c->len)) return -1;
            c->len = 0;
        }
        ssize_t n = fill(c);
        if (n == 0) return 0;
        if (n < 0) return -1;
    }
}

int cl_wait_closed(cl_conn_t *c, int timeout_ms) {
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    for (int waited = 0; waited < timeout_ms; waited += 10) {
        if (poll(&p, 1, 10) > 0) {
            char tmp[4096];
            ssize_t n = recv(c->fd, tmp, sizeof tmp, MSG_DONTWAIT);
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return 1;
        }
    }
    return 0;
}

void cl_resp_free(cl_resp_t *r) {
    free(r->body);
    r->body = NULL;
    r->body_len = r->body_cap = 0;
}

void cl_close(cl_conn_t *c) {
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
}

int cl_request(cl_conn_t *c, const char *req, cl_resp_t *r) {
    if (cl_send_str(c, req)) return -1;
    return cl_read_response(c, r, 0);
}

int cl_connect_send(cl_conn_t *c, int port, const char *req) {
    if (cl_connect(c, port)) return -1;
    if (cl_send_str(c, req) == 0) return 0;
    cl_close(c);
    return -1;
}

int cl_expect_continue(cl_conn_t *c, const char *head, const char *body, char *msg, size_t cap) {
    cl_resp_t r;
    CHECK(cl_send_str(c, head) == 0, "send head");
    CHECK(cl_read_head(c, &r) == 0 && r.status == 100, "100 Continue expected: %d", r.status);
    CHECK(cl_send_str(c, body) == 0, "send body");
    CHECK(cl_read_response(c, &r, 0) == 0, "no answer after 100");
    int ok = r.status == 200 && strcmp(r.body, body) == 0;
    CHECK(ok, "echo after 100: %d '%s'", r.status, r.body);
    cl_resp_free(&r);
    return 0;
}

int cl_status_of(harness_t *h, const char *req, cl_resp_t *out) {
    cl_conn_t c;
    cl_resp_t r;
    if (cl_connect(&c, h->port)) return -1;
    if (cl_send_str(&c, req)) return -2;
    int st = cl_read_response(&c, &r, 0) == 0 ? r.status : 0;
    if (out)
        *out = r;
    else if (st)
        cl_resp_free(&r);
    cl_close(&c);
    return st;
}

int cl_expect_closing(cl_conn_t *c, cl_resp_t *r, int wait_ms, char *msg, size_t cap) {
    char v[64];
    int marked = cl_header(r, "Connection", v, sizeof v) == 0 && strcmp(v, "close") == 0;
    int status = r->status;
    cl_resp_free(r);
    CHECK(marked, "%d without Connection: close", status);
    CHECK(cl_wait_closed(c, wait_ms), "connection not closed after %d", status);
    cl_close(c);
    return 0;
}

int cl_expect_error_close(cl_conn_t *c, int status, char *msg, size_t cap) {
    cl_resp_t r;
    CHECK(cl_read_response(c, &r, 0) == 0, "no %d response", status);
    CHECK(r.status == status, "status %d, expected %d", r.status, status);
    CHECK(strstr(r.body, "{\"error\":{\"message\":") && strstr(r.body, "\"type\":") &&
              strstr(r.body, "\"param\":null") && strstr(r.body, "\"code\":"),
          "error body '%s'", r.body);
    return cl_expect_closing(c, &r, 3000, msg, cap);
}

int cl_expect_read(cl_conn_t *c, int status, char *msg, size_t cap) {
    cl_resp_t r;
    CHECK(cl_read_response(c, &r, 0) == 0, "no answer (want %d)", status);
    int st = r.status;
    cl_resp_free(&r);
    CHECK(st == status, "status %d, expected %d", st, status);
    return 0;
}

int cl_expect_status(cl_conn_t *c, const char *req, int status, char *msg, size_t cap) {
    CHECK(cl_send_str(c, req) == 0, "send %.40s", req);
    return cl_expect_read(c, status, msg, cap);
}

int cl_refused(harness_t *h, const char *req, int status, char *msg, size_t cap) {
    cl_conn_t c;
    CHECK(cl_connect(&c, h->port) == 0, "connect");
    CHECK(cl_send_str(&c, req) == 0, "send");
    return cl_expect_error_close(&c, status, msg, cap);
}

/* ---- test routes ---------------------------------------------------------------------- */

typedef struct job_s {
    uv_timer_t timer;
    harness_t *h;
    ul_http_req_t *req;
    ul_sse_t *sse;
    int n;
    int ignore_pressure;
} job_t;

static void job_free(uv_handle_t *t) { free(t->data); }

static void job_end(job_t *j) {
    uv_timer_stop(&j->timer);
    uv_close((uv_handle_t *)&j->timer, job_free);
}

static void on_job_abort(ul_http_req_t *req, void *data, int reason) {
    job_t *j = data;
    atomic_fetch_add(&j->h->aborts, 1);
    atomic_store(&j->h->last_abort_reason, reason);
    job_end(j);
}

static void on_job_drain(ul_http_req_t *req, void *data) {
    job_t *j = data;
    atomic_fetch_add(&j->h->drains, 1);
}

static job_t *job_new(ul_http_req_t *req, harness_t *h) {
    job_t *j = calloc(1, sizeof *j);
    j->h = h;
    j->req = req;
    uv_timer_init(&h->loop, &j->timer);
    j->timer.data = j;
    ul_http_req_cbs_t cbs = {.on_abort = on_job_abort, .on_drain = on_job_drain};
    ul_http_req_set_cbs(req, &cbs, j);
    return j;
}

static int h_health(ul_http_req_t *req, void *data) {
    static const char body[] = "{\"status\":\"ok\"}";
    return ul_http_respond(req, 200, NULL, body, sizeof body - 1);
}

static int h_echo(ul_http_req_t *req, void *data) {
    char id[32];
    snprintf(id, sizeof id, "%llu", (unsigned long long)req->req_id);
    ul_http_resp_header(req, "X-Req-Id", id);
    const ul_http_header_t *eh = ul_http_req_header(req, "x-echo-header");
    if (eh) { /* answer "[value]" of the named header, as a C string */
        const ul_http_header_t *v = ul_http_req_header(req, eh->value);
        char out[256];
        int n = snprintf(out, sizeof out, "[%s]", v ? v->value : "(none)");
        return ul_http_respond(req, 200, "text/plain", out, (size_t)n);
    }
    const ul_http_header_t *q = ul_http_req_header(req, "x-echo-query");
    if (q) return ul_http_respond(req, 200, "text/plain", req->query, req->query_len);
    return ul_http_respond(req, 200, "text/plain", req->body, req->body_len);
}

static void async_fire(uv_timer_t *t) {
    job_t *j = t->data;
    atomic_fetch_sub(&j->h->async_pending, 1);
    ul_http_respond(j->req, 200, "text/plain", "async", 5);
    job_end(j);
}

static int h_async(ul_http_req_t *req, void *data) {
    job_t *j = job_new(req, data);
    atomic_fetch_add(&j->h->async_pending, 1);
    uv_timer_start(&j->timer, async_fire, 30, 0);
    return 0;
}

static int h_hang(ul_http_req_t *req, void *data) {
    job_new(req, data); /* answered never: only on_abort ends it */
    atomic_fetch_add(&((harness_t *)data)->async_pending, 1);
    return 0;
}

static void stream_tick(uv_timer_t *t) {
    job_t *j = t->data;
    char ev[64];
    int n = snprintf(ev, sizeof ev, "{\"i\":%d}", j->n);
    ul_sse_send(j->sse, ev, (size_t)n);
    if (++j->n == 3) {
        ul_sse_done(j->sse);
        job_end(j);
    }
}

/* A stream job whose events come from tick every period_ms (tick NULL: none ever come). */
static int start_stream(ul_http_req_t *req, harness_t *h, int ignore, uv_timer_cb tick,
                        uint64_t period_ms) {
    job_t *j = job_new(req, h);
    j->ignore_pressure = ignore;
    int rc = ul_sse_start(req, &j->sse);
    if (rc) {
        job_end(j);
        return rc;
    }
    if (tick) uv_timer_start(&j->timer, tick, period_ms, period_ms);
    return 0;
}

static int h_stream(ul_http_req_t *req, void *data) {
    return start_stream(req, data, 0, stream_tick, 10);
}

/* Produces 4 KiB events while the stream is not backpressured (or regardless). */
static void flood_tick(uv_timer_t *t) {
    job_t *j = t->data;
    static char ev[4096];
    if (!ev[0]) {
        memset(ev, 'x', sizeof ev - 2);
        ev[0] = '"';
        ev[sizeof ev - 2] = '"';
    }
    for (int i = 0; i < 64; i++) {
        if (!j->ignore_pressure && ul_sse_backpressured(j->sse)) return;
        int rc = ul_sse_send(j->sse, ev, strlen(ev));
        if (rc == UL_EFULL) {
            atomic_store(&j->h->efull, 1);
            uv_timer_stop(&j->timer); /* on_abort follows and frees the job */
            return;
        }
        if (rc) return;
        atomic_fetch_add(&j->h->stream_events, 1);
        if (!j->ignore_pressure && atomic_load(&j->h->stream_events) >= 2000) {
            ul_sse_done(j->sse);
            job_end(j);
            return;
        }
    }
}

static int h_flood(ul_http_req_t *req, void *data) {
    return start_stream(req, data, 0, flood_tick, 1);
}
static int h_flood_ignore(ul_http_req_t *req, void *data) {
    return start_stream(req, data, 1, flood_tick, 1);
}

/* events never come: only pings keep the stream alive */
static int h_silent(ul_http_req_t *req, void *data) { return start_stream(req, data, 0, NULL, 0); }

static int h_fail(ul_http_req_t *req, void *data) { return UL_EINVAL; }

/* GET /big?N: an answer of N bytes ('b' repeated). */
static int h_big(ul_http_req_t *req, void *data) {
    size_t n = strtoul(req->query, NULL, 10);
    char *b = malloc(n ? n : 1);
    memset(b, 'b', n);
    int rc = ul_http_respond(req, 200, "text/plain", b, n);
    free(b);
    return rc == UL_ECLOSED ? 0 : rc;
}

/* GET /take?N: an answer of N bytes (byte i is 'a' + i % 23) handed over whole
 * (ul_http_respond_buf): large ones are sent from the handler's own buffer. */
static int h_take(ul_http_req_t *req, void *data) {
    size_t n = strtoul(req->query, NULL, 10);
    ul_buf_t b = {0};
    if (ul_buf_reserve(&b, n + 1)) return UL_ENOMEM;
    for (size_t i = 0; i < n; i++) b.p[i] = (char)('a' + i % 23);
    b.len = n;
    int rc = ul_http_respond_buf(req, 200, "text/plain", &b);
    ul_buf_free(&b);
    return rc == UL_ECLOSED ? 0 : rc;
}

/* ---- harness ---------------------------------------------------------------------------- */

void harness_config(harness_t *h) {
    memset(h, 0, sizeof *h);
    ul_http_config_default(&h->cfg);
    h->cfg.port = 0;
}

static void on_server_closed(ul_http_server_t *s) {
    harness_t *h = s->data;
    h->server_closed = 1;
}

static void on_bridge(ul_bridge_t *b, ul_queue_t *item) {
    harness_t *h = b->data;
    if (item == &h->stats_item) {
        h->stats_copy = h->srv.stats;
        atomic_store(&h->stats_ready, 1); /* release: the copy above is visible with it */
        return;
    }
    if (item == &h->shutdown_item) {
        ul_http_server_shutdown(&h->srv, h->shutdown_grace_ms, on_server_closed);
        atomic_store(&h->draining, 1);
        return;
    }
    ul_http_server_shutdown(&h->srv, h->shutdown_grace_ms, on_server_closed);
    ul_bridge_close(&h->bridge, NULL);
}

void harness_shutdown(harness_t *h) {
    ul_bridge_post(&h->bridge, &h->shutdown_item);
    for (int i = 0; i < 500 && !atomic_load(&h->draining); i++) usleep(1000);
}

int harness_stats(harness_t *h, ul_http_stats_t *out) {
    atomic_store(&h->stats_ready, 0);
    ul_bridge_post(&h->bridge, &h->stats_item);
    for (int i = 0; i < 5000 && !atomic_load(&h->stats_ready); i++) usleep(1000);
    if (!atomic_load(&h->stats_ready)) return -1;
    *out = h->stats_copy;
    return 0;
}

static void *client_main(void *arg) {
    harness_t *h = arg;
    h->client_rc = h->client(h, h->msg, sizeof h->msg);
    ul_bridge_post(&h->bridge, &h->done_item);
    return NULL;
}

/* The test routes; every handler gets the harness as its data. */
static const struct {
    ul_http_method_t method;
    const char *path;
    ul_http_handler_fn fn;
} k_routes[] = {
    {UL_HTTP_GET, "/health", h_health},   {UL_HTTP_POST, "/echo", h_echo},
    {UL_HTTP_GET, "/echo", h_echo},       {UL_HTTP_GET, "/async", h_async},
    {UL_HTTP_GET, "/hang", h_hang},       {UL_HTTP_GET, "/stream", h_stream},
    {UL_HTTP_GET, "/flood", h_flood},     {UL_HTTP_GET, "/flood-ignore", h_flood_ignore},
    {UL_HTTP_GET, "/fail", h_fail},       {UL_HTTP_GET, "/silent", h_silent},
    {UL_HTTP_POST, "/only-post", h_echo}, {UL_HTTP_GET, "/big", h_big},
    {UL_HTTP_GET, "/take", h_take},
};

int harness_run(harness_t *h, client_fn fn) {
    if (uv_loop_init(&h->loop)) return -100;
    ul_router_init(&h->router);
    for (size_t i = 0; i < sizeof k_routes / sizeof k_routes[0]; i++)
        ul_router_add(&h->router, k_routes[i].method, k_routes[i].path, k_routes[i].fn, h);
    if (ul_http_server_init(&h->loop, &h->srv, &h->cfg, &h->router)) return -101;
    h->srv.data = h;
    if (ul_http_server_listen(&h->srv)) return -102;
    h->port = ul_http_server_port(&h->srv);
    if (ul_bridge_init(&h->loop, &h->bridge, on_bridge)) return -103;
    h->bridge.data = h;
    h->client = fn;
    pthread_t t;
    pthread_create(&t, NULL, client_main, h);
    uv_run(&h->loop, UV_RUN_DEFAULT);
    pthread_join(t, NULL);
    if (!h->server_closed) return -104;
    return uv_loop_close(&h->loop);
}
