/* Fair share between clients: the sequences (choices) each client has in flight and the
 * worker jobs it has queued, so one client cannot take every slot (--max-seqs-per-client)
 * or the whole job queue. A client is its API key when the server has keys (one key may
 * be used from many addresses), else its address. Only a 64-bit hash of the key is kept.
 * An open-addressing table (linear probing, deletion by backward shift) keyed by that
 * hash; an entry goes when both its counts are back to 0, so the table holds the clients
 * with work in flight and no more. Loop thread only. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/api.h"
#include "uvllm/err.h"

static uint64_t fnv(uint64_t h, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h;
}

uint64_t ul_api_client_of(const ul_api_t *a, const ul_http_req_t *req) {
    uint64_t h = 0xcbf29ce484222325ull;
    const ul_http_header_t *auth = a->api_keys.n ? ul_http_req_header(req, "authorization") : NULL;
    if (auth && auth->value_len > 7 && !strncasecmp(auth->value, "Bearer ", 7))
        h = fnv(fnv(h, "key:", 4), auth->value + 7, auth->value_len - 7);
    else
        h = fnv(fnv(h, "addr:", 5), req->peer ? req->peer : "", req->peer ? strlen(req->peer) : 0);
    return h ? h : 1; /* 0 marks an empty slot */
}

static size_t slot(const ul_api_share_t *s, uint64_t key) {
    size_t mask = s->cap - 1, i = (size_t)(key * 0x9e3779b97f4a7c15ull >> 17) & mask;
    while (s->e[i].key && s->e[i].key != key) i = (i + 1) & mask;
    return i;
}

static int grow(ul_api_share_t *s) {
    size_t cap = s->cap ? s->cap * 2 : 64;
    ul_api_share_entry_t *old = s->e;
    size_t ocap = s->cap;
    s->e = calloc(cap, sizeof *s->e);
    if (!s->e) {
        s->e = old;
        return UL_ENOMEM;
    }
    s->cap = cap;
    for (size_t i = 0; i < ocap; i++)
        if (old[i].key) s->e[slot(s, old[i].key)] = old[i];
    free(old);
    return 0;
}

static ul_api_share_entry_t *find(ul_api_share_t *s, uint64_t key, int create) {
    if (!s->cap && (!create || grow(s))) return NULL;
    ul_api_share_entry_t *e = &s->e[slot(s, key)];
    if (e->key || !create) return e->key ? e : NULL;
    if ((s->used + 1) * 2 > s->cap) {
        if (grow(s)) return NULL;
        e = &s->e[slot(s, key)];
    }
    e->key = key;
    s->used++;
    return e;
}

/* Removes e (both counts 0), shifting back the entries of its probe run. */
static void drop(ul_api_share_t *s, ul_api_share_entry_t *e) {
    size_t mask = s->cap - 1, i = (size_t)(e - s->e), j = i;
    s->e[i].key = 0;
    s->used--;
    for (;;) {
        j = (j + 1) & mask;
        if (!s->e[j].key) return;
        size_t home = (size_t)(s->e[j].key * 0x9e3779b97f4a7c15ull >> 17) & mask;
        /* e[j] may move into the hole at i when its home is not in (i, j] cyclically */
        if ((i <= j) ? (home <= i || home > j) : (home <= i && home > j)) {
            s->e[i] = s->e[j];
            s->e[j].key = 0;
            i = j;
        }
    }
}

int ul_api_share_add(ul_api_share_t *s, uint64_t client, int kind, int32_t n, int32_t max) {
    ul_api_share_entry_t *e = find(s, client, 0);
    int32_t have = e ? e->n[kind] : 0;
    if (max > 0 && (n > max || have > max - n)) return UL_EFULL;
    if (!e && !(e = find(s, client, 1))) return UL_ENOMEM;
    e->n[kind] += n;
    return 0;
}

void ul_api_share_del(ul_api_share_t *s, uint64_t client, int kind, int32_t n) {
    ul_api_share_entry_t *e = find(s, client, 0);
    if (!e) return;
    e->n[kind] = e->n[kind] > n ? e->n[kind] - n : 0;
    if (!e->n[0] && !e->n[1]) drop(s, e);
}

int32_t ul_api_share_get(const ul_api_share_t *s, uint64_t client, int kind) {
    if (!s->cap) return 0;
    const ul_api_share_entry_t *e = &s->e[slot(s, client)];
    return e->key ? e->n[kind] : 0;
}

void ul_api_share_free(ul_api_share_t *s) {
    free(s->e);
    memset(s, 0, sizeof *s);
}
