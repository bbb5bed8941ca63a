/* A connection's input side and lifecycle: accept, read, llhttp parsing with limits,
 * dispatch to the router, request completion, timeouts and close.
 *
 * Reads land in the server's shared buffer and are parsed at once. The parser pauses
 * after every complete message (on_message_complete returns HPE_PAUSED) so the handler
 * runs outside llhttp's callbacks; if the request stays open (async handler), the unparsed
 * rest of the read is kept in conn->in and parsing resumes from the server's check
 * callback once the response is finished. While in the header phase the parser is fed at
 * most max_header_bytes in total, so an oversized head is detected exactly. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <sys/socket.h>

#include "net/conn.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

/* Pipelined input buffered while a request is open; over it we stop reading. */
#define IN_CAP(c) ((c)->srv->cfg.max_header_bytes * 2 + 4096)

/* ---- dispatch ----------------------------------------------------------------------- */

static ul_http_method_t map_method(uint8_t m) {
    switch (m) {
    case HTTP_GET:
        return UL_HTTP_GET;
    case HTTP_HEAD:
        return UL_HTTP_HEAD;
    case HTTP_POST:
        return UL_HTTP_POST;
    case HTTP_PUT:
        return UL_HTTP_PUT;
    case HTTP_DELETE:
        return UL_HTTP_DELETE;
    case HTTP_OPTIONS:
        return UL_HTTP_OPTIONS;
    case HTTP_PATCH:
        return UL_HTTP_PATCH;
    default:
        return UL_HTTP_OTHER;
    }
}

/* The request as the head gives it (method, path, query, headers, ids); the body is added
 * at dispatch. The header storage no longer moves: trailers are not stored. */
static int build_head(ul_conn_t *c) {
    ul_http_req_t *r = &c->req;
    if (c->n_hoff > c->cap_hdrs) {
        ul_http_header_t *h = realloc(c->hdrs, c->n_hoff * sizeof *h);
        if (!h) return UL_ENOMEM;
        c->hdrs = h;
        c->cap_hdrs = c->n_hoff;
    }
    if (!c->hdr.p) return UL_EFORMAT; /* llhttp requires a URL: cannot happen */
    char *url = c->hdr.p;             /* "path?query\0" */
    char *q = memchr(url, '?', c->url_len);
    r->path = url;
    if (q) {
        *q = '\0';
        r->path_len = (size_t)(q - url);
        r->query = q + 1;
        r->query_len = c->url_len - r->path_len - 1;
    } else {
        r->path_len = c->url_len;
        r->query = "";
        r->query_len = 0;
    }
    for (size_t i = 0; i < c->n_hoff; i++) {
        const ul_hoff_t *o = &c->hoff[i];
        c->hdrs[i] = (ul_http_header_t){.name = c->hdr.p + o->name_off,
                                        .value = c->hdr.p + o->val_off,
                                        .name_len = o->name_len,
                                        .value_len = o->val_len};
    }
    r->headers = c->hdrs;
    r->n_headers = c->n_hoff;
    r->body = "";
    r->body_len = 0;
    r->content_length =
        (c->parser.flags & F_CONTENT_LENGTH) ? (int64_t)c->parser.content_length : -1;
    r->method = map_method(c->parser.method);
    r->method_name = llhttp_method_name((llhttp_method_t)c->parser.method);
    r->http_major = c->parser.http_major;
    r->http_minor = c->parser.http_minor;
    r->conn_id = c->id;
    r->req_id = ++c->n_req;
    r->request_id = c->rid;
    r->peer = c->peer;
    r->arena = &c->arena;
    r->user = NULL;
    r->conn_ = c;
    return 0;
}

