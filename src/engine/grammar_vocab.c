/* The vocabulary index of the grammar engine (grammar.h): every token's bytes, the ids that
 * end generation, and a trie of the bytes whose children are contiguous, so a walk visits
 * each shared prefix once and drops a whole subtree at the first byte a grammar refuses. */
#include <stdlib.h>
#include <string.h>

#include "base/free_all.h"
#include "engine/grammar_impl.h"
#include "uvllm/err.h"

void ul_gvocab_free(ul_gvocab_t *v) {
    if (!v) return;
    UL_FREE_ALL(v->off, v->eog, v->blob, v->nodes, v->height, v->by_len, v->dup, v->eog_ids, v);
}

int32_t ul_gvocab_size(const ul_gvocab_t *v) { return v->n; }

const char *ul_gvocab_piece(const ul_gvocab_t *v, int32_t id, uint32_t *n) {
    *n = v->off[id + 1] - v->off[id];
    return v->blob + v->off[id];
}

int ul_gvocab_is_eog(const ul_gvocab_t *v, int32_t id) { return v->eog[id]; }

static int cmp_tok(const void *a, const void *b, void *ctx) {
    const ul_gvocab_t *v = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    uint32_t nx = v->off[x + 1] - v->off[x], ny = v->off[y + 1] - v->off[y];
    int r = memcmp(v->blob + v->off[x], v->blob + v->off[y], nx < ny ? nx : ny);
    if (r) return r;
    if (nx != ny) return nx < ny ? -1 : 1;
    return (x > y) - (x < y);
}

typedef struct {
    int32_t node, lo, hi;
} span_t;

/* Builds the trie over the sorted ids ord[0..n) breadth first. */
static int build_trie(ul_gvocab_t *v, const int32_t *ord, int32_t n) {
    size_t cap = (size_t)n + 64, qcap = (size_t)n + 64;
    v->nodes = calloc(cap, sizeof *v->nodes);
    span_t *q = malloc(qcap * sizeof *q);
    if (!v->nodes || !q) {
        free(q);
        return UL_ENOMEM;
    }
    v->nodes[0] = (tnode_t){.tok = -1};
    v->n_nodes = 1;
    size_t qh = 0, qt = 0;
    q[qt++] = (span_t){0, 0, n};
    while (qh < qt) {
        span_t sp = q[qh++];
        int32_t i = sp.lo;
        uint32_t dep = sp.node ? v->nodes[sp.node].depth : 0;
        /* tokens that end here */
        int32_t last = -1;
        while (i < sp.hi && v->off[ord[i] + 1] - v->off[ord[i]] == dep) {
            if (last < 0)
                v->nodes[sp.node].tok = ord[i];
            else
                v->dup[last] = ord[i];
            last = ord[i++];
        }
        int32_t groups = 0;
        for (int32_t j = i; j < sp.hi;) {
            uint8_t b = (uint8_t)v->blob[v->off[ord[j]] + dep];
            while (j < sp.hi && (uint8_t)v->blob[v->off[ord[j]] + dep] == b) j++;
            groups++;
        }
        if (!groups) continue;
        if ((size_t)v->n_nodes + (size_t)groups > cap) {
            size_t nc = cap * 2 + (size_t)groups;
            tnode_t *nn = realloc(v->nodes, nc * sizeof *nn);
            if (!nn) {
                free(q);
                return UL_ENOMEM;
            }
            v->nodes = nn;
            cap = nc;
        }
        if (qt + (size_t)groups > qcap) {
            size_t nc = qcap * 2 + (size_t)groups;
            span_t *nq = realloc(q, nc * sizeof *nq);
            if (!nq) {
                free(q);
                return UL_ENOMEM;
            }
            q = nq;
            qcap = nc;
        }
        v->nodes[sp.node].child = v->n_nodes;
        v->nodes[sp.node].n_child = groups;
        for (int32_t j = i; j < sp.hi;) {
            uint8_t b = (uint8_t)v->blob[v->off[ord[j]] + dep];
            int32_t k = j;
            while (k < sp.hi && (uint8_t)v->blob[v->off[ord[k]] + dep] == b) k++;
            int32_t c = v->n_nodes++;
            v->nodes[c] = (tnode_t){.tok = -1, .byte = b, .depth = (uint8_t)(dep + 1)};
            q[qt++] = (span_t){c, j, k};
            j = k;
        }
    }
    free(q);
    return 0;
}

