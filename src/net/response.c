/* Response serialization: status line, headers and body appended straight into the
 * connection's output buffer (no intermediate strings), OpenAI-style error bodies, and the
 * access-log line written once per finished request. */
#include <inttypes.h>
#include <stdio.h>

#include "net/conn.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

#define RESP_HDRS_MAX 8192

const char *ul_http_reason(int status) {
    switch (status) {
    case 100:
        return "Continue";
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 202:
        return "Accepted";
    case 204:
        return "No Content";
    case 301:
        return "Moved Permanently";
    case 302:
        return "Found";
    case 304:
        return "Not Modified";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 409:
        return "Conflict";
    case 413:
        return "Payload Too Large";
    case 415:
        return "Unsupported Media Type";
    case 422:
        return "Unprocessable Entity";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    default:
        return status >= 500 ? "Error" : status >= 400 ? "Client Error" : "Status";
    }
}

const char *ul_http_error_type(int status) {
    if (status >= 500) return "server_error";
    if (status == 408) return "timeout_error";
    return "invalid_request_error";
}

int ul_http_head_write(ul_buf_t *b, const ul_http_head_t *h) {
    int rc = 0;
    int status = h->status >= 100 && h->status <= 999 ? h->status : 500;
    rc |= ul_buf_puts(b, "HTTP/1.1 ");
    rc |= ul_buf_append_u64(b, (uint64_t)status);
    rc |= ul_buf_puts(b, " ");
    rc |= ul_buf_puts(b, ul_http_reason(status));
    rc |= ul_buf_puts(b, "\r\n");
    if (h->sse) {
        rc |= ul_buf_puts(b, "Content-Type: text/event-stream\r\n"
                             "Cache-Control: no-cache\r\n"
                             "X-Accel-Buffering: no\r\n");
    } else if (h->content_type && status != 204) {
        rc |= ul_buf_puts(b, "Content-Type: ");
        rc |= ul_buf_puts(b, h->content_type);
        rc |= ul_buf_puts(b, "\r\n");
    }
    if (h->content_length >= 0 && status != 204) { /* a 204 has no body, not even a length */
        rc |= ul_buf_puts(b, "Content-Length: ");
        rc |= ul_buf_append_u64(b, (uint64_t)h->content_length);
        rc |= ul_buf_puts(b, "\r\n");
    } else if (h->chunked) {
        rc |= ul_buf_puts(b, "Transfer-Encoding: chunked\r\n");
    }
    if (h->date) rc |= ul_buf_puts(b, h->date);
    if (h->extra && h->extra_len) rc |= ul_buf_append(b, h->extra, h->extra_len);
    if (!h->keep_alive)
        rc |= ul_buf_puts(b, "Connection: close\r\n");
    else if (h->http10)
        rc |= ul_buf_puts(b, "Connection: keep-alive\r\n");
    rc |= ul_buf_puts(b, "\r\n");
    return rc ? UL_ENOMEM : 0;
}

int ul_http_error_body(ul_buf_t *b, const char *type, const char *code, const char *message) {
    int rc = 0;
    if (!message) message = "";
    if (!type) type = "server_error";
    rc |= ul_buf_puts(b, "{\"error\":{\"message\":\"");
    rc |= ul_buf_append_json_str(b, message, strlen(message));
    rc |= ul_buf_puts(b, "\",\"type\":\"");
    rc |= ul_buf_append_json_str(b, type, strlen(type));
    rc |= ul_buf_puts(b, "\",\"param\":null,\"code\":");
    if (code) {
        rc |= ul_buf_puts(b, "\"");
        rc |= ul_buf_append_json_str(b, code, strlen(code));
        rc |= ul_buf_puts(b, "\"");
    } else {
        rc |= ul_buf_puts(b, "null");
    }
    rc |= ul_buf_puts(b, "}}");
    return rc ? UL_ENOMEM : 0;
}