/* Opens the current message as a request: response state reset, standard headers. */
static int open_request(ul_conn_t *c) {
    memset(&c->cbs, 0, sizeof c->cbs);
    c->cbs_data = NULL;
    c->resp = UL_RESP_NONE;
    c->status = 0;
    c->resp_bytes = 0;
    c->chunked = 0;
    c->cut = NULL;
    c->head_only = c->req.method == UL_HTTP_HEAD;
    c->t_start = uv_hrtime();
    c->req.t_start_ns = c->t_start;
    c->req_open = 1;
    if (ul_conn_std_headers(c, &c->resp_hdrs)) {
        ul_conn_close(c, UL_ENOMEM);
        c->status = 500;
        ul_conn_req_finish(c);
        return -1;
    }
    return 0;
}

static const char *fail_message(int st) {
    switch (st) {
    case 413:
        return "request body is too large";
    case 431:
        return "request line and headers are too large";
    case 400:
        return "malformed HTTP request";
    case 503:
        return "the server's memory for requests is full; retry later";
    default:
        return "internal error";
    }
}

/* A request refused at its head never has its body read; when that body is large, the
 * connection does not read it to throw it away either (the reads cost the loop more than
 * the client's answer is worth): it waits briefly for the client to take the answer and
 * closes. */
static void unread_body(ul_conn_t *c) {
    if (!(c->parser.flags & F_CONTENT_LENGTH) || c->parser.content_length <= 65536) return;
    c->discarded = UL_CONN_DISCARD_MAX + 1;
    c->quick_linger = 1;
}

/* The head is complete and the parser paused before the body: credentials (on_head) are
 * checked, then the body's size against its limits, and only then does a client waiting
 * for 100 Continue get it. Returns 0 to go on reading the body. */
static int head_check(ul_conn_t *c) {
    ul_http_server_t *s = c->srv;
    llhttp_t *p = &c->parser;
    if (build_head(c)) {
        ul_conn_fail(c, 500, "out of memory");
        return -1;
    }
    if (s->cfg.on_head && c->req.method != UL_HTTP_OPTIONS) {
        int keep = c->keep_alive;
        c->keep_alive = 0; /* an answer here leaves the body unread: the connection ends */
        if (open_request(c)) return -1;
        if (s->cfg.on_head(&c->req, s->cfg.hook_data)) { /* answered */
            unread_body(c);
            return -1;
        }
        c->req_open = 0;
        c->resp_hdrs.len = 0;
        c->keep_alive = keep;
    }
    if ((p->flags & F_CONTENT_LENGTH) && p->content_length > s->cfg.max_body) {
        unread_body(c);
        ul_conn_fail(c, 413, "request body is too large");
        return -1;
    }
    /* a large announced body that the memory budget cannot take is refused before any of
     * it is read (reading it only to refuse it half-way costs the loop its reads) */
    if ((p->flags & F_CONTENT_LENGTH) && p->content_length > 65536) {
        size_t n = (size_t)p->content_length;
        int st = ul_conn_mem_check(c, n > c->body.cap ? n - c->body.cap : 0);
        if (st) {
            unread_body(c);
            ul_conn_fail(c, st, st == 413 ? "request body is too large" : fail_message(503));
            return -1;
        }
        /* the whole body's room at once: growing it by doubling copied each byte twice and
         * touched twice its size in fresh pages, the loop's main cost under a flood of
         * large bodies (a page fault here is ~16 us: 36 ms per 2 MiB body) */
        if (ul_buf_reserve_exact(&c->body, n + 1)) { /* and dispatch's NUL */
            unread_body(c);
            ul_conn_fail(c, 503, fail_message(503));
            return -1;
        }
        ul_conn_account(c);
    }
    c->expect_continue = 0;
    size_t len = 0;
    const char *ex = ul_conn_header(c, "expect", &len);
    if (ex && len == 12 && !strncasecmp(ex, "100-continue", 12) && p->http_major == 1 &&
        p->http_minor >= 1 && ((p->flags & F_CHUNKED) || p->content_length > 0)) {
        c->expect_continue = 1;
        if (ul_conn_out(c, "HTTP/1.1 100 Continue\r\n\r\n", 25)) {
            ul_conn_fail(c, 500, "out of memory");
            return -1;
        }
    }
    c->in_body = 1;
    c->body_start = uv_now(s->loop);
    return 0;
}

