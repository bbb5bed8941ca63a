/* The parse state of a grammar: sets of rule stacks, advanced byte by byte (grammar.h).
 * A stack's frames are DFA states: the top is where the text is in the innermost rule, the
 * others where each caller resumes. After every byte the set is closed: calls entered,
 * finished rules popped, so every stack's top can take a byte (or the set says the
 * sentence may end). */
#include <stdlib.h>
#include <string.h>

#include "base/free_all.h"
#include "engine/grammar_impl.h"
#include "uvllm/err.h"

#define MAX_CFGS 1024        /* stacks one parse state may hold (ambiguity bound) */
#define CLOSURE_BUDGET 65536 /* stacks one closure may visit */
#define SCR_KEEP 4096        /* a closure scratch grown past this is freed after use */
#define MASK_CACHE 4         /* masks a matcher keeps, by parse state */

/* The closure walks stacks as nodes: node i is the stack par[i] with state st[i] pushed on
 * it, interned by (par, st), so one stack is one node and "seen" is one byte. An epsilon
 * cycle (a rule that may be empty, repeated) visits each stack once, and the walk is a
 * work list, not recursion: a grammar cannot make it deep or long. */
typedef struct {
    uint32_t stamp; /* the closure that filled the slot; older stamps are empty */
    int32_t par, st, node;
} slot_t;

struct cfgscr_s {
    int32_t *par, *st, *dep;
    uint8_t *seen;
    uint32_t n, cap;
    slot_t *tab;
    uint32_t tab_cap, stamp;
    int32_t *work;
    size_t n_work, cap_work;
    int budget;
};

static void scr_free(cfgscr_t *x) {
    if (!x) return;
    UL_FREE_ALL(x->par, x->st, x->dep, x->seen, x->tab, x->work, x);
}

void ul_cfg_clear(cfgset_t *s) {
    s->len = s->n = 0;
    s->accept = 0;
}

void ul_cfg_free(cfgset_t *s) {
    free(s->p);
    scr_free(s->x);
    memset(s, 0, sizeof *s);
}

static int reserve(cfgset_t *s, uint32_t extra) {
    if (s->len + extra <= s->cap) return 0;
    uint32_t nc = s->cap * 2 + extra + 64;
    int32_t *np = realloc(s->p, (size_t)nc * sizeof *np);
    if (!np) return UL_ENOMEM;
    s->p = np;
    s->cap = nc;
    return 0;
}

int ul_cfg_copy(cfgset_t *dst, const cfgset_t *src) {
    ul_cfg_clear(dst);
    if (reserve(dst, src->len)) return UL_ENOMEM;
    if (src->len) memcpy(dst->p, src->p, (size_t)src->len * sizeof *src->p);
    dst->len = src->len;
    dst->n = src->n;
    dst->accept = src->accept;
    return 0;
}

/* Starts a closure into out (cleared): no nodes, a fresh stamp. */
static cfgscr_t *scr_begin(cfgset_t *out) {
    ul_cfg_clear(out);
    if (!out->x && !(out->x = calloc(1, sizeof *out->x))) return NULL;
    cfgscr_t *x = out->x;
    x->n = x->n_work = 0;
    x->budget = CLOSURE_BUDGET;
    if (++x->stamp == 0) { /* wrapped: forget every slot once */
        if (x->tab) memset(x->tab, 0, (size_t)x->tab_cap * sizeof *x->tab);
        x->stamp = 1;
    }
    return x;
}

static void scr_end(cfgset_t *out) {
    if (out->x && out->x->cap > SCR_KEEP) {
        scr_free(out->x);
        out->x = NULL;
    }
}

static uint32_t slot_of(const cfgscr_t *x, int32_t par, int32_t st) {
    uint32_t h = (uint32_t)par * 0x9E3779B1u ^ (uint32_t)st * 0x85EBCA77u;
    h ^= h >> 15;
    return h & (x->tab_cap - 1);
}

