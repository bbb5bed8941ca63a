/* uvllm's HTTP/1.x server on the libuv loop: listener, connections (uv_tcp_t + llhttp),
 * router, responses, SSE streams, limits, timeouts, graceful shutdown, counters.
 * It knows nothing about models; the api layer registers handlers and answers requests.
 *
 * Threads: every function here is called on the loop thread that owns the server, and
 * every callback fires on that thread. Work from other threads comes back through
 * base/bridge.h first.
 *
 * Request lifetime (the "detach" protocol, no refcounts):
 *   1. A handler gets a ul_http_req_t *. The request is OPEN until the owner FINISHES it
 *      with ul_http_respond*() or ul_sse_done()/ul_sse_end().
 *   2. The handler may finish it before returning (synchronous) or keep the pointer and
 *      finish it later from the loop thread (asynchronous, e.g. when tokens arrive).
 *   3. If the connection dies while the request is open (client disconnect, write error,
 *      output hard limit, forced shutdown, timeout), net calls the owner's on_abort once.
 *      on_abort is never called from inside a ul_http_ or ul_sse_ call made by the
 *      owner: it runs from a libuv callback (the connection's close callback), so the
 *      owner can cancel its work there. Until on_abort has run, the request memory stays
 *      valid and every ul_http_ and ul_sse_ call on it is safe (returns UL_ECLOSED/UL_EFULL
 *      once the connection is going away).
 *   4. After the owner finished the request, or after on_abort returned, the owner must
 *      not touch the pointer again. Net frees nothing the owner still holds.
 * Pipelined requests on one connection are answered in order: while a request is open,
 * net does not parse the next one (llhttp is paused) but keeps reading so a disconnect is
 * noticed at once. A client EOF (even a half-close) while a request is open counts as a
 * disconnect.
 */
#ifndef UL_NET_HTTP_H
#define UL_NET_HTTP_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/queue.h"

/* ---- configuration ---------------------------------------------------------------- */

typedef struct ul_http_req_s ul_http_req_t;
typedef struct ul_http_server_s ul_http_server_t;

