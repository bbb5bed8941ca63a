/* The server: configuration, the listener, one sweep timer for every connection's
 * timeouts and SSE pings (a per-second scan is cheaper than a timer per request), one
 * check handle that flushes coalesced output after each poll, and graceful shutdown. */
#include <inttypes.h>
#include <malloc.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sys/resource.h>

#include "base/size.h"
#include "net/conn.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

#define RBUF_SIZE (64 * 1024)

void ul_http_config_default(ul_http_config_t *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->host = "127.0.0.1";
    cfg->port = 8080;
    cfg->backlog = 1024;
    cfg->max_header_bytes = 16 * 1024;
    cfg->max_headers = 256;
    cfg->max_body = 8 * 1024 * 1024;
    cfg->max_conns = 4096;
    cfg->header_timeout_ms = 10000;
    cfg->request_timeout_ms = 120000;
    cfg->min_body_rate = 1024;
    cfg->idle_timeout_ms = 75000;
    cfg->stall_timeout_ms = 60000;
    cfg->mem_evict_after_ms = 1000;
    cfg->sse_ping_ms = 15000;
    cfg->out_soft_limit = 256 * 1024;
    cfg->out_hard_limit = 4 * 1024 * 1024;
    cfg->linger_ms = 2000;
    cfg->access_log = 1;
}

static int check_config(const ul_http_config_t *c) {
    if (!c->host || strlen(c->host) >= sizeof((ul_http_server_t *)0)->host) return UL_EINVAL;
    if (c->port < 0 || c->port > 65535 || c->backlog <= 0) return UL_EINVAL;
    if (c->max_header_bytes < 64 || c->max_header_bytes > (1u << 30)) return UL_EINVAL;
    if (c->max_body > ((size_t)1 << 40) || c->max_conns == 0) return UL_EINVAL;
    if (!c->header_timeout_ms || !c->idle_timeout_ms || !c->stall_timeout_ms) return UL_EINVAL;
    if (!c->request_timeout_ms || !c->max_headers) return UL_EINVAL;
    if (c->max_buffered_mem && c->max_conn_mem > c->max_buffered_mem) return UL_EINVAL;
    if (!c->out_soft_limit || c->out_hard_limit < c->out_soft_limit) return UL_EINVAL;
    if (c->n_cors_origins && !c->cors_origins) return UL_EINVAL;
    for (size_t i = 0; i < c->n_cors_origins; i++)
        if (!c->cors_origins[i] || !*c->cors_origins[i] || strpbrk(c->cors_origins[i], "\r\n"))
            return UL_EINVAL;
    return 0;
}

/* Sweep often enough that the shortest timeout fires within ~25% of its value. */
static uint64_t sweep_interval(const ul_http_config_t *c) {
    uint64_t t = c->header_timeout_ms;
    if (c->idle_timeout_ms < t) t = c->idle_timeout_ms;
    if (c->request_timeout_ms < t) t = c->request_timeout_ms;
    if (c->stall_timeout_ms < t) t = c->stall_timeout_ms;
    if (c->sse_ping_ms && c->sse_ping_ms < t) t = c->sse_ping_ms;
    if (c->linger_ms && c->linger_ms < t) t = c->linger_ms;
    t /= 4;
    return t < 5 ? 5 : t > 1000 ? 1000 : t;
}

static void on_check(uv_check_t *h) {
    ul_http_server_t *s = h->data;
    ul_queue_t batch;
    ul_queue_move(&s->ticks, &batch);
    while (!ul_queue_empty(&batch)) {
        ul_queue_t *q = ul_queue_head(&batch);
        ul_queue_remove(q);
        ul_conn_tick(UL_QUEUE_DATA(q, ul_conn_t, tick));
    }
}

static int conn_idle(const ul_conn_t *c) {
    return !c->req_open && c->in_headers && !c->got_bytes && c->in.len == 0 &&
           ul_conn_pending(c) == 0 && !c->close_after_write;
}

/* While draining, a connection that has sent nothing yet is given this long to send its
 * request (it was accepted just before the listener closed: the client is about to). */
#define DRAIN_FRESH_MS 2000

/* An idle connection is closed while draining unless a request may be on its way: its
 * bytes wait in the socket unread (closing would reset the connection, request and all),
 * or it is new and has not had DRAIN_FRESH_MS to send one. Such a request is read and
 * answered (its answer carries Connection: close). */
