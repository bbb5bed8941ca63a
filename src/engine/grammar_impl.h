/* Internals of the grammar engine shared by its files: the GBNF syntax tree (gbnf.c), the
 * compiled automaton (grammar_compile.c), the vocabulary trie (grammar_vocab.c), the
 * parse-state sets (grammar_match.c) and the per-state token caches (grammar_mask.c). */
#ifndef UL_ENGINE_GRAMMAR_IMPL_H
#define UL_ENGINE_GRAMMAR_IMPL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/grammar.h"

/* ---- syntax tree (gbnf.c) ------------------------------------------------------------- */

enum { A_SEQ, A_ALT, A_REP, A_REF, A_CLASS };

typedef struct {
    uint8_t kind;
    int32_t first, next; /* children (SEQ, ALT, REP: first only), sibling; -1 ends */
    int32_t min, max;    /* REP: max -1 = unbounded */
    int32_t ref;         /* REF: rule index */
    int32_t r0, nr;      /* CLASS: code point ranges [r0, r0 + nr) in ast_t.ranges */
} anode_t;

typedef struct {
    uint32_t lo, hi;
} cprange_t;

typedef struct {
    char *name;
    int32_t body;    /* node; -1 until defined */
    int32_t line;    /* where first referenced or defined, for messages */
    int32_t defined; /* 1 once its definition was read */
} arule_t;

typedef struct {
    anode_t *nodes;
    size_t n_nodes, c_nodes;
    cprange_t *ranges;
    size_t n_ranges, c_ranges;
    arule_t *rules;
    size_t n_rules, c_rules;
} ast_t;

/* Parses GBNF; 0, UL_EINVAL (err set) or UL_ENOMEM. */
int ul_gbnf_parse(const char *src, size_t len, ast_t *ast, char *err, size_t err_len);
void ul_gbnf_free(ast_t *ast);

/* ---- the vocabulary trie (grammar_vocab.c) -------------------------------------------- */

typedef struct {
    int32_t child; /* first child (children are contiguous), 0 when none */
    int32_t n_child;
    int32_t tok;   /* a token whose bytes end here, or -1 (more in gvocab.dup) */
    uint8_t byte;  /* the byte leading here */
    uint8_t depth; /* bytes from the root (capped at 255) */
} tnode_t;

struct ul_gvocab_s {
    int32_t n;
    uint32_t *off; /* [n + 1]: token i's bytes are blob[off[i] .. off[i + 1]) */
    uint8_t *eog;  /* [n] */
    char *blob;
    tnode_t *nodes; /* [n_nodes]; node 0 is the root */
    int32_t n_nodes;
    uint8_t *height; /* [n_nodes]: the depth of the deepest node below (or at) each node */
    int32_t *dup;    /* [n]: the next token with the same bytes, or -1 */
    int32_t *eog_ids;
    int32_t n_eog;
    uint32_t max_len;      /* longest token */
    int32_t *by_len;       /* [n]: the ids by length; */
    uint32_t len_off[257]; /* by_len[len_off[k] .. len_off[k + 1]) have k bytes */
};

/* ---- the compiled grammar (grammar_compile.c) ----------------------------------------- */

enum { S_FINAL = 1, S_BYTES = 2 };

/* What a state's tokens are, cached (grammar_mask.c). */
typedef struct posinfo_s {
    uint32_t *bits; /* accepted without leaving the rule: a bitmap, or NULL (see ids) */
    int32_t *ids;   /* ... or these n_ids ids */
    int32_t n_ids;
    int32_t *exits; /* trie nodes (depth >= 1) where the rule can end with bytes to follow */
    int32_t n_exits;
    /* the children of the exits by their byte: xkid[xoff[b] .. xoff[b + 1]) lead on with b,
     * so a step walks only the children whose byte the stack below the rule can take */
    int32_t *xoff; /* [257], NULL without exits */
    int32_t *xkid;
    /* a state derived from another (grammar_eqv.c) shares that one's exits of at most
     * base_d bytes instead of copying them: base's exits are sorted by depth, and so is
     * each of its xkid groups (n_exits counts both parts) */
    const struct posinfo_s *base;
    uint8_t base_d;
} posinfo_t;

