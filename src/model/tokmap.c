/* Hash maps of the tokenizers: token text -> id, merge pair -> rank, and the per-call
 * word cache. Open addressing
 * with linear probing over a power-of-two table at most half full; the keys stay in the
 * vocabulary's text blob, a slot holds only the index and the full 64-bit hash, so a
 * probe compares text only when the hashes agree. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "model/vocab_impl.h"
#include "uvllm/err.h"

#define POW_TAB 64

static uint64_t tab[POW_TAB];
static pthread_once_t tab_once = PTHREAD_ONCE_INIT;

static void tab_init(void) {
    uint64_t p = 1;
    for (int i = 0; i < POW_TAB; i++, p *= UL_HASH_P) tab[i] = p;
}

uint64_t ul_hash_pow(size_t n) {
    pthread_once(&tab_once, tab_init);
    if (n < POW_TAB) return tab[n];
    uint64_t r = 1, b = UL_HASH_P;
    while (n) {
        if (n & 1) r *= b;
        b *= b;
        n >>= 1;
    }
    return r;
}

/* Spreads the polynomial hash over the low bits used as the table index. */
static inline uint64_t mix(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

int ul_tokmap_init(ul_tokmap_t *m, uint32_t n_keys, const char *blob, const uint32_t *off,
                   const uint32_t *aux) {
    uint32_t cap = 16;
    while (cap < 2 * (uint64_t)n_keys + 1) cap <<= 1;
    m->mask = cap - 1;
    m->slot = malloc(sizeof *m->slot * cap);
    m->hash = malloc(sizeof *m->hash * cap);
    m->blob = blob;
    m->off = off;
    m->aux = aux;
    if (!m->slot || !m->hash) {
        ul_tokmap_free(m);
        return UL_ENOMEM;
    }
    memset(m->slot, 0xff, sizeof *m->slot * cap);
    return 0;
}

void ul_tokmap_free(ul_tokmap_t *m) {
    free(m->slot);
    free(m->hash);
    m->slot = NULL;
    m->hash = NULL;
}

static int same_key(const ul_tokmap_t *m, int32_t idx, const char *p, size_t n, uint32_t aux) {
    uint32_t o = m->off[idx], len = m->off[idx + 1] - o;
    if (len != n || (m->aux && m->aux[idx] != aux)) return 0;
    return memcmp(m->blob + o, p, n) == 0;
}

void ul_tokmap_put(ul_tokmap_t *m, int32_t idx, uint64_t h, int replace) {
    const char *p = m->blob + m->off[idx];
    size_t n = m->off[idx + 1] - m->off[idx];
    uint32_t aux = m->aux ? m->aux[idx] : 0;
    for (uint64_t i = mix(h) & m->mask;; i = (i + 1) & m->mask) {
        if (m->slot[i] < 0) {
            m->slot[i] = idx;
            m->hash[i] = h;
            return;
        }
        if (m->hash[i] == h && same_key(m, m->slot[i], p, n, aux)) {
            if (replace) m->slot[i] = idx;
            return;
        }
    }
}

int32_t ul_tokmap_get(const ul_tokmap_t *m, uint64_t h, const char *p, size_t n, uint32_t aux) {
    for (uint64_t i = mix(h) & m->mask;; i = (i + 1) & m->mask) {
        int32_t s = m->slot[i];
        if (s < 0) return -1;
        if (m->hash[i] == h && same_key(m, s, p, n, aux)) return s;
    }
}

#define WC_SLOTS 8192

struct ul_wslot_s {
    const char *w; /* NULL: empty */
    uint32_t n, off, cnt;
    uint64_t h;
};

int ul_wcache_init(ul_wcache_t *c) {
    memset(c, 0, sizeof *c);
    c->slot = calloc(WC_SLOTS, sizeof *c->slot);
    return c->slot ? 0 : UL_ENOMEM;
}

void ul_wcache_free(ul_wcache_t *c) {
    free(c->slot);
    free(c->ids.p);
    memset(c, 0, sizeof *c);
}

/* The slot holding w, or the empty slot where it would go (the table is at most half
 * full, so the probe ends). */
static ul_wslot_t *wc_find(const ul_wcache_t *c, uint64_t h, const char *w, size_t n) {
    for (size_t i = mix(h) & (WC_SLOTS - 1);; i = (i + 1) & (WC_SLOTS - 1)) {
        ul_wslot_t *e = &c->slot[i];
        if (!e->w || (e->h == h && e->n == n && !memcmp(e->w, w, n))) return e;
    }
}

int ul_wcache_get(const ul_wcache_t *c, const char *w, size_t n, ul_ids_t *out) {
    if (!c->slot || n > UL_WCACHE_MAX_WORD || n == 0) return 0;
    const ul_wslot_t *e = wc_find(c, ul_hash_bytes(w, n), w, n);
    if (!e->w) return 0;
    for (uint32_t i = 0; i < e->cnt; i++)
        if (ul_ids_push(out, c->ids.p[e->off + i])) return UL_ENOMEM;
    return 1;
}

int ul_wcache_put(ul_wcache_t *c, const char *w, size_t n, const int32_t *ids, size_t cnt) {
    if (!c->slot || n > UL_WCACHE_MAX_WORD || n == 0 || c->n >= WC_SLOTS / 2) return 0;
    uint64_t h = ul_hash_bytes(w, n);
    ul_wslot_t *e = wc_find(c, h, w, n);
    if (e->w) return 0;
    size_t off = c->ids.n;
    for (size_t i = 0; i < cnt; i++) ul_ids_push(&c->ids, ids[i]);
    if (c->ids.err) return c->ids.err;
    *e = (ul_wslot_t){w, (uint32_t)n, (uint32_t)off, (uint32_t)cnt, h};
    c->n++;
    return 0;
}