void ul_conn_hold_release(ul_conn_t *c) {
    void (*release)(void *, uint64_t) = c->hold_release;
    c->hold_release = NULL;
    if (release) release(c->hold_data, c->hold_key);
}

static void dispatch(ul_conn_t *c, int upgrade) {
    ul_http_server_t *s = c->srv;
    ul_conn_hold_release(c); /* the handler takes over from the head hook */
    c->in_headers = 1;       /* the next message starts from here */
    c->in_body = 0;
    c->hdr_raw = 0;
    c->hdr_lf = 0;
    c->got_bytes = 0;
    if (ul_buf_reserve(&c->body, 1)) {
        ul_conn_fail(c, 500, "out of memory");
        return;
    }
    c->body.p[c->body.len] = '\0';
    ul_http_req_t *r = &c->req;
    r->body = c->body.p;
    r->body_len = c->body.len;
    /* No upgrades: after answering such a request the connection ends, so the parser is
     * never resumed past it. */
    upgrade |= c->parser.upgrade;
    c->keep_alive =
        llhttp_should_keep_alive(&c->parser) && !s->draining && !s->no_keepalive && !upgrade;
    if (open_request(c)) return;
    if (ul_conn_cors_preflight(c)) return;
    if (s->cfg.before && s->cfg.before(r, s->cfg.hook_data)) return;

    const ul_route_t *rt = NULL;
    char allow[96];
    int m = ul_router_match(s->router, r->method, r->path, r->path_len, &rt, allow, sizeof allow);
    if (m == 404) {
        ul_http_respond_error(r, 404, "invalid_request_error", "not_found", "unknown path");
        return;
    }
    if (m == 405) {
        ul_http_resp_header(r, "Allow", allow);
        ul_http_respond_error(r, 405, "invalid_request_error", "method_not_allowed",
                              "method not allowed for this path");
        return;
    }
    ul_http_method_t hm = r->method;
    if (hm == UL_HTTP_HEAD && !(rt->methods & (1u << UL_HTTP_HEAD))) hm = UL_HTTP_GET;
    int rc = rt->fn[hm](r, rt->data[hm]);
    if (rc < 0 && c->req_open) {
        UL_LOG_WARN("conn=%" PRIu64 " req=%" PRIu64 " handler failed: %s", c->id, r->req_id,
                    ul_strerror(rc));
        if (c->resp == UL_RESP_NONE)
            ul_http_respond_error(r, 500, "server_error", NULL, "internal error");
        else
            ul_sse_end(&c->sse);
    }
}

/* Obsolete line folding (a header line starting with a space or tab) is refused: llhttp
 * joins such a line to the previous value even in strict mode, so a proxy in front and this
 * server could read "Content-Length:\r\n 5" differently. Scans the raw head bytes fed. */
static int folded(ul_conn_t *c, const char *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (c->hdr_lf && (p[i] == ' ' || p[i] == '\t')) return 1;
        c->hdr_lf = p[i] == '\n';
    }
    return 0;
}

/* Parsing stops while a request is open, the connection is ending, or (backpressure for
 * every response, not only streams) the answers already queued are over out_soft_limit:
 * a client that pipelines requests without reading the answers gets no more of them. */
static int may_parse(const ul_conn_t *c) {
    return !c->req_open && !c->closing && !c->close_after_write && !c->lingering &&
           ul_conn_pending(c) <= c->srv->cfg.out_soft_limit;
}

/* Feeds p[0..n) to the parser until it is consumed or parsing must stop (may_parse);
 * returns the bytes consumed. */
