/* Server-sent events on top of a connection: the event-stream head, one frame per event
 * ("data: ...\n\n", one HTTP chunk each on HTTP/1.1, raw and close-delimited on 1.0), and
 * the bounded output policy: over the soft limit the stream reports backpressure, over
 * the hard limit the connection is closed and the owner hears on_abort(UL_EFULL). */
#include <stdio.h>
#include <string.h>

#include "net/conn.h"
#include "uvllm/err.h"

int ul_sse_frame(ul_buf_t *b, int chunked, const char *prefix, const char *data, size_t len) {
    size_t plen = strlen(prefix);
    size_t payload = plen + len + 2;
    if (payload < len) return UL_ENOMEM;
    int rc = ul_buf_reserve(b, payload + 24);
    if (rc) return rc;
    if (chunked) {
        ul_buf_append_hex(b, payload);
        ul_buf_append(b, "\r\n", 2);
    }
    ul_buf_append(b, prefix, plen);
    ul_buf_append(b, data, len);
    ul_buf_append(b, "\n\n", 2);
    if (chunked) ul_buf_append(b, "\r\n", 2);
    return 0;
}

int ul_sse_start(ul_http_req_t *req, ul_sse_t **out) {
    ul_conn_t *c = req->conn_;
    if (!c->req_open || c->resp != UL_RESP_NONE) return UL_ESTATE;
    c->sse.conn = c;
    if (out) *out = &c->sse;
    if (c->closing || c->cutting) return UL_ECLOSED;
    int http10 = req->http_major == 1 && req->http_minor == 0;
    c->chunked = !http10;
    /* A 1.0 client learns the end of the stream only from the connection closing. */
    if (http10) c->keep_alive = 0;
    ul_conn_hook_headers(c, &c->resp_hdrs);
    ul_http_head_t h = {
        .status = 200,
        .content_length = -1,
        .chunked = c->chunked,
        .keep_alive = c->keep_alive,
        .http10 = http10,
        .sse = 1,
        .extra = c->resp_hdrs.p,
        .extra_len = c->resp_hdrs.len,
        .date = ul_http_server_date(c->srv),
    };
    size_t before = c->out.len;
    if (ul_http_head_write(&c->out, &h)) {
        c->out.len = before;
        ul_conn_close(c, UL_ENOMEM);
        return UL_ECLOSED;
    }
    c->resp = UL_RESP_STREAM;
    c->status = 200;
    c->resp_bytes += c->out.len - before;
    c->last_out = uv_now(c->srv->loop);
    c->srv->stats.streams_active++;
    ul_conn_mark_pressure(c);
    ul_conn_want_flush(c);
    return 0;
}

static int stream_check(ul_conn_t *c) {
    if (!c) return UL_EINVAL;
    if (!c->req_open || c->resp != UL_RESP_STREAM) return UL_ESTATE;
    if (c->closing || c->cutting) return UL_ECLOSED;
    return 0;
}

/* hold: leave the flush to a later event (ul_sse_send_held), unless enough is waiting
 * that backpressure could start with nothing in flight to ever end it. */
static int emit(ul_conn_t *c, const char *prefix, const char *data, size_t len, int hold) {
    size_t add = strlen(prefix) + len + 32;
    size_t grow = ul_buf_grown_cap(&c->out, add) - c->out.cap;
    if (ul_conn_pending(c) + add > c->srv->cfg.out_hard_limit ||
        (grow && ul_conn_mem_check(c, grow))) {
        ul_conn_close(c, UL_EFULL);
        return UL_EFULL;
    }
    size_t before = c->out.len;
    if (ul_sse_frame(&c->out, c->chunked, prefix, data, len)) {
        c->out.len = before;
        ul_conn_close(c, UL_ENOMEM);
        return UL_ECLOSED;
    }
    c->resp_bytes += c->out.len - before;
    c->last_out = uv_now(c->srv->loop);
    if (grow) ul_conn_account(c);
    ul_conn_mark_pressure(c);
    if (!hold || ul_conn_pending(c) > c->srv->cfg.out_soft_limit / 4) ul_conn_want_flush(c);
    return 0;
}

/* An event name is a short token: it is written into the frame as is. */
static int event_name_ok(const char *ev) {
    size_t n = strlen(ev);
    if (n < 1 || n > 64) return 0;
    for (size_t i = 0; i < n; i++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-", ev[i]))
            return 0;
    return 1;
}

int ul_sse_send_event(ul_sse_t *s, const char *event, const char *json, size_t len, int hold) {
    ul_conn_t *c = s ? s->conn : NULL;
    int rc = stream_check(c);
    if (rc) return rc;
    if (memchr(json, '\n', len) || memchr(json, '\r', len)) return UL_EINVAL;
    if (!event) return emit(c, "data: ", json, len, hold);
    if (!event_name_ok(event)) return UL_EINVAL;
    char prefix[96];
    snprintf(prefix, sizeof prefix, "event: %s\ndata: ", event);
    return emit(c, prefix, json, len, hold);
}

int ul_sse_send(ul_sse_t *s, const char *json, size_t len) {
    return ul_sse_send_event(s, NULL, json, len, 0);
}

int ul_sse_send_held(ul_sse_t *s, const char *json, size_t len) {
    return ul_sse_send_event(s, NULL, json, len, 1);
}

int ul_sse_flush(ul_sse_t *s) {
    ul_conn_t *c = s ? s->conn : NULL;
    int rc = stream_check(c);
    if (rc) return rc;
    if (c->out.len) ul_conn_want_flush(c);
    return 0;
}

int ul_sse_comment(ul_sse_t *s, const char *text) {
    ul_conn_t *c = s ? s->conn : NULL;
    int rc = stream_check(c);
    if (rc) return rc;
    if (strpbrk(text, "\r\n")) return UL_EINVAL;
    return emit(c, ": ", text, strlen(text), 0);
}

static int finish(ul_conn_t *c, int done) {
    int rc = stream_check(c);
    if (rc == UL_ESTATE || rc == UL_EINVAL) return rc;
    c->srv->stats.streams_active--;
    c->resp = UL_RESP_DONE;
    if (rc == 0) {
        size_t before = c->out.len;
        int err = 0;
        if (done) err |= ul_sse_frame(&c->out, c->chunked, "data: ", "[DONE]", 6);
        if (c->chunked) err |= ul_buf_append(&c->out, "0\r\n\r\n", 5);
        if (err) {
            c->out.len = before;
            ul_conn_close(c, UL_ENOMEM);
            rc = UL_ECLOSED;
        } else {
            c->resp_bytes += c->out.len - before;
        }
    }
    ul_conn_req_finish(c);
    return rc;
}

int ul_sse_done(ul_sse_t *s) { return finish(s ? s->conn : NULL, 1); }
int ul_sse_end(ul_sse_t *s) { return finish(s ? s->conn : NULL, 0); }

int ul_sse_backpressured(const ul_sse_t *s) { return s && s->conn && s->conn->backpressured; }

ul_http_req_t *ul_sse_req(ul_sse_t *s) { return s && s->conn ? &s->conn->req : NULL; }