static int scr_grow(cfgscr_t *x) {
    uint32_t nc = x->cap ? x->cap * 2 : 64;
    int32_t *a = realloc(x->par, nc * sizeof *a);
    if (a) x->par = a;
    int32_t *b = a ? realloc(x->st, nc * sizeof *b) : NULL;
    if (b) x->st = b;
    int32_t *c = b ? realloc(x->dep, nc * sizeof *c) : NULL;
    if (c) x->dep = c;
    uint8_t *e = c ? realloc(x->seen, nc) : NULL;
    if (!e) return UL_ENOMEM;
    x->seen = e;
    x->cap = nc;
    /* the table at most half full: rehash this closure's slots into twice the nodes */
    slot_t *t = calloc((size_t)nc * 2, sizeof *t), *old = x->tab;
    if (!t) return UL_ENOMEM;
    uint32_t old_cap = x->tab_cap;
    x->tab = t;
    x->tab_cap = nc * 2;
    for (uint32_t i = 0; i < old_cap; i++) {
        if (old[i].stamp != x->stamp) continue;
        uint32_t k = slot_of(x, old[i].par, old[i].st);
        while (t[k].stamp == x->stamp) k = (k + 1) & (x->tab_cap - 1);
        t[k] = old[i];
    }
    free(old);
    return 0;
}

/* The node of stack par + st, made if new; -1 on ENOMEM. */
static int32_t intern(cfgscr_t *x, int32_t par, int32_t st) {
    if (x->n == x->cap && scr_grow(x)) return -1;
    uint32_t k = slot_of(x, par, st);
    for (; x->tab[k].stamp == x->stamp; k = (k + 1) & (x->tab_cap - 1))
        if (x->tab[k].par == par && x->tab[k].st == st) return x->tab[k].node;
    int32_t i = (int32_t)x->n++;
    x->tab[k] = (slot_t){x->stamp, par, st, i};
    x->par[i] = par;
    x->st[i] = st;
    x->dep[i] = par < 0 ? 1 : x->dep[par] + 1;
    x->seen[i] = 0;
    return i;
}

static int push_work(cfgscr_t *x, int32_t node) {
    if (node < 0) return UL_ENOMEM;
    if (ul_g_grow_i32(&x->work, &x->cap_work, x->n_work + 1, 64)) return UL_ENOMEM;
    x->work[x->n_work++] = node;
    return 0;
}

/* Adds the stack of node i (not yet in out: every node is visited once). */
static int add_cfg(cfgset_t *out, const cfgscr_t *x, int32_t i) {
    if (out->n >= MAX_CFGS) return 0; /* pathological ambiguity: keep the first ones */
    int d = x->dep[i];
    if (reserve(out, (uint32_t)d + 1)) return UL_ENOMEM;
    int32_t *fr = out->p + out->len;
    fr[0] = d;
    for (int j = d; j >= 1; j--, i = x->par[i]) fr[j] = x->st[i];
    out->len += (uint32_t)d + 1;
    out->n++;
    return 0;
}

/* Visits the work list: a stack whose top takes bytes joins out; its top's calls are
 * entered; a finished top rule is popped (or, at the bottom, the sentence may end). */
static int closure(const ul_grammar_t *g, cfgset_t *out) {
    cfgscr_t *x = out->x;
    while (x->n_work) {
        int32_t i = x->work[--x->n_work];
        if (x->seen[i]) continue;
        x->seen[i] = 1;
        if (--x->budget < 0) { /* pathological: keep what was found */
            x->n_work = 0;
            break;
        }
        int32_t s = x->st[i];
        if ((g->flags[s] & S_BYTES) && add_cfg(out, x, i)) return UL_ENOMEM;
        if (g->flags[s] & S_FINAL) {
            if (x->dep[i] == 1)
                out->accept = 1;
            else if (push_work(x, x->par[i]))
                return UL_ENOMEM;
        }
        if (x->dep[i] >= UL_GRAMMAR_MAX_STACK) continue;
        /* last pushed, first visited: calls in the grammar's order */
        for (int32_t k = g->call_off[s + 1] - 1; k >= g->call_off[s]; k--) {
            if (g->call_to[k] < 0) continue; /* pruned: the callee cannot finish */
            int32_t r = intern(x, x->par[i], g->call_ret[k]);
            if (r < 0 || push_work(x, intern(x, r, g->call_to[k]))) return UL_ENOMEM;
        }
    }
    return 0;
}

