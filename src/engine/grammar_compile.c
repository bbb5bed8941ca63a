/* GBNF -> the compiled pushdown automaton (grammar_impl.h).
 *
 * Each rule becomes a Thompson NFA over bytes (classes of code points expanded into UTF-8
 * byte sequences) and calls of other rules, then a DFA by subset construction over byte
 * classes and callees. Small rules without loops that are not recursive (whitespace, a key
 * literal, a character escape) are inlined into their callers: the more of a lexeme one
 * rule holds, the more tokens stay inside it and are answered by its cached token sets.
 * Rules with loops (a string's characters) stay separate, so every caller shares their
 * states and caches. Left recursion (a rule that can call itself before any byte) is
 * refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errbuf.h"
#include "base/free_all.h"
#include "base/grow.h"
#include "engine/grammar_impl.h"
#include "uvllm/err.h"

#define INLINE_MAX 256  /* NFA states a rule may have to be inlined */
#define MAX_NFA 2000000 /* NFA states of one grammar */
#define MAX_DFA 200000  /* DFA states of one grammar */
/* Work the subset construction may do for one grammar (edges visited, NFA states bucketed
 * and closed): a base plus so much per NFA edge. Bounds compile time against a rule whose
 * DFA explodes, e.g. ([^a]{20} | "a")+, whose subsets track every count at once: refused
 * after ~5 ms of one core in Release, ~0.5 s in the fuzz build. The 60 schemas of
 * tests/e2e/corpus do at most 10 per edge (95,000 in all); ("a" | [a-z]{1,60} ",")+ 445,000. */
#define SUBSET_WORK_BASE 500000
#define SUBSET_WORK_PER_EDGE 100

typedef struct {
    int32_t from, to;
    int32_t rule; /* -1: epsilon or bytes */
    uint8_t lo, hi, eps;
} nedge_t;

typedef struct {
    const ast_t *ast;
    nedge_t *e;
    size_t n_e, c_e;
    int32_t n_states;
    int32_t *start, *end; /* per rule, -1 for inlined rules */
    uint8_t *inl;         /* per rule: inlined */
    int32_t *size;        /* per rule: estimated NFA states, -1 unknown */
    int depth, nomem;
    char *err;
    size_t err_len;
} nb_t;

/* The first failure's message into the caller's buffer; returns UL_EINVAL. */
#define fail(b, ...) ul_errbuf_set((b)->err, (b)->err_len, UL_EINVAL, __VA_ARGS__)

int ul_g_grow_i32(int32_t **v, size_t *cap, size_t need, size_t min) {
    if (need <= *cap) return 0;
    size_t nc = *cap * 2 + min;
    if (nc < need) nc = need;
    int32_t *nv = realloc(*v, nc * sizeof *nv);
    if (!nv) return UL_ENOMEM;
    *v = nv;
    *cap = nc;
    return 0;
}

static int new_state(nb_t *b, int32_t *s) {
    if (b->n_states >= MAX_NFA)
        return fail(b, "the grammar is too large (over %d states)", MAX_NFA);
    *s = b->n_states++;
    return 0;
}

static int edge(nb_t *b, int32_t from, int32_t to, int32_t rule, int eps, uint8_t lo, uint8_t hi) {
    nedge_t *ne = ul_grow(b->e, &b->c_e, b->n_e + 1, sizeof *ne, 1024);
    if (!ne) return b->nomem = 1, UL_ENOMEM;
    b->e = ne;
    b->e[b->n_e++] = (nedge_t){from, to, rule, lo, hi, (uint8_t)eps};
    return 0;
}

/* ---- code point ranges as UTF-8 byte sequences ------------------------------------------ */

static int encode(uint32_t c, uint8_t *o) {
    if (c < 0x80) return o[0] = (uint8_t)c, 1;
    if (c < 0x800) return o[0] = (uint8_t)(0xc0 | c >> 6), o[1] = (uint8_t)(0x80 | (c & 0x3f)), 2;
    if (c < 0x10000) {
        o[0] = (uint8_t)(0xe0 | c >> 12);
        o[1] = (uint8_t)(0x80 | ((c >> 6) & 0x3f));
        o[2] = (uint8_t)(0x80 | (c & 0x3f));
        return 3;
    }
    o[0] = (uint8_t)(0xf0 | c >> 18);
    o[1] = (uint8_t)(0x80 | ((c >> 12) & 0x3f));
    o[2] = (uint8_t)(0x80 | ((c >> 6) & 0x3f));
    o[3] = (uint8_t)(0x80 | (c & 0x3f));
    return 4;
}

/* Emits [lo, hi] (same UTF-8 length, no surrogates) as byte-range chains from in to out,
 * split until each byte position is one contiguous range (the utf8-ranges algorithm). */
