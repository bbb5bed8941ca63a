/* The memory budget (ul_http_config_t.max_buffered_mem, max_conn_mem): what every
 * connection holds for its client (input, head, body, queued output, their bookkeeping) is
 * its footprint, kept current at the points where buffers grow or shrink, and summed per
 * server. A request body or an answer that would take a connection over its budget is a
 * 413, over the total a 503. Before a 503, connections whose output made no progress for a
 * second (clients that stopped reading; their memory is the cheapest to give up) are
 * closed, largest first. Bulk allocations (over 64 KiB) may fill three quarters of the
 * total only, so requests of a few hundred bytes keep finding room. Buffers grown for one
 * large request are released when it ends. */
#include <malloc.h>
#include <stdlib.h>

#include "net/conn.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

#define BULK (64 * 1024)     /* an allocation this large is "bulk" */
#define KEEP (64 * 1024)     /* idle buffers above this are released */
#define FREE_AWAY (1u << 20) /* buffers this large are freed on a pool thread */

static size_t footprint(const ul_conn_t *c) {
    return sizeof *c + c->in.cap + c->hdr.cap + c->body.cap + c->resp_hdrs.cap + c->out.cap +
           c->wbuf.cap + c->wbody.cap + c->cap_hoff * sizeof *c->hoff +
           c->cap_hdrs * sizeof *c->hdrs;
}

void ul_conn_account(ul_conn_t *c) {
    if (c->closing) return;
    ul_http_server_t *s = c->srv;
    size_t m = footprint(c);
    s->stats.mem_buffered = s->stats.mem_buffered - c->mem + m;
    c->mem = m;
}

void ul_conn_unaccount(ul_conn_t *c) {
    c->srv->stats.mem_buffered -= c->mem;
    c->mem = 0;
}

static int fits_total(const ul_http_server_t *s, size_t n) {
    size_t limit = s->cfg.max_buffered_mem;
    if (n > BULK) limit -= limit / 4;
    return s->stats.mem_buffered <= limit && n <= limit - s->stats.mem_buffered;
}

/* The connection (other than keep) holding the most output that no client took for
 * mem_evict_after_ms, or NULL. */
static ul_conn_t *stalled_reader(ul_http_server_t *s, const ul_conn_t *keep) {
    uint64_t now = uv_now(s->loop);
    ul_conn_t *best = NULL;
    ul_queue_t *q;
    UL_QUEUE_FOREACH(q, &s->conns) {
        ul_conn_t *c = UL_QUEUE_DATA(q, ul_conn_t, node);
        if (c == keep || c->closing || ul_conn_pending(c) == 0 ||
            now - c->last_out < s->cfg.mem_evict_after_ms)
            continue;
        if (!best || c->mem > best->mem) best = c;
    }
    return best;
}

int ul_conn_mem_check(ul_conn_t *c, size_t n) {
    ul_http_server_t *s = c->srv;
    size_t own = s->cfg.max_conn_mem;
    if (c->mem > own || n > own - c->mem) {
        s->stats.mem_refused++;
        return 413;
    }
    while (!fits_total(s, n)) {
        ul_conn_t *v = stalled_reader(s, c);
        if (!v) {
            s->stats.mem_refused++;
            UL_LOG_DEBUG("conn=%llu memory budget full: %zu bytes refused (%llu of %zu in use)",
                         (unsigned long long)c->id, n, (unsigned long long)s->stats.mem_buffered,
                         s->cfg.max_buffered_mem);
            return 503;
        }
        UL_LOG_INFO("conn=%llu closed to free memory: %zu bytes of output unread",
                    (unsigned long long)v->id, ul_conn_pending(v));
        s->stats.mem_evicted++;
        v->cut = "memory";
        ul_conn_abort(v, UL_ETIMEDOUT);
    }
    return 0;
}

/* ---- freeing large buffers off the loop ------------------------------------------------ */

/* Large buffers stop coming for this long: what malloc keeps goes back to the system. */
#define TRIM_AFTER_MS 2000

static void free_work(uv_work_t *w) {
    ul_http_server_t *s = w->data;
    for (size_t i = 0; i < s->n_freeing; i++) free(s->freeing[i]);
    if (s->trimming) malloc_trim(0);
}

static void free_next(ul_http_server_t *s);

static void free_done(uv_work_t *w, int status) {
    ul_http_server_t *s = w->data;
    s->n_freeing = 0;
    s->free_busy = 0;
    s->trimming = 0;
    free_next(s);
    ul_http_server_conn_gone(s); /* a shutdown may have waited for this */
}

