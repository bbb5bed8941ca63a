/* States whose token sets agree up to a depth (grammar_impl.h, geqv_t), so the cold mask
 * can derive one state's sets from another's instead of walking the whole vocabulary trie
 * again. A counted repetition ("k more of [a-z] allowed", k = 1..60) compiles to states
 * that differ only past k bytes: a token of at most k bytes gets the same answer from all
 * of them. Moore's partition refinement finds such states for any grammar: level 0 groups
 * states by finality and calls (of the same rules; a rule that can match the empty string
 * must also return to the same state), level i + 1 splits a group whose members step on
 * some byte class, or return from a call of a rule that cannot be empty, into different
 * level-i groups (such a return is met only after a byte, so one level less). Two states
 * in one level-d group take every byte string of at most d bytes the same way, into
 * states of the same finality and calls, so their trie walks agree on every token and
 * exit of at most d bytes (grammar_mask.c derives the rest with a walk of the deeper
 * subtrees only). Computed on the first cold mask, off the loop thread. */
#include <stdlib.h>
#include <string.h>

#include "base/free_all.h"
#include "engine/grammar_impl.h"
#include "uvllm/err.h"

#define EQV_MAX_DEPTH 254 /* trie depths are capped at 255 */

typedef struct {
    const ul_grammar_t *g;
    int32_t *cls, *nxt; /* [n_states] class at this level / the next: its least member */
    int32_t *act;       /* states in classes of two or more members */
    int32_t n_act;
    int32_t *cnt, *best; /* [n_states] by class */
    uint8_t *empty;      /* [n_states]: can reach its rule's end without a byte */
    /* each state's row as runs of byte classes with one target (-1: none): run_at[k] is
     * the first class of run k, run_to[k] its target; a state's runs are run_off[s] ..
     * run_off[s + 1]. Rows compare as runs (a row split where another is not is told
     * apart: fewer states agree, none wrongly), a few per state instead of n_cls. */
    int32_t *run_off, *run_to;
    uint8_t *run_at;
    int32_t *hash; /* open addressing: a member + 1 */
    size_t hcap;
    int level0;
} refine_t;

static uint64_t mix(uint64_t h, uint32_t x) { return (h ^ x) * 1099511628211ull; }

/* A call's return state, compared exactly (callee may be empty) or by class (-1); -2 for a
 * call pruned at compile time (call_to and call_ret -1: never taken). */
static int32_t exact_ret(const refine_t *r, int32_t k) {
    int32_t to = r->g->call_to[k];
    if (to < 0) return -2;
    return r->empty[to] ? r->g->call_ret[k] : -1;
}

static uint64_t sig_hash(const refine_t *r, int32_t s) {
    const ul_grammar_t *g = r->g;
    uint64_t h = 1469598103934665603ull;
    if (r->level0) {
        h = mix(h, g->flags[s] & S_FINAL);
        for (int32_t k = g->call_off[s]; k < g->call_off[s + 1]; k++)
            h = mix(mix(h, (uint32_t)g->call_to[k]), (uint32_t)exact_ret(r, k));
        return h;
    }
    h = mix(h, (uint32_t)r->cls[s]);
    for (int32_t k = r->run_off[s]; k < r->run_off[s + 1]; k++)
        h = mix(mix(h, r->run_at[k]),
                r->run_to[k] < 0 ? UINT32_MAX : (uint32_t)r->cls[r->run_to[k]]);
    for (int32_t k = g->call_off[s]; k < g->call_off[s + 1]; k++)
        if (exact_ret(r, k) == -1) h = mix(h, (uint32_t)r->cls[g->call_ret[k]]);
    return h;
}