struct ul_grammar_s {
    atomic_int refs;
    const ul_gvocab_t *v;
    int32_t n_states, n_cls, n_rules, root;
    uint8_t cls[256];             /* byte -> class */
    int32_t *trans;               /* [n_states][n_cls]: next state or -1 */
    uint8_t *flags;               /* [n_states]: S_FINAL, S_BYTES */
    int32_t *call_off;            /* [n_states + 1] into call_to / call_ret */
    int32_t *call_to;             /* the called rule's start state */
    int32_t *call_ret;            /* the caller's state after the call */
    _Atomic(posinfo_t *) *pos;    /* [n_states], filled lazily */
    _Atomic(struct geqv_s *) eqv; /* the states' near-equivalence (grammar_eqv.c), lazily */
};

/* ---- states that agree up to a depth (grammar_eqv.c) ----------------------------------- */

/* rep[s]: a state whose token sets equal s's for every token (and exit) of at most dd[s]
 * bytes, or -1 when none is known; following rep strictly raises (dd, -id), so chains end. */
typedef struct geqv_s {
    int32_t *rep; /* [n_states] */
    uint8_t *dd;  /* [n_states] */
} geqv_t;

/* The near-equivalence of g's states (computed on first use, any thread). NULL on ENOMEM. */
const geqv_t *ul_grammar_eqv(ul_grammar_t *g);
void ul_geqv_free(geqv_t *e);

/* ---- parse-state sets (grammar_match.c) ------------------------------------------------- */

/* A set of stacks: records [depth, frame 0 (bottom), ..., frame depth-1 (top)] of int32
 * state ids, back to back. accept: some stack could pop to empty (the sentence can end,
 * or, for a walk from a single state, the state's rule can end). */
typedef struct cfgscr_s cfgscr_t; /* closure scratch of the set (grammar_match.c) */
typedef struct {
    int32_t *p;
    uint32_t len, cap;
    uint32_t n;
    uint8_t accept;
    cfgscr_t *x; /* owned; NULL until the set is first the target of a closure */
} cfgset_t;

void ul_cfg_clear(cfgset_t *s);
void ul_cfg_free(cfgset_t *s);
int ul_cfg_copy(cfgset_t *dst, const cfgset_t *src);
/* out = the stacks reachable from fr[0..d) (top fr[d-1]) without consuming a byte: calls
 * entered, finished rules popped (out is cleared first; fr is not changed). 0 or
 * UL_ENOMEM. */
int ul_cfg_closure(const ul_grammar_t *g, cfgset_t *out, int32_t *fr, int d);
/* out = the stacks of in after byte b (cleared first). 0 or UL_ENOMEM. */
int ul_cfg_step(const ul_grammar_t *g, const cfgset_t *in, uint8_t b, cfgset_t *out);

/* Makes room for need entries in the growable array *v of capacity *cap (grown to twice
 * plus min, or to need). 0 or UL_ENOMEM. */
int ul_g_grow_i32(int32_t **v, size_t *cap, size_t need, size_t min);

static inline int32_t ul_g_next(const ul_grammar_t *g, int32_t s, uint8_t b) {
    return g->trans[(size_t)s * (size_t)g->n_cls + g->cls[b]];
}

/* The cached token sets of state s, computed on first use (any thread). NULL on ENOMEM. */
const posinfo_t *ul_grammar_posinfo(ul_grammar_t *g, int32_t s);
void ul_posinfo_free(posinfo_t *p);
/* The children of p's exits that lead on with byte b, as up to two spans kid[i][0 .. n[i])
 * (p's own exits, its base's). */
void ul_posinfo_kids(const ul_gvocab_t *v, const posinfo_t *p, uint8_t b, const int32_t *kid[2],
                     int32_t n[2]);

#endif
