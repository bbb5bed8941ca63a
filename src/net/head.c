/* The llhttp callbacks of a connection: the request line and header fields are stored in
 * conn->hdr (offsets in conn->hoff, since the buffer may move while it grows), the body in
 * conn->body under its limits. llhttp is built in strict mode (CMakeLists.txt); what strict
 * mode still lets through is refused here or in conn.c:
 *   - a Transfer-Encoding other than exactly "chunked" (gzip, chunked; chunked, identity):
 *     501, since a body we cannot decode must not be guessed at;
 *   - more than max_headers fields: 431 (each costs far more than its bytes);
 *   - trailer fields after a chunked body: never stored (a trailer must not pass for a
 *     request header, least of all Authorization), their bytes and their number counted
 *     against max_header_bytes and max_headers together with the head's: 431;
 *   - obsolete line folding (conn.c scans the raw head, see hdr_lf).
 * on_headers_complete pauses the parser so the head is checked (credentials, 100-continue,
 * the memory budget) before any body byte is read; conn.c resumes it. */
#include <stdlib.h>
#include <strings.h>

#include "net/conn.h"
#include "uvllm/err.h"

static ul_conn_t *conn_of(llhttp_t *p) { return p->data; }

static int fail(ul_conn_t *c, int status, const char *msg) {
    c->err_status = status;
    c->err_msg = msg;
    return -1;
}

static int store(ul_conn_t *c, const char *at, size_t len) {
    if (ul_buf_append(&c->hdr, at, len)) return fail(c, 500, NULL);
    return 0;
}

/* A trailer field's bytes: counted with the head against max_header_bytes, then dropped. */
static int trailer(ul_conn_t *c, size_t len) {
    c->trailer_bytes += len;
    if (c->hdr_raw + c->trailer_bytes > c->srv->cfg.max_header_bytes)
        return fail(c, 431, "request headers and trailers are too large");
    return 0;
}

static int on_message_begin(llhttp_t *p) {
    ul_conn_t *c = conn_of(p);
    c->hdr.len = 0;
    c->body.len = 0;
    c->n_hoff = 0;
    c->url_len = 0;
    c->hdr_in_value = 0;
    c->hdr_val_open = 0;
    c->expect_continue = 0;
    c->rid_set = 0;
    c->trailer_bytes = 0;
    c->trailer_fields = 0;
    c->body_raw = 0;
    if (!c->got_bytes) { /* header timeout counts from the first byte of the message */
        c->got_bytes = 1;
        c->hdr_start = uv_now(c->srv->loop);
    }
    return 0;
}

static int on_url(llhttp_t *p, const char *at, size_t len) {
    ul_conn_t *c = conn_of(p);
    if (store(c, at, len)) return -1;
    c->url_len += (uint32_t)len;
    return 0;
}

static int on_url_complete(llhttp_t *p) { return store(conn_of(p), "", 1); }

/* Terminates a value whose on_header_value_complete never came (defensive: an empty
 * value must still read as "" and not run into the next header's name). */
static int close_value(ul_conn_t *c) {
    if (!c->hdr_val_open) return 0;
    c->hdr_val_open = 0;
    return store(c, "", 1);
}

static int new_header(ul_conn_t *c) {
    if (c->n_hoff >= c->srv->cfg.max_headers) return fail(c, 431, "too many request header fields");
    if (c->n_hoff == c->cap_hoff) {
        size_t cap = c->cap_hoff ? c->cap_hoff * 2 : 32;
        ul_hoff_t *h = realloc(c->hoff, cap * sizeof *h);
        if (!h) return fail(c, 500, NULL);
        c->hoff = h;
        c->cap_hoff = cap;
    }
    ul_hoff_t *h = &c->hoff[c->n_hoff++];
    h->name_off = (uint32_t)c->hdr.len;
    h->name_len = h->val_off = h->val_len = 0;
    c->hdr_in_value = 0;
    return 0;
}

static int on_header_field(llhttp_t *p, const char *at, size_t len) {
    ul_conn_t *c = conn_of(p);
    if (!c->in_headers) return trailer(c, len + 4); /* ": " and CRLF */
    if (close_value(c)) return -1;
    if (c->hdr_in_value || c->n_hoff == 0 || c->hoff[c->n_hoff - 1].val_off != 0)
        if (new_header(c)) return -1;
    if (store(c, at, len)) return -1;
    c->hoff[c->n_hoff - 1].name_len += (uint32_t)len;
    return 0;
}