static int utf8_range(nb_t *b, uint32_t lo, uint32_t hi, int32_t in, int32_t out) {
    if (lo > hi) return 0;
    static const uint32_t bounds[] = {0x7f, 0x7ff, 0xffff};
    for (int i = 0; i < 3; i++)
        if (lo <= bounds[i] && hi > bounds[i]) {
            int rc = utf8_range(b, lo, bounds[i], in, out);
            return rc ? rc : utf8_range(b, bounds[i] + 1, hi, in, out);
        }
    if (hi < 0x80) return edge(b, in, out, -1, 0, (uint8_t)lo, (uint8_t)hi);
    for (int i = 1; i < 4; i++) {
        uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if (lo & m) {
                int rc = utf8_range(b, lo, lo | m, in, out);
                return rc ? rc : utf8_range(b, (lo | m) + 1, hi, in, out);
            }
            if ((hi & m) != m) {
                int rc = utf8_range(b, lo, (hi & ~m) - 1, in, out);
                return rc ? rc : utf8_range(b, hi & ~m, hi, in, out);
            }
        }
    }
    uint8_t a[4], z[4];
    int n = encode(lo, a);
    encode(hi, z);
    int32_t cur = in;
    for (int i = 0; i < n; i++) {
        int32_t nx = out;
        if (i + 1 < n && new_state(b, &nx)) return UL_EINVAL;
        if (edge(b, cur, nx, -1, 0, a[i], z[i])) return UL_ENOMEM;
        cur = nx;
    }
    return 0;
}

static int build_class(nb_t *b, const anode_t *nd, int32_t in, int32_t *out) {
    int rc = new_state(b, out);
    for (int32_t i = 0; i < nd->nr && !rc; i++) {
        cprange_t r = b->ast->ranges[nd->r0 + i];
        if (r.hi > 0x10ffff) r.hi = 0x10ffff;
        /* no surrogates in UTF-8: [lo, D7FF] and [E000, hi] */
        if (r.lo <= 0xd7ff) rc = utf8_range(b, r.lo, r.hi < 0xd7ff ? r.hi : 0xd7ff, in, *out);
        if (!rc && r.hi >= 0xe000)
            rc = utf8_range(b, r.lo > 0xe000 ? r.lo : 0xe000, r.hi, in, *out);
    }
    return rc;
}

/* ---- Thompson construction -------------------------------------------------------------- */

static int build(nb_t *b, int32_t node, int32_t in, int32_t *out);

static int build_rep(nb_t *b, const anode_t *nd, int32_t in, int32_t *out) {
    int32_t cur = in;
    int rc = 0;
    for (int32_t i = 0; i < nd->min && !rc; i++) rc = build(b, nd->first, cur, &cur);
    if (rc) return rc;
    if (nd->max < 0) { /* loop */
        int32_t s = -1, e = -1;
        if ((rc = new_state(b, &s)) || (rc = edge(b, cur, s, -1, 1, 0, 0))) return rc;
        if ((rc = build(b, nd->first, s, &e)) || (rc = edge(b, e, s, -1, 1, 0, 0))) return rc;
        *out = s;
        return 0;
    }
    int32_t end = -1;
    if ((rc = new_state(b, &end))) return rc;
    for (int32_t i = nd->min; i < nd->max && !rc; i++) {
        rc = edge(b, cur, end, -1, 1, 0, 0);
        if (!rc) rc = build(b, nd->first, cur, &cur);
    }
    if (!rc) rc = edge(b, cur, end, -1, 1, 0, 0);
    *out = end;
    return rc;
}

static int build(nb_t *b, int32_t node, int32_t in, int32_t *out) {
    const anode_t *nd = &b->ast->nodes[node];
    int rc = 0;
    if (++b->depth > 200) return fail(b, "the grammar nests too deeply");
    switch (nd->kind) {
    case A_SEQ: {
        int32_t cur = in;
        for (int32_t c = nd->first; c >= 0 && !rc; c = b->ast->nodes[c].next)
            rc = build(b, c, cur, &cur);
        *out = cur;
        break;
    }
    case A_ALT: {
        if ((rc = new_state(b, out))) break;
        for (int32_t c = b->ast->nodes[node].first; c >= 0 && !rc; c = b->ast->nodes[c].next) {
            int32_t s = -1, e = -1;
            if ((rc = new_state(b, &s)) || (rc = edge(b, in, s, -1, 1, 0, 0))) break;
            if (!(rc = build(b, c, s, &e))) rc = edge(b, e, *out, -1, 1, 0, 0);
        }
        break;
    }
    case A_REP:
        rc = build_rep(b, nd, in, out);
        break;
    case A_CLASS:
        rc = build_class(b, nd, in, out);
        break;
    case A_REF:
        if (b->inl[nd->ref]) {
            rc = build(b, b->ast->rules[nd->ref].body, in, out);
        } else if (!(rc = new_state(b, out))) {
            rc = edge(b, in, *out, nd->ref, 0, 0, 0);
        }
        break;
    }
    b->depth--;
    return rc;
}

/* ---- which rules to inline -------------------------------------------------------------- */

/* Estimated NFA states of node (inlined references included); -1: has an unbounded loop. */
static int64_t est(nb_t *b, int32_t node, int depth) {
    const anode_t *nd = &b->ast->nodes[node];
    if (depth > 200) return -1;
    int64_t s = 0, v;
    switch (nd->kind) {
    case A_SEQ:
    case A_ALT:
        for (int32_t c = nd->first; c >= 0; c = b->ast->nodes[c].next) {
            if ((v = est(b, c, depth + 1)) < 0) return -1;
            s += v + 1;
        }
        return s;
    case A_REP:
        if (nd->max < 0) return -1;
        if ((v = est(b, nd->first, depth + 1)) < 0) return -1;
        return (v + 1) * nd->max;
    case A_CLASS:
        return 2 + nd->nr;
    default: /* A_REF */
        return b->inl[nd->ref] ? b->size[nd->ref] : 1;
    }
}

