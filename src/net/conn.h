/* Internal to src/net: the connection object and the helpers the net files share.
 * A ul_conn_t embeds its uv_tcp_t (first member, so the handle pointer is the connection)
 * and its llhttp_t; it is freed only in the uv_close callback, after the owner of an open
 * request got on_abort. Requests on one connection are strictly sequential: the parser is
 * paused after each complete message until the response is finished. */
#ifndef UL_NET_CONN_H
#define UL_NET_CONN_H

#include <llhttp.h>
#include <string.h>

#include "base/buf.h"
#include "net/http.h"

/* Input read and thrown away after an answer that ends the connection, at most (enough for
 * a client that sends its whole body before it reads; past it the reads would only cost). */
#define UL_CONN_DISCARD_MAX (256u << 10)

/* A stored header while parsing: offsets into conn->hdr, which may move when it grows. */
typedef struct ul_hoff_s {
    uint32_t name_off, name_len, val_off, val_len;
} ul_hoff_t;

struct ul_sse_s {
    struct ul_conn_s *conn;
};

typedef enum {
    UL_RESP_NONE = 0, /* nothing written for the current request */
    UL_RESP_STREAM,   /* SSE head written, events follow */
    UL_RESP_DONE      /* finished */
} ul_resp_state_t;

typedef struct ul_conn_s {
    uv_tcp_t tcp; /* first: (uv_handle_t *)conn works */
    llhttp_t parser;
    ul_http_server_t *srv;
    ul_queue_t node; /* in srv->conns */
    ul_queue_t tick; /* in srv->ticks while a flush or a parse resume is due */
    uint64_t id;
    uint64_t n_req;

    /* input: bytes read but not parsed yet (only while a request is open) */
    ul_buf_t in;
    size_t hdr_raw;       /* raw bytes consumed in the current request's header phase */
    uint64_t hdr_start;   /* uv_now when the current request's first byte arrived */
    uint64_t last_in;     /* uv_now of the last read */
    int in_headers;       /* parser is before on_headers_complete of the current message */
    int got_bytes;        /* the current message has started (any byte consumed) */
    int err_status;       /* limit hit inside a parser callback: 413 / 431 / 400 / 501 / 503 */
    const char *err_msg;  /* its message, or NULL for the status's usual one */
    int head_paused;      /* on_headers_complete paused the parser: the head is checked next */
    int hdr_lf;           /* the last header byte fed was '\n' (a line starting with a space
                             or tab after it is obsolete line folding: refused) */
    size_t trailer_bytes; /* trailer fields of the current chunked body, counted not kept */
    unsigned trailer_fields;
    int in_body;         /* headers checked, the body is arriving (deadline and rate apply) */
    uint64_t body_start; /* uv_now when the body phase began */
    uint64_t body_raw;   /* raw bytes consumed in the body phase */

    /* request under construction; hdr holds url, names and values, NUL-separated */
    ul_buf_t hdr;
    ul_buf_t body;
    ul_hoff_t *hoff;
    ul_http_header_t *hdrs;
    size_t n_hoff, cap_hoff, cap_hdrs;
    uint32_t url_len;
    int hdr_in_value; /* last header callback was a value */
    int hdr_val_open; /* a value started (field complete) but is not NUL-terminated yet */
    int expect_continue;
    int rid_set; /* rid holds the current message's request id (its headers are complete) */
    char rid[UL_HTTP_REQUEST_ID_MAX + 1];
    ul_http_req_t req;
    ul_sse_t sse;
    ul_arena_t arena;
    ul_http_req_cbs_t cbs;
    void *cbs_data;
    void (*hold_release)(void *data, uint64_t key); /* ul_http_req_hold, until dispatch */
    void *hold_data;
    uint64_t hold_key;
    int req_open; /* a dispatched request is not finished yet */

    /* response of the current request */
    ul_buf_t resp_hdrs; /* extra header lines from ul_http_resp_header */
    ul_resp_state_t resp;
    int status;
    int chunked;
    int keep_alive;
    int head_only; /* HEAD: no body bytes */
    uint64_t resp_bytes;
    uint64_t t_start; /* uv_hrtime at dispatch, for dur_ms */

    /* output: out collects, wbuf is the one buffer in flight; wbuf's memory is handed to
     * uv_write and must stay untouched until on_write runs (at most one write in flight).
     * An answer taken whole (ul_http_respond_buf) is staged as wbuf (its head) + wbody (its
     * body, sent from wbody_off) and leaves before out: its body is never copied. */
    ul_buf_t out;
    ul_buf_t wbuf;
    ul_buf_t wbody;
    size_t wbody_off;
    uv_write_t wreq;
    uv_shutdown_t sreq;
    uint64_t last_out; /* uv_now of the last write progress or SSE event */
    int writing;
    int backpressured;

    /* lifecycle */
    int in_parse;          /* inside the parse loop: flush at its end, no re-entry */
    int reading;           /* uv_read_start is active */
    int read_again;        /* reading paused for the rest of this loop iteration (fairness) */
    int eof;               /* the client closed its side */
    int close_after_write; /* close once out and wbuf are empty */
    int lingering;         /* write side shut down; discarding input until EOF/timeout */
    int quick_linger;      /* refused at accept: linger briefly, its descriptor is needed */
    uint64_t linger_deadline;
    size_t discarded; /* input thrown away since the connection began ending */
    int closing;      /* uv_close called */
    int abort_reason;
    const char *cut;       /* why an open request was cut, for the access log, or NULL */
    int cutting;           /* shutdown deadline: its last words are queued, close follows */
    uint64_t cut_deadline; /* uv_now by which a cutting connection closes regardless */
    size_t mem;            /* bytes accounted to the memory budget (budget.c) */
    char peer[48];         /* the client's address, "" if unknown */
} ul_conn_t;

