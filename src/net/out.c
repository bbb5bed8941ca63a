/* The output side of a connection. Everything written is appended to conn->out; a flush
 * first tries uv_try_write (the common case: the whole response leaves in one syscall with
 * no request object) and hands what the socket did not take to a single uv_write. At most
 * one write is in flight: its buffer (conn->wbuf) is swapped out of conn->out and stays
 * untouched until on_write, while new output keeps collecting in conn->out.
 * Flushes are coalesced: inside the parse loop they wait for the end of the read, outside
 * it they wait for the server's check callback, so a burst of pipelined responses or of
 * SSE events produced in one loop iteration becomes one write. */
#include "net/conn.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

int ul_conn_out(ul_conn_t *c, const void *p, size_t n) { return ul_buf_append(&c->out, p, n); }

void ul_conn_schedule(ul_conn_t *c) {
    if (c->closing || c->tick.next != &c->tick) return; /* already queued */
    ul_queue_insert_tail(&c->srv->ticks, &c->tick);
}

void ul_conn_want_flush(ul_conn_t *c) {
    if (c->in_parse) return; /* the parse loop flushes when it ends */
    ul_conn_schedule(c);
}

void ul_conn_update_pressure(ul_conn_t *c) {
    size_t pending = ul_conn_pending(c);
    if (!c->backpressured) {
        if (pending > c->srv->cfg.out_soft_limit) c->backpressured = 1;
        return;
    }
    if (pending >= c->srv->cfg.out_soft_limit) return;
    c->backpressured = 0;
    if (c->req_open && c->cbs.on_drain) c->cbs.on_drain(&c->req, c->cbs_data);
}

static void on_shutdown(uv_shutdown_t *req, int status) {
    ul_conn_t *c = req->data;
    if (status < 0 && !c->closing) ul_conn_close(c, UL_ECLOSED);
}

/* Output is drained after the response that ends the connection: send FIN, then keep
 * reading (and discarding) until the client closes or linger_ms passes, so a client still
 * sending a rejected body reads our answer instead of a reset. */
static void start_linger(ul_conn_t *c) {
    if (c->eof) { /* the client is gone already: nothing to linger for */
        ul_conn_close(c, UL_ECLOSED);
        return;
    }
    c->lingering = 1;
    ul_conn_shrink(c); /* nothing more is sent or parsed: large buffers go now */
    uint64_t ms = c->srv->cfg.linger_ms;
    if (c->quick_linger && ms > 200) ms = 200;
    c->linger_deadline = uv_now(c->srv->loop) + ms;
    c->sreq.data = c;
    int rc = uv_shutdown(&c->sreq, (uv_stream_t *)&c->tcp, on_shutdown);
    if (rc) {
        ul_conn_close(c, UL_ECLOSED);
        return;
    }
    c->in.len = 0;
    if (c->discarded <= UL_CONN_DISCARD_MAX)
        ul_conn_read_start(c); /* reading may have stopped at the input cap */
    else if (c->reading) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = 0;
    }
}

/* Called when out is empty (wbuf may still be in flight). */
static void drained(ul_conn_t *c) {
    ul_conn_update_pressure(c);
    if (c->closing) return;
    if (c->cutting) { /* shutdown: the last words are out, no lingering */
        if (!c->writing) ul_conn_close(c, UL_ECLOSED);
        return;
    }
    if (c->close_after_write && !c->lingering && !c->req_open) {
        start_linger(c);
        return;
    }
    if (!c->req_open && !c->writing) {
        ul_conn_shrink(c);
        /* parsing stopped for backpressure (conn.c may_parse) resumes */
        if (c->in.len && !c->close_after_write && !c->lingering) ul_conn_schedule(c);
    }
}