static size_t parse(ul_conn_t *c, const char *p, size_t n) {
    size_t off = 0;
    size_t max_hdr = c->srv->cfg.max_header_bytes;
    int again = 0; /* after the head: run the parser once more even with no byte left, so a
                      request without a body completes now */
    c->in_parse = 1;
    while ((off < n || again) && may_parse(c)) {
        again = 0;
        size_t chunk = n - off;
        int head = c->in_headers;
        if (head) {
            if (c->hdr_raw >= max_hdr) {
                c->discarded = UL_CONN_DISCARD_MAX + 1; /* a flood: not worth reading on */
                c->quick_linger = 1;
                ul_conn_fail(c, 431, "request line and headers are too large");
                break;
            }
            if (chunk > max_hdr - c->hdr_raw) chunk = max_hdr - c->hdr_raw;
        }
        const char *at = p + off;
        llhttp_errno_t err = llhttp_execute(&c->parser, at, chunk);
        size_t k = err == HPE_OK ? chunk : (size_t)(llhttp_get_error_pos(&c->parser) - at);
        if (head && folded(c, at, k)) {
            ul_conn_fail(c, 400, "obsolete line folding in the request headers");
            break;
        }
        if (err != HPE_OK && err != HPE_PAUSED && err != HPE_PAUSED_UPGRADE) {
            int st = c->err_status ? c->err_status : 400;
            if (st == 431 || st == 413) { /* a flood of fields or body: not worth reading on */
                c->discarded = UL_CONN_DISCARD_MAX + 1;
                c->quick_linger = 1;
            }
            UL_LOG_DEBUG("conn=%" PRIu64 " parse error %s: %s", c->id, llhttp_errno_name(err),
                         llhttp_get_error_reason(&c->parser));
            ul_conn_fail(c, st, c->err_msg ? c->err_msg : fail_message(st));
            break;
        }
        off += k;
        if (head)
            c->hdr_raw += k;
        else if (c->in_body)
            c->body_raw += k;
        if (err == HPE_OK) continue;
        if (c->head_paused) { /* on_headers_complete: the body is not read yet */
            c->head_paused = 0;
            if (head_check(c)) {
                ul_conn_hold_release(c);
                break;
            }
            llhttp_resume(&c->parser);
            again = 1;
            continue;
        }
        dispatch(c, err == HPE_PAUSED_UPGRADE);
    }
    c->in_parse = 0;
    return off;
}

/* ---- reading ------------------------------------------------------------------------ */

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
    ul_conn_t *c = (ul_conn_t *)h;
    *buf = uv_buf_init(c->srv->rbuf, (unsigned)c->srv->rbuf_size);
}

static void read_stop(ul_conn_t *c) {
    if (c->reading) uv_read_stop((uv_stream_t *)&c->tcp);
    c->reading = 0;
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf);

void ul_conn_read_start(ul_conn_t *c) {
    if (c->reading || c->closing || c->eof) return;
    int rc = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    if (rc) {
        ul_conn_close(c, rc);
        return;
    }
    c->reading = 1;
}

/* The client closed its side. Requests it sent before are still answered (a pipelined
 * batch may sit unparsed in conn->in); a request still open counts as a disconnect. */
static void on_eof(ul_conn_t *c, ssize_t nread) {
    if (nread != UV_EOF || c->req_open || c->lingering) {
        ul_conn_close(c, nread == UV_EOF ? UL_ECLOSED : (int)nread);
        return;
    }
    read_stop(c);
    c->eof = 1;
    if (c->in.len && !c->close_after_write) {
        ul_conn_schedule(c); /* the tick parses the rest, then closes */
        return;
    }
    c->in.len = 0;
    if (ul_conn_pending(c) > 0 || c->writing) {
        c->close_after_write = 1; /* deliver what is queued, then close */
        return;
    }
    ul_conn_close(c, UL_ECLOSED);
}

/* Parses what waits in conn->in (pipelined input kept while a request was open, or a
 * partial request) and resumes reading once the backlog is small again. */
static void parse_in(ul_conn_t *c) {
    if (c->req_open || !c->in.len || c->close_after_write || c->lingering) return;
    size_t used = parse(c, c->in.p, c->in.len);
    if (c->closing) return;
    if (c->close_after_write || c->lingering)
        c->in.len = 0;
    else
        ul_buf_consume(&c->in, used);
    /* backpressure reaches the socket: a client whose input piles up is not read */
    if (c->in.len <= IN_CAP(c) && !c->close_after_write)
        ul_conn_read_start(c);
    else if (c->in.len > IN_CAP(c))
        read_stop(c);
}