void ul_http_access_log(ul_conn_t *c) {
    ul_http_server_t *s = c->srv;
    s->stats.requests_total++;
    if (!s->cfg.access_log) return;
    double ms = (double)(uv_hrtime() - c->t_start) / 1e6;
    /* the path and the request id are the client's: quoted when they hold anything but
     * URL-safe characters, so they can neither forge fields nor lines */
    char path[400], rid[2 * UL_HTTP_REQUEST_ID_MAX + 16];
    const char *p = c->req.path;
    UL_LOG_INFO("conn=%" PRIu64 " req=%" PRIu64 " %s %s status=%d bytes=%" PRIu64
                " dur_ms=%.3f request_id=%s%s%s",
                c->id, c->req.req_id, c->req.method_name ? c->req.method_name : "-",
                p ? ul_log_field(p, c->req.path_len, path, sizeof path) : "-", c->status,
                c->resp_bytes, ms,
                c->rid_set ? ul_log_field(c->rid, strlen(c->rid), rid, sizeof rid) : "-",
                c->cut ? " cut=" : "", c->cut ? c->cut : "");
}

void ul_conn_hook_headers(const ul_conn_t *c, ul_buf_t *b) {
    const ul_http_config_t *cfg = &c->srv->cfg;
    if (!cfg->resp_header) return;
    char line[512];
    size_t n = cfg->resp_header(line, sizeof line, cfg->hook_data);
    if (n > 0 && n <= sizeof line) ul_buf_append(b, line, n);
}

const ul_http_header_t *ul_http_req_header(const ul_http_req_t *req, const char *name) {
    size_t len = strlen(name);
    for (size_t i = 0; i < req->n_headers; i++) {
        const ul_http_header_t *h = &req->headers[i];
        if (h->name_len == len && strncasecmp(h->name, name, len) == 0) return h;
    }
    return NULL;
}

void ul_http_req_set_cbs(ul_http_req_t *req, const ul_http_req_cbs_t *cbs, void *data) {
    ul_conn_t *c = req->conn_;
    if (cbs)
        c->cbs = *cbs;
    else
        memset(&c->cbs, 0, sizeof c->cbs);
    c->cbs_data = data;
}

void ul_http_req_hold(ul_http_req_t *req, void (*release)(void *data, uint64_t key), void *data,
                      uint64_t key) {
    ul_conn_t *c = req->conn_;
    ul_conn_hold_release(c); /* one hold at a time */
    c->hold_release = release;
    c->hold_data = data;
    c->hold_key = key;
}

static int has_crlf(const char *s) { return strpbrk(s, "\r\n") != NULL; }

int ul_http_resp_header(ul_http_req_t *req, const char *name, const char *value) {
    ul_conn_t *c = req->conn_;
    if (!c->req_open || c->resp != UL_RESP_NONE) return UL_ESTATE;
    if (!name || !value || !*name || has_crlf(name) || has_crlf(value) || strchr(name, ':'))
        return UL_EINVAL;
    size_t n = strlen(name) + strlen(value) + 4;
    if (c->resp_hdrs.len + n > RESP_HDRS_MAX) return UL_E2BIG;
    int rc = 0;
    rc |= ul_buf_puts(&c->resp_hdrs, name);
    rc |= ul_buf_puts(&c->resp_hdrs, ": ");
    rc |= ul_buf_puts(&c->resp_hdrs, value);
    rc |= ul_buf_puts(&c->resp_hdrs, "\r\n");
    return rc ? UL_ENOMEM : 0;
}

/* Finishes the request without writing when the connection is already going away (a
 * connection being cut keeps the status it was cut with). */
static int finish_closed(ul_conn_t *c, int status) {
    if (!c->cutting) c->status = status;
    ul_conn_req_finish(c);
    return UL_ECLOSED;
}

/* The answer does not fit the memory budget: a small error in its place, then close. */
static int respond_over_budget(ul_conn_t *c, int st) {
    c->keep_alive = 0;
    c->resp_hdrs.len = 0;
    ul_conn_std_headers(c, &c->resp_hdrs);
    if (st == 503) ul_buf_puts(&c->resp_hdrs, "Retry-After: 1\r\n");
    ul_buf_t b = {0};
    int rc = ul_http_error_body(
        &b, st == 503 ? "server_error" : "invalid_request_error",
        st == 503 ? "server_overloaded" : "response_too_large",
        st == 503 ? "the server's memory for answers is full; retry later"
                  : "the answer is larger than this server sends on one connection; ask for less");
    rc = rc ? rc : ul_http_respond(&c->req, st, NULL, b.p, b.len);
    ul_buf_free(&b);
    return rc;
}

