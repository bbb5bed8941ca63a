/* Exact-path router: a small fixed table scanned linearly. An OpenAI server has a handful
 * of routes, so a scan with a length check first beats any hashing, and it allocates
 * nothing. A path that exists with other methods answers 405 with an Allow list. */
#include <string.h>

#include "net/http.h"
#include "uvllm/err.h"

static const char *const g_method_names[UL_HTTP_METHOD_COUNT] = {
    "OTHER", "GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"};

const char *ul_http_method_name(ul_http_method_t m) {
    if ((unsigned)m >= UL_HTTP_METHOD_COUNT) return "OTHER";
    return g_method_names[m];
}

void ul_router_init(ul_router_t *r) { memset(r, 0, sizeof *r); }

static ul_route_t *find(const ul_router_t *r, const char *path, size_t len) {
    if (len >= sizeof r->routes[0].path) return NULL;
    for (size_t i = 0; i < r->n; i++) {
        const ul_route_t *rt = &r->routes[i];
        if (strncmp(rt->path, path, len) == 0 && rt->path[len] == '\0') return (ul_route_t *)rt;
    }
    return NULL;
}

int ul_router_add(ul_router_t *r, ul_http_method_t method, const char *path, ul_http_handler_fn fn,
                  void *data) {
    if (!path || path[0] != '/' || !fn) return UL_EINVAL;
    if (method <= UL_HTTP_OTHER || method >= UL_HTTP_METHOD_COUNT) return UL_EINVAL;
    size_t len = strlen(path);
    if (len >= sizeof r->routes[0].path) return UL_EINVAL;
    ul_route_t *rt = find(r, path, len);
    if (!rt) {
        if (r->n >= UL_ROUTER_MAX) return UL_EFULL;
        rt = &r->routes[r->n++];
        memset(rt, 0, sizeof *rt);
        memcpy(rt->path, path, len + 1);
    }
    if (rt->methods & (1u << method)) return UL_EBUSY;
    rt->methods |= 1u << method;
    rt->fn[method] = fn;
    rt->data[method] = data;
    return 0;
}

static void allow_list(const ul_route_t *rt, char *allow, size_t cap) {
    if (!allow || cap == 0) return;
    unsigned m = rt->methods;
    if (m & (1u << UL_HTTP_GET)) m |= 1u << UL_HTTP_HEAD;
    size_t n = 0;
    allow[0] = '\0';
    for (int i = 1; i < UL_HTTP_METHOD_COUNT; i++) {
        if (!(m & (1u << i))) continue;
        const char *name = g_method_names[i];
        size_t need = strlen(name) + (n ? 2 : 0);
        if (n + need + 1 > cap) break;
        if (n) {
            memcpy(allow + n, ", ", 2);
            n += 2;
        }
        memcpy(allow + n, name, strlen(name));
        n += strlen(name);
        allow[n] = '\0';
    }
}

int ul_router_match(const ul_router_t *r, ul_http_method_t method, const char *path,
                    size_t path_len, const ul_route_t **route, char *allow, size_t allow_cap) {
    const ul_route_t *rt = find(r, path, path_len);
    if (!rt) return 404;
    ul_http_method_t m = method;
    if (m == UL_HTTP_HEAD && !(rt->methods & (1u << UL_HTTP_HEAD))) m = UL_HTTP_GET;
    if ((unsigned)m < UL_HTTP_METHOD_COUNT && m != UL_HTTP_OTHER && (rt->methods & (1u << m))) {
        if (route) *route = rt;
        return 200;
    }
    allow_list(rt, allow, allow_cap);
    return 405;
}