/* conn.c */
void ul_conn_accept(ul_http_server_t *s);
/* At shutdown, before the listener closes: every connection the kernel completed is taken
 * (closing the listener would reset them, with their requests sent). */
void ul_conn_accept_backlog(ul_http_server_t *s);
/* 1 if the client's bytes are waiting in the socket, not read yet. */
int ul_conn_input_waiting(const ul_conn_t *c);
void ul_conn_close(ul_conn_t *c, int reason);
/* Closes with a reset: what the kernel still holds for the client is dropped with the
 * connection (a reader evicted for memory must not keep megabytes in its socket). */
void ul_conn_abort(ul_conn_t *c, int reason);
/* (Re)starts reading; closes the connection if libuv refuses. */
void ul_conn_read_start(ul_conn_t *c);
/* Timeouts and pings, from the server's sweep timer. */
void ul_conn_sweep(ul_conn_t *c, uint64_t now);
/* From the server's check handle: flush output and resume parsing buffered input. */
void ul_conn_tick(ul_conn_t *c);
/* Marks the current request finished (response complete) and resumes the connection. */
void ul_conn_req_finish(ul_conn_t *c);
/* Sends an error response generated by net itself and closes after it (400, 408, 413,
 * 431, 503): message and type per the OpenAI error body. */
void ul_conn_fail(ul_conn_t *c, int status, const char *message);

/* The current message's first header with that name (case-insensitive), valid while the
 * message's headers are stored (from on_headers_complete until the request finishes);
 * NULL if absent. *len gets the value's length. */
const char *ul_conn_header(const ul_conn_t *c, const char *name, size_t *len);

/* head.c: the llhttp callbacks storing the request line and headers */
const llhttp_settings_t *ul_conn_parser_settings(void);

/* budget.c: the memory budget (ul_http_config_t.max_buffered_mem) */
/* Recomputes c's footprint and the server's total; after c's buffers grew or shrank. */
void ul_conn_account(ul_conn_t *c);
/* Drops c's share of the total at once (c is closing; its memory goes with it). */
void ul_conn_unaccount(ul_conn_t *c);
/* 0 when n more bytes may be buffered for c; else the status to refuse with (413: c's own
 * budget, 503: the total, after closing stalled readers failed to make room). */
int ul_conn_mem_check(ul_conn_t *c, size_t n);
/* Frees buffers a finished request grew large (a keep-alive connection must not keep a
 * big body's or answer's memory while idle). */
void ul_conn_shrink(ul_conn_t *c);
/* Frees b, a large one on a pool thread (b is empty afterwards). */
void ul_conn_buf_drop(ul_http_server_t *s, ul_buf_t *b);
/* From the sweep: once large buffers have stopped coming for a while, a pool thread gives
 * what malloc keeps free back to the system (malloc_trim). */