/* Pushes stack fr[0..d) as a node and closes over it. */
static int close_stack(const ul_grammar_t *g, cfgset_t *out, const int32_t *fr, int d) {
    int32_t node = -1;
    for (int j = 0; j < d; j++)
        if ((node = intern(out->x, node, fr[j])) < 0) return UL_ENOMEM;
    if (push_work(out->x, node)) return UL_ENOMEM;
    return closure(g, out);
}

int ul_cfg_closure(const ul_grammar_t *g, cfgset_t *out, int32_t *fr, int d) {
    if (!scr_begin(out)) return UL_ENOMEM;
    int rc = close_stack(g, out, fr, d);
    scr_end(out);
    return rc;
}

int ul_cfg_step(const ul_grammar_t *g, const cfgset_t *in, uint8_t b, cfgset_t *out) {
    int32_t fr[UL_GRAMMAR_MAX_STACK + 1];
    if (!scr_begin(out)) return UL_ENOMEM;
    int rc = 0;
    for (uint32_t i = 0; i < in->len && !rc; i += (uint32_t)in->p[i] + 1) {
        int d = in->p[i];
        int32_t t = ul_g_next(g, in->p[i + d], b);
        if (t < 0) continue;
        memcpy(fr, in->p + i + 1, (size_t)d * sizeof *fr);
        fr[d - 1] = t;
        rc = close_stack(g, out, fr, d);
    }
    scr_end(out);
    return rc;
}

/* ---- the matcher ------------------------------------------------------------------------ */

typedef struct {
    cfgset_t key; /* the parse state the mask was built for */
    uint32_t *bits;
    uint64_t used; /* LRU stamp; 0 = empty */
} mcache_t;

struct ul_gmatch_s {
    const ul_grammar_t *g;
    cfgset_t cur, tmp;
    cfgset_t *walk; /* [max token length + 1] per-depth states of mask walks */
    uint32_t n_walk;
    mcache_t cache[MASK_CACHE];
    uint64_t clock;
    ul_gmatch_stats_t st;
};

ul_gmatch_t *ul_gmatch_new(const ul_grammar_t *g) {
    ul_gmatch_t *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->g = g;
    int32_t fr[UL_GRAMMAR_MAX_STACK + 1] = {g->root};
    if (ul_cfg_closure(g, &m->cur, fr, 1)) {
        ul_gmatch_free(m);
        return NULL;
    }
    return m;
}

void ul_gmatch_free(ul_gmatch_t *m) {
    if (!m) return;
    ul_cfg_free(&m->cur);
    ul_cfg_free(&m->tmp);
    for (uint32_t i = 0; i < m->n_walk; i++) ul_cfg_free(&m->walk[i]);
    free(m->walk);
    for (int i = 0; i < MASK_CACHE; i++) {
        ul_cfg_free(&m->cache[i].key);
        free(m->cache[i].bits);
    }
    free(m);
}

void ul_gmatch_copy(ul_gmatch_t *dst, const ul_gmatch_t *src) {
    if (ul_cfg_copy(&dst->cur, &src->cur)) ul_cfg_clear(&dst->cur); /* dead: refuses all */
}

int ul_gmatch_done(const ul_gmatch_t *m) { return m->cur.accept; }

/* Runs p[0..n) from m->cur into m->tmp; 0 when alive after the last byte (or n == 0). */
static int run(ul_gmatch_t *m, const char *p, size_t n, int *ok) {
    *ok = 1;
    if (ul_cfg_copy(&m->tmp, &m->cur)) return UL_ENOMEM;
    cfgset_t other = {0};
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        if (!m->tmp.n) {
            *ok = 0;
            break;
        }
        if ((rc = ul_cfg_step(m->g, &m->tmp, (uint8_t)p[i], &other))) break;
        cfgset_t t = m->tmp;
        m->tmp = other;
        other = t;
    }
    if (!rc && *ok && n) *ok = m->tmp.n > 0 || m->tmp.accept; /* no bytes: nothing changes */
    ul_cfg_free(&other);
    return rc;
}

int ul_gmatch_feed(ul_gmatch_t *m, const char *p, size_t n) {
    int ok;
    if (run(m, p, n, &ok) || !ok) return -1;
    cfgset_t t = m->cur;
    m->cur = m->tmp;
    m->tmp = t;
    return 0;
}