static int drain_closes(const ul_conn_t *c, uint64_t now) {
    if (!conn_idle(c) || ul_conn_input_waiting(c)) return 0;
    return c->n_req > 0 || now - c->hdr_start >= DRAIN_FRESH_MS;
}

static void close_conns(ul_http_server_t *s, int all) {
    uint64_t now = uv_now(s->loop);
    ul_queue_t *q;
    UL_QUEUE_FOREACH(q, &s->conns) {
        ul_conn_t *c = UL_QUEUE_DATA(q, ul_conn_t, node);
        /* closing only marks: memory goes in the close callback, the list stays intact */
        if (all && c->req_open)
            ul_conn_cut(c);
        else if (all || drain_closes(c, now))
            ul_conn_close(c, UL_ECLOSED);
    }
}

/* The last words of a request the shutdown deadline cuts: an SSE error event (no [DONE],
 * no terminating chunk: the stream must read as incomplete), or a 503 when nothing was
 * answered yet. Written as far as the socket takes them, then the connection closes. */
static int last_words(ul_conn_t *c) {
    static const char ev[] = "{\"error\":{\"message\":\"the server is shutting down\","
                             "\"type\":\"server_error\",\"param\":null,"
                             "\"code\":\"shutting_down\"}}";
    if (c->resp == UL_RESP_STREAM)
        return ul_sse_frame(&c->out, c->chunked, "data: ", ev, sizeof ev - 1);
    if (c->resp != UL_RESP_NONE) return 0;
    ul_buf_t body = {0}, extra = {0};
    int rc =
        ul_http_error_body(&body, "server_error", "shutting_down", "the server is shutting down");
    rc |= ul_buf_puts(&extra, "Retry-After: 5\r\n");
    rc |= ul_conn_std_headers(c, &extra);
    ul_http_head_t h = {.status = 503,
                        .content_type = "application/json",
                        .content_length = (int64_t)body.len,
                        .extra = extra.p,
                        .extra_len = extra.len,
                        .date = ul_http_server_date(c->srv)};
    size_t before = c->out.len;
    rc |= ul_http_head_write(&c->out, &h);
    if (!rc && !c->head_only) rc = ul_buf_append(&c->out, body.p, body.len);
    ul_buf_free(&body);
    ul_buf_free(&extra);
    c->status = 503;
    c->resp_bytes += c->out.len - before;
    return rc;
}

void ul_conn_cut(ul_conn_t *c) {
    if (c->closing || c->cutting) return;
    c->cut = "shutdown";
    c->keep_alive = 0;
    if (last_words(c)) {
        ul_conn_close(c, UL_ECLOSED);
        return;
    }
    c->cutting = 1;
    c->cut_deadline =
        uv_now(c->srv->loop) + (c->srv->cfg.linger_ms < 1000 ? c->srv->cfg.linger_ms : 1000);
    ul_conn_flush(c);
}

static void on_sweep(uv_timer_t *t) {
    ul_http_server_t *s = t->data;
    uint64_t now = uv_now(s->loop);
    ul_queue_t *q;
    UL_QUEUE_FOREACH(q, &s->conns) ul_conn_sweep(UL_QUEUE_DATA(q, ul_conn_t, node), now);
    ul_http_trim_check(s, now);
    if (s->draining) close_conns(s, s->drain_deadline && now >= s->drain_deadline);
}

/* libuv writes with write(2): a client that reset its connection would raise SIGPIPE and
 * kill the process. Ignore it unless the program installed its own handler. */
static void ignore_sigpipe(void) {
    struct sigaction old;
    if (sigaction(SIGPIPE, NULL, &old) == 0 && old.sa_handler == SIG_DFL) {
        struct sigaction sa = {.sa_handler = SIG_IGN};
        sigemptyset(&sa.sa_mask);
        sigaction(SIGPIPE, &sa, NULL);
    }
}

/* The memory budget's defaults (http.h, max_buffered_mem and max_conn_mem). */
static void budget_defaults(ul_http_config_t *c) {
    if (!c->max_buffered_mem) {
        int64_t mem = ul_size_mem_limit();
        uint64_t v = mem > 0 ? (uint64_t)mem / 8 : (uint64_t)1 << 30;
        if (v < (64u << 20)) v = 64u << 20;
        if (v > ((uint64_t)4 << 30)) v = (uint64_t)4 << 30;
        c->max_buffered_mem = (size_t)v;
    }
    if (!c->max_conn_mem) {
        size_t v = c->max_body + c->out_hard_limit + 2 * c->max_header_bytes;
        if (c->max_buffered_mem / 32 > v) v = c->max_buffered_mem / 32;
        c->max_conn_mem = v < c->max_buffered_mem ? v : c->max_buffered_mem;
    }
}

