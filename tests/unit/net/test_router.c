/* Router matching: exact paths, 404 for unknown paths, 405 with an Allow list for known
 * paths with another method, HEAD served by GET, and registration errors. */
#include <criterion/criterion.h>
#include <string.h>

#include "net/http.h"
#include "uvllm/err.h"

static int h_a(ul_http_req_t *req, void *data) { return 0; }
static int h_b(ul_http_req_t *req, void *data) { return 1; }

static int match(const ul_router_t *r, ul_http_method_t m, const char *path, const ul_route_t **rt,
                 char *allow) {
    return ul_router_match(r, m, path, strlen(path), rt, allow, 64);
}

Test(router, exact_paths_and_methods) {
    ul_router_t r;
    ul_router_init(&r);
    int tag_a = 1, tag_b = 2;
    cr_assert_eq(ul_router_add(&r, UL_HTTP_GET, "/v1/models", h_a, &tag_a), 0);
    cr_assert_eq(ul_router_add(&r, UL_HTTP_POST, "/v1/completions", h_b, &tag_b), 0);
    cr_assert_eq(ul_router_add(&r, UL_HTTP_POST, "/v1/models", h_b, &tag_b), 0);

    const ul_route_t *rt = NULL;
    char allow[64];
    cr_assert_eq(match(&r, UL_HTTP_GET, "/v1/models", &rt, allow), 200);
    cr_assert_eq(rt->fn[UL_HTTP_GET], h_a);
    cr_assert_eq(rt->data[UL_HTTP_GET], &tag_a);
    cr_assert_eq(match(&r, UL_HTTP_POST, "/v1/models", &rt, allow), 200);
    cr_assert_eq(rt->fn[UL_HTTP_POST], h_b);

    /* no prefix, no trailing-slash, no case folding */
    cr_assert_eq(match(&r, UL_HTTP_GET, "/v1/model", &rt, allow), 404);
    cr_assert_eq(match(&r, UL_HTTP_GET, "/v1/models/", &rt, allow), 404);
    cr_assert_eq(match(&r, UL_HTTP_GET, "/V1/models", &rt, allow), 404);
    cr_assert_eq(match(&r, UL_HTTP_GET, "/", &rt, allow), 404);
    /* path_len is honoured: "/v1/modelsXYZ" cut to 10 bytes is "/v1/models" */
    cr_assert_eq(ul_router_match(&r, UL_HTTP_GET, "/v1/modelsXYZ", 10, &rt, allow, 64), 200);
}

Test(router, wrong_method_405_with_allow) {
    ul_router_t r;
    ul_router_init(&r);
    cr_assert_eq(ul_router_add(&r, UL_HTTP_POST, "/v1/chat/completions", h_a, NULL), 0);
    cr_assert_eq(ul_router_add(&r, UL_HTTP_GET, "/health", h_a, NULL), 0);
    char allow[64] = "junk";
    const ul_route_t *rt = NULL;
    cr_assert_eq(match(&r, UL_HTTP_GET, "/v1/chat/completions", &rt, allow), 405);
    cr_assert_str_eq(allow, "POST");
    cr_assert_eq(match(&r, UL_HTTP_DELETE, "/health", &rt, allow), 405);
    cr_assert_str_eq(allow, "GET, HEAD");
    cr_assert_eq(match(&r, UL_HTTP_OTHER, "/health", &rt, allow), 405);
    /* HEAD is served by the GET handler */
    cr_assert_eq(match(&r, UL_HTTP_HEAD, "/health", &rt, allow), 200);
    cr_assert_eq(rt->fn[UL_HTTP_GET], h_a);
    /* a tiny Allow buffer truncates at a method boundary, never overflows */
    char small[6];
    cr_assert_eq(ul_router_match(&r, UL_HTTP_PUT, "/health", 7, &rt, small, sizeof small), 405);
    cr_assert_str_eq(small, "GET");
}

Test(router, registration_errors) {
    ul_router_t r;
    ul_router_init(&r);
    cr_assert_eq(ul_router_add(&r, UL_HTTP_GET, "nope", h_a, NULL), UL_EINVAL);
    cr_assert_eq(ul_router_add(&r, UL_HTTP_GET, NULL, h_a, NULL), UL_EINVAL);
    cr_assert_eq(ul_router_add(&r, UL_HTTP_GET, "/x", NULL, NULL), UL_EINVAL);
    cr_assert_eq(ul_router_add(&r, UL_HTTP_OTHER, "/x", h_a, NULL), UL_EINVAL);
    cr_assert_eq(ul_router_add(&r, UL_HTTP_GET, "/x", h_a, NULL), 0);
    cr_assert_eq(ul_router_add(&r, UL_HTTP_GET, "/x", h_b, NULL), UL_EBUSY);
    char longp[200];
    memset(longp, 'a', sizeof longp);
    longp[0] = '/';
    longp[sizeof longp - 1] = '\0';
    cr_assert_eq(ul_router_add(&r, UL_HTTP_GET, longp, h_a, NULL), UL_EINVAL);
    /* a long request path is a clean 404, not an overread */
    const ul_route_t *rt;
    cr_assert_eq(ul_router_match(&r, UL_HTTP_GET, longp, strlen(longp), &rt, NULL, 0), 404);
    for (int i = 1; i < UL_ROUTER_MAX; i++) {
        char p[16];
        snprintf(p, sizeof p, "/r%d", i);
        cr_assert_eq(ul_router_add(&r, UL_HTTP_GET, p, h_a, NULL), 0);
    }
    cr_assert_eq(ul_router_add(&r, UL_HTTP_GET, "/one-too-many", h_a, NULL), UL_EFULL);
    cr_assert_str_eq(ul_http_method_name(UL_HTTP_POST), "POST");
    cr_assert_str_eq(ul_http_method_name((ul_http_method_t)99), "OTHER");
}