static int on_header_field_complete(llhttp_t *p) {
    ul_conn_t *c = conn_of(p);
    if (!c->in_headers) /* with the head's, against max_headers: each costs callbacks */
        return ++c->trailer_fields + c->n_hoff > c->srv->cfg.max_headers
                   ? fail(c, 431, "too many request header and trailer fields")
                   : 0;
    if (store(c, "", 1)) return -1;
    c->hoff[c->n_hoff - 1].val_off = (uint32_t)c->hdr.len;
    c->hdr_in_value = 1;
    c->hdr_val_open = 1;
    return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t len) {
    ul_conn_t *c = conn_of(p);
    if (!c->in_headers) return trailer(c, len);
    if (store(c, at, len)) return -1;
    c->hoff[c->n_hoff - 1].val_len += (uint32_t)len;
    return 0;
}

static int on_header_value_complete(llhttp_t *p) {
    ul_conn_t *c = conn_of(p);
    if (!c->in_headers) return 0;
    ul_hoff_t *h = &c->hoff[c->n_hoff - 1];
    /* A header with an empty value never calls on_header_value: val_off is still set by
     * on_header_field_complete, so the stored value is simply "". */
    while (h->val_len && (c->hdr.p[h->val_off + h->val_len - 1] == ' ' ||
                          c->hdr.p[h->val_off + h->val_len - 1] == '\t'))
        h->val_len--;
    c->hdr.len = h->val_off + h->val_len;
    c->hdr_val_open = 0;
    return store(c, "", 1);
}

/* RFC 9112 6.1: a server that does not understand a transfer coding answers 501. Only
 * "chunked", alone and once (llhttp already refuses a second chunked or one not last). */
static int transfer_encoding_ok(const ul_conn_t *c) {
    size_t len = 0;
    const char *te = ul_conn_header(c, "transfer-encoding", &len);
    int n = 0;
    for (size_t i = 0; i < c->n_hoff; i++)
        if (c->hoff[i].name_len == 17 &&
            !strncasecmp(c->hdr.p + c->hoff[i].name_off, "transfer-encoding", 17))
            n++;
    return !te || (n == 1 && len == 7 && !strncasecmp(te, "chunked", 7));
}

static int on_headers_complete(llhttp_t *p) {
    ul_conn_t *c = conn_of(p);
    c->in_headers = 0;
    if (close_value(c)) return -1;
    ul_conn_request_id(c); /* before any answer, so a 413 carries it too */
    if (!transfer_encoding_ok(c))
        return fail(c, 501, "only 'Transfer-Encoding: chunked' is supported");
    c->head_paused = 1;
    return HPE_PAUSED; /* conn.c checks the head before the body is read */
}

static int on_body(llhttp_t *p, const char *at, size_t len) {
    ul_conn_t *c = conn_of(p);
    if (c->body.len + len > c->srv->cfg.max_body) return fail(c, 413, NULL);
    /* growth beyond the buffer's capacity is what the memory budget must allow */
    size_t grow = ul_buf_grown_cap(&c->body, len) - c->body.cap;
    int st = grow ? ul_conn_mem_check(c, grow) : 0;
    if (st) return fail(c, st, NULL);
    if (ul_buf_append(&c->body, at, len)) return fail(c, 413, NULL); /* as good as too large */
    if (grow) ul_conn_account(c);
    return 0;
}

static int on_message_complete(llhttp_t *p) {
    (void)p;
    return HPE_PAUSED; /* dispatch outside the parser; see parse() in conn.c */
}

static const llhttp_settings_t g_settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_url_complete = on_url_complete,
    .on_header_field = on_header_field,
    .on_header_field_complete = on_header_field_complete,
    .on_header_value = on_header_value,
    .on_header_value_complete = on_header_value_complete,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

const llhttp_settings_t *ul_conn_parser_settings(void) { return &g_settings; }

const char *ul_conn_header(const ul_conn_t *c, const char *name, size_t *len) {
    size_t n = strlen(name);
    for (size_t i = 0; i < c->n_hoff; i++) {
        const ul_hoff_t *h = &c->hoff[i];
        if (h->name_len == n && h->val_off && strncasecmp(c->hdr.p + h->name_off, name, n) == 0) {
            *len = h->val_len;
            return c->hdr.p + h->val_off;
        }
    }
    return NULL;
}
