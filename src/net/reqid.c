/* Request ids: every request gets one, so a client, the access log and the api's response
 * ids can be tied together. A client (or a proxy in front) may choose it with X-Request-Id;
 * a value that is not short printable ASCII is ignored (it would be echoed into headers and
 * logs) and the server makes one: 128 bits from a per-server counter run through a mixing
 * function keyed with a random seed, so ids are unique within a run and unpredictable
 * across runs without costing a system call per request. */
#include <stdio.h>
#include <unistd.h>

#include "net/conn.h"

int ul_http_request_id_valid(const char *s, size_t len) {
    if (!s || len == 0 || len > UL_HTTP_REQUEST_ID_MAX) return 0;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e) return 0;
    return 1;
}

const char *ul_http_req_id_str(const ul_http_req_t *req) { return req->request_id; }

/* splitmix64's finaliser: a bijection, so distinct counters give distinct outputs. */
static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void seed(ul_http_server_t *s) {
    uint64_t r[2];
    if (uv_random(NULL, NULL, r, sizeof r, 0, NULL) != 0) {
        r[0] = uv_hrtime() ^ ((uint64_t)getpid() << 32);
        r[1] = mix(r[0] + (uint64_t)(uintptr_t)s);
    }
    s->rid_seed[0] = r[0];
    s->rid_seed[1] = r[1] | 1;
}

static void make_id(ul_http_server_t *s, char out[33]) {
    if (!s->rid_seed[1]) seed(s);
    uint64_t n = ++s->rid_next;
    uint64_t hi = mix(s->rid_seed[0] + n * 0x9e3779b97f4a7c15ull);
    uint64_t lo = mix(hi ^ s->rid_seed[1] ^ n);
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)hi, (unsigned long long)lo);
}

void ul_conn_request_id(ul_conn_t *c) {
    size_t len = 0;
    const char *v = ul_conn_header(c, "x-request-id", &len);
    if (v && ul_http_request_id_valid(v, len)) {
        memcpy(c->rid, v, len);
        c->rid[len] = '\0';
    } else {
        make_id(c->srv, c->rid);
    }
    c->rid_set = 1;
}