typedef struct ul_http_config_s {
    const char *host;            /* bind address, default "127.0.0.1"; IPv4 or IPv6 literal,
                                    or "localhost" (= 127.0.0.1) */
    int port;                    /* default 8080; 0 picks a free port (see ul_http_server_port) */
    int backlog;                 /* listen backlog, default 1024 */
    size_t max_header_bytes;     /* request line + headers, default 16 KiB; a chunked body's
                                    trailer fields count too; over it: 431 + close */
    unsigned max_headers;        /* header fields of a request, default 256; over it: 431 */
    size_t max_body;             /* request body, default 8 MiB; over it: 413 + close */
    unsigned max_conns;          /* open connections, default 4096; over it: 503 + close */
    uint64_t header_timeout_ms;  /* a request's headers must arrive within this, default 10000;
                                    over it: 408 + close (slowloris) */
    uint64_t request_timeout_ms; /* a whole request (headers and body) must arrive within this
                                    from its first byte, default 120000; over it: 408 */
    size_t min_body_rate;        /* bytes/s a body must average once header_timeout_ms has
                                    passed since its headers, default 1024 (0: off); a body
                                    trickled slower (one byte every few seconds pins its
                                    buffer) is answered 408 */
    uint64_t idle_timeout_ms;    /* idle keep-alive connection, default 75000; then closed */
    uint64_t stall_timeout_ms;   /* output waiting that the client takes none of for this
                                    long (it stopped reading, e.g. a paused stream): closed,
                                    the owner gets on_abort(UL_ETIMEDOUT); default 60000 */
    uint64_t sse_ping_ms;        /* ": ping" comment after this much SSE silence, default 15000;
                                    0 disables */
    size_t out_soft_limit;       /* pending output bytes per connection over which a stream is
                                    "backpressured", default 256 KiB */
    size_t out_hard_limit;       /* pending output bytes over which the connection is closed
                                    and the owner gets on_abort(UL_EFULL), default 4 MiB */
    /* Memory budget for what clients make the server hold: request heads and bodies,
     * pipelined input and queued output (streamed or not) of every connection.
     * max_buffered_mem: all connections together; 0 picks a default at init, an eighth of
     * the memory the process may use (ul_size_mem_limit: MemTotal or the cgroup limit),
     * within 64 MiB..4 GiB. max_conn_mem: one connection; 0 picks max(max_body +
     * out_hard_limit + 2 x max_header_bytes, max_buffered_mem / 32), within the total.
     * A body over its connection's budget is a 413, over the total a 503; so is an answer
     * (ul_http_respond answers 503 instead). Requests and answers of more than 64 KiB may
     * fill only three quarters of the total, so small requests (health checks, streaming
     * clients) still find room when large ones have taken theirs. Before refusing for the
     * total, connections whose output made no progress for mem_evict_after_ms (clients
     * that stopped reading; default 1000) are closed, largest first. Connection: close
     * follows every refusal. */
    size_t max_buffered_mem;
    size_t max_conn_mem;
    uint64_t mem_evict_after_ms;
    uint64_t linger_ms; /* after an error response + close, how long unread client
                           input is drained so the client can read the answer,
                           default 2000 */
    int access_log;     /* one UL_LOG_INFO line per request, default 1 */
    /* CORS, default off (NULL/0): OPTIONS is routed like any other method and no CORS
     * header is sent. On: OPTIONS on any path is a preflight answered 204 by net, and every
     * response to a request whose Origin is allowed carries Access-Control-Allow-Origin and
     * Access-Control-Expose-Headers: X-Request-Id (plus Vary: Origin on every response).
     * Entries are exact Origin values ("https://app.example"); "*" allows any origin and is
     * answered with "*". The array and its strings must outlive the server. */
    const char *const *cors_origins;
    size_t n_cors_origins;
    /* Optional hooks, all called on the loop thread with hook_data.
     * before: runs for every request after a CORS preflight was ruled out and before the
     * router; returns 0 to let the request be routed, or 1 when it finished the request
     * itself (an authentication check answering 401).
     * resp_header: writes extra header lines ("Name: value\r\n"...) into out (at most cap
     * bytes, no NUL needed) for every response head net writes (handlers' answers, SSE
     * heads, preflights and net's own errors) at the moment it is written; returns the
     * bytes written (0: none). */
    int (*before)(ul_http_req_t *req, void *data);
    /* on_head: like before, but when the request's headers are complete: before a 100
     * Continue is sent and before any byte of the body is read (req->body is ""). A
     * request it finishes (an authentication check answering 401) never has its body read:
     * the connection closes after the answer. Trailer fields of a chunked body never reach
     * a handler (they are counted against max_header_bytes and dropped), so credentials
     * are only ever read from the head. */
    int (*on_head)(ul_http_req_t *req, void *data);
    size_t (*resp_header)(char *out, size_t cap, void *data);
    void *hook_data;
} ul_http_config_t;

/* Fills every field with its default. */
void ul_http_config_default(ul_http_config_t *cfg);

/* ---- requests --------------------------------------------------------------------- */

typedef enum {
    UL_HTTP_OTHER = 0, /* a method the router cannot register (answered 405 or 404) */
    UL_HTTP_GET,
    UL_HTTP_HEAD, /* routed to the GET handler; net drops the response body */
    UL_HTTP_POST,
    UL_HTTP_PUT,
    UL_HTTP_DELETE,
    UL_HTTP_OPTIONS,
    UL_HTTP_PATCH,
    UL_HTTP_METHOD_COUNT
} ul_http_method_t;

/* "GET", ...; "OTHER" for UL_HTTP_OTHER. */
const char *ul_http_method_name(ul_http_method_t m);

typedef struct ul_http_header_s {
    const char *name;  /* NUL-terminated, as sent (compare case-insensitively) */
    const char *value; /* NUL-terminated, leading/trailing whitespace removed */
    size_t name_len, value_len;
} ul_http_header_t;

