/* The token sets cached per DFA state (grammar_impl.h, posinfo_t): a walk of the vocabulary
 * trie from a stack holding only that state. Tokens the walk consumes whole are accepted
 * whatever lies below the state's rule; the trie nodes where the rule may end with bytes
 * left are kept as exits, whose subtrees the matcher walks at each step from the real
 * stack (grammar_match.c). While the walk is in one rule with no calls (a string's
 * characters, a number's digits) it steps the DFA directly, a table lookup per trie node.
 * A state that agrees with another up to d bytes (grammar_eqv.c) takes that state's tokens
 * and exits of at most d bytes and walks only the subtrees that reach deeper. */
#include <stdlib.h>
#include <string.h>

#include "base/free_all.h"
#include "engine/grammar_impl.h"
#include "uvllm/err.h"

typedef struct {
    ul_grammar_t *g;
    const ul_gvocab_t *v;
    int32_t *acc, *exits;
    size_t n_acc, c_acc, n_exits, c_exits;
    cfgset_t *lvl; /* per depth */
    uint32_t n_lvl;
    uint8_t skip; /* record only trie nodes deeper than this, walk only subtrees that are */
    int nomem;
} pw_t;

static void push(pw_t *w, int32_t **a, size_t *n, size_t *c, int32_t x) {
    if (*n == *c) {
        size_t nc = *c * 2 + 256;
        int32_t *na = realloc(*a, nc * sizeof *na);
        if (!na) {
            w->nomem = 1;
            return;
        }
        *a = na;
        *c = nc;
    }
    (*a)[(*n)++] = x;
}

static void accept_node(pw_t *w, int32_t c) {
    if (w->v->nodes[c].tok >= 0 && w->v->nodes[c].depth > w->skip)
        push(w, &w->acc, &w->n_acc, &w->c_acc, w->v->nodes[c].tok);
}

static void exit_node(pw_t *w, int32_t c) {
    if (w->v->nodes[c].n_child && w->v->nodes[c].depth > w->skip)
        push(w, &w->exits, &w->n_exits, &w->c_exits, c);
}

static cfgset_t *level(pw_t *w, uint32_t d) {
    if (d >= w->n_lvl) {
        uint32_t nn = d + 16;
        cfgset_t *nl = realloc(w->lvl, nn * sizeof *nl);
        if (!nl) return w->nomem = 1, NULL;
        memset(nl + w->n_lvl, 0, (nn - w->n_lvl) * sizeof *nl);
        w->lvl = nl;
        w->n_lvl = nn;
    }
    return &w->lvl[d];
}

/* Below this agreement depth a derived walk saves little over a full one. */
#define DERIVE_MIN 2

static void walk_gen(pw_t *w, int32_t x, uint32_t d);

/* One stack of one frame s, no calls from s (the DFA fast path). */
static void walk_dfa(pw_t *w, int32_t s, int32_t x) {
    const ul_grammar_t *g = w->g;
    const tnode_t *nd = &w->v->nodes[x];
    for (int32_t c = nd->child; c < nd->child + nd->n_child && !w->nomem; c++) {
        if (w->v->height[c] <= w->skip) continue;
        int32_t t = ul_g_next(g, s, w->v->nodes[c].byte);
        if (t < 0) continue;
        accept_node(w, c);
        if (g->call_off[t] != g->call_off[t + 1]) { /* calls: the general walk below */
            uint32_t d = w->v->nodes[c].depth;
            cfgset_t *l = level(w, d);
            if (!l) return;
            ul_cfg_clear(l);
            int32_t fr[UL_GRAMMAR_MAX_STACK + 1] = {t};
            if (ul_cfg_closure(g, l, fr, 1)) {
                w->nomem = 1;
                return;
            }
            if (l->accept) exit_node(w, c);
            if (l->n) walk_gen(w, c, d);
            continue;
        }
        if (g->flags[t] & S_FINAL) exit_node(w, c);
        if (g->flags[t] & S_BYTES) walk_dfa(w, t, c);
    }
}

/* Any stacks (those in level d, at trie node x). */
static void walk_gen(pw_t *w, int32_t x, uint32_t d) {
    const tnode_t *nd = &w->v->nodes[x];
    for (int32_t c = nd->child; c < nd->child + nd->n_child && !w->nomem; c++) {
        if (w->v->height[c] <= w->skip) continue;
        cfgset_t *out = level(w, d + 1);
        if (!out) return;
        const cfgset_t *in = &w->lvl[d];
        if (ul_cfg_step(w->g, in, w->v->nodes[c].byte, out)) {
            w->nomem = 1;
            return;
        }
        if (!out->n && !out->accept) continue;
        accept_node(w, c);
        if (out->accept) exit_node(w, c);
        if (!out->n) continue;
        /* back on the fast path: one stack of one frame (its calls, if any, would have been
         * other stacks) */
        if (out->n == 1 && out->p[0] == 1)
            walk_dfa(w, out->p[1], c);
        else
            walk_gen(w, c, d + 1);
    }
}