/* 1 when rule r can reach rule t through references. */
static int reaches(const ast_t *a, int32_t node, int32_t t, uint8_t *seen) {
    const anode_t *nd = &a->nodes[node];
    if (nd->kind == A_REF) {
        if (nd->ref == t) return 1;
        if (seen[nd->ref]) return 0;
        seen[nd->ref] = 1;
        return reaches(a, a->rules[nd->ref].body, t, seen);
    }
    for (int32_t c = nd->first; c >= 0; c = a->nodes[c].next)
        if (reaches(a, c, t, seen)) return 1;
    return 0;
}

/* 1 when every rule node references has been decided. */
static int refs_decided(const ast_t *a, int32_t node, const uint8_t *decided) {
    const anode_t *nd = &a->nodes[node];
    if (nd->kind == A_REF) return decided[nd->ref];
    for (int32_t c = nd->first; c >= 0; c = a->nodes[c].next)
        if (!refs_decided(a, c, decided)) return 0;
    return 1;
}

/* Decides inlining bottom-up: a rule is sized once every rule it references is decided,
 * so its estimate counts what it will really inline. Recursive rules and the root are
 * never inlined (and are decided first, which breaks every cycle). */
static int plan_inlining(nb_t *b, int32_t root) {
    size_t n = b->ast->n_rules;
    uint8_t *seen = calloc(n, 1), *decided = calloc(n, 1);
    if (!seen || !decided) {
        free(seen);
        free(decided);
        return b->nomem = 1, UL_ENOMEM;
    }
    for (size_t r = 0; r < n; r++) {
        memset(seen, 0, n);
        decided[r] = (int32_t)r == root || reaches(b->ast, b->ast->rules[r].body, (int32_t)r, seen);
    }
    for (int changed = 1; changed;) {
        changed = 0;
        for (size_t r = 0; r < n; r++) {
            if (decided[r] || !refs_decided(b->ast, b->ast->rules[r].body, decided)) continue;
            int64_t s = est(b, b->ast->rules[r].body, 0);
            if (s >= 0 && s <= INLINE_MAX) {
                b->inl[r] = 1;
                b->size[r] = (int32_t)s;
            }
            decided[r] = changed = 1;
        }
    }
    free(seen);
    free(decided);
    return 0;
}

/* ---- subset construction ---------------------------------------------------------------- */

typedef struct {
    int32_t *off;  /* [n_states + 1] CSR of edges by from */
    nedge_t *e;    /* sorted */
    int32_t *mark; /* [n_states] generation stamps */
    int32_t gen;
} nfa_t;

typedef struct {
    int32_t *set; /* members of every DFA state back to back */
    size_t n_set, c_set;
    int32_t *set_off; /* [n + 1] */
    int32_t *final;
    size_t n, c;
    int32_t *hash; /* open addressing: DFA ids + 1 */
    size_t hcap;
} dfa_build_t;

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Epsilon closure of the n states in v (growing v, sorted on return). */
static int eclose(nfa_t *f, int32_t **v, size_t *n, size_t *cap) {
    f->gen++;
    for (size_t i = 0; i < *n; i++) f->mark[(*v)[i]] = f->gen;
    for (size_t i = 0; i < *n; i++) {
        int32_t s = (*v)[i];
        for (int32_t k = f->off[s]; k < f->off[s + 1]; k++) {
            if (!f->e[k].eps || f->mark[f->e[k].to] == f->gen) continue;
            if (ul_g_grow_i32(v, cap, *n + 1, 16)) return UL_ENOMEM;
            f->mark[f->e[k].to] = f->gen;
            (*v)[(*n)++] = f->e[k].to;
        }
    }
    qsort(*v, *n, sizeof **v, cmp_i32);
    return 0;
}

static uint64_t hash_set(const int32_t *v, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint32_t)v[i]) * 1099511628211ull;
    return h;
}