typedef struct ul_sse_s ul_sse_t;

/* Owner callbacks of an open request; all optional. */
typedef struct ul_http_req_cbs_s {
    /* The connection is gone before the owner finished the request. reason: UL_ECLOSED
     * (client disconnected / shutdown), UL_EFULL (output over the hard limit),
     * UL_ETIMEDOUT, or a libuv write error. After it returns, req is invalid. */
    void (*on_abort)(ul_http_req_t *req, void *data, int reason);
    /* The stream's pending output dropped below out_soft_limit after having been over it
     * (ul_sse_backpressured() turned false): resume producing. */
    void (*on_drain)(ul_http_req_t *req, void *data);
} ul_http_req_cbs_t;

/* Read-only for handlers unless noted. Memory (strings, headers, body) belongs to the
 * connection and is valid while the request is open. */
struct ul_http_req_s {
    ul_http_method_t method;
    const char *method_name; /* as sent, NUL-terminated */
    const char *path;        /* NUL-terminated, without the query ("/v1/models") */
    const char *query;       /* NUL-terminated, after '?', "" if none; not decoded */
    size_t path_len, query_len;
    const ul_http_header_t *headers;
    size_t n_headers;
    const char *body; /* NUL-terminated (the NUL is not counted); "" when there is none */
    size_t body_len;
    int64_t content_length; /* the head's Content-Length; -1 when chunked or absent (for
                               on_head, which runs before the body is read) */
    int http_major, http_minor;
    uint64_t conn_id; /* server-unique connection id, for conn= in log lines */
    uint64_t req_id;  /* 1, 2, ... within the connection, for req= in log lines */
    /* The request id: the client's X-Request-Id when it is 1..UL_HTTP_REQUEST_ID_MAX
     * printable ASCII characters, else 32 lowercase hex characters made by the server.
     * NUL-terminated; echoed as X-Request-Id on every response (net adds the header) and
     * written as request_id= in the access-log line. Same lifetime as the request. */
    const char *request_id;
    const char *peer;    /* the client's address ("127.0.0.1", "::1"); "" when unknown */
    uint64_t t_start_ns; /* uv_hrtime() when the request was complete and dispatched */
    ul_arena_t *arena;   /* scratch for the owner; reset when the request ends */
    void *user;          /* owner's, writable; net never reads it */
    /* private */
    struct ul_conn_s *conn_;
};

#define UL_HTTP_REQUEST_ID_MAX 128

/* req->request_id (for callers that prefer a function). */
const char *ul_http_req_id_str(const ul_http_req_t *req);

/* 1 if s[0..len) is acceptable as a client-supplied request id: 1..UL_HTTP_REQUEST_ID_MAX
 * bytes, each printable ASCII (0x20..0x7e). */
int ul_http_request_id_valid(const char *s, size_t len);

/* The Access-Control-Allow-Origin value for a request's Origin under cfg's CORS list: "*"
 * when "*" is configured, the configured entry equal to origin, else NULL (also when CORS
 * is off or origin is NULL). The result points into cfg's list. */
const char *ul_http_cors_allow(const ul_http_config_t *cfg, const char *origin, size_t len);

/* Case-insensitive header lookup: the first header with that name, or NULL. */
const ul_http_header_t *ul_http_req_header(const ul_http_req_t *req, const char *name);

/* Sets the owner callbacks (cbs is copied). Call before returning from the handler when
 * the request stays open after the handler returns. */
void ul_http_req_set_cbs(ul_http_req_t *req, const ul_http_req_cbs_t *cbs, void *data);

/* For on_head only: what the hook admitted the request with (a client's job slot) is held
 * while its body is read: release(data, key) runs once, when the request is dispatched to
 * its handler or when the connection ends before that. Without it the hook cannot count
 * bodies still being read, so a flood of large bodies passes it all at once. */
void ul_http_req_hold(ul_http_req_t *req, void (*release)(void *data, uint64_t key), void *data,
                      uint64_t key);

