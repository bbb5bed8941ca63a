/* The whole server in-process, built by ul_server_init as `uvllm serve` builds it (null
 * backend, scheduler, api with its chat template, router, HTTP) on one loop with a client
 * thread: a one-shot completion, a chat completion (through the ChatML template), a
 * stream, a client that leaves mid-stream, a 400 naming its param — then ul_server_close,
 * after which every handle is closed (uv_loop_close must succeed, ASan must see no leak).
 * And a start that fails on the configuration's values: a usage error, nothing left open. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/server.h"

typedef struct stack_s {
    uv_loop_t loop;
    ul_server_t sv;
    uv_async_t stop;
    int port, closed;
    uint32_t free_pages, n_pages;
    char replies[5][8192];
} stack_t_;

static int connect_to(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

/* Sends a POST with Connection: close and reads until EOF (or until `until` appears). */
static void post(int port, const char *path, const char *body, char *out, size_t cap,
                 const char *until) {
    int fd = connect_to(port);
    char req[1024];
    int n = snprintf(req, sizeof req,
                     "POST %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     path, strlen(body), body);
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
    const char *cmpl = "/v1/completions";
    post(st->port, cmpl, "{\"prompt\":\"a b c\",\"max_tokens\":4}", st->replies[0], 8192, NULL);
    post(st->port, cmpl, "{\"prompt\":\"x\",\"max_tokens\":3,\"stream\":true}", st->replies[1],
         8192, NULL);
    /* leaves after the first event of an endless stream */
    post(st->port, cmpl, "{\"prompt\":\"x\",\"max_tokens\":4000,\"stream\":true}", st->replies[2],
         8192, "data:");
    post(st->port, cmpl, "{\"prompt\":\"x\",\"top_p\":7}", st->replies[3], 8192, NULL);
    post(st->port, "/v1/chat/completions",
         "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":2}", st->replies[4],
         8192, NULL);
    uv_async_send(&st->stop);
    return NULL;
}

static void on_closed(ul_server_t *sv) {
    stack_t_ *st = sv->data;
    st->closed = 1;
    st->free_pages = (uint32_t)sv->sched.pool.n_free;
    st->n_pages = (uint32_t)sv->sched.pool.n_pages;
}

static void on_stop(uv_async_t *a) {
    stack_t_ *st = a->data;
    uv_close((uv_handle_t *)a, NULL);
    ul_server_close(&st->sv, on_closed);
}

Test(server, full_stack_as_serve_builds_it) {
    static stack_t_ st;
    memset(&st, 0, sizeof st);
    cr_assert_eq(uv_loop_init(&st.loop), 0);
    ul_server_config_t cfg;
    ul_server_config_default(&cfg);
    cfg.port = 0;
    cfg.null_delay_us = 2000;
    cfg.no_access_log = 1;
    cfg.canary_interval_s = 0;
    cr_assert_eq(ul_server_init(&st.loop, &st.sv, &cfg), 0, "%s", st.sv.err);
    st.sv.data = &st;
    st.port = ul_server_port(&st.sv);
    cr_assert_gt(st.port, 0);
    cr_assert_not_null(st.sv.api.chat_tmpl, "a chat template, as serve has");
    uv_async_init(&st.loop, &st.stop, on_stop);
    st.stop.data = &st;

    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, client, &st), 0);
    uv_run(&st.loop, UV_RUN_DEFAULT);
    pthread_join(th, NULL);

    cr_assert(st.closed);
    cr_assert(strstr(st.replies[0], "HTTP/1.1 200"), "%s", st.replies[0]);
    cr_assert(strstr(st.replies[0], "\"completion_tokens\":4"), "%s", st.replies[0]);
    cr_assert(strstr(st.replies[0], "\"prompt_tokens\":3"));
    cr_assert(strstr(st.replies[1], "text/event-stream"));
    cr_assert(strstr(st.replies[1], "\"finish_reason\":\"length\""));
    cr_assert(strstr(st.replies[1], "data: [DONE]"));
    cr_assert(strstr(st.replies[3], "HTTP/1.1 400"));
    cr_assert(strstr(st.replies[3], "\"param\":\"top_p\""), "%s", st.replies[3]);
    cr_assert(strstr(st.replies[4], "HTTP/1.1 200"), "%s", st.replies[4]);
    cr_assert(strstr(st.replies[4], "\"chat.completion\""), "%s", st.replies[4]);
    cr_assert_eq(st.sv.api.stats.active_sequences, 0);
    cr_assert_eq(st.sv.api.stats.active_streams, 0);
    cr_assert_eq(st.sv.api.stats.completions_rejected, 1);
    cr_assert_eq(st.free_pages, st.n_pages, "every KV page returned");

    ul_server_free(&st.sv);
    cr_assert_eq(uv_loop_close(&st.loop), 0);
}

/* A chat template file that cannot be read: a usage error (exit 2 in serve) with a message
 * naming the option; the handles opened before it close with one loop run. */
Test(server, bad_value_fails_the_start_cleanly) {
    uv_loop_t loop;
    cr_assert_eq(uv_loop_init(&loop), 0);
    ul_server_config_t cfg;
    ul_server_config_default(&cfg);
    cfg.port = 0;
    cfg.canary_interval_s = 0;
    cfg.chat_template = "/nonexistent/template.jinja";
    static ul_server_t sv;
    cr_assert_neq(ul_server_init(&loop, &sv, &cfg), 0);
    cr_assert(sv.bad_config);
    cr_assert(strstr(sv.err, "--chat-template"), "%s", sv.err);
    /* bounded: a handle left open would make UV_RUN_DEFAULT hang, not fail */
    for (int i = 0; i < 2000 && uv_run(&loop, UV_RUN_NOWAIT); i++) usleep(1000);
    cr_assert_eq(uv_loop_alive(&loop), 0, "every handle init opened is closed");
    ul_server_free(&sv);
    cr_assert_eq(uv_loop_close(&loop), 0);
}