void ul_posinfo_free(posinfo_t *p) {
    if (!p) return;
    UL_FREE_ALL(p->xoff, p->xkid, p->bits, p->ids, p->exits, p);
}

/* Sorts the exits by depth (a counting sort: depths are bytes), so that each byte's group of
 * children below is sorted by depth too and a derived state can share a prefix of it. */
static int sort_exits(const ul_gvocab_t *v, int32_t *ex, int32_t n) {
    int32_t at[257] = {0};
    int32_t *tmp = malloc(((size_t)n + 1) * sizeof *tmp);
    if (!tmp) return UL_ENOMEM;
    for (int32_t i = 0; i < n; i++) at[v->nodes[ex[i]].depth + 1]++;
    for (int d = 0; d < 256; d++) at[d + 1] += at[d];
    for (int32_t i = 0; i < n; i++) tmp[at[v->nodes[ex[i]].depth]++] = ex[i];
    memcpy(ex, tmp, (size_t)n * sizeof *ex);
    free(tmp);
    return 0;
}

/* Groups the exits' children by byte (posinfo_t.xoff / xkid). */
static int index_exits(const ul_gvocab_t *v, posinfo_t *p) {
    if (sort_exits(v, p->exits, p->n_exits)) return UL_ENOMEM;
    p->xoff = calloc(257, sizeof *p->xoff);
    if (!p->xoff) return UL_ENOMEM;
    size_t total = 0;
    for (int32_t i = 0; i < p->n_exits; i++) {
        const tnode_t *x = &v->nodes[p->exits[i]];
        for (int32_t c = x->child; c < x->child + x->n_child; c++) p->xoff[v->nodes[c].byte + 1]++;
        total += (size_t)x->n_child;
    }
    for (int b = 0; b < 256; b++) p->xoff[b + 1] += p->xoff[b];
    p->xkid = malloc((total + 1) * sizeof *p->xkid);
    int32_t fill[256];
    if (!p->xkid) return UL_ENOMEM;
    memcpy(fill, p->xoff, sizeof fill);
    for (int32_t i = 0; i < p->n_exits; i++) {
        const tnode_t *x = &v->nodes[p->exits[i]];
        for (int32_t c = x->child; c < x->child + x->n_child; c++)
            p->xkid[fill[v->nodes[c].byte]++] = c;
    }
    return 0;
}