static int sig_eq(const refine_t *r, int32_t a, int32_t b) {
    const ul_grammar_t *g = r->g;
    int32_t na = g->call_off[a + 1] - g->call_off[a], ka = g->call_off[a], kb = g->call_off[b];
    if (r->level0) {
        if ((g->flags[a] & S_FINAL) != (g->flags[b] & S_FINAL) ||
            na != g->call_off[b + 1] - g->call_off[b])
            return 0;
        for (int32_t k = 0; k < na; k++)
            if (g->call_to[ka + k] != g->call_to[kb + k] ||
                exact_ret(r, ka + k) != exact_ret(r, kb + k))
                return 0;
        return 1;
    }
    int32_t n = r->run_off[a + 1] - r->run_off[a], ra = r->run_off[a], rb = r->run_off[b];
    if (r->cls[a] != r->cls[b] || n != r->run_off[b + 1] - rb) return 0;
    for (int32_t k = 0; k < n; k++) {
        int32_t x = r->run_to[ra + k], y = r->run_to[rb + k];
        if (r->run_at[ra + k] != r->run_at[rb + k] ||
            (x < 0 ? -1 : r->cls[x]) != (y < 0 ? -1 : r->cls[y]))
            return 0;
    }
    for (int32_t k = 0; k < na; k++) /* same level-0 class: the same calls in the same order */
        if (exact_ret(r, ka + k) == -1 &&
            r->cls[g->call_ret[ka + k]] != r->cls[g->call_ret[kb + k]])
            return 0;
    return 1;
}

/* The rows as runs (refine_t.run_*). */
static int find_runs(refine_t *r) {
    const ul_grammar_t *g = r->g;
    size_t n = 0, cap = (size_t)g->n_states * 4 + 16;
    r->run_off = malloc(((size_t)g->n_states + 1) * sizeof *r->run_off);
    r->run_to = malloc(cap * sizeof *r->run_to);
    r->run_at = malloc(cap);
    if (!r->run_off || !r->run_to || !r->run_at) return UL_ENOMEM;
    for (int32_t s = 0; s < g->n_states; s++) {
        const int32_t *row = g->trans + (size_t)s * (size_t)g->n_cls;
        r->run_off[s] = (int32_t)n;
        for (int c = 0; c < g->n_cls; c++) {
            if (c && row[c] == row[c - 1]) continue;
            if (n == cap) {
                cap *= 2;
                int32_t *nt = realloc(r->run_to, cap * sizeof *nt);
                if (nt) r->run_to = nt;
                uint8_t *na = nt ? realloc(r->run_at, cap) : NULL;
                if (!na) return UL_ENOMEM;
                r->run_at = na;
            }
            r->run_at[n] = (uint8_t)c;
            r->run_to[n++] = row[c];
        }
    }
    r->run_off[g->n_states] = (int32_t)n;
    return 0;
}

/* empty[s]: s can reach its rule's end through calls of rules that can be empty. */
static void find_empty(refine_t *r) {
    const ul_grammar_t *g = r->g;
    for (int32_t s = 0; s < g->n_states; s++) r->empty[s] = (g->flags[s] & S_FINAL) != 0;
    for (int changed = 1; changed;) {
        changed = 0;
        for (int32_t s = 0; s < g->n_states; s++)
            for (int32_t k = g->call_off[s]; k < g->call_off[s + 1] && !r->empty[s]; k++)
                if (g->call_to[k] >= 0 && r->empty[g->call_to[k]] && r->empty[g->call_ret[k]])
                    r->empty[s] = 1, changed = 1;
    }
}

/* One level: nxt = the classes of the active states split by their signatures; the active
 * list keeps those still in a class of two or more. Returns the number of those classes,
 * or -1 on ENOMEM. */
static int32_t refine_level(refine_t *r) {
    size_t need = 16;
    while (need < (size_t)r->n_act * 2) need *= 2;
    if (need > r->hcap) {
        free(r->hash);
        if (!(r->hash = malloc(need * sizeof *r->hash))) return -1;
        r->hcap = need;
    }
    memset(r->hash, 0, r->hcap * sizeof *r->hash);
    for (int32_t i = 0; i < r->n_act; i++) { /* increasing ids: a class's id is its least */
        int32_t s = r->act[i];
        for (size_t h = sig_hash(r, s);; h++) {
            int32_t x = r->hash[h & (r->hcap - 1)];
            if (!x) {
                r->hash[h & (r->hcap - 1)] = s + 1;
                r->nxt[s] = s;
                break;
            }
            if (sig_eq(r, x - 1, s)) {
                r->nxt[s] = x - 1;
                break;
            }
        }
    }
    for (int32_t i = 0; i < r->n_act; i++) r->cnt[r->nxt[r->act[i]]] = 0;
    for (int32_t i = 0; i < r->n_act; i++) r->cnt[r->nxt[r->act[i]]]++;
    int32_t n = 0, n_cls = 0;
    for (int32_t i = 0; i < r->n_act; i++) {
        int32_t s = r->act[i];
        r->cls[s] = r->nxt[s];
        if (r->cnt[r->cls[s]] < 2) continue;
        n_cls += r->cls[s] == s;
        r->act[n++] = s;
    }
    r->n_act = n;
    r->level0 = 0;
    return n_cls;
}

