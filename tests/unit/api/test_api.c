/* The api layer in-process: the pseudo-token codec, and the whole stack (HTTP server +
 * api + scheduler + null backend) on one loop with a client thread: a one-shot
 * completion, a stream, a client that leaves mid-stream, a 400 naming its param — then a
 * shutdown that closes every handle (uv_loop_close must succeed, ASan must see no leak). */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api/api.h"

Test(codec, null_one_token_per_word) {
    ul_codec_t c;
    ul_codec_init_null(&c, 100, 99);
    int32_t ids[8];
    int n = c.tokenize(&c, "  hello\tworld \n hello ", 22, NULL, 1, 0, ids, 8);
    cr_assert_eq(n, 3);
    cr_assert_eq(ids[0], ids[2], "same word, same token");
    cr_assert_neq(ids[0], ids[1]);
    for (int i = 0; i < 3; i++) cr_assert(ids[i] >= 0 && ids[i] < 99, "never the eos id");
    cr_assert_eq(c.tokenize(&c, "a b c", 5, NULL, 1, 0, ids, 2), -3, "too small: -(needed)");
    cr_assert_eq(c.tokenize(&c, " \t", 2, NULL, 1, 0, ids, 8), 0);
    char piece[16];
    n = c.piece(&c, NULL, 42, piece, sizeof piece);
    cr_assert_eq(n, 6);
    cr_assert(!memcmp(piece, " tok42", 6));
}

typedef struct stack_s {
    uv_loop_t loop;
    ul_backend_t *backend;
    ul_sched_t sched;
    ul_driver_t driver;
    ul_api_t api;
    ul_router_t router;
    ul_http_server_t http;
    uv_async_t stop;
    int port;
    int http_closed, sched_closed;
    char replies[4][8192];
} stack_t_;

static int connect_to(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

/* Sends a POST with Connection: close and reads until EOF (or until `until` appears). */
static void post(int port, const char *body, char *out, size_t cap, const char *until) {
    int fd = connect_to(port);
    char req[1024];
    int n = snprintf(req, sizeof req,
                     "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     strlen(body), body);
    cr_assert_eq(write(fd, req, (size_t)n), n);
    size_t len = 0;
    for (;;) {
        ssize_t r = read(fd, out + len, cap - 1 - len);
        if (r <= 0) break;
        len += (size_t)r;
        out[len] = 0;
        if (until && strstr(out, until)) break;
    }
    out[len] = 0;
    close(fd);
}

static void *client(void *arg) {
    stack_t_ *st = arg;
    post(st->port, "{\"prompt\":\"a b c\",\"max_tokens\":4}", st->replies[0], 8192, NULL);
    post(st->port, "{\"prompt\":\"x\",\"max_tokens\":3,\"stream\":true}", st->replies[1], 8192,
         NULL);
    /* leaves after the first event of an endless stream */
    post(st->port, "{\"prompt\":\"x\",\"max_tokens\":4000,\"stream\":true}", st->replies[2], 8192,
         "data:");
    post(st->port, "{\"prompt\":\"x\",\"top_p\":7}", st->replies[3], 8192, NULL);
    uv_async_send(&st->stop);
    return NULL;
}

static void on_sched_closed(ul_driver_t *d) { ((stack_t_ *)d->data)->sched_closed = 1; }

static void on_http_closed(ul_http_server_t *h) {
    stack_t_ *st = h->data;
    st->http_closed = 1;
    ul_driver_close(&st->driver, on_sched_closed);
}

static void on_stop(uv_async_t *a) {
    stack_t_ *st = a->data;
    uv_close((uv_handle_t *)a, NULL);
    ul_http_server_shutdown(&st->http, 0, on_http_closed);
}

Test(api, full_stack_on_one_loop) {
    static stack_t_ st;
    memset(&st, 0, sizeof st);
    cr_assert_eq(uv_loop_init(&st.loop), 0);
    ul_null_config_t nc = {.delay_us = 2000};
    cr_assert_eq(ul_null_backend_create(&nc, &st.backend), 0);
    cr_assert_eq(ul_sched_init(&st.sched, st.backend, NULL), 0);
    cr_assert_eq(ul_driver_init(&st.loop, &st.driver, &st.sched), 0);
    st.driver.data = &st;
    ul_codec_t codec;
    ul_codec_init_null(&codec, st.backend->n_vocab, st.backend->eos_id);
    ul_api_init(&st.api, &st.sched, &codec, "null");
    ul_router_init(&st.router);
    cr_assert_eq(ul_api_register(&st.api, &st.router), 0);
    ul_http_config_t hc;
    ul_http_config_default(&hc);
    hc.port = 0;
    hc.access_log = 0;
    cr_assert_eq(ul_http_server_init(&st.loop, &st.http, &hc, &st.router), 0);
    st.http.data = &st;
    st.api.server = &st.http;
    cr_assert_eq(ul_http_server_listen(&st.http), 0);
    st.port = ul_http_server_port(&st.http);
    cr_assert_gt(st.port, 0);
    uv_async_init(&st.loop, &st.stop, on_stop);
    st.stop.data = &st;

    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, client, &st), 0);
    uv_run(&st.loop, UV_RUN_DEFAULT);
    pthread_join(th, NULL);

    cr_assert(st.http_closed && st.sched_closed);
    cr_assert(strstr(st.replies[0], "HTTP/1.1 200"), "%s", st.replies[0]);
    cr_assert(strstr(st.replies[0], "\"completion_tokens\":4"), "%s", st.replies[0]);
    cr_assert(strstr(st.replies[0], "\"prompt_tokens\":3"));
    cr_assert(strstr(st.replies[1], "text/event-stream"));
    cr_assert(strstr(st.replies[1], "\"finish_reason\":\"length\""));
    cr_assert(strstr(st.replies[1], "data: [DONE]"));
    cr_assert(strstr(st.replies[3], "HTTP/1.1 400"));
    cr_assert(strstr(st.replies[3], "\"param\":\"top_p\""), "%s", st.replies[3]);
    cr_assert_eq(st.api.stats.active_sequences, 0);
    cr_assert_eq(st.api.stats.active_streams, 0);
    cr_assert_eq(st.api.stats.completions_total, 3);
    cr_assert_eq(st.api.stats.completions_rejected, 1);
    cr_assert_eq(st.sched.pool.n_free, st.sched.pool.n_pages, "every KV page returned");

    ul_sched_free(&st.sched);
    ul_backend_destroy(st.backend);
    cr_assert_eq(uv_loop_close(&st.loop), 0);
}