/* A read that filled the whole buffer means more is waiting: libuv would keep reading this
 * connection (up to 32 times) before it returns to any other, so a client pouring a large
 * body or a flood in would delay every stream and probe by milliseconds per iteration.
 * Each connection gets one buffer per loop iteration; the check callback resumes it. */
static void read_fair(ul_conn_t *c, ssize_t nread) {
    if ((size_t)nread < c->srv->rbuf_size || !c->reading || c->closing) return;
    read_stop(c);
    c->read_again = 1;
    ul_conn_schedule(c);
}

static void on_read_data(ul_conn_t *c, ssize_t nread, const uv_buf_t *buf);

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf) {
    ul_conn_t *c = (ul_conn_t *)st;
    if (nread == 0 || c->closing) return;
    if (nread < 0) {
        on_eof(c, nread);
        return;
    }
    on_read_data(c, nread, buf);
    if (!c->closing) read_fair(c, nread);
}

static void on_read_data(ul_conn_t *c, ssize_t nread, const uv_buf_t *buf) {
    c->srv->stats.bytes_in += (uint64_t)nread;
    c->last_in = uv_now(c->srv->loop);
    if (c->lingering || c->close_after_write) { /* discard */
        /* Enough to let a client that sends its whole body before reading get to our
         * answer; past it, a client that keeps sending would only cost reads: stop reading
         * and close at the linger deadline. */
        c->discarded += (size_t)nread;
        if (c->discarded > UL_CONN_DISCARD_MAX) read_stop(c);
        return;
    }
    if (c->in_headers && !c->got_bytes && !c->req_open) {
        c->got_bytes = 1;
        c->hdr_start = c->last_in;
    }
    if (c->req_open || c->in.len) {
        /* Behind an open request, or after a partial one: queue, parse from conn->in. */
        if (ul_buf_append(&c->in, buf->base, (size_t)nread)) {
            ul_conn_close(c, UL_ENOMEM);
            return;
        }
        if (c->req_open) {
            if (c->in.len > IN_CAP(c)) read_stop(c);
            ul_conn_account(c);
            return;
        }
        parse_in(c);
        if (!c->closing) ul_conn_flush(c);
        if (!c->closing) ul_conn_account(c);
        return;
    }
    size_t used = parse(c, buf->base, (size_t)nread);
    if (used < (size_t)nread && !c->closing && !c->close_after_write && !c->lingering) {
        if (ul_buf_append(&c->in, buf->base + used, (size_t)nread - used)) {
            ul_conn_close(c, UL_ENOMEM);
            return;
        }
    }
    ul_conn_flush(c);
    if (!c->closing) ul_conn_account(c);
}

void ul_conn_tick(ul_conn_t *c) {
    if (c->closing) return;
    if (c->read_again) { /* read_fair: the next iteration may read it again */
        c->read_again = 0;
        if (c->in.len <= IN_CAP(c) && c->discarded <= UL_CONN_DISCARD_MAX) ul_conn_read_start(c);
    }
    parse_in(c);
    if (c->closing) return;
    if (c->eof && !c->close_after_write && !c->lingering) {
        if (c->req_open) { /* answered only to a client that is still there */
            ul_conn_close(c, UL_ECLOSED);
            return;
        }
        if (c->in.len == 0) c->close_after_write = 1; /* else: the tick comes back */
    }
    ul_conn_flush(c);
}

/* ---- lifecycle ---------------------------------------------------------------------- */

/* Why an open request ended with its connection, for the access log: "client" (it left:
 * logged 499, nginx's "client closed request"), "stall" (stopped reading), "full" (output
 * over the hard limit), "memory" (closed to free memory) or "shutdown"/"error". */