/* Prefer the deepest agreement, then the least id: the representative a chain ends on. */
static int better(const uint8_t *dd, int32_t a, int32_t b) {
    return dd[a] != dd[b] ? dd[a] > dd[b] : a < b;
}

/* Runs the levels up to max_d. Without rep: sets dd (the last level at which each state
 * shared its class; max_d once the partition stops changing). With rep (dd known): each
 * state's representative is the best member of its class at level dd. */
static int refine(refine_t *r, int32_t max_d, uint8_t *dd, int32_t *rep) {
    int32_t n = r->g->n_states, prev = -1, prev_act = -1;
    r->n_act = n;
    r->level0 = 1;
    for (int32_t s = 0; s < n; s++) r->act[s] = s;
    for (int32_t lv = 0; r->n_act; lv++) {
        int32_t k = refine_level(r);
        if (k < 0) return UL_ENOMEM;
        /* the same states in as many classes: unchanged, and so is every deeper level */
        int last = (k == prev && r->n_act == prev_act) || lv >= max_d;
        uint8_t d = (uint8_t)(last ? max_d : lv);
        prev = k;
        prev_act = r->n_act;
        if (!rep) {
            for (int32_t i = 0; i < r->n_act; i++) dd[r->act[i]] = d;
        } else {
            for (int32_t i = 0; i < r->n_act; i++) r->best[r->cls[r->act[i]]] = -1;
            for (int32_t i = 0; i < r->n_act; i++) {
                int32_t s = r->act[i], *b = &r->best[r->cls[s]];
                if (*b < 0 || better(dd, s, *b)) *b = s;
            }
            for (int32_t i = 0; i < r->n_act; i++) {
                int32_t s = r->act[i], b = r->best[r->cls[s]];
                if (dd[s] == d && b != s) rep[s] = b;
            }
        }
        if (last) break;
    }
    return 0;
}

void ul_geqv_free(geqv_t *e) {
    if (!e) return;
    UL_FREE_ALL(e->rep, e->dd, e);
}

static geqv_t *compute_eqv(const ul_grammar_t *g) {
    size_t n = (size_t)g->n_states + 1;
    geqv_t *e = calloc(1, sizeof *e);
    refine_t r = {.g = g};
    int32_t max_d = g->v->max_len < EQV_MAX_DEPTH ? (int32_t)g->v->max_len : EQV_MAX_DEPTH;
    int rc = UL_ENOMEM;
    if (e && (e->rep = malloc(n * sizeof *e->rep)) && (e->dd = calloc(n, 1)) &&
        (r.cls = malloc(n * sizeof *r.cls)) && (r.nxt = malloc(n * sizeof *r.nxt)) &&
        (r.act = malloc(n * sizeof *r.act)) && (r.cnt = malloc(n * sizeof *r.cnt)) &&
        (r.best = malloc(n * sizeof *r.best)) && (r.empty = malloc(n))) {
        for (size_t s = 0; s < n; s++) e->rep[s] = -1;
        find_empty(&r);
        rc = find_runs(&r);
        if (!rc) rc = refine(&r, max_d, e->dd, NULL);
        if (!rc) rc = refine(&r, max_d, e->dd, e->rep);
    }
    free(r.cls);
    free(r.nxt);
    free(r.act);
    free(r.cnt);
    free(r.best);
    free(r.empty);
    free(r.run_off);
    free(r.run_to);
    free(r.run_at);
    free(r.hash);
    if (rc) {
        ul_geqv_free(e);
        return NULL;
    }
    return e;
}

const geqv_t *ul_grammar_eqv(ul_grammar_t *g) {
    geqv_t *e = atomic_load_explicit(&g->eqv, memory_order_acquire);
    if (e) return e;
    geqv_t *mine = compute_eqv(g);
    if (!mine) return NULL;
    geqv_t *expect = NULL;
    if (atomic_compare_exchange_strong_explicit(&g->eqv, &expect, mine, memory_order_acq_rel,
                                                memory_order_acquire))
        return mine;
    ul_geqv_free(mine); /* another thread was first */
    return expect;
}
