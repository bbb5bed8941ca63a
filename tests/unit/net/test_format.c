/* Byte-exact output formats: SSE frames (chunked and raw), response heads, OpenAI error
 * bodies and JSON string escaping. */
#include <criterion/criterion.h>
#include <string.h>

#include "net/conn.h"

static char *str(ul_buf_t *b) {
    ul_buf_reserve(b, 1);
    b->p[b->len] = '\0';
    return b->p;
}

Test(format, sse_frame_chunked_and_raw) {
    ul_buf_t b = {0};
    const char *json = "{\"x\":1}";
    cr_assert_eq(ul_sse_frame(&b, 0, "data: ", json, strlen(json)), 0);
    cr_assert_str_eq(str(&b), "data: {\"x\":1}\n\n");
    b.len = 0;
    /* chunk size = 6 + 7 + 2 = 15 = 0xf */
    cr_assert_eq(ul_sse_frame(&b, 1, "data: ", json, strlen(json)), 0);
    cr_assert_str_eq(str(&b), "f\r\ndata: {\"x\":1}\n\n\r\n");
    b.len = 0;
    cr_assert_eq(ul_sse_frame(&b, 1, "data: ", "[DONE]", 6), 0);
    cr_assert_str_eq(str(&b), "e\r\ndata: [DONE]\n\n\r\n");
    b.len = 0;
    cr_assert_eq(ul_sse_frame(&b, 0, ": ", "ping", 4), 0);
    cr_assert_str_eq(str(&b), ": ping\n\n");
    /* a large event: the chunk size is the payload length in hex */
    b.len = 0;
    static char big[70000];
    memset(big, 'a', sizeof big);
    cr_assert_eq(ul_sse_frame(&b, 1, "data: ", big, sizeof big), 0);
    cr_assert_eq(strncmp(b.p, "11178\r\n", 7), 0, "got %.8s", b.p); /* 70008 = 0x11178 */
    cr_assert_eq(b.len, 7 + 70008 + 2);
    ul_buf_free(&b);
}

Test(format, response_head) {
    ul_buf_t b = {0};
    ul_http_head_t h = {
        .status = 200, .content_type = "application/json", .content_length = 15, .keep_alive = 1};
    cr_assert_eq(ul_http_head_write(&b, &h), 0);
    cr_assert_str_eq(
        str(&b), "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 15\r\n\r\n");
    b.len = 0;
    h = (ul_http_head_t){.status = 503,
                         .content_type = "application/json",
                         .content_length = 0,
                         .keep_alive = 0,
                         .extra = "Retry-After: 1\r\n",
                         .extra_len = 16,
                         .date = "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n"};
    cr_assert_eq(ul_http_head_write(&b, &h), 0);
    cr_assert_str_eq(str(&b),
                     "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                     "Content-Length: 0\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n"
                     "Retry-After: 1\r\nConnection: close\r\n\r\n");
    b.len = 0;
    /* SSE over HTTP/1.1: chunked, no length; HTTP/1.0 keep-alive is announced */
    h = (ul_http_head_t){
        .status = 200, .content_length = -1, .chunked = 1, .keep_alive = 1, .sse = 1};
    cr_assert_eq(ul_http_head_write(&b, &h), 0);
    cr_assert_str_eq(str(&b), "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                              "Cache-Control: no-cache\r\nX-Accel-Buffering: no\r\n"
                              "Transfer-Encoding: chunked\r\n\r\n");
    b.len = 0;
    h = (ul_http_head_t){.status = 404, .content_length = 2, .keep_alive = 1, .http10 = 1};
    cr_assert_eq(ul_http_head_write(&b, &h), 0);
    cr_assert_str_eq(str(&b), "HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n"
                              "Connection: keep-alive\r\n\r\n");
    ul_buf_free(&b);
    cr_assert_str_eq(ul_http_reason(431), "Request Header Fields Too Large");
    cr_assert_str_eq(ul_http_reason(413), "Payload Too Large");
}

Test(format, error_body_openai_shape_and_escaping) {
    ul_buf_t b = {0};
    cr_assert_eq(
        ul_http_error_body(&b, "invalid_request_error", "bad_request", "bad \"x\"\n\\ \x01"), 0);
    cr_assert_str_eq(str(&b), "{\"error\":{\"message\":\"bad \\\"x\\\"\\n\\\\ \\u0001\","
                              "\"type\":\"invalid_request_error\",\"param\":null,"
                              "\"code\":\"bad_request\"}}");
    b.len = 0;
    cr_assert_eq(ul_http_error_body(&b, "server_error", NULL, "boom"), 0);
    cr_assert_str_eq(str(&b), "{\"error\":{\"message\":\"boom\",\"type\":\"server_error\","
                              "\"param\":null,\"code\":null}}");
    ul_buf_free(&b);
}

Test(format, nbuf_numbers) {
    ul_buf_t b = {0};
    ul_buf_append_u64(&b, 0);
    ul_buf_puts(&b, " ");
    ul_buf_append_u64(&b, 18446744073709551615ull);
    ul_buf_puts(&b, " ");
    ul_buf_append_hex(&b, 0);
    ul_buf_puts(&b, " ");
    ul_buf_append_hex(&b, 0xdeadbeef);
    cr_assert_str_eq(str(&b), "0 18446744073709551615 0 deadbeef");
    ul_buf_consume(&b, 2);
    cr_assert_eq(strncmp(b.p, "18446", 5), 0);
    ul_buf_free(&b);
}