/* The DFA id of set v[0..n) (added if new, *added = 1). */
static int dfa_intern(dfa_build_t *d, const int32_t *v, size_t n, int32_t end, int32_t *id,
                      int *added) {
    if (d->n * 2 + 2 >= d->hcap) { /* rehash */
        size_t nc = d->hcap ? d->hcap * 2 : 1024;
        int32_t *nh = calloc(nc, sizeof *nh);
        if (!nh) return UL_ENOMEM;
        for (size_t i = 0; i < d->n; i++) {
            size_t h =
                hash_set(d->set + d->set_off[i], (size_t)(d->set_off[i + 1] - d->set_off[i]));
            while (nh[h & (nc - 1)]) h++;
            nh[h & (nc - 1)] = (int32_t)i + 1;
        }
        free(d->hash);
        d->hash = nh;
        d->hcap = nc;
    }
    size_t h = hash_set(v, n);
    for (;; h++) {
        int32_t x = d->hash[h & (d->hcap - 1)];
        if (!x) break;
        x--;
        if ((size_t)(d->set_off[x + 1] - d->set_off[x]) == n &&
            !memcmp(d->set + d->set_off[x], v, n * sizeof *v))
            return *id = x, *added = 0, 0;
    }
    if (d->n + 2 > d->c) {
        size_t nc = d->c * 2 + 64;
        int32_t *no = realloc(d->set_off, (nc + 1) * sizeof *no);
        if (!no) return UL_ENOMEM;
        d->set_off = no;
        int32_t *nf = realloc(d->final, nc * sizeof *nf);
        if (!nf) return UL_ENOMEM;
        d->final = nf;
        d->c = nc;
    }
    if (d->n_set + n > d->c_set) {
        size_t nc = (d->c_set + n) * 2;
        int32_t *ns = realloc(d->set, nc * sizeof *ns);
        if (!ns) return UL_ENOMEM;
        d->set = ns;
        d->c_set = nc;
    }
    if (!d->n) d->set_off[0] = 0;
    memcpy(d->set + d->n_set, v, n * sizeof *v);
    d->n_set += n;
    d->set_off[d->n + 1] = (int32_t)d->n_set;
    int fin = 0;
    for (size_t i = 0; i < n; i++) fin |= v[i] == end;
    d->final[d->n] = fin;
    d->hash[h & (d->hcap - 1)] = (int32_t)d->n + 1;
    *id = (int32_t)d->n++;
    *added = 1;
    return 0;
}

/* Output of one rule's DFA, in local ids. */
typedef struct {
    int32_t *trans; /* [n][n_cls] */
    size_t c_trans;
    int32_t *calls; /* triples (state, callee rule, target) */
    size_t n_calls, c_calls;
} rule_dfa_t;

static int push_call(rule_dfa_t *r, int32_t s, int32_t rule, int32_t to) {
    if (ul_g_grow_i32(&r->calls, &r->c_calls, r->n_calls + 3, 48)) return UL_ENOMEM;
    r->calls[r->n_calls++] = s;
    r->calls[r->n_calls++] = rule;
    r->calls[r->n_calls++] = to;
    return 0;
}

typedef struct {
    nfa_t *f;
    dfa_build_t *d;
    rule_dfa_t *out;
    int n_cls;
    const uint8_t *rep; /* [n_cls] a byte of each class */
    const uint8_t *cls;
    int32_t end;
    int32_t *v;
    size_t cap;
    int64_t work, max_work; /* edges visited so far, and the bound */
    int32_t *boff;          /* [n_cls + 1] per-class buckets of one DFA state's byte targets */
    int32_t *bv;            /* their NFA states */
    size_t c_bv;
} subset_t;

static int push_v(subset_t *t, size_t n, int32_t to) {
    if (ul_g_grow_i32(&t->v, &t->cap, n + 1, 16)) return UL_ENOMEM;
    t->v[n] = to;
    return 0;
}

/* The DFA state of NFA states t->v[0..n) and their epsilon closure (-1 when n is 0). */
static int close_and_intern(subset_t *t, size_t n, int32_t *tid, int *added) {
    *tid = -1;
    if (!n) return 0;
    if (eclose(t->f, &t->v, &n, &t->cap)) return UL_ENOMEM;
    t->work += (int64_t)n;
    size_t m = 0; /* dedupe (sorted) */
    for (size_t i = 0; i < n; i++)
        if (!m || t->v[m - 1] != t->v[i]) t->v[m++] = t->v[i];
    return dfa_intern(t->d, t->v, m, t->end, tid, added);
}

/* Target of DFA state x on calls of rule. */
static int call_target(subset_t *t, int32_t x, int32_t rule, int32_t *tid, int *added) {
    size_t n = 0;
    nfa_t *f = t->f;
    for (int32_t i = t->d->set_off[x]; i < t->d->set_off[x + 1]; i++) {
        int32_t s = t->d->set[i];
        t->work += f->off[s + 1] - f->off[s];
        for (int32_t k = f->off[s]; k < f->off[s + 1]; k++)
            if (f->e[k].rule == rule && push_v(t, n++, f->e[k].to)) return UL_ENOMEM;
    }
    return close_and_intern(t, n, tid, added);
}

/* Buckets x's byte edges by class (t->boff/t->bv): one pass over the members' edges, where
 * asking each class in turn scanned them all n_cls times. */
static int bucket_classes(subset_t *t, int32_t x) {
    const nfa_t *f = t->f;
    int32_t *off = t->boff;
    memset(off, 0, ((size_t)t->n_cls + 2) * sizeof *off);
    for (int pass = 0; pass < 2; pass++) {
        for (int32_t i = t->d->set_off[x]; i < t->d->set_off[x + 1]; i++) {
            int32_t s = t->d->set[i];
            if (!pass) t->work += f->off[s + 1] - f->off[s];
            for (int32_t k = f->off[s]; k < f->off[s + 1]; k++) {
                const nedge_t *e = &f->e[k];
                if (e->eps || e->rule >= 0) continue;
                for (int c = t->cls[e->lo]; c <= t->cls[e->hi]; c++)
                    pass ? (void)(t->bv[off[c + 1]++] = e->to) : (void)off[c + 2]++;
            }
        }
        if (pass) break;
        /* off[c + 2] counted class c; prefix sums make off[c + 1] its start, then its end */
        for (int c = 0; c < t->n_cls; c++) off[c + 2] += off[c + 1];
        size_t total = (size_t)off[t->n_cls + 1];
        t->work += (int64_t)total;
        if (total > t->c_bv) {
            int32_t *nb = realloc(t->bv, total * sizeof *nb);
            if (!nb) return UL_ENOMEM;
            t->bv = nb;
            t->c_bv = total;
        }
    }
    return 0;
}