/* by_len: a counting sort (lengths are below 256). */
static void sort_by_len(ul_gvocab_t *v) {
    uint32_t at[257] = {0};
    for (int32_t t = 0; t < v->n; t++) at[v->off[t + 1] - v->off[t] + 1]++;
    for (int k = 0; k < 256; k++) at[k + 1] += at[k];
    memcpy(v->len_off, at, sizeof at);
    for (int32_t t = 0; t < v->n; t++) v->by_len[at[v->off[t + 1] - v->off[t]]++] = t;
}

/* height[]: children come after their parent (breadth first), so one backward pass. */
static int build_heights(ul_gvocab_t *v) {
    v->height = malloc((size_t)v->n_nodes);
    if (!v->height) return UL_ENOMEM;
    for (int32_t x = v->n_nodes - 1; x >= 0; x--) {
        const tnode_t *nd = &v->nodes[x];
        uint8_t h = nd->depth;
        for (int32_t c = nd->child; c < nd->child + nd->n_child; c++)
            if (v->height[c] > h) h = v->height[c];
        v->height[x] = h;
    }
    return 0;
}

ul_gvocab_t *ul_gvocab_new(int32_t n, void *ctx,
                           int (*piece)(void *ctx, int32_t id, char *out, int cap),
                           int (*is_eog)(void *ctx, int32_t id)) {
    ul_gvocab_t *v = calloc(1, sizeof *v);
    if (!v) return NULL;
    v->n = n;
    v->off = malloc(((size_t)n + 1) * sizeof *v->off);
    v->eog = calloc((size_t)n + 1, 1);
    v->dup = malloc(((size_t)n + 1) * sizeof *v->dup);
    v->eog_ids = malloc(((size_t)n + 1) * sizeof *v->eog_ids);
    v->by_len = malloc(((size_t)n + 1) * sizeof *v->by_len);
    int32_t *ord = malloc(((size_t)n + 1) * sizeof *ord);
    size_t cap = (size_t)n * 8 + 64, len = 0;
    v->blob = malloc(cap);
    if (!v->off || !v->eog || !v->dup || !v->eog_ids || !v->by_len || !ord || !v->blob) goto fail;
    int32_t n_ord = 0;
    for (int32_t i = 0; i < n; i++) {
        v->off[i] = (uint32_t)len;
        v->dup[i] = -1;
        v->eog[i] = is_eog && is_eog(ctx, i);
        if (v->eog[i]) {
            v->eog_ids[v->n_eog++] = i;
            continue;
        }
        char buf[256];
        int k = piece ? piece(ctx, i, buf, (int)sizeof buf) : 0;
        if (k <= 0 || k > 255) continue; /* control tokens and pieces past 255 bytes: never */
        if (len + (size_t)k > cap) {
            char *nb = len + (size_t)k <= UINT32_MAX ? realloc(v->blob, cap * 2 + (size_t)k) : NULL;
            if (!nb) goto fail;
            v->blob = nb;
            cap = cap * 2 + (size_t)k;
        }
        memcpy(v->blob + len, buf, (size_t)k);
        len += (size_t)k;
        if ((uint32_t)k > v->max_len) v->max_len = (uint32_t)k;
        ord[n_ord++] = i;
    }
    v->off[n] = (uint32_t)len;
    qsort_r(ord, (size_t)n_ord, sizeof *ord, cmp_tok, v);
    if (build_trie(v, ord, n_ord) || build_heights(v)) goto fail;
    sort_by_len(v);
    free(ord);
    return v;
fail:
    free(ord);
    ul_gvocab_free(v);
    return NULL;
}