/* ---- responses -------------------------------------------------------------------- */

/* Adds a response header for the response not yet started ("Retry-After", "5").
 * name/value are copied. Content-Length, Transfer-Encoding, Connection and (for SSE)
 * Content-Type/Cache-Control are written by net: do not add them.
 * Returns UL_ESTATE if the response already started, UL_E2BIG if the headers grew over
 * 8 KiB, UL_EINVAL if name or value contains CR/LF. */
int ul_http_resp_header(ul_http_req_t *req, const char *name, const char *value);

/* Sends a complete response with Content-Length and FINISHES the request. body is copied
 * (into the connection's output buffer), so the caller may free it on return. A body over
 * 4 KiB that the memory budget cannot take (max_conn_mem, max_buffered_mem) is replaced by
 * a 413 response_too_large (the connection's budget) or a 503 (the total), with
 * Connection: close; the call still returns 0.
 * content_type NULL means "application/json". Returns 0, UL_ECLOSED when the connection
 * is already going away (the request still counts as finished: on_abort will not fire),
 * or UL_ESTATE if the request was already finished / is a stream. */
int ul_http_respond(ul_http_req_t *req, int status, const char *content_type, const char *body,
                    size_t len);

/* Like ul_http_respond, but the body's memory becomes the connection's instead of being
 * copied: a body of UL_HTTP_TAKE_MIN bytes or more, with no output queued before it, is
 * written straight from body->p (a multi-megabyte answer built off the loop costs the loop
 * no copy and no page faults). body must be heap memory from ul_buf_*; it is left empty
 * whatever the outcome. Budget and return values as ul_http_respond. */
#define UL_HTTP_TAKE_MIN (64 * 1024)
int ul_http_respond_buf(ul_http_req_t *req, int status, const char *content_type, ul_buf_t *body);

/* The request body's memory becomes the caller's: a malloc'ed, NUL-terminated block of
 * *len bytes (free() it; NULL and *len 0 when there is no body). req->body reads "" from
 * then on. For work that outlives the request (a worker thread reading the body while the
 * client may leave). */
char *ul_http_req_take_body(ul_http_req_t *req, size_t *len);

/* Bytes an answer to req may have now under the memory budget (max_conn_mem, and the total
 * as large answers see it). *status gets what to answer instead when an answer would not
 * fit: 413 when the connection's own budget is the limit, 503 when the total is. */
size_t ul_http_resp_room(const ul_http_req_t *req, int *status);

/* Charges n bytes an owner holds for a request outside net (a worker's copy of the body,
 * its parse tree, the answer it builds) to the memory budget: 0, or 413 / 503 as for a body
 * (nothing charged then). ul_http_mem_release gives them back, also after the request
 * ended. */
int ul_http_mem_charge(ul_http_req_t *req, size_t n);
void ul_http_mem_release(ul_http_server_t *s, size_t n);

/* ---- bearer-token authentication (auth.c) ----------------------------------------- */

#define UL_HTTP_KEY_MAX 256 /* longest key, bytes */

/* A set of secret keys (API keys). Compared in constant time: every check walks every
 * key over UL_HTTP_KEY_MAX bytes, whatever the lengths and wherever the first difference
 * is, so the time taken says nothing about the keys. Plain object; ul_http_keys_free. */
typedef struct ul_http_keys_s {
    unsigned char (*key)[UL_HTTP_KEY_MAX]; /* [n], zero-padded */
    size_t *len;                           /* [n] */
    size_t n, cap;
} ul_http_keys_t;

/* Adds a key of len bytes (1..UL_HTTP_KEY_MAX printable ASCII, no space). Returns 0,
 * UL_EINVAL (empty, too long, or a byte outside 0x21..0x7e) or UL_ENOMEM. */