static int determinize(subset_t *t, int32_t start, int32_t *n_out) {
    size_t n = 1;
    if (!t->cap) {
        t->v = malloc(16 * sizeof *t->v);
        if (!t->v) return UL_ENOMEM;
        t->cap = 16;
    }
    t->v[0] = start;
    int32_t id;
    int added;
    if (eclose(t->f, &t->v, &n, &t->cap) || dfa_intern(t->d, t->v, n, t->end, &id, &added))
        return UL_ENOMEM;
    if (!t->boff && !(t->boff = malloc(((size_t)t->n_cls + 2) * sizeof *t->boff))) return UL_ENOMEM;
    for (size_t x = 0; x < t->d->n; x++) {
        if (t->d->n > MAX_DFA || t->work > t->max_work) return UL_E2BIG;
        if ((x + 1) * (size_t)t->n_cls > t->out->c_trans) {
            size_t nc = (x + 1) * (size_t)t->n_cls * 2;
            int32_t *nt = realloc(t->out->trans, nc * sizeof *nt);
            if (!nt) return UL_ENOMEM;
            t->out->trans = nt;
            t->out->c_trans = nc;
        }
        if (bucket_classes(t, (int32_t)x)) return UL_ENOMEM;
        const int32_t *off = t->boff;
        for (int c = 0; c < t->n_cls; c++) {
            int32_t *row = t->out->trans + x * (size_t)t->n_cls, a = off[c], n = off[c + 1] - a;
            /* a class whose targets equal the previous class's goes where it went */
            if (c && n && n == off[c] - off[c - 1] &&
                !memcmp(t->bv + a, t->bv + off[c - 1], (size_t)n * sizeof *t->bv)) {
                row[c] = row[c - 1];
                continue;
            }
            for (int32_t i = 0; i < n; i++)
                if (push_v(t, (size_t)i, t->bv[a + i])) return UL_ENOMEM;
            if (close_and_intern(t, (size_t)n, &row[c], &added)) return UL_ENOMEM;
        }
        /* calls, one target per callee (this state's calls start at `first`) */
        size_t first = t->out->n_calls;
        for (int32_t i = t->d->set_off[x]; i < t->d->set_off[x + 1]; i++) {
            int32_t s = t->d->set[i];
            for (int32_t k = t->f->off[s]; k < t->f->off[s + 1]; k++) {
                int32_t rule = t->f->e[k].rule;
                if (rule < 0) continue;
                int dup = 0;
                for (size_t j = first; j < t->out->n_calls && !dup; j += 3)
                    dup = t->out->calls[j + 1] == rule;
                if (dup) continue;
                int32_t to;
                if (call_target(t, (int32_t)x, rule, &to, &added) ||
                    push_call(t->out, (int32_t)x, rule, to))
                    return UL_ENOMEM;
            }
        }
    }
    *n_out = (int32_t)t->d->n;
    return 0;
}

/* ---- assembling ------------------------------------------------------------------------- */

static int cmp_edge(const void *a, const void *b) {
    const nedge_t *x = a, *y = b;
    return (x->from > y->from) - (x->from < y->from);
}

/* Byte classes: bytes no edge tells apart share a class. */
static int byte_classes(const nb_t *b, uint8_t *cls, uint8_t *rep) {
    uint8_t cut[257] = {0}; /* cut[i]: a class starts at byte i */
    cut[0] = 1;
    for (size_t i = 0; i < b->n_e; i++) {
        if (b->e[i].eps || b->e[i].rule >= 0) continue;
        cut[b->e[i].lo] = 1;
        cut[b->e[i].hi + 1] = 1;
    }
    int n = -1;
    for (int c = 0; c < 256; c++) {
        if (cut[c]) rep[++n] = (uint8_t)c;
        cls[c] = (uint8_t)n;
    }
    return n + 1;
}

typedef struct {
    int32_t n; /* DFA states */
    rule_dfa_t dfa;
    uint8_t *final; /* [n] */
} rule_out_t;