static void free_next(ul_http_server_t *s) {
    if (s->free_busy || (!s->n_to_free && !s->trim_wanted)) return;
    s->trimming = s->trim_wanted;
    s->trim_wanted = 0;
    void **t = s->freeing;
    size_t cap = s->cap_freeing;
    s->freeing = s->to_free, s->cap_freeing = s->cap_to_free, s->n_freeing = s->n_to_free;
    s->to_free = t, s->cap_to_free = cap, s->n_to_free = 0;
    s->free_work.data = s;
    if (uv_queue_work(s->loop, &s->free_work, free_work, free_done) == 0) {
        s->free_busy = 1;
        return;
    }
    free_work(&s->free_work); /* cannot happen on a live loop; free them here then */
    s->n_freeing = 0;
    s->trimming = 0;
}

/* Unmapping megabytes (page freeing, TLB shootdowns across the process's threads) took the
 * loop tens of milliseconds when many connections that had read large bodies closed in one
 * iteration; such buffers are freed on a pool thread instead. */
void ul_http_trim_check(ul_http_server_t *s, uint64_t now) {
    if (!s->trim_at || now < s->trim_at || s->closing) return;
    s->trim_at = 0;
    s->trim_wanted = 1;
    free_next(s);
}

void ul_conn_buf_drop(ul_http_server_t *s, ul_buf_t *b) {
    if (b->cap >= FREE_AWAY) s->trim_at = uv_now(s->loop) + TRIM_AFTER_MS;
    if (b->cap < FREE_AWAY || s->closing) {
        ul_buf_free(b);
        return;
    }
    if (s->n_to_free == s->cap_to_free) {
        size_t cap = s->cap_to_free ? 2 * s->cap_to_free : 16;
        void **q = realloc(s->to_free, cap * sizeof *q);
        if (!q) {
            ul_buf_free(b);
            return;
        }
        s->to_free = q, s->cap_to_free = cap;
    }
    s->to_free[s->n_to_free++] = b->p;
    *b = (ul_buf_t){0};
    free_next(s);
}

void ul_http_server_free_now(ul_http_server_t *s) {
    for (size_t i = 0; i < s->n_to_free; i++) free(s->to_free[i]);
    free(s->to_free);
    free(s->freeing);
    s->to_free = s->freeing = NULL;
    s->n_to_free = s->cap_to_free = s->n_freeing = s->cap_freeing = 0;
}

static void release(ul_http_server_t *s, ul_buf_t *b) {
    if (b->len == 0 && b->cap > KEEP) ul_conn_buf_drop(s, b);
}

void ul_conn_shrink(ul_conn_t *c) {
    if (c->closing) return;
    ul_http_server_t *s = c->srv;
    release(s, &c->body);
    release(s, &c->hdr);
    release(s, &c->resp_hdrs);
    release(s, &c->in);
    release(s, &c->out);
    if (!c->writing) release(s, &c->wbuf); /* in flight: libuv still reads it */
    ul_conn_account(c);
}

size_t ul_http_resp_room(const ul_http_req_t *req, int *status) {
    const ul_conn_t *c = req->conn_;
    const ul_http_server_t *s = c->srv;
    size_t own = s->cfg.max_conn_mem;
    size_t room = c->mem < own ? own - c->mem : 0;
    size_t total = s->cfg.max_buffered_mem - s->cfg.max_buffered_mem / 4;
    size_t troom = s->stats.mem_buffered < total ? total - s->stats.mem_buffered : 0;
    if (status) *status = troom < room ? 503 : 413;
    return troom < room ? troom : room;
}

char *ul_http_req_take_body(ul_http_req_t *req, size_t *len) {
    ul_conn_t *c = req->conn_;
    *len = 0;
    if (!c->req_open || !c->body.len) return NULL;
    char *p = c->body.p; /* NUL-terminated by dispatch */
    *len = c->body.len;
    c->body = (ul_buf_t){0};
    req->body = "";
    req->body_len = 0;
    ul_conn_account(c);
    return p;
}

int ul_http_mem_charge(ul_http_req_t *req, size_t n) {
    ul_conn_t *c = req->conn_;
    int st = ul_conn_mem_check(c, n);
    if (!st) c->srv->stats.mem_buffered += n;
    return st;
}

void ul_http_mem_release(ul_http_server_t *s, size_t n) {
    s->stats.mem_buffered = s->stats.mem_buffered > n ? s->stats.mem_buffered - n : 0;
}