int ul_http_keys_add(ul_http_keys_t *k, const char *key, size_t len);
void ul_http_keys_free(ul_http_keys_t *k);
/* 1 when token[0..len) equals one of the keys, in time independent of the keys. */
int ul_http_keys_match(const ul_http_keys_t *k, const char *token, size_t len);
/* 1 when the request carries "Authorization: Bearer <one of the keys>" (scheme
 * case-insensitive); 0 when the header is missing, has another scheme or another token. */
int ul_http_keys_check(const ul_http_keys_t *k, const ul_http_req_t *req);
/* Answers 401 with WWW-Authenticate: Bearer and OpenAI's body for a wrong key
 * ({"error":{"message":"Incorrect API key provided","type":"invalid_request_error",
 * "param":null,"code":"invalid_api_key"}}) and FINISHES the request. */
int ul_http_respond_unauthorized(ul_http_req_t *req);

/* Sends the OpenAI-style error body
 * {"error":{"message":message,"type":type,"param":null,"code":code}} and FINISHES the
 * request. code NULL writes "code":null; message is JSON-escaped. */
int ul_http_respond_error(ul_http_req_t *req, int status, const char *type, const char *code,
                          const char *message);

/* ---- SSE streams ------------------------------------------------------------------ */

/* Starts a text/event-stream response (status 200, Content-Type: text/event-stream,
 * Cache-Control: no-cache, X-Accel-Buffering: no, plus headers added with
 * ul_http_resp_header). HTTP/1.1: chunked transfer; HTTP/1.0: no chunking, the stream is
 * close-delimited and the connection closes after ul_sse_done. The request stays open
 * until ul_sse_done/ul_sse_end. *out points into the request: same lifetime.
 * Returns UL_ESTATE if a response already started (*out untouched), or UL_ECLOSED if the
 * connection is going away (also when the head could not be buffered: net closes it);
 * with UL_ECLOSED *out is still set, every ul_sse_ call on it returns UL_ECLOSED, and
 * on_abort follows. The ul_sse_ functions accept a NULL stream (UL_EINVAL). */
int ul_sse_start(ul_http_req_t *req, ul_sse_t **out);

/* Writes one event "data: {json}\n\n" (json must not contain a newline: UL_EINVAL).
 * Never blocks: the bytes are queued and written when the socket allows.
 * Returns 0, UL_ECLOSED (connection going away; on_abort follows), or UL_EFULL (pending
 * output passed out_hard_limit, or the memory budget cannot take it: the connection is
 * being closed; on_abort(UL_EFULL) follows). */
int ul_sse_send(ul_sse_t *s, const char *json, size_t len);

/* ul_sse_send without asking for a write: the event waits in the connection's buffer and
 * leaves with the next event sent with ul_sse_send, ul_sse_done or ul_sse_end, so several
 * events share one write syscall (a loaded server writes each stream every few steps).
 * The caller must guarantee that such a call follows soon. Once a quarter of
 * out_soft_limit is waiting, it writes anyway. Same returns as ul_sse_send. */
int ul_sse_send_held(ul_sse_t *s, const char *json, size_t len);

/* ul_sse_send / ul_sse_send_held of a named event: "event: NAME\ndata: {json}\n\n", as
 * Anthropic's and OpenAI's Responses streams carry them (NAME: [A-Za-z0-9_.-]{1,64}, else
 * UL_EINVAL). NULL event: a plain data event. */
int ul_sse_send_event(ul_sse_t *s, const char *event, const char *json, size_t len, int held);

/* Writes what ul_sse_send_held left waiting (at the end of this loop iteration). */
int ul_sse_flush(ul_sse_t *s);

/* Writes a comment line ": text\n\n" (keeps proxies from timing out). */
int ul_sse_comment(ul_sse_t *s, const char *text);

/* Writes "data: [DONE]\n\n", ends the response and FINISHES the request. */
int ul_sse_done(ul_sse_t *s);

/* Ends the response without [DONE] (after an error event) and FINISHES the request. */
int ul_sse_end(ul_sse_t *s);

/* 1 while the connection's pending output is over out_soft_limit: the producer should
 * stop (e.g. the scheduler skips the sequence) until on_drain fires. */