static int assemble(ul_grammar_t *g, rule_out_t *ro, int32_t n_rules, const uint8_t *inl) {
    int32_t *base = malloc((size_t)n_rules * sizeof *base);
    if (!base) return UL_ENOMEM;
    int32_t total = 0, n_calls = 0;
    for (int32_t r = 0; r < n_rules; r++) {
        base[r] = total;
        if (!inl[r]) total += ro[r].n, n_calls += (int32_t)(ro[r].dfa.n_calls / 3);
    }
    g->n_states = total;
    g->trans = malloc((size_t)total * (size_t)g->n_cls * sizeof *g->trans);
    g->flags = calloc((size_t)total, 1);
    g->call_off = calloc((size_t)total + 1, sizeof *g->call_off);
    g->call_to = malloc(((size_t)n_calls + 1) * sizeof *g->call_to);
    g->call_ret = malloc(((size_t)n_calls + 1) * sizeof *g->call_ret);
    g->pos = calloc((size_t)total, sizeof *g->pos);
    if (!g->trans || !g->flags || !g->call_off || !g->call_to || !g->call_ret || !g->pos) {
        free(base);
        return UL_ENOMEM;
    }
    /* calls grouped by state: count, then fill (states are ordered rule by rule) */
    for (int32_t r = 0; r < n_rules; r++)
        for (size_t j = 0; !inl[r] && j < ro[r].dfa.n_calls; j += 3)
            g->call_off[base[r] + ro[r].dfa.calls[j] + 1]++;
    for (int32_t s = 0; s < total; s++) g->call_off[s + 1] += g->call_off[s];
    int32_t *fill = malloc(((size_t)total + 1) * sizeof *fill);
    if (!fill) {
        free(base);
        return UL_ENOMEM;
    }
    memcpy(fill, g->call_off, ((size_t)total + 1) * sizeof *fill);
    for (int32_t r = 0; r < n_rules; r++) {
        if (inl[r]) continue;
        const rule_dfa_t *d = &ro[r].dfa;
        for (size_t j = 0; j < d->n_calls; j += 3) {
            int32_t s = base[r] + d->calls[j];
            g->call_to[fill[s]] = base[d->calls[j + 1]];
            g->call_ret[fill[s]++] = base[r] + d->calls[j + 2];
        }
        for (int32_t x = 0; x < ro[r].n; x++) {
            int32_t s = base[r] + x, any = 0;
            for (int c = 0; c < g->n_cls; c++) {
                int32_t t = d->trans[(size_t)x * (size_t)g->n_cls + c];
                g->trans[(size_t)s * (size_t)g->n_cls + c] = t < 0 ? -1 : base[r] + t;
                any |= t >= 0;
            }
            g->flags[s] = (uint8_t)((any ? S_BYTES : 0) | (ro[r].final[x] ? S_FINAL : 0));
        }
    }
    free(fill);
    free(base);
    return 0;
}

/* Nullable rules and left recursion: a rule that can reach a call of itself before any
 * byte would make the parser loop. */
static int check_left_recursion(ul_grammar_t *g, int32_t *starts, int32_t n_rules, const ast_t *ast,
                                const uint8_t *inl, char *err, size_t err_len) {
    int rc = 0;
    uint8_t *nullable = calloc((size_t)n_rules, 1);
    int32_t *stack = malloc(((size_t)g->n_states + 1) * sizeof *stack);
    uint8_t *seen = malloc((size_t)g->n_states + 1);
    int32_t *rule_at = malloc(((size_t)g->n_states + 1) * sizeof *rule_at);
    if (!nullable || !stack || !seen || !rule_at) {
        rc = UL_ENOMEM;
        goto out;
    }
    for (int32_t s = 0; s < g->n_states; s++) rule_at[s] = -1;
    for (int32_t r = 0; r < n_rules; r++)
        if (!inl[r]) rule_at[starts[r]] = r;
    for (int changed = 1; changed && !rc;) {
        changed = 0;
        for (int32_t r = 0; r < n_rules; r++) {
            if (inl[r] || nullable[r]) continue;
            memset(seen, 0, (size_t)g->n_states);
            int32_t sp = 0;
            stack[sp++] = starts[r];
            seen[starts[r]] = 1;
            while (sp && !nullable[r]) {
                int32_t s = stack[--sp];
                if (g->flags[s] & S_FINAL) nullable[r] = 1;
                for (int32_t k = g->call_off[s]; k < g->call_off[s + 1]; k++) {
                    int32_t q = rule_at[g->call_to[k]];
                    if (q >= 0 && nullable[q] && !seen[g->call_ret[k]])
                        seen[g->call_ret[k]] = 1, stack[sp++] = g->call_ret[k];
                }
            }
            changed |= nullable[r];
        }
    }
    /* left calls: for each rule, the rules callable before a byte; a path back is a cycle */
    for (int32_t r = 0; r < n_rules && !rc; r++) {
        if (inl[r]) continue;
        memset(seen, 0, (size_t)g->n_states);
        int32_t sp = 0;
        stack[sp++] = starts[r];
        seen[starts[r]] = 1;
        while (sp && !rc) {
            int32_t s = stack[--sp];
            for (int32_t k = g->call_off[s]; k < g->call_off[s + 1]; k++) {
                int32_t q = rule_at[g->call_to[k]];
                if (q == r) {
                    snprintf(err, err_len, "rule '%.60s' is left-recursive", ast->rules[r].name);
                    rc = UL_EINVAL;
                    break;
                }
                /* into the callee's start, and past it when it can be empty */
                if (!seen[g->call_to[k]]) seen[g->call_to[k]] = 1, stack[sp++] = g->call_to[k];
                if (q >= 0 && nullable[q] && !seen[g->call_ret[k]])
                    seen[g->call_ret[k]] = 1, stack[sp++] = g->call_ret[k];
            }
        }
    }
out:
    free(rule_at);
    free(nullable);
    free(stack);
    free(seen);
    return rc;
}