/* How many of a[0..n) (trie nodes sorted by depth) are at most d deep. */
static int32_t upto_depth(const ul_gvocab_t *v, const int32_t *a, int32_t n, uint32_t d) {
    int32_t lo = 0, hi = n;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (v->nodes[a[mid]].depth <= d)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void ul_posinfo_kids(const ul_gvocab_t *v, const posinfo_t *p, uint8_t b, const int32_t *kid[2],
                     int32_t n[2]) {
    n[0] = n[1] = 0;
    if (p->xoff) {
        kid[0] = p->xkid + p->xoff[b];
        n[0] = p->xoff[b + 1] - p->xoff[b];
    }
    const posinfo_t *q = p->base;
    if (q && q->xoff) { /* children of exits at most base_d deep are at most base_d + 1 */
        kid[1] = q->xkid + q->xoff[b];
        n[1] = upto_depth(v, kid[1], q->xoff[b + 1] - q->xoff[b], p->base_d + 1u);
    }
}

/* Packs the walk's tokens and exits into a posinfo (w's lists move into it). bits: the
 * tokens' bitmap so far (adopted), or NULL. */
static posinfo_t *pack(pw_t *w, uint32_t *bits) {
    const ul_gvocab_t *v = w->v;
    posinfo_t *p = calloc(1, sizeof *p);
    uint32_t words = ((uint32_t)v->n + 31) / 32;
    if (p && !w->nomem) {
        if (bits || w->n_acc > words) { /* dense: a bitmap (ids would take more room) */
            p->bits = bits ? bits : calloc(words, sizeof *p->bits);
            bits = NULL;
            if (p->bits)
                for (size_t i = 0; i < w->n_acc; i++) {
                    for (int32_t t = w->acc[i]; t >= 0; t = v->dup[t])
                        p->bits[t >> 5] |= 1u << (t & 31);
                }
            else
                w->nomem = 1;
            free(w->acc);
        } else {
            p->ids = w->acc;
            p->n_ids = (int32_t)w->n_acc;
        }
        w->acc = NULL;
        p->exits = w->exits;
        p->n_exits = (int32_t)w->n_exits;
        w->exits = NULL;
        if (p->n_exits && index_exits(v, p)) w->nomem = 1;
    }
    free(bits);
    free(w->acc);
    free(w->exits);
    for (uint32_t i = 0; i < w->n_lvl; i++) ul_cfg_free(&w->lvl[i]);
    free(w->lvl);
    if (!p || w->nomem) {
        ul_posinfo_free(p);
        return NULL;
    }
    return p;
}

static uint32_t tok_len(const ul_gvocab_t *v, int32_t t) { return v->off[t + 1] - v->off[t]; }

/* out = the tokens of at most d bytes in bits: copied one by one or all but the longer
 * ones cleared, whichever touches fewer. */
static void keep_upto(const ul_gvocab_t *v, const uint32_t *bits, uint8_t d, uint32_t *out) {
    uint32_t words = ((uint32_t)v->n + 31) / 32, mid = v->len_off[d + 1];
    if (mid - v->len_off[1] < v->len_off[256] - mid) {
        memset(out, 0, words * sizeof *out);
        for (uint32_t i = v->len_off[1]; i < mid; i++) {
            int32_t t = v->by_len[i];
            out[t >> 5] |= bits[t >> 5] & 1u << (t & 31);
        }
    } else {
        memcpy(out, bits, words * sizeof *out);
        for (uint32_t i = mid; i < v->len_off[256]; i++)
            out[v->by_len[i] >> 5] &= ~(1u << (v->by_len[i] & 31));
    }
}

/* State s from r, which agrees with it on every token and exit of at most d bytes: r's
 * tokens of those, r's exits of those shared (from r's base when r is derived too: r agrees
 * with its base deeper than with s), and a walk from s of the subtrees that reach deeper. */
static posinfo_t *derive(ul_grammar_t *g, int32_t s, const posinfo_t *r, uint8_t d) {
    const ul_gvocab_t *v = g->v;
    pw_t w = {.g = g, .v = v, .skip = d};
    for (int32_t i = 0; i < r->n_ids && !w.nomem; i++)
        if (tok_len(v, r->ids[i]) <= d) push(&w, &w.acc, &w.n_acc, &w.c_acc, r->ids[i]);
    uint32_t words = ((uint32_t)v->n + 31) / 32, *bits = NULL;
    if (r->bits && !(bits = malloc(words * sizeof *bits))) w.nomem = 1;
    if (bits) /* r's dense set, its tokens of at most d bytes */
        keep_upto(v, r->bits, d, bits);
    if (!w.nomem) walk_dfa(&w, s, 0);
    posinfo_t *p = pack(&w, bits);
    if (p) {
        p->base = r->base ? r->base : r;
        p->base_d = d;
        p->n_exits += upto_depth(v, p->base->exits, p->base->n_exits, d);
    }
    return p;
}

static posinfo_t *compute(ul_grammar_t *g, int32_t s) {
    pw_t w = {.g = g, .v = g->v};
    /* s's byte edges only: its calls (and its end) are other stacks of the same state */
    walk_dfa(&w, s, 0);
    return pack(&w, NULL);
}

static posinfo_t *publish(ul_grammar_t *g, int32_t s, posinfo_t *mine) {
    posinfo_t *expect = NULL;
    if (atomic_compare_exchange_strong_explicit(&g->pos[s], &expect, mine, memory_order_acq_rel,
                                                memory_order_acquire))
        return mine;
    ul_posinfo_free(mine); /* another thread was first */
    return expect;
}

const posinfo_t *ul_grammar_posinfo(ul_grammar_t *g, int32_t s) {
    posinfo_t *p = atomic_load_explicit(&g->pos[s], memory_order_acquire);
    if (p) return p;
    const geqv_t *e = ul_grammar_eqv(g);
    if (!e) return NULL;
    posinfo_t *mine = NULL;
    /* a chain of representatives is at most EQV_MAX_DEPTH long (each raises dd) */
    if (e->rep[s] >= 0 && e->dd[s] >= DERIVE_MIN) {
        const posinfo_t *r = ul_grammar_posinfo(g, e->rep[s]);
        if (r && r->base && r->base_d < e->dd[s]) /* not from grammar_eqv.c's choice */
            mine = compute(g, s);
        else if (r)
            mine = derive(g, s, r, e->dd[s]);
    } else {
        mine = compute(g, s);
    }
    return mine ? publish(g, s, mine) : NULL;
}