static void on_write(uv_write_t *req, int status) {
    ul_conn_t *c = req->data;
    size_t n = c->wbuf.len + (c->wbody.len - c->wbody_off);
    c->writing = 0;
    c->wbuf.len = 0;
    if (c->wbody.p) { /* a staged answer's body: sent, or the connection closes */
        ul_conn_buf_drop(c->srv, &c->wbody);
        c->wbody_off = 0;
    }
    if (status < 0) {
        if (!c->closing) {
            UL_LOG_DEBUG("conn=%llu write failed: %s", (unsigned long long)c->id,
                         uv_strerror(status));
            ul_conn_close(c, status);
        }
        return;
    }
    c->srv->stats.bytes_out += n;
    c->last_out = uv_now(c->srv->loop);
    ul_conn_flush(c);
    if (!c->closing) ul_conn_account(c);
}

/* The staged answer's head (wbuf) and unsent body (wbody from wbody_off) as buffers for a
 * write; returns how many (1 or 2). */
static unsigned staged_bufs(ul_conn_t *c, uv_buf_t b[2]) {
    unsigned n = 0;
    if (c->wbuf.len) b[n++] = uv_buf_init(c->wbuf.p, (unsigned)c->wbuf.len);
    b[n++] = uv_buf_init(c->wbody.p + c->wbody_off, (unsigned)(c->wbody.len - c->wbody_off));
    return n;
}

/* What the socket takes of b now, counted as sent: the bytes written (0 when it is full), or
 * -1 when the write failed and the connection was closed. */
static int try_write(ul_conn_t *c, const uv_buf_t *b, unsigned nb) {
    int n = uv_try_write((uv_stream_t *)&c->tcp, b, nb);
    if (n == UV_EAGAIN || n == UV_ENOSYS) return 0;
    if (n < 0) {
        ul_conn_close(c, n);
        return -1;
    }
    if (n > 0) {
        c->srv->stats.bytes_out += (uint64_t)n;
        c->last_out = uv_now(c->srv->loop);
    }
    return n;
}

/* Sends the staged answer (ul_http_respond_buf) straight from its own buffers: what the
 * socket takes now, the rest in one uv_write of both; then whatever out collected since. */
static void flush_staged(ul_conn_t *c) {
    uv_buf_t b[2];
    unsigned nb = staged_bufs(c, b);
    int n = try_write(c, b, nb);
    if (n < 0) return;
    size_t head = (size_t)n < c->wbuf.len ? (size_t)n : c->wbuf.len;
    ul_buf_consume(&c->wbuf, head);
    c->wbody_off += (size_t)n - head;
    if (c->wbody_off == c->wbody.len) { /* all gone in one call */
        ul_conn_buf_drop(c->srv, &c->wbody);
        c->wbody_off = 0;
        ul_conn_flush(c);
        return;
    }
    nb = staged_bufs(c, b);
    c->wreq.data = c;
    int rc = uv_write(&c->wreq, (uv_stream_t *)&c->tcp, b, nb, on_write);
    if (rc) {
        ul_conn_close(c, rc);
        return;
    }
    c->writing = 1;
    ul_conn_update_pressure(c);
}

void ul_conn_flush(ul_conn_t *c) {
    if (c->closing || c->writing) return;
    if (c->wbody.len) {
        flush_staged(c);
        return;
    }
    if (c->out.len == 0) {
        drained(c);
        return;
    }
    uv_buf_t b = uv_buf_init(c->out.p, (unsigned)c->out.len);
    int n = try_write(c, &b, 1);
    if (n < 0) return;
    if ((size_t)n == c->out.len) {
        c->out.len = 0;
        drained(c);
        return;
    }
    /* The socket is full: the rest goes to one uv_write from the swapped-out buffer. */
    ul_buf_consume(&c->out, (size_t)n);
    ul_buf_t t = c->wbuf;
    c->wbuf = c->out;
    c->out = t;
    c->out.len = 0;
    b = uv_buf_init(c->wbuf.p, (unsigned)c->wbuf.len);
    c->wreq.data = c;
    int rc = uv_write(&c->wreq, (uv_stream_t *)&c->tcp, &b, 1, on_write);
    if (rc) {
        c->wbuf.len = 0;
        ul_conn_close(c, rc);
        return;
    }
    c->writing = 1;
    ul_conn_update_pressure(c);
}