/* Drops the states from which no sentence can be finished (an empty class, a counted
 * remainder that can never reach zero): a state is productive when it is final, or a byte
 * or a call (of a rule that can finish) leads to a productive state. Without this the
 * matcher could accept a token into a dead end, and the mask would then allow nothing. */
/* Marks the productive states: backwards from the final ones over the reversed byte and
 * call edges (a work list: linear in the edges, where repeated passes over every state were
 * quadratic on a long counted repetition). A call's source is productive when both its
 * callee and its return state are: it is queued from either and checked. */
static int productive(const ul_grammar_t *g, uint8_t *ok) {
    int32_t n = g->n_states;
    int32_t *off = calloc((size_t)n + 1, sizeof *off), *queue = malloc((size_t)n * sizeof *queue);
    int32_t *pos = malloc((size_t)n * sizeof *pos), *src = NULL;
    int rc = !off || !queue || !pos ? UL_ENOMEM : 0;
    for (int pass = 0; pass < 2 && !rc; pass++) { /* count, then fill (CSR by target) */
        for (int32_t s = 0; s < n; s++) {
            const int32_t *row = g->trans + (size_t)s * (size_t)g->n_cls;
            for (int c = 0; c < g->n_cls; c++)
                if (row[c] >= 0) pass ? (void)(src[pos[row[c]]++] = s) : (void)off[row[c] + 1]++;
            for (int32_t k = g->call_off[s]; k < g->call_off[s + 1]; k++) {
                if (g->call_to[k] < 0) continue;
                if (pass) { /* ~s: a call edge, checked when reached */
                    src[pos[g->call_to[k]]++] = ~s;
                    src[pos[g->call_ret[k]]++] = ~s;
                } else {
                    off[g->call_to[k] + 1]++;
                    off[g->call_ret[k] + 1]++;
                }
            }
        }
        if (pass) break;
        for (int32_t s = 0; s < n; s++) off[s + 1] += off[s];
        memcpy(pos, off, (size_t)n * sizeof *pos);
        if (!(src = malloc(((size_t)off[n] + 1) * sizeof *src))) rc = UL_ENOMEM;
    }
    int32_t head = 0, tail = 0;
    for (int32_t s = 0; s < n && !rc; s++)
        if ((ok[s] = (g->flags[s] & S_FINAL) != 0)) queue[tail++] = s;
    while (head < tail && !rc) {
        int32_t t = queue[head++];
        for (int32_t i = off[t]; i < off[t + 1]; i++) {
            int32_t s = src[i], call = s < 0;
            if (call) s = ~s;
            if (ok[s]) continue;
            if (call) {
                int any = 0;
                for (int32_t k = g->call_off[s]; k < g->call_off[s + 1] && !any; k++)
                    any = g->call_to[k] >= 0 && ok[g->call_to[k]] && ok[g->call_ret[k]];
                if (!any) continue;
            }
            ok[s] = 1;
            queue[tail++] = s;
        }
    }
    free(off);
    free(pos);
    free(src);
    free(queue);
    return rc;
}

static int prune(ul_grammar_t *g, char *err, size_t err_len) {
    uint8_t *ok = calloc((size_t)g->n_states + 1, 1);
    if (!ok) return UL_ENOMEM;
    if (productive(g, ok)) {
        free(ok);
        return UL_ENOMEM;
    }
    int rc = 0;
    if (!ok[g->root]) {
        snprintf(err, err_len, "the grammar has no complete sentence");
        rc = UL_EINVAL;
    }
    for (int32_t s = 0; s < g->n_states && !rc; s++) {
        int32_t *row = g->trans + (size_t)s * (size_t)g->n_cls;
        int any = 0;
        for (int c = 0; c < g->n_cls; c++) {
            if (row[c] >= 0 && !ok[row[c]]) row[c] = -1;
            any |= row[c] >= 0;
        }
        if (!any) g->flags[s] &= (uint8_t)~S_BYTES;
        for (int32_t k = g->call_off[s]; k < g->call_off[s + 1]; k++)
            if (!ok[g->call_to[k]] || !ok[g->call_ret[k]]) /* a call that cannot finish */
                g->call_to[k] = g->call_ret[k] = -1;
    }
    free(ok);
    return rc;
}

static void free_grammar(ul_grammar_t *g) {
    if (!g) return;
    for (int32_t s = 0; g->pos && s < g->n_states; s++) ul_posinfo_free(atomic_load(&g->pos[s]));
    free(g->pos);
    ul_geqv_free(atomic_load(&g->eqv));
    UL_FREE_ALL(g->trans, g->flags, g->call_off, g->call_to, g->call_ret, g);
}