static const char *cut_reason(const ul_conn_t *c) {
    if (c->cut) return c->cut;
    switch (c->abort_reason) {
    case UL_ECLOSED:
        return "client";
    case UL_ETIMEDOUT:
        return "stall";
    case UL_EFULL:
        return "full";
    case UL_ENOMEM:
        return "error";
    default: /* a read or write error: the client reset the connection */
        return "client";
    }
}

static void on_close(uv_handle_t *h) {
    ul_conn_t *c = (ul_conn_t *)h;
    ul_http_server_t *s = c->srv;
    if (c->req_open) {
        ul_http_req_cbs_t cbs = c->cbs;
        if (c->resp == UL_RESP_STREAM) s->stats.streams_active--;
        c->req_open = 0;
        c->cut = cut_reason(c);
        if (!c->status || !strcmp(c->cut, "client")) c->status = 499;
        ul_http_access_log(c);
        if (cbs.on_abort) cbs.on_abort(&c->req, c->cbs_data, c->abort_reason);
    }
    ul_conn_hold_release(c);
    ul_conn_unaccount(c);
    ul_queue_remove(&c->node);
    ul_queue_remove(&c->tick);
    s->stats.conns_open--;
    ul_conn_buf_drop(s, &c->in);
    ul_conn_buf_drop(s, &c->hdr);
    ul_conn_buf_drop(s, &c->body);
    ul_conn_buf_drop(s, &c->resp_hdrs);
    ul_conn_buf_drop(s, &c->out);
    ul_conn_buf_drop(s, &c->wbuf);
    ul_conn_buf_drop(s, &c->wbody);
    ul_arena_free(&c->arena);
    free(c->hoff);
    free(c->hdrs);
    free(c);
    ul_http_server_conn_gone(s);
}

/* Marks the connection closing (once) and takes it out of the budget and the tick list. */
static int begin_close(ul_conn_t *c, int reason) {
    if (c->closing) return 0;
    c->closing = 1;
    c->abort_reason = reason;
    ul_conn_unaccount(c);
    ul_queue_remove(&c->tick);
    return 1;
}

void ul_conn_close(ul_conn_t *c, int reason) {
    if (begin_close(c, reason)) uv_close((uv_handle_t *)&c->tcp, on_close);
}

void ul_conn_abort(ul_conn_t *c, int reason) {
    if (begin_close(c, reason) && uv_tcp_close_reset(&c->tcp, on_close))
        uv_close((uv_handle_t *)&c->tcp, on_close);
}

static void free_handle(uv_handle_t *h) { free(h); }

static void peer_name(ul_conn_t *c) {
    struct sockaddr_storage ss;
    int len = sizeof ss;
    c->peer[0] = '\0';
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len)) return;
    if (ss.ss_family == AF_INET6)
        uv_ip6_name((struct sockaddr_in6 *)&ss, c->peer, sizeof c->peer);
    else if (ss.ss_family == AF_INET)
        uv_ip4_name((struct sockaddr_in *)&ss, c->peer, sizeof c->peer);
}

/* Over max_conns: a 503 and a warning at most every 10 s with the count refused since. */
static void refuse_conn(ul_http_server_t *s, ul_conn_t *c) {
    uint64_t now = uv_now(s->loop);
    s->stats.conns_rejected++;
    s->limit_refused++;
    if (!s->limit_log_at || now - s->limit_log_at >= 10000) {
        UL_LOG_WARN("connection limit reached (--max-conns %u): %" PRIu64
                    " connection(s) refused with 503 since the last such line",
                    s->cfg.max_conns, s->limit_refused);
        s->limit_log_at = now;
        s->limit_refused = 0;
    }
    c->quick_linger = 1; /* at the limit descriptors are scarce */
    ul_conn_fail(c, 503, "too many open connections");
    ul_conn_flush(c);
}

/* A connection from the listener (libuv's accepted descriptor when fd < 0, else fd, taken
 * from the backlog directly). 0, or -1 when nothing was there to accept. */
