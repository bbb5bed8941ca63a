/* Request ids and CORS in net: which client ids are kept, that made ids are 32 hex and
 * distinct, that every answer (handler, SSE, 404, net's own 413) carries X-Request-Id, and
 * the CORS policy: preflight on any path, Allow-Origin only for a listed Origin, nothing
 * CORS-related (and OPTIONS still 405) when the list is empty. */
#include <criterion/criterion.h>
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "client.h"

Test(reqid, validation) {
    cr_assert(ul_http_request_id_valid("abc-123", 7));
    cr_assert(ul_http_request_id_valid("a b", 3), "space is printable");
    cr_assert(!ul_http_request_id_valid("", 0));
    cr_assert(!ul_http_request_id_valid(NULL, 3));
    cr_assert(!ul_http_request_id_valid("a\tb", 3));
    cr_assert(!ul_http_request_id_valid("a\x7f", 2));
    cr_assert(!ul_http_request_id_valid("\xc3\xa9", 2), "non-ASCII");
    char long_id[200];
    memset(long_id, 'x', sizeof long_id);
    cr_assert(ul_http_request_id_valid(long_id, 128));
    cr_assert(!ul_http_request_id_valid(long_id, 129));
}

Test(cors, allow_list) {
    ul_http_config_t cfg;
    ul_http_config_default(&cfg);
    cr_assert_null(ul_http_cors_allow(&cfg, "https://a.example", 17), "off by default");
    const char *list[] = {"https://a.example", "http://localhost:3000"};
    cfg.cors_origins = list;
    cfg.n_cors_origins = 2;
    cr_assert_str_eq(ul_http_cors_allow(&cfg, "https://a.example", 17), "https://a.example");
    cr_assert_str_eq(ul_http_cors_allow(&cfg, "http://localhost:3000", 21),
                     "http://localhost:3000");
    cr_assert_null(ul_http_cors_allow(&cfg, "https://a.example.evil", 22));
    cr_assert_null(ul_http_cors_allow(&cfg, "https://a.exampl", 16), "prefix is not a match");
    cr_assert_null(ul_http_cors_allow(&cfg, NULL, 0));
    const char *any[] = {"*"};
    cfg.cors_origins = any;
    cfg.n_cors_origins = 1;
    cr_assert_str_eq(ul_http_cors_allow(&cfg, "https://whoever", 15), "*");
}

static int is_hex32(const char *s) {
    if (strlen(s) != 32) return 0;
    for (int i = 0; i < 32; i++)
        if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i])) return 0;
    return 1;
}

static int rid_client(harness_t *h, char *msg, size_t cap) {
    cl_conn_t c;
    cl_resp_t r;
    char v[256], first[64];
    CHECK(cl_connect(&c, h->port) == 0, "connect");
    CHECK(cl_request(&c, "GET /health HTTP/1.1\r\nX-Request-Id: my-id 42\r\n\r\n", &r) == 0, "r1");
    CHECK(cl_header(&r, "X-Request-Id", v, sizeof v) == 0 && !strcmp(v, "my-id 42"), "kept: %s", v);
    cl_resp_free(&r);
    CHECK(cl_request(&c, "GET /health HTTP/1.1\r\n\r\n", &r) == 0, "r2");
    CHECK(cl_header(&r, "X-Request-Id", first, sizeof first) == 0 && is_hex32(first), "made: %s",
          first);
    cl_resp_free(&r);
    CHECK(cl_request(&c, "GET /nowhere HTTP/1.1\r\n\r\n", &r) == 0 && r.status == 404, "404");
    CHECK(cl_header(&r, "X-Request-Id", v, sizeof v) == 0 && is_hex32(v), "404 id: %s", v);
    CHECK(strcmp(v, first) != 0, "two made ids are equal");
    cl_resp_free(&r);
    /* too long (129 characters): ignored, one is made */
    char req[512];
    snprintf(req, sizeof req, "GET /health HTTP/1.1\r\nX-Request-Id: %0129d\r\n\r\n", 7);
    CHECK(cl_request(&c, req, &r) == 0 && r.status == 200, "r4");
    CHECK(cl_header(&r, "X-Request-Id", v, sizeof v) == 0 && is_hex32(v), "long id kept: %s", v);
    cl_resp_free(&r);
    CHECK(cl_request(&c, "GET /stream HTTP/1.1\r\nX-Request-Id: s-1\r\n\r\n", &r) == 0, "sse");
    CHECK(cl_header(&r, "X-Request-Id", v, sizeof v) == 0 && !strcmp(v, "s-1"), "sse: %s", v);
    CHECK(cl_header(&r, "Vary", v, sizeof v) != 0, "Vary without CORS");
    CHECK(cl_header(&r, "Access-Control-Allow-Origin", v, sizeof v) != 0, "CORS without CORS");
    cl_resp_free(&r);
    /* without CORS, OPTIONS is just another method */
    CHECK(cl_request(&c, "OPTIONS /health HTTP/1.1\r\nOrigin: https://a.example\r\n\r\n", &r) ==
                  0 &&
              r.status == 405,
          "OPTIONS without CORS: %d", r.status);
    cl_resp_free(&r);
    /* net's own 413 (headers complete, body too large) carries the id */
    CHECK(cl_request(&c,
                     "POST /echo HTTP/1.1\r\nX-Request-Id: big\r\nContent-Length: 99999\r\n\r\n",
                     &r) == 0 &&
              r.status == 413,
          "413: %d", r.status);
    CHECK(cl_header(&r, "X-Request-Id", v, sizeof v) == 0 && !strcmp(v, "big"), "413 id: %s", v);
    cl_resp_free(&r);
    cl_close(&c);
    return 0;
}