int ul_sse_backpressured(const ul_sse_t *s);

/* The request the stream belongs to. */
ul_http_req_t *ul_sse_req(ul_sse_t *s);

/* ---- router ----------------------------------------------------------------------- */

/* Called on the loop thread for each request that matched a route. Return 0 when the
 * request was finished or will be finished later (async); return a negative UL_E* code to
 * let net answer 500 (only if no response was started; net then finishes the request). */
typedef int (*ul_http_handler_fn)(ul_http_req_t *req, void *data);

#define UL_ROUTER_MAX 32

typedef struct ul_route_s {
    char path[96];
    unsigned methods; /* bit (1u << ul_http_method_t) per registered method */
    ul_http_handler_fn fn[UL_HTTP_METHOD_COUNT];
    void *data[UL_HTTP_METHOD_COUNT];
} ul_route_t;

/* Exact-path router: unknown path -> 404, known path with another method -> 405 with an
 * Allow header listing the registered methods (GET implies HEAD). Plain struct, no
 * allocation; must outlive the server. */
typedef struct ul_router_s {
    ul_route_t routes[UL_ROUTER_MAX];
    size_t n;
} ul_router_t;

void ul_router_init(ul_router_t *r);
/* Registers fn for (method, path). Returns UL_EINVAL (bad method/path, path not starting
 * with '/'), UL_EBUSY (already registered), UL_EFULL (more than UL_ROUTER_MAX paths). */
int ul_router_add(ul_router_t *r, ul_http_method_t method, const char *path, ul_http_handler_fn fn,
                  void *data);

/* Lookup, exposed for tests: returns 200 and sets *route when (method, path) matches;
 * 404 for an unknown path; 405 for a known path without that method, writing the Allow
 * value ("GET, HEAD, POST") into allow (NUL-terminated, truncated to allow_cap). */
int ul_router_match(const ul_router_t *r, ul_http_method_t method, const char *path,
                    size_t path_len, const ul_route_t **route, char *allow, size_t allow_cap);

/* ---- server ----------------------------------------------------------------------- */

/* Counters for /health and /metrics; read them directly (loop thread). */
typedef struct ul_http_stats_s {
    uint64_t conns_open;     /* currently open connections (gauge) */
    uint64_t conns_total;    /* accepted since start */
    uint64_t conns_rejected; /* answered 503 because of max_conns */
    uint64_t requests_total; /* requests finished (any status, including 4xx from net) */
    uint64_t streams_active; /* SSE streams currently open (gauge) */
    uint64_t bytes_in;       /* bytes read from clients */
    uint64_t bytes_out;      /* bytes written to clients */
    uint64_t mem_buffered;   /* gauge: bytes the connections hold (the budget's use) */
    uint64_t mem_limit;      /* the total budget in force (max_buffered_mem) */
    uint64_t mem_refused;    /* requests and answers refused for the memory budget */
    uint64_t mem_evicted;    /* connections closed to free memory (stalled readers) */
    uint64_t timeouts;       /* requests answered 408 (headers, body deadline or rate) */
} ul_http_stats_t;

typedef struct ul_http_server_s ul_http_server_t;
typedef void (*ul_http_server_cb)(ul_http_server_t *s);