static int conn_accept(ul_http_server_t *s, int fd) {
    ul_conn_t *c = calloc(1, sizeof *c);
    if (!c) {
        UL_LOG_ERROR("out of memory accepting a connection");
        if (fd >= 0) close(fd);
        return 0;
    }
    int rc = uv_tcp_init(s->loop, &c->tcp);
    if (rc) {
        free(c);
        if (fd >= 0) close(fd);
        return 0;
    }
    rc = fd < 0 ? uv_accept((uv_stream_t *)&s->listener, (uv_stream_t *)&c->tcp)
                : uv_tcp_open(&c->tcp, fd);
    if (rc) {
        if (fd >= 0) close(fd);
        uv_close((uv_handle_t *)&c->tcp, free_handle);
        return -1;
    }
    c->srv = s;
    c->id = ++s->next_conn_id;
    llhttp_init(&c->parser, HTTP_REQUEST, ul_conn_parser_settings());
    c->parser.data = c;
    ul_arena_init(&c->arena, 4096);
    ul_queue_init(&c->tick);
    ul_queue_insert_tail(&s->conns, &c->node);
    c->in_headers = 1;
    c->keep_alive = 1;
    c->hdr_start = c->last_in = c->last_out = uv_now(s->loop);
    peer_name(c);
    s->stats.conns_open++;
    s->stats.conns_total++;
    ul_conn_account(c);
    uv_tcp_nodelay(&c->tcp, 1);
    ul_conn_read_start(c);
    if (!c->closing && s->stats.conns_open > s->cfg.max_conns) refuse_conn(s, c);
    return 0;
}

void ul_conn_accept(ul_http_server_t *s) { conn_accept(s, -1); }

void ul_conn_accept_backlog(ul_http_server_t *s) {
    uv_os_fd_t lfd;
    if (uv_fileno((uv_handle_t *)&s->listener, &lfd)) return;
    conn_accept(s, -1); /* the one libuv may hold already */
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR) continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK &&
                errno != EINVAL) /* EINVAL: never listened */
                UL_LOG_WARN("accepting the backlog at shutdown: %s", strerror(errno));
            return;
        }
        conn_accept(s, fd);
    }
}