static int compile_ast(const ast_t *ast, ul_grammar_t *g, char *err, size_t err_len) {
    int32_t n_rules = (int32_t)ast->n_rules, root = 0;
    while (strcmp(ast->rules[root].name, "root")) root++;
    nb_t b = {.ast = ast, .err = err, .err_len = err_len};
    b.start = malloc((size_t)n_rules * sizeof *b.start);
    b.end = malloc((size_t)n_rules * sizeof *b.end);
    b.inl = calloc((size_t)n_rules, 1);
    b.size = calloc((size_t)n_rules, sizeof *b.size);
    rule_out_t *ro = calloc((size_t)n_rules, sizeof *ro);
    int32_t *starts = malloc((size_t)n_rules * sizeof *starts);
    nfa_t f = {0};
    dfa_build_t d = {0};
    subset_t t = {0};
    uint8_t rep[256];
    int rc = !b.start || !b.end || !b.inl || !b.size || !ro || !starts ? UL_ENOMEM : 0;
    if (!rc) rc = plan_inlining(&b, root);
    for (int32_t r = 0; r < n_rules && !rc; r++) {
        b.start[r] = b.end[r] = -1;
        if (b.inl[r]) continue;
        if (!(rc = new_state(&b, &b.start[r])))
            rc = build(&b, ast->rules[r].body, b.start[r], &b.end[r]);
    }
    if (!rc) {
        g->n_cls = byte_classes(&b, g->cls, rep);
        qsort(b.e, b.n_e, sizeof *b.e, cmp_edge);
        f.e = b.e;
        f.off = calloc((size_t)b.n_states + 1, sizeof *f.off);
        f.mark = calloc((size_t)b.n_states, sizeof *f.mark);
        if (!f.off || !f.mark) rc = UL_ENOMEM;
        for (size_t i = 0; !rc && i < b.n_e; i++) f.off[b.e[i].from + 1]++;
        for (int32_t s = 0; !rc && s < b.n_states; s++) f.off[s + 1] += f.off[s];
    }
    t = (subset_t){.f = &f,
                   .d = &d,
                   .n_cls = g->n_cls,
                   .rep = rep,
                   .cls = g->cls,
                   .max_work = SUBSET_WORK_BASE + SUBSET_WORK_PER_EDGE * (int64_t)b.n_e};
    int32_t total = 0;
    for (int32_t r = 0; r < n_rules && !rc; r++) {
        if (b.inl[r]) continue;
        d.n = d.n_set = 0;
        if (d.hash) memset(d.hash, 0, d.hcap * sizeof *d.hash);
        t.out = &ro[r].dfa;
        t.end = b.end[r];
        rc = determinize(&t, b.start[r], &ro[r].n);
        if (rc == UL_E2BIG || (!rc && (total += ro[r].n) > MAX_DFA)) {
            snprintf(err, err_len,
                     "the grammar is too large or too ambiguous to compile (rule '%.60s' "
                     "needs over %d states or %lld steps)",
                     ast->rules[r].name, MAX_DFA, (long long)t.max_work);
            rc = UL_EINVAL;
        }
        if (!rc && !(ro[r].final = malloc((size_t)ro[r].n))) rc = UL_ENOMEM;
        for (int32_t x = 0; !rc && x < ro[r].n; x++) ro[r].final[x] = (uint8_t)d.final[x];
    }
    if (!rc) {
        g->n_rules = n_rules;
        rc = assemble(g, ro, n_rules, b.inl);
    }
    if (!rc) {
        int32_t s = 0;
        for (int32_t r = 0; r < n_rules; r++) {
            starts[r] = s;
            if (!b.inl[r]) s += ro[r].n;
        }
        g->root = starts[root];
        rc = check_left_recursion(g, starts, n_rules, ast, b.inl, err, err_len);
    }
    if (!rc) rc = prune(g, err, err_len);
    if (b.nomem) rc = UL_ENOMEM;
    for (int32_t r = 0; ro && r < n_rules; r++) {
        free(ro[r].dfa.trans);
        free(ro[r].dfa.calls);
        free(ro[r].final);
    }
    free(ro);
    free(starts);
    free(b.start);
    free(b.end);
    free(b.inl);
    free(b.size);
    free(b.e);
    free(f.off);
    free(f.mark);
    free(d.set);
    free(d.set_off);
    free(d.final);
    free(d.hash);
    free(t.v);
    free(t.boff);
    free(t.bv);
    return rc;
}

int ul_grammar_compile(const ul_gvocab_t *v, const char *src, size_t len, ul_grammar_t **out,
                       char *err, size_t err_len) {
    ast_t ast;
    *out = NULL;
    if (err_len) err[0] = 0;
    int rc = ul_gbnf_parse(src, len, &ast, err, err_len);
    ul_grammar_t *g = rc ? NULL : calloc(1, sizeof *g);
    if (!rc && !g) rc = UL_ENOMEM;
    if (!rc) rc = compile_ast(&ast, g, err, err_len);
    ul_gbnf_free(&ast);
    if (rc) {
        free_grammar(g);
        return rc;
    }
    g->v = v;
    atomic_init(&g->refs, 1);
    *out = g;
    return 0;
}

void ul_grammar_ref(ul_grammar_t *g) { atomic_fetch_add(&g->refs, 1); }

void ul_grammar_unref(ul_grammar_t *g) {
    if (g && atomic_fetch_sub(&g->refs, 1) == 1) free_grammar(g);
}

int32_t ul_grammar_n_states(const ul_grammar_t *g) { return g->n_states; }
