/* Test support for the net loopback tests: a blocking HTTP/1.1 client that runs on its own
 * thread (the server's loop runs on the test thread), and a harness that starts a server
 * on 127.0.0.1:0 with test routes, runs the client script, shuts everything down and
 * checks that the loop closes cleanly. Client threads never call criterion asserts: they
 * record the first failure in a message the test thread asserts on. */
#ifndef UL_TEST_NET_CLIENT_H
#define UL_TEST_NET_CLIENT_H

#include <stdatomic.h>
#include <stddef.h>

#include "base/bridge.h"
#include "net/http.h"

typedef struct cl_conn_s {
    int fd;
    char buf[1 << 16];
    size_t len; /* bytes received but not consumed */
} cl_conn_t;

typedef struct cl_resp_s {
    int status;
    char head[16384]; /* status line and headers, NUL-terminated */
    char *body;       /* malloc'd, NUL-terminated; decoded if chunked */
    size_t body_len;
    size_t body_cap;
    int chunked;
} cl_resp_t;

/* Connects to 127.0.0.1:port with a 5 s receive timeout; -1 on failure. */
int cl_connect(cl_conn_t *c, int port);
int cl_send(cl_conn_t *c, const char *data, size_t n);
int cl_send_str(cl_conn_t *c, const char *s);
/* Reads one response. until_close: the body ends at EOF (HTTP/1.0 stream). 0 or -1. */
int cl_read_response(cl_conn_t *c, cl_resp_t *r, int until_close);
/* Reads exactly the head of a response (up to the blank line) into r->head. */
int cl_read_head(cl_conn_t *c, cl_resp_t *r);
/* 1 if the server closed the connection (EOF or reset) within timeout_ms. */
int cl_wait_closed(cl_conn_t *c, int timeout_ms);
/* Case-insensitive header lookup in r->head; copies the value; 0 if found. */
int cl_header(const cl_resp_t *r, const char *name, char *out, size_t cap);
void cl_resp_free(cl_resp_t *r);
void cl_close(cl_conn_t *c);
/* cl_connect, then req sent; 0, or -1 (the connection closed). */
int cl_connect_send(cl_conn_t *c, int port, const char *req);
/* Sends req and reads one response into r. 0 or -1. */
int cl_request(cl_conn_t *c, const char *req, cl_resp_t *r);

/* ---- harness ---- */

typedef struct harness_s harness_t;
/* The client script: returns 0 on success or writes msg and returns -1. */
typedef int (*client_fn)(harness_t *h, char *msg, size_t cap);

struct harness_s {
    uv_loop_t loop;
    ul_router_t router;
    ul_http_server_t srv;
    ul_http_config_t cfg;
    ul_bridge_t bridge;
    ul_queue_t done_item;
    ul_queue_t shutdown_item;
    atomic_int draining; /* set on the loop once the mid-script shutdown began */
    int port;
    client_fn client;
    char msg[512];
    int client_rc;
    int server_closed;
    uint64_t shutdown_grace_ms;
    /* loop-side observations, read by the client thread */
    atomic_int aborts;
    atomic_int last_abort_reason;
    atomic_int drains;
    atomic_int async_pending;
    atomic_int stream_events; /* events the backpressure producer managed to queue */
    atomic_int efull;
    ul_queue_t stats_item; /* harness_stats: the loop copies srv.stats into stats_copy */
    ul_http_stats_t stats_copy;
    atomic_int stats_ready;
    void *user;
};

/* From the client thread: starts ul_http_server_shutdown(shutdown_grace_ms) now, while
 * the script goes on; waits until the loop has done it. */
void harness_shutdown(harness_t *h);

/* From the client thread: the server's counters as the loop sees them now (copied on the
 * loop, so the read is not a data race). Returns 0, or -1 if the loop did not answer in 5 s. */
int harness_stats(harness_t *h, ul_http_stats_t *out);

/* Default config for tests: port 0, access log on. */
void harness_config(harness_t *h);
/* Starts the server with the test routes, runs fn on a thread, then shuts the server down
 * and closes the bridge; returns uv_loop_close's result. The test asserts on it and on
 * h->client_rc / h->msg. */
int harness_run(harness_t *h, client_fn fn);

/* harness_run, then the assertions every loop test makes on it (needs criterion): the client
 * succeeded and the loop closed. */
#define HARNESS_RUN(h, fn)                                                                         \
    do {                                                                                           \
        int rc_ = harness_run((h), (fn));                                                          \
        cr_assert_eq((h)->client_rc, 0, "client: %s", (h)->msg);                                   \
        cr_assert_eq(rc_, 0, "uv_loop_close / harness: %d", rc_);                                  \
    } while (0)

/* ---- client-script steps: 0, or -1 with msg written (the CHECK convention below) ---- */

/* One raw exchange on a new connection: the answer's status (0: none, -1/-2: no connection
 * or send failed). out: the answer, for the caller to free; NULL: freed here. */
int cl_status_of(harness_t *h, const char *req, cl_resp_t *out);
/* The answer r (freed here) says Connection: close and the server closes c within wait_ms;
 * then c is closed. */
int cl_expect_closing(cl_conn_t *c, cl_resp_t *r, int wait_ms, char *msg, size_t cap);
/* The next answer on c is an error with status, the JSON error body and Connection: close,
 * and the server closes the connection (cl_expect_closing). */
int cl_expect_error_close(cl_conn_t *c, int status, char *msg, size_t cap);
/* The next answer on c has status (it is freed). */
int cl_expect_read(cl_conn_t *c, int status, char *msg, size_t cap);
/* req on c is answered with status (the answer is freed). */
int cl_expect_status(cl_conn_t *c, const char *req, int status, char *msg, size_t cap);
/* A 5-byte POST to /echo that waits for 100 Continue. */
#define CONTINUE_HEAD "POST /echo HTTP/1.1\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n"
/* head (with Expect: 100-continue) on c gets 100 Continue; then body, echoed by /echo
 * with 200. */
int cl_expect_continue(cl_conn_t *c, const char *head, const char *body, char *msg, size_t cap);
/* req on a new connection is refused that way (cl_expect_error_close). */
int cl_refused(harness_t *h, const char *req, int status, char *msg, size_t cap);

/* A loop test with the default config changed by the statements after client (e.g.
 * h.cfg.max_body = 1024), then HARNESS_RUN's assertions and nothing more. */
#define HARNESS_TEST(suite, name, client, ...)                                                     \
    Test(suite, name) {                                                                            \
        harness_t h;                                                                               \
        harness_config(&h);                                                                        \
        __VA_ARGS__;                                                                               \
        HARNESS_RUN(&h, client);                                                                   \
    }

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            snprintf(msg, cap, __VA_ARGS__);                                                       \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

#endif