int ul_http_server_init(uv_loop_t *loop, ul_http_server_t *s, const ul_http_config_t *cfg,
                        ul_router_t *router) {
    memset(s, 0, sizeof *s);
    ignore_sigpipe();
    /* Client buffers of up to 32 MiB (bodies, answers) come from malloc's heaps, where freed
     * ones are reused without new page faults (a heap keeps up to 4 MiB free at its top).
     * Mapping each on its own (the threshold was 1 MiB) cost a page fault per 4 KiB, a
     * mapping change and a TLB shootdown per buffer: under a flood of 2 MiB /tokenize bodies
     * the honest streams' inter-token p99 was 3x its value without the flood, against 1.06x
     * when the same flood hit another process (tests/hostile --decoy), so it was this
     * process's own mapping churn. Free memory inside the heaps goes back to the system once
     * large buffers stop coming (ul_http_trim_check), so RSS does not stay at its peak. */
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 4 << 20);
    if (cfg)
        s->cfg = *cfg;
    else
        ul_http_config_default(&s->cfg);
    int rc = check_config(&s->cfg);
    if (rc) return rc;
    budget_defaults(&s->cfg);
    s->stats.mem_limit = s->cfg.max_buffered_mem;
    strcpy(s->host, s->cfg.host);
    s->cfg.host = s->host;
    s->loop = loop;
    s->router = router;
    ul_queue_init(&s->conns);
    ul_queue_init(&s->ticks);
    s->rbuf_size = RBUF_SIZE;
    s->rbuf = malloc(s->rbuf_size);
    if (!s->rbuf) return UL_ENOMEM;
    uv_timer_init(loop, &s->sweep);
    s->sweep.data = s;
    uv_check_init(loop, &s->check);
    s->check.data = s;
    uv_check_start(&s->check, on_check);
    uv_unref((uv_handle_t *)&s->check); /* never keeps the loop alive by itself */
    s->handles_open = 2;
    return 0;
}

static void on_connection(uv_stream_t *l, int status) {
    ul_http_server_t *s = l->data;
    if (status < 0) { /* EMFILE and the like: at most one line every 10 s */
        uint64_t now = uv_now(s->loop);
        s->limit_refused++;
        if (!s->limit_log_at || now - s->limit_log_at >= 10000) {
            UL_LOG_WARN("accept failed: %s (%" PRIu64 " refused since the last such line)",
                        uv_strerror(status), s->limit_refused);
            s->limit_log_at = now;
            s->limit_refused = 0;
        }
        return;
    }
    if (s->draining) return;
    ul_conn_accept(s);
}

/* Descriptors the process needs besides connections: the listener, libuv's own, the model
 * file, worker threads' and logging; a connection over the limit would be reset by the
 * kernel (libuv's EMFILE path) with nobody told. */
#define FD_RESERVE 64

void ul_http_raise_nofile(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur >= rl.rlim_max) return;
    rlim_t was = rl.rlim_cur;
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
        UL_LOG_INFO("descriptor limit (RLIMIT_NOFILE) raised from %llu to %llu",
                    (unsigned long long)was, (unsigned long long)rl.rlim_max);
}

static void clamp_conns(ul_http_server_t *s) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == RLIM_INFINITY) return;
    rlim_t room = rl.rlim_cur > 2 * FD_RESERVE ? rl.rlim_cur - FD_RESERVE : rl.rlim_cur / 2;
    if (s->cfg.max_conns <= room) return;
    UL_LOG_WARN("max-conns %u lowered to %u: the descriptor limit (RLIMIT_NOFILE) is %llu",
                s->cfg.max_conns, (unsigned)room, (unsigned long long)rl.rlim_cur);
    s->cfg.max_conns = (unsigned)room;
}