/* Caller-allocated; fields are private except stats and data. */
struct ul_http_server_s {
    uv_loop_t *loop;
    ul_http_config_t cfg; /* copied at init; cfg.host copied too */
    ul_router_t *router;
    ul_http_stats_t stats;
    void *data; /* owner's */
    /* private */
    uv_tcp_t listener;
    uv_timer_t sweep; /* one timer for every connection's timeouts and SSE pings */
    uv_check_t check; /* after each poll: flush coalesced output, resume paused parsers */
    ul_queue_t ticks; /* connections waiting for the check callback */
    char host[64];
    int port;
    int listening, draining, closing;
    int no_keepalive;      /* ul_http_server_drain_begin was called */
    unsigned handles_open; /* listener + sweep + check, to know when the close callback may run */
    uint64_t next_conn_id;
    uint64_t drain_deadline; /* uv_now ms; 0 = none */
    ul_queue_t conns;        /* every ul_conn_t, oldest first */
    ul_http_server_cb shutdown_cb;
    char *rbuf; /* shared read buffer: libuv reads into it and on_read consumes it at once */
    size_t rbuf_size;
    char date[40]; /* cached "Date: ...\r\n" line, refreshed once per second */
    uint64_t date_sec;
    uint64_t rid_seed[2];      /* random at init: made request ids differ across restarts */
    uint64_t rid_next;         /* made request ids so far */
    uv_work_t free_work;       /* frees large buffers on a pool thread (budget.c) */
    void **to_free, **freeing; /* waiting; being freed by free_work */
    size_t n_to_free, cap_to_free, n_freeing, cap_freeing;
    int free_busy;
    int trim_wanted, trimming; /* malloc_trim after (trimming: by) the next free_work */
    uint64_t trim_at;          /* uv_now when memory goes back to the system; 0 = not due */
    uint64_t limit_log_at;     /* uv_now of the last "connection limit" line (rate-limited) */
    uint64_t limit_refused;    /* connections refused since that line */
};

/* Initialises the server (no socket yet). cfg NULL means defaults; router must outlive
 * the server. Returns 0 or UL_ENOMEM / UL_EINVAL (bad config). After a successful init
 * the server holds loop handles: release it with ul_http_server_shutdown (also when
 * listen failed) and free its memory only in the shutdown callback. Sets SIGPIPE to
 * SIG_IGN when it is still SIG_DFL (a vanished client must cost EPIPE, not the process). */
int ul_http_server_init(uv_loop_t *loop, ul_http_server_t *s, const ul_http_config_t *cfg,
                        ul_router_t *router);

/* Binds cfg.host:cfg.port and listens; logs "listening on http://HOST:PORT" (the real
 * port when cfg.port was 0) with UL_LOG_INFO. max_conns is first lowered to what the
 * process's descriptor limit (RLIMIT_NOFILE) leaves room for, with a warning, so a client
 * over the limit is answered 503 instead of being reset by the kernel. Returns 0 or a libuv error
 * (UV_EADDRINUSE, UV_EINVAL for a bad host, ...). */
int ul_http_server_listen(ul_http_server_t *s);

/* Raises the process's soft descriptor limit (RLIMIT_NOFILE) to its hard limit, logged;
 * for a program about to serve many connections. Call at start-up. */
void ul_http_raise_nofile(void);

/* The bound port (after a successful listen), else 0. */
int ul_http_server_port(const ul_http_server_t *s);

/* Graceful shutdown: closes the listener, sets draining, closes idle keep-alive
 * connections now, lets open requests/streams finish (their responses carry
 * Connection: close), and after grace_ms cuts whatever is left: a stream gets an SSE error
 * event (code "shutting_down") and ends without the terminating chunk (a client must not
 * take it for a complete answer), a request not answered yet gets a 503; each connection
 * closes once that is written (within linger_ms at most), the access log says cut=shutdown,
 * and owners get on_abort(UL_ECLOSED). cb runs once every connection and every server handle is
 * closed; then the server memory may be freed and uv_loop_close will succeed.
 * grace_ms 0 force-closes at once. Calling it again only shortens the grace period. */
void ul_http_server_shutdown(ul_http_server_t *s, uint64_t grace_ms, ul_http_server_cb cb);

/* 1 after ul_http_server_shutdown was called. */
int ul_http_server_draining(const ul_http_server_t *s);

/* The first phase of a drain that keeps the listener open (serve --drain-delay-s): every
 * response from now on carries Connection: close (also those of requests already open
 * that have not answered yet), so clients and proxies stop reusing connections to this
 * server while it still answers. Idempotent; ul_http_server_shutdown follows. */
void ul_http_server_drain_begin(ul_http_server_t *s);

#endif