int ul_http_respond(ul_http_req_t *req, int status, const char *content_type, const char *body,
                    size_t len) {
    ul_conn_t *c = req->conn_;
    if (!c->req_open || c->resp != UL_RESP_NONE) return UL_ESTATE;
    if (c->closing || c->cutting) return finish_closed(c, status);
    if (len > 4096) { /* an error body is always let through */
        size_t need = c->out.len + len + c->resp_hdrs.len + 1024; /* the head fits in 1 KiB */
        int st = need > c->out.cap ? ul_conn_mem_check(c, need - c->out.cap) : 0;
        if (st) return respond_over_budget(c, st);
        if (ul_buf_reserve_exact(&c->out, need - c->out.len)) {
            ul_conn_close(c, UL_ENOMEM);
            return finish_closed(c, status);
        }
    }
    ul_conn_hook_headers(c, &c->resp_hdrs);
    ul_http_head_t h = {
        .status = status,
        .content_type = content_type ? content_type : "application/json",
        .content_length = (int64_t)len,
        .keep_alive = c->keep_alive,
        .http10 = req->http_major == 1 && req->http_minor == 0,
        .extra = c->resp_hdrs.p,
        .extra_len = c->resp_hdrs.len,
        .date = ul_http_server_date(c->srv),
    };
    size_t before = c->out.len;
    int rc = ul_http_head_write(&c->out, &h);
    if (!rc && !c->head_only) rc = ul_buf_append(&c->out, body, len);
    if (rc) {
        /* Could not buffer the answer: drop the partial head and close instead. */
        c->out.len = before;
        ul_conn_close(c, UL_ENOMEM);
        return finish_closed(c, status);
    }
    c->status = status;
    c->resp_bytes += c->out.len - before;
    ul_conn_account(c);
    ul_conn_req_finish(c);
    return 0;
}

int ul_http_respond_buf(ul_http_req_t *req, int status, const char *content_type, ul_buf_t *body) {
    ul_conn_t *c = req->conn_;
    if (body->len < UL_HTTP_TAKE_MIN || c->out.len || c->writing || c->wbody.len || c->head_only ||
        !c->req_open || c->resp != UL_RESP_NONE || c->closing || c->cutting) {
        /* small, or output is queued ahead of it: copied like any answer */
        int rc = ul_http_respond(req, status, content_type, body->p ? body->p : "", body->len);
        ul_conn_buf_drop(c->srv, body);
        return rc;
    }
    int st = ul_conn_mem_check(c, body->cap);
    if (st) {
        ul_conn_buf_drop(c->srv, body);
        return respond_over_budget(c, st);
    }
    ul_conn_hook_headers(c, &c->resp_hdrs);
    ul_http_head_t h = {
        .status = status,
        .content_type = content_type ? content_type : "application/json",
        .content_length = (int64_t)body->len,
        .keep_alive = c->keep_alive,
        .http10 = req->http_major == 1 && req->http_minor == 0,
        .extra = c->resp_hdrs.p,
        .extra_len = c->resp_hdrs.len,
        .date = ul_http_server_date(c->srv),
    };
    if (ul_http_head_write(&c->wbuf, &h)) { /* nothing is in flight, so wbuf is free */
        c->wbuf.len = 0;
        ul_conn_buf_drop(c->srv, body);
        ul_conn_close(c, UL_ENOMEM);
        return finish_closed(c, status);
    }
    c->wbody = *body;
    c->wbody_off = 0;
    *body = (ul_buf_t){0};
    c->status = status;
    c->resp_bytes += c->wbuf.len + c->wbody.len;
    ul_conn_account(c);
    ul_conn_req_finish(c);
    return 0;
}

int ul_http_respond_error(ul_http_req_t *req, int status, const char *type, const char *code,
                          const char *message) {
    ul_conn_t *c = req->conn_;
    if (!c->req_open || c->resp != UL_RESP_NONE) return UL_ESTATE;
    /* The arena is the request's scratch; the body is copied into the output buffer. */
    ul_buf_t tmp = {0};
    if (ul_http_error_body(&tmp, type, code, message)) {
        ul_buf_free(&tmp);
        return ul_http_respond(req, status, NULL, "", 0);
    }
    int rc = ul_http_respond(req, status, NULL, tmp.p, tmp.len);
    ul_buf_free(&tmp);
    return rc;
}