int ul_gmatch_allows(ul_gmatch_t *m, int32_t id) {
    const ul_gvocab_t *v = m->g->v;
    if (!v || id < 0 || id >= v->n) return 0;
    if (v->eog[id]) return m->cur.accept;
    uint32_t n;
    const char *p = ul_gvocab_piece(v, id, &n);
    if (!n) return 0;
    int ok;
    return run(m, p, n, &ok) == 0 && ok;
}

int ul_gmatch_accept(ul_gmatch_t *m, int32_t id) {
    const ul_gvocab_t *v = m->g->v;
    if (!v || id < 0 || id >= v->n) return -1;
    if (v->eog[id]) return m->cur.accept ? 0 : -1;
    uint32_t n;
    const char *p = ul_gvocab_piece(v, id, &n);
    if (!n) return -1;
    return ul_gmatch_feed(m, p, n);
}

void ul_gmatch_stats(const ul_gmatch_t *m, ul_gmatch_stats_t *out) { *out = m->st; }

/* ---- masks ------------------------------------------------------------------------------ */

static void set_tok(const ul_gvocab_t *v, uint32_t *bits, int32_t tok) {
    for (; tok >= 0; tok = v->dup[tok]) bits[tok >> 5] |= 1u << (tok & 31);
}

static cfgset_t *walk_state(ul_gmatch_t *m, uint32_t depth) {
    if (depth >= m->n_walk) {
        uint32_t nn = depth + 8;
        cfgset_t *nw = realloc(m->walk, nn * sizeof *nw);
        if (!nw) return NULL;
        memset(nw + m->n_walk, 0, (nn - m->n_walk) * sizeof *nw);
        m->walk = nw;
        m->n_walk = nn;
    }
    return &m->walk[depth];
}

/* Marks the tokens below trie node x that the full stacks in state (at depth d) accept. */
static int walk_below(ul_gmatch_t *m, int32_t x, uint32_t depth, uint32_t *bits) {
    const ul_gvocab_t *v = m->g->v;
    const tnode_t *nd = &v->nodes[x];
    for (int32_t c = nd->child; c < nd->child + nd->n_child; c++) {
        cfgset_t *in = &m->walk[depth], *out = walk_state(m, depth + 1);
        if (!out) return UL_ENOMEM;
        in = &m->walk[depth];
        m->st.walked_nodes++;
        if (ul_cfg_step(m->g, in, v->nodes[c].byte, out)) return UL_ENOMEM;
        if (!out->n && !out->accept) continue;
        if (v->nodes[c].tok >= 0) set_tok(v, bits, v->nodes[c].tok);
        if (out->n && walk_below(m, c, depth + 1, bits)) return UL_ENOMEM;
    }
    return 0;
}

static int walk_child(ul_gmatch_t *m, int32_t c, uint32_t *bits) {
    const ul_gvocab_t *v = m->g->v;
    cfgset_t *out = walk_state(m, 1);
    if (!out) return UL_ENOMEM;
    m->st.walked_nodes++;
    if (ul_cfg_step(m->g, &m->walk[0], v->nodes[c].byte, out)) return UL_ENOMEM;
    if (!out->n && !out->accept) return 0;
    if (v->nodes[c].tok >= 0) set_tok(v, bits, v->nodes[c].tok);
    return out->n ? walk_below(m, c, 1, bits) : 0;
}

/* The mask of one stack fr[0..d): its top state's cached tokens, plus those that end the
 * top rule and go on in the stack below it. */