void ul_http_trim_check(ul_http_server_t *s, uint64_t now);
/* Frees what waits to be freed, at once (the server's end). */
void ul_http_server_free_now(ul_http_server_t *s);

/* reqid.c */
/* Sets c->rid from the message's X-Request-Id when valid, else makes one; from
 * on_headers_complete. */
void ul_conn_request_id(ul_conn_t *c);

/* cors.c */
/* Appends the header lines every response to the current message carries: X-Request-Id
 * (once the headers are complete), and with CORS on Vary: Origin plus, for an allowed
 * Origin, Access-Control-Allow-Origin and Access-Control-Expose-Headers. */
int ul_conn_std_headers(const ul_conn_t *c, ul_buf_t *b);
/* With CORS on, answers an OPTIONS request as a preflight (204) and FINISHES it; returns
 * 1 then, else 0. */
int ul_conn_cors_preflight(ul_conn_t *c);

/* out.c */
/* Appends to the output buffer; UL_ENOMEM if the buffer cannot grow. */
int ul_conn_out(ul_conn_t *c, const void *p, size_t n);
/* Bytes waiting in out + wbuf + wbody. */
static inline size_t ul_conn_pending(const ul_conn_t *c) {
    return c->out.len + c->wbuf.len + (c->wbody.len - c->wbody_off);
}
/* Flushes now, or at the end of the parse loop / in the next check callback. */
void ul_conn_want_flush(ul_conn_t *c);
void ul_conn_flush(ul_conn_t *c);
/* Queues the connection for the server's check callback. */
void ul_conn_schedule(ul_conn_t *c);
/* Recomputes the backpressure flag after output shrank; calls on_drain when it clears, so
 * only from libuv callbacks, never inside an owner's call. */
void ul_conn_update_pressure(ul_conn_t *c);
/* Sets the backpressure flag after output grew (never notifies). */
static inline void ul_conn_mark_pressure(ul_conn_t *c) {
    if (ul_conn_pending(c) > c->srv->cfg.out_soft_limit) c->backpressured = 1;
}

/* response.c */
const char *ul_http_reason(int status);
/* Appends a status line and headers (ending with the blank line) for a response.
 * content_length < 0: no Content-Length (chunked or close-delimited, see flags).
 * extra: pre-formatted header lines ("Name: value\r\n"), may be NULL. date: a full
 * "Date: ...\r\n" line or NULL. */
typedef struct ul_http_head_s {
    int status;
    const char *content_type;
    int64_t content_length;
    int chunked;
    int keep_alive; /* 0: Connection: close */
    int http10;     /* a 1.0 client: keep-alive must be announced explicitly */
    int sse;        /* event-stream headers */
    const char *extra;
    size_t extra_len;
    const char *date;
} ul_http_head_t;
int ul_http_head_write(ul_buf_t *b, const ul_http_head_t *h);
/* Appends the config's resp_header hook lines to b (nothing without a hook; a line that
 * does not fit is dropped: the headers are hints). */
void ul_conn_hook_headers(const ul_conn_t *c, ul_buf_t *b);
/* Appends {"error":{"message":...,"type":...,"param":null,"code":...}}. */
int ul_http_error_body(ul_buf_t *b, const char *type, const char *code, const char *message);
/* "invalid_request_error" etc. for a status net generates itself. */
const char *ul_http_error_type(int status);
/* Writes the access-log line and updates counters; called once per finished request. */
void ul_http_access_log(ul_conn_t *c);

/* sse.c */
/* Appends one SSE frame "<prefix><data>\n\n", wrapped as one HTTP chunk if chunked. */
int ul_sse_frame(ul_buf_t *b, int chunked, const char *prefix, const char *data, size_t len);

/* server.c */
void ul_http_server_conn_gone(ul_http_server_t *s);
/* The shutdown deadline reached c with a request still open: queues its last words (an SSE
 * error event, or a 503 when nothing was answered yet) and closes once they are written. */
void ul_conn_cut(ul_conn_t *c);
const char *ul_http_server_date(ul_http_server_t *s);

/* Runs and clears the head hook's hold (ul_http_req_hold), if any. */
void ul_conn_hold_release(ul_conn_t *c);

#endif
