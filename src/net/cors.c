/* CORS for browser clients (a web UI on another origin calling the API). The policy is a
 * list of allowed origins in the server config, applied by net to every response, so no
 * handler repeats it: a preflight (OPTIONS on any path) is answered here with 204, and
 * responses to an allowed Origin carry Access-Control-Allow-Origin. Vary: Origin goes on
 * every response while CORS is on, since whether the header is present depends on the
 * request's Origin (a shared cache must not hand one origin's answer to another). */
#include "net/conn.h"
#include "uvllm/err.h"

#define ALLOW_HEADERS_MAX 1024

const char *ul_http_cors_allow(const ul_http_config_t *cfg, const char *origin, size_t len) {
    if (!cfg->n_cors_origins || !origin) return NULL;
    for (size_t i = 0; i < cfg->n_cors_origins; i++) {
        const char *o = cfg->cors_origins[i];
        if (!strcmp(o, "*")) return o;
        if (strlen(o) == len && !memcmp(o, origin, len)) return o;
    }
    return NULL;
}

static int line(ul_buf_t *b, const char *name, const char *value, size_t len) {
    int rc = ul_buf_puts(b, name);
    rc |= ul_buf_puts(b, ": ");
    rc |= ul_buf_append(b, value, len);
    rc |= ul_buf_puts(b, "\r\n");
    return rc;
}

static const char *allowed_origin(const ul_conn_t *c) {
    size_t len = 0;
    const char *origin = ul_conn_header(c, "origin", &len);
    return ul_http_cors_allow(&c->srv->cfg, origin, len);
}

int ul_conn_std_headers(const ul_conn_t *c, ul_buf_t *b) {
    int rc = 0;
    if (c->rid_set) rc |= line(b, "X-Request-Id", c->rid, strlen(c->rid));
    if (c->srv->cfg.n_cors_origins && c->rid_set) {
        const char *allow = allowed_origin(c);
        if (allow) {
            rc |= line(b, "Access-Control-Allow-Origin", allow, strlen(allow));
            rc |= ul_buf_puts(b, "Access-Control-Expose-Headers: X-Request-Id\r\n");
        }
        rc |= ul_buf_puts(b, "Vary: Origin\r\n");
    }
    return rc ? UL_ENOMEM : 0;
}

/* A header list the client asks to send is echoed only when it is a plain token list. */
static int token_list(const char *s, size_t len) {
    if (len == 0 || len > ALLOW_HEADERS_MAX) return 0;
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '-' || ch == '_' || ch == ',' || ch == ' '))
            return 0;
    }
    return 1;
}

int ul_conn_cors_preflight(ul_conn_t *c) {
    ul_http_req_t *r = &c->req;
    if (!c->srv->cfg.n_cors_origins || r->method != UL_HTTP_OPTIONS) return 0;
    size_t len = 0;
    const char *want = ul_conn_header(c, "access-control-request-headers", &len);
    if (!want || !token_list(want, len)) {
        /* x-api-key and anthropic-version: Anthropic's SDK in a browser (/v1/messages) */
        want = "Authorization, Content-Type, X-Request-Id, X-Api-Key, Anthropic-Version";
        len = strlen(want);
    }
    int rc = ul_buf_puts(&c->resp_hdrs, "Access-Control-Allow-Methods: GET, POST, OPTIONS\r\n");
    rc |= line(&c->resp_hdrs, "Access-Control-Allow-Headers", want, len);
    rc |= ul_buf_puts(&c->resp_hdrs, "Access-Control-Max-Age: 86400\r\n");
    if (rc) {
        ul_conn_close(c, UL_ENOMEM);
        c->status = 204;
        ul_conn_req_finish(c);
        return 1;
    }
    ul_http_respond(r, 204, NULL, "", 0);
    return 1;
}