static int mask_stack(ul_gmatch_t *m, int32_t *fr, int d, uint32_t *bits) {
    const ul_gvocab_t *v = m->g->v;
    const posinfo_t *pi = ul_grammar_posinfo((ul_grammar_t *)(uintptr_t)m->g, fr[d - 1]);
    if (!pi) return UL_ENOMEM;
    uint32_t words = ((uint32_t)v->n + 31) / 32;
    if (pi->bits)
        for (uint32_t i = 0; i < words; i++) bits[i] |= pi->bits[i];
    for (int32_t i = 0; i < pi->n_ids; i++) set_tok(v, bits, pi->ids[i]);
    if (!pi->n_exits || d == 1) return 0; /* at the bottom, nothing may follow the end */
    cfgset_t *below = walk_state(m, 0);
    if (!below) return UL_ENOMEM;
    ul_cfg_clear(below);
    int32_t top = fr[d - 1];
    if (ul_cfg_closure(m->g, below, fr, d - 1)) return UL_ENOMEM;
    fr[d - 1] = top;
    if (!below->n) return 0;
    /* the exits' subtrees, from the stacks below (walk state 0): only the children whose
     * byte those stacks can take (a rule that may end after any of its bytes has thousands
     * of exits; the text after it usually starts with one or two bytes) */
    uint8_t can[256] = {0};
    for (uint32_t k = 0; k < below->len; k += (uint32_t)below->p[k] + 1) {
        int32_t top = below->p[k + below->p[k]];
        for (int b = 0; b < 256; b++) can[b] |= ul_g_next(m->g, top, (uint8_t)b) >= 0;
    }
    for (int b = 0; b < 256; b++) {
        const int32_t *kid[2];
        int32_t nk[2] = {0, 0};
        if (can[b]) ul_posinfo_kids(v, pi, (uint8_t)b, kid, nk);
        for (int h = 0; h < 2; h++)
            for (int32_t i = 0; i < nk[h]; i++)
                if (walk_child(m, kid[h][i], bits)) return UL_ENOMEM;
    }
    return 0;
}

static int mask_build(ul_gmatch_t *m, uint32_t *bits) {
    const ul_gvocab_t *v = m->g->v;
    uint32_t words = ((uint32_t)v->n + 31) / 32;
    memset(bits, 0, words * sizeof *bits);
    int32_t fr[UL_GRAMMAR_MAX_STACK + 1];
    const cfgset_t *c = &m->cur;
    for (uint32_t i = 0; i < c->len; i += (uint32_t)c->p[i] + 1) {
        int d = c->p[i];
        memcpy(fr, c->p + i + 1, (size_t)d * sizeof *fr);
        if (mask_stack(m, fr, d, bits)) return UL_ENOMEM;
    }
    if (c->accept)
        for (int32_t i = 0; i < v->n_eog; i++) set_tok(v, bits, v->eog_ids[i]);
    return 0;
}

static int same_state(const cfgset_t *a, const cfgset_t *b) {
    return a->n == b->n && a->len == b->len && a->accept == b->accept &&
           (!a->len || !memcmp(a->p, b->p, (size_t)a->len * sizeof *a->p)); /* p: NULL when empty */
}

void ul_gmatch_fill_mask(ul_gmatch_t *m, uint32_t *bits) {
    const ul_gvocab_t *v = m->g->v;
    uint32_t words = ((uint32_t)v->n + 31) / 32;
    m->st.masks++;
    m->clock++;
    mcache_t *lru = &m->cache[0];
    for (int i = 0; i < MASK_CACHE; i++) {
        mcache_t *e = &m->cache[i];
        if (e->used && e->bits && same_state(&e->key, &m->cur)) {
            memcpy(bits, e->bits, words * sizeof *bits);
            e->used = m->clock;
            m->st.mask_hits++;
            return;
        }
        if (e->used < lru->used) lru = e;
    }
    if (mask_build(m, bits)) { /* out of memory: allow everything the matcher can check */
        for (int32_t id = 0; id < v->n; id++)
            if (ul_gmatch_allows(m, id)) bits[id >> 5] |= 1u << (id & 31);
        return;
    }
    if (!lru->bits && !(lru->bits = malloc(words * sizeof *bits))) return;
    if (ul_cfg_copy(&lru->key, &m->cur)) {
        lru->used = 0;
        return;
    }
    memcpy(lru->bits, bits, words * sizeof *bits);
    lru->used = m->clock;
}

/* ---- the sampler's filter --------------------------------------------------------------- */

/* Lazy filters before the trigger: where in tail + token bytes the trigger starts (so that
 * it ends inside the token), or -1. */
static long trigger_at(const ul_gfilter_t *f, const char *p, uint32_t n, char *buf) {
    memcpy(buf, f->tail, f->tail_len);
    memcpy(buf + f->tail_len, p, n);
    uint32_t len = f->tail_len + n;
    const char *hit = memmem(buf, len, f->trigger, f->trigger_len);
    return hit ? (long)(hit - buf) : -1;
}