int ul_conn_input_waiting(const ul_conn_t *c) {
    uv_os_fd_t fd;
    char b;
    if (uv_fileno((const uv_handle_t *)&c->tcp, &fd)) return 0;
    return recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

void ul_conn_req_finish(ul_conn_t *c) {
    c->req_open = 0;
    c->resp = UL_RESP_DONE;
    ul_http_access_log(c);
    ul_arena_reset(&c->arena);
    c->hdr.len = c->body.len = c->resp_hdrs.len = 0;
    c->n_hoff = 0;
    c->rid_set = 0;
    c->req.path = c->req.method_name = NULL;
    memset(&c->cbs, 0, sizeof c->cbs);
    c->err_status = 0;
    c->err_msg = NULL;
    c->cut = NULL;
    if (c->closing) return;
    ul_conn_shrink(c);
    if (!c->keep_alive || c->srv->draining) {
        c->close_after_write = 1;
        c->in.len = 0;
    } else {
        llhttp_resume(&c->parser);
        if (c->in.len) {
            c->got_bytes = 1;
            c->hdr_start = uv_now(c->srv->loop);
        }
    }
    c->last_in = uv_now(c->srv->loop); /* idle time counts from the end of a request */
    ul_conn_want_flush(c);
}

void ul_conn_fail(ul_conn_t *c, int status, const char *message) {
    if (c->closing || c->close_after_write) return;
    static const struct {
        int status;
        const char *code;
    } codes[] = {{400, "bad_request"},       {408, "request_timeout"}, {413, "request_too_large"},
                 {431, "headers_too_large"}, {500, "internal_error"},  {501, "not_implemented"},
                 {503, "server_overloaded"}};
    const char *code = NULL;
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        if (codes[i].status == status) code = codes[i].code;
    ul_buf_t body = {0};
    int rc = ul_http_error_body(&body, ul_http_error_type(status), code, message);
    ul_buf_t extra = {0};
    if (status == 503) rc |= ul_buf_puts(&extra, "Retry-After: 1\r\n");
    rc |= ul_conn_std_headers(c, &extra);
    ul_conn_hook_headers(c, &extra);
    ul_http_head_t h = {
        .status = status,
        .content_type = "application/json",
        .content_length = rc ? 0 : (int64_t)body.len,
        .keep_alive = 0,
        .extra = extra.p,
        .extra_len = extra.len,
        .date = ul_http_server_date(c->srv),
    };
    size_t before = c->out.len;
    rc |= ul_http_head_write(&c->out, &h);
    if (!rc) rc = ul_buf_append(&c->out, body.p, body.len);
    ul_buf_free(&body);
    ul_buf_free(&extra);
    if (rc) {
        ul_conn_close(c, UL_ENOMEM);
        return;
    }
    if (status == 408) c->srv->stats.timeouts++;
    c->status = status;
    c->resp_bytes = c->out.len - before;
    c->t_start = uv_hrtime();
    if (c->n_req == 0 || c->req.req_id != c->n_req || !c->req.path) {
        /* nothing of this message was built: no method or path to log */
        c->req.req_id = c->n_req + 1;
        c->req.method_name = c->req.path = NULL;
    }
    c->req.request_id = c->rid_set ? c->rid : NULL;
    c->cut = NULL;
    ul_http_access_log(c);
    c->keep_alive = 0;
    c->close_after_write = 1;
    c->in.len = 0;
    ul_conn_want_flush(c);
}

/* A body that takes longer than request_timeout_ms from the request's first byte, or that
 * averages under min_body_rate once header_timeout_ms has passed since its head: 408. */
static int body_too_slow(const ul_conn_t *c, uint64_t now) {
    const ul_http_config_t *cfg = &c->srv->cfg;
    if (now - c->hdr_start >= cfg->request_timeout_ms) return 1;
    uint64_t t = now - c->body_start, grace = cfg->header_timeout_ms;
    return cfg->min_body_rate && t > grace &&
           c->body_raw * 1000 < (uint64_t)cfg->min_body_rate * (t - grace);
}

void ul_conn_sweep(ul_conn_t *c, uint64_t now) {
    const ul_http_config_t *cfg = &c->srv->cfg;
    if (c->closing) return;
    if (c->lingering || c->cutting) {
        uint64_t at = c->lingering ? c->linger_deadline : c->cut_deadline;
        if (now >= at) ul_conn_close(c, UL_ECLOSED);
        return;
    }
    /* A client that stopped reading: nothing left the buffer for stall_timeout (a paused
     * stream's sequence holds KV pages until this cancels it). */
    if (ul_conn_pending(c) > 0 && now - c->last_out >= cfg->stall_timeout_ms) {
        ul_conn_close(c, UL_ETIMEDOUT);
        return;
    }
    if (c->req_open) {
        if (c->resp == UL_RESP_STREAM && cfg->sse_ping_ms && !c->backpressured &&
            now - c->last_out >= cfg->sse_ping_ms)
            ul_sse_comment(&c->sse, "ping");
        return;
    }
    if (c->close_after_write) return;
    if (c->in_headers && !c->got_bytes && c->n_req > 0) {
        if (now - c->last_in >= cfg->idle_timeout_ms) ul_conn_close(c, UL_ETIMEDOUT);
        return;
    }
    if (c->in_body && body_too_slow(c, now)) {
        ul_conn_fail(c, 408, "the request body arrived too slowly");
        return;
    }
    uint64_t since = c->in_headers ? c->hdr_start : c->last_in;
    if (now - since >= cfg->header_timeout_ms) {
        if (c->got_bytes)
            ul_conn_fail(c, 408, "timed out reading the request");
        else
            ul_conn_close(c, UL_ETIMEDOUT);
    }
}