HARNESS_TEST(reqid, echoed_on_every_answer, rid_client, h.cfg.max_body = 1000)

static int cors_client(harness_t *h, char *msg, size_t cap) {
    cl_conn_t c;
    cl_resp_t r;
    char v[256];
    CHECK(cl_connect(&c, h->port) == 0, "connect");
    CHECK(cl_request(&c,
                     "OPTIONS /any/path HTTP/1.1\r\nOrigin: https://a.example\r\n"
                     "Access-Control-Request-Method: POST\r\n"
                     "Access-Control-Request-Headers: content-type, x-api-key\r\n\r\n",
                     &r) == 0,
          "preflight");
    CHECK(r.status == 204, "preflight status %d", r.status);
    CHECK(r.body_len == 0, "preflight body");
    CHECK(cl_header(&r, "Content-Length", v, sizeof v) != 0, "204 with a Content-Length");
    CHECK(cl_header(&r, "Access-Control-Allow-Origin", v, sizeof v) == 0 &&
              !strcmp(v, "https://a.example"),
          "allow-origin %s", v);
    CHECK(cl_header(&r, "Access-Control-Allow-Methods", v, sizeof v) == 0 &&
              !strcmp(v, "GET, POST, OPTIONS"),
          "methods %s", v);
    CHECK(cl_header(&r, "Access-Control-Allow-Headers", v, sizeof v) == 0 &&
              !strcmp(v, "content-type, x-api-key"),
          "headers %s", v);
    CHECK(cl_header(&r, "Access-Control-Max-Age", v, sizeof v) == 0 && !strcmp(v, "86400"), "age");
    CHECK(cl_header(&r, "Vary", v, sizeof v) == 0 && !strcmp(v, "Origin"), "vary");
    cl_resp_free(&r);
    /* keep-alive survives the 204: the next request on the connection is answered */
    CHECK(cl_request(&c, "GET /health HTTP/1.1\r\nOrigin: https://a.example\r\n\r\n", &r) == 0 &&
              r.status == 200,
          "after preflight");
    CHECK(cl_header(&r, "Access-Control-Allow-Origin", v, sizeof v) == 0 &&
              !strcmp(v, "https://a.example"),
          "normal allow-origin");
    CHECK(cl_header(&r, "Access-Control-Expose-Headers", v, sizeof v) == 0 &&
              !strcmp(v, "X-Request-Id"),
          "expose");
    cl_resp_free(&r);
    CHECK(cl_request(&c, "GET /stream HTTP/1.1\r\nOrigin: https://a.example\r\n\r\n", &r) == 0,
          "sse");
    CHECK(cl_header(&r, "Access-Control-Allow-Origin", v, sizeof v) == 0, "sse allow-origin");
    cl_resp_free(&r);
    /* an origin not in the list: no Allow-Origin, but Vary */
    CHECK(cl_request(&c, "GET /health HTTP/1.1\r\nOrigin: https://evil.example\r\n\r\n", &r) == 0,
          "other origin");
    CHECK(cl_header(&r, "Access-Control-Allow-Origin", v, sizeof v) != 0, "evil allowed");
    CHECK(cl_header(&r, "Vary", v, sizeof v) == 0, "vary on every response");
    cl_resp_free(&r);
    /* a preflight without a usable header list gets the default one */
    CHECK(cl_request(&c, "OPTIONS /health HTTP/1.1\r\nOrigin: https://a.example\r\n\r\n", &r) ==
                  0 &&
              r.status == 204,
          "preflight 2");
    CHECK(cl_header(&r, "Access-Control-Allow-Headers", v, sizeof v) == 0 &&
              !strcmp(v, "Authorization, Content-Type, X-Request-Id, X-Api-Key, Anthropic-Version"),
          "default headers %s", v);
    cl_resp_free(&r);
    cl_close(&c);
    return 0;
}

Test(cors, preflight_and_response_headers) {
    harness_t h;
    harness_config(&h);
    static const char *const list[] = {"https://a.example"};
    h.cfg.cors_origins = list;
    h.cfg.n_cors_origins = 1;
    HARNESS_RUN(&h, cors_client);
}