static int lazy_allows(ul_gfilter_t *f, int32_t id) {
    const ul_gvocab_t *v = f->m->g->v;
    if (id < 0 || id >= v->n) return 0;
    if (v->eog[id]) return 1;
    uint32_t n;
    const char *p = ul_gvocab_piece(v, id, &n);
    if (!n) return 0;
    char buf[64 + 256];
    long at = trigger_at(f, p, n, buf);
    if (at < 0) return 1;
    ul_gmatch_t *m = f->m;
    int ok;
    return run(m, buf + at, f->tail_len + n - (size_t)at, &ok) == 0 && ok;
}

static void lazy_accept(ul_gfilter_t *f, int32_t id) {
    const ul_gvocab_t *v = f->m->g->v;
    if (id < 0 || id >= v->n || v->eog[id]) return;
    uint32_t n;
    const char *p = ul_gvocab_piece(v, id, &n);
    char buf[64 + 256];
    long at = trigger_at(f, p, n, buf);
    uint32_t len = f->tail_len + n;
    if (at >= 0) {
        f->active = 1;
        (void)ul_gmatch_feed(f->m, buf + at, len - (size_t)at);
        return;
    }
    uint32_t keep = len < f->trigger_len - 1 ? len : f->trigger_len - 1;
    memmove(f->tail, buf + len - keep, keep);
    f->tail_len = keep;
}

static int gf_allows(const ul_token_filter_t *base, int32_t id) {
    /* the filter is never const where it lives: its owner hands it to one sampling thread */
    ul_gfilter_t *f = (ul_gfilter_t *)(uintptr_t)base;
    if (f->trigger_len && !f->active) return lazy_allows(f, id);
    return ul_gmatch_allows(f->m, id);
}

static void gf_accept(ul_token_filter_t *base, int32_t id) {
    ul_gfilter_t *f = (ul_gfilter_t *)base;
    if (f->trigger_len && !f->active)
        lazy_accept(f, id);
    else
        (void)ul_gmatch_accept(f->m, id);
}

static void gf_mask(ul_token_filter_t *base, uint32_t *bits) {
    ul_gfilter_t *f = (ul_gfilter_t *)base;
    if (!f->trigger_len || f->active) {
        ul_gmatch_fill_mask(f->m, bits);
        return;
    }
    /* free text: every token but those that start the grammar wrongly (rare: the sampler
     * asks only when its own choice was refused) */
    int32_t n = f->m->g->v->n;
    memset(bits, 0, ((size_t)n + 31) / 32 * sizeof *bits);
    for (int32_t id = 0; id < n; id++)
        if (lazy_allows(f, id)) bits[id >> 5] |= 1u << (id & 31);
}

/* How many of ids the filter would take one after the other: on a copy of its state, so
 * proposals it refuses are cut before they are computed. 0 without memory for the copy. */
static int32_t gf_prefix(ul_token_filter_t *base, const int32_t *ids, int32_t n) {
    ul_gfilter_t *f = (ul_gfilter_t *)base;
    if (!f->probe && !(f->probe = ul_gmatch_new(f->m->g))) return 0;
    ul_gfilter_t c = *f;
    c.m = f->probe;
    ul_gmatch_copy(c.m, f->m);
    int32_t k = 0;
    while (k < n && gf_allows(&c.base, ids[k])) gf_accept(&c.base, ids[k++]);
    return k;
}

int ul_gfilter_init(ul_gfilter_t *f, const ul_grammar_t *g) {
    memset(f, 0, sizeof *f);
    f->base = (ul_token_filter_t){
        .allows = gf_allows, .accept = gf_accept, .fill_mask = gf_mask, .prefix = gf_prefix};
    f->m = ul_gmatch_new(g);
    return f->m ? 0 : UL_ENOMEM;
}

int ul_gfilter_init_lazy(ul_gfilter_t *f, const ul_grammar_t *g, const char *trigger) {
    size_t n = strlen(trigger);
    if (!n || n >= sizeof f->trigger) return UL_EINVAL;
    int rc = ul_gfilter_init(f, g);
    memcpy(f->trigger, trigger, n);
    f->trigger_len = (uint32_t)n;
    return rc;
}

void ul_gfilter_free(ul_gfilter_t *f) {
    ul_gmatch_free(f->m);
    ul_gmatch_free(f->probe);
    f->m = f->probe = NULL;
}
