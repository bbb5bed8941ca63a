/* Server set-up and tear-down without traffic: config validation, listen errors (bad
 * address, port in use) that still shut down cleanly, port 0 picking a real port,
 * "localhost", and shutdown before listen. Each test ends with uv_loop_close == 0. */
#include <criterion/criterion.h>
#include <string.h>

#include "net/http.h"
#include "uvllm/err.h"

static int g_closed;
static void on_closed(ul_http_server_t *s) { g_closed++; }

/* shutdown + run the loop until the callback; returns uv_loop_close's result */
static int finish(uv_loop_t *loop, ul_http_server_t *s) {
    g_closed = 0;
    ul_http_server_shutdown(s, 0, on_closed);
    uv_run(loop, UV_RUN_DEFAULT);
    cr_assert_eq(g_closed, 1, "shutdown callback ran %d times", g_closed);
    return uv_loop_close(loop);
}

Test(server, config_validation) {
    uv_loop_t loop;
    uv_loop_init(&loop);
    ul_router_t r;
    ul_router_init(&r);
    ul_http_server_t s;
    ul_http_config_t c;
    ul_http_config_default(&c);
    cr_assert_eq(c.max_header_bytes, 16384);
    cr_assert_eq(c.max_body, 8u << 20);
    cr_assert_eq(c.header_timeout_ms, 10000);
    cr_assert_eq(c.idle_timeout_ms, 75000);
    cr_assert_eq(c.stall_timeout_ms, 60000);
    cr_assert_eq(c.sse_ping_ms, 15000);
    cr_assert_geq(c.backlog, 1024);

    ul_http_config_t bad = c;
    bad.out_hard_limit = bad.out_soft_limit - 1;
    cr_assert_eq(ul_http_server_init(&loop, &s, &bad, &r), UL_EINVAL);
    bad = c;
    bad.port = 70000;
    cr_assert_eq(ul_http_server_init(&loop, &s, &bad, &r), UL_EINVAL);
    bad = c;
    bad.max_conns = 0;
    cr_assert_eq(ul_http_server_init(&loop, &s, &bad, &r), UL_EINVAL);
    bad = c;
    bad.header_timeout_ms = 0;
    cr_assert_eq(ul_http_server_init(&loop, &s, &bad, &r), UL_EINVAL);
    bad = c;
    bad.host = NULL;
    cr_assert_eq(ul_http_server_init(&loop, &s, &bad, &r), UL_EINVAL);
    /* a failed init holds no handles */
    cr_assert_eq(uv_loop_close(&loop), 0);
}

Test(server, port_zero_localhost_and_clean_close) {
    uv_loop_t loop;
    uv_loop_init(&loop);
    ul_router_t r;
    ul_router_init(&r);
    ul_http_config_t c;
    ul_http_config_default(&c);
    c.port = 0;
    c.host = "localhost";
    ul_http_server_t s;
    cr_assert_eq(ul_http_server_init(&loop, &s, &c, &r), 0);
    cr_assert_eq(ul_http_server_port(&s), 0);
    cr_assert_eq(ul_http_server_listen(&s), 0);
    cr_assert_gt(ul_http_server_port(&s), 0);
    cr_assert_eq(ul_http_server_listen(&s), UL_ESTATE);
    cr_assert_not(ul_http_server_draining(&s));
    /* a second server on the same port fails with EADDRINUSE and still closes cleanly */
    ul_http_server_t s2;
    c.port = ul_http_server_port(&s);
    c.host = "127.0.0.1";
    cr_assert_eq(ul_http_server_init(&loop, &s2, &c, &r), 0);
    cr_assert_eq(ul_http_server_listen(&s2), UV_EADDRINUSE);
    g_closed = 0;
    ul_http_server_shutdown(&s2, 0, on_closed);
    cr_assert(ul_http_server_draining(&s2));
    uv_run(&loop, UV_RUN_NOWAIT); /* s2's handles close; s keeps listening */
    cr_assert_eq(g_closed, 1);
    cr_assert_not(ul_http_server_draining(&s));
    cr_assert_eq(finish(&loop, &s), 0);
}

Test(server, bad_address_and_shutdown_before_listen) {
    uv_loop_t loop;
    uv_loop_init(&loop);
    ul_router_t r;
    ul_router_init(&r);
    ul_http_config_t c;
    ul_http_config_default(&c);
    c.port = 0;
    c.host = "not-an-address";
    ul_http_server_t s;
    cr_assert_eq(ul_http_server_init(&loop, &s, &c, &r), 0);
    cr_assert_eq(ul_http_server_listen(&s), UL_EINVAL);
    cr_assert_eq(finish(&loop, &s), 0);

    uv_loop_init(&loop);
    c.host = "::1";
    cr_assert_eq(ul_http_server_init(&loop, &s, &c, &r), 0);
    cr_assert_eq(finish(&loop, &s), 0); /* never listened */
}