int ul_http_server_listen(ul_http_server_t *s) {
    if (s->listening || s->draining) return UL_ESTATE;
    clamp_conns(s);
    struct sockaddr_storage ss;
    /* Literal addresses only (no resolver on the loop thread); "localhost" is common
     * enough in configs to be understood as the IPv4 loopback. */
    const char *addr = strcmp(s->host, "localhost") == 0 ? "127.0.0.1" : s->host;
    int rc = uv_ip4_addr(addr, s->cfg.port, (struct sockaddr_in *)&ss);
    if (rc) rc = uv_ip6_addr(addr, s->cfg.port, (struct sockaddr_in6 *)&ss);
    if (rc) {
        UL_LOG_ERROR("invalid listen address '%s'", s->host);
        return UL_EINVAL;
    }
    rc = uv_tcp_init(s->loop, &s->listener);
    if (rc) return rc;
    s->listener.data = s;
    s->listening = 1;
    s->handles_open++;
    rc = uv_tcp_bind(&s->listener, (const struct sockaddr *)&ss, 0);
    if (!rc) rc = uv_listen((uv_stream_t *)&s->listener, s->cfg.backlog, on_connection);
    if (rc) {
        UL_LOG_ERROR("cannot listen on %s:%d: %s", s->host, s->cfg.port, uv_strerror(rc));
        return rc;
    }
    struct sockaddr_storage bound;
    int len = sizeof bound;
    rc = uv_tcp_getsockname(&s->listener, (struct sockaddr *)&bound, &len);
    if (rc) return rc;
    s->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                : ((struct sockaddr_in *)&bound)->sin_port);
    uint64_t iv = sweep_interval(&s->cfg);
    uv_timer_start(&s->sweep, on_sweep, iv, iv);
    if (strchr(s->host, ':'))
        UL_LOG_INFO("listening on http://[%s]:%d", s->host, s->port);
    else
        UL_LOG_INFO("listening on http://%s:%d", s->host, s->port);
    return 0;
}

int ul_http_server_port(const ul_http_server_t *s) { return s->port; }

int ul_http_server_draining(const ul_http_server_t *s) { return s->draining; }

static void on_handle_closed(uv_handle_t *h) {
    ul_http_server_t *s = h->data;
    if (--s->handles_open > 0) return;
    ul_http_server_free_now(s);
    free(s->rbuf);
    s->rbuf = NULL;
    if (s->shutdown_cb) s->shutdown_cb(s);
}

static void maybe_done(ul_http_server_t *s) {
    if (!s->draining || s->closing || !ul_queue_empty(&s->conns) || s->free_busy) return;
    s->closing = 1;
    uv_close((uv_handle_t *)&s->sweep, on_handle_closed);
    uv_close((uv_handle_t *)&s->check, on_handle_closed);
}

void ul_http_server_conn_gone(ul_http_server_t *s) { maybe_done(s); }

/* Responses still to come carry Connection: close. */
static void close_after_answers(ul_http_server_t *s) {
    ul_queue_t *q;
    UL_QUEUE_FOREACH(q, &s->conns) {
        ul_conn_t *c = UL_QUEUE_DATA(q, ul_conn_t, node);
        if (c->req_open && c->resp == UL_RESP_NONE) c->keep_alive = 0;
    }
}

void ul_http_server_drain_begin(ul_http_server_t *s) {
    s->no_keepalive = 1;
    close_after_answers(s);
}

void ul_http_server_shutdown(ul_http_server_t *s, uint64_t grace_ms, ul_http_server_cb cb) {
    if (cb) s->shutdown_cb = cb;
    uint64_t now = uv_now(s->loop);
    uint64_t deadline = now + grace_ms;
    if (!s->drain_deadline || deadline < s->drain_deadline) s->drain_deadline = deadline;
    if (!s->draining) {
        s->draining = 1;
        if (s->listening) {
            s->listening = 0;
            ul_conn_accept_backlog(s);
            uv_close((uv_handle_t *)&s->listener, on_handle_closed);
        }
        if (!ul_queue_empty(&s->conns))
            UL_LOG_INFO("draining %" PRIu64 " connection(s), grace %" PRIu64 " ms",
                        s->stats.conns_open, grace_ms);
        close_after_answers(s);
        /* The sweep timer enforces the deadline; it may not be running if listen failed. */
        if (!uv_is_active((uv_handle_t *)&s->sweep)) {
            uint64_t iv = sweep_interval(&s->cfg);
            uv_timer_start(&s->sweep, on_sweep, iv, iv);
        }
    }
    close_conns(s, grace_ms == 0);
    maybe_done(s);
}

const char *ul_http_server_date(ul_http_server_t *s) {
    time_t now = time(NULL);
    if ((uint64_t)now != s->date_sec) {
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(s->date, sizeof s->date, "Date: %a, %d %b %Y %H:%M:%S GMT\r\n", &tm);
        s->date_sec = (uint64_t)now;
    }
    return s->date;
}
