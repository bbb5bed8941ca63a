/* Constrained decoding: a context-free grammar (llama.cpp's GBNF) compiled per request and
 * matched byte by byte against the generated text, with the allowed-token mask of each step
 * computed from a per-vocabulary token trie.
 *
 *   ul_gvocab_t   every token's bytes as a trie (children contiguous) and which ids end
 *                 generation; built once per model, read-only, shared by every thread.
 *   ul_grammar_t  a compiled grammar: each rule a byte-level DFA whose edges are byte
 *                 classes or calls of other rules (a pushdown automaton over rule DFAs).
 *                 Immutable except for its per-position token caches (below), which are
 *                 filled lazily by whichever thread needs them first (published with a
 *                 compare-and-swap), so one grammar may be used by many sequences on many
 *                 threads at once. Reference-counted.
 *   ul_gmatch_t   one sequence's parse state: the set of rule stacks the text so far can be
 *                 in. Owned by one thread at a time.
 *
 * The mask (xgrammar's adaptive token mask cache, in outline): for a stack whose top is DFA
 * state s of rule R, the tokens that are accepted without leaving R (its calls return into
 * it) do not depend on what lies below R on the stack; they are computed once per state by
 * a walk of the token trie and cached in the grammar. The tokens that run past R's end
 * (a JSON string's closing quote followed by ',') are kept as the trie nodes at which R
 * ended, and only their subtrees are walked at each step, from the stack below R. A step's
 * mask is then one bitmap OR per stack plus a short walk; the matcher also keeps the last
 * masks it built, keyed by the parse state (a string's characters repeat one state).
 *
 * Grammar text (GBNF): `name ::= alternatives`, one rule per line (a rule continues on the
 * next line inside parentheses or after '|'), "literal" with \n \r \t \\ \" \xHH \uHHHH
 * \UHHHHHHHH escapes, [character classes] with ranges and ^, '.', (groups), rule names,
 * the postfix operators * + ? {m} {m,} {m,n}, and # comments. Matching is over Unicode code
 * points encoded as UTF-8 (a class or '.' matches whole characters). The start rule is
 * "root". Left recursion is refused at compile time. */
#ifndef UL_ENGINE_GRAMMAR_H
#define UL_ENGINE_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#include "uvllm/backend.h"

#define UL_GRAMMAR_MAX_STACK 128 /* rule nesting of a parse (a JSON document's depth x 2) */

/* ---- the vocabulary index ------------------------------------------------------------ */

typedef struct ul_gvocab_s ul_gvocab_t;

/* piece(ctx, id, out, cap): the bytes of token id (0 for control tokens, which are never
 * allowed by a grammar), or -(needed) when cap is too small. is_eog(ctx, id): 1 when id
 * ends generation (allowed once the grammar is complete). NULL on ENOMEM. */
ul_gvocab_t *ul_gvocab_new(int32_t n_vocab, void *ctx,
                           int (*piece)(void *ctx, int32_t id, char *out, int cap),
                           int (*is_eog)(void *ctx, int32_t id));
void ul_gvocab_free(ul_gvocab_t *v);
int32_t ul_gvocab_size(const ul_gvocab_t *v);
/* Token id's bytes (*n of them) and whether it ends generation. */
const char *ul_gvocab_piece(const ul_gvocab_t *v, int32_t id, uint32_t *n);
int ul_gvocab_is_eog(const ul_gvocab_t *v, int32_t id);

/* ---- grammars ------------------------------------------------------------------------ */

typedef struct ul_grammar_s ul_grammar_t;

/* Compiles GBNF text (len bytes) into *out for vocabulary v (NULL: bytes only, no masks).
 * Returns 0, UL_EINVAL with a message in err ("line 3: undefined rule 'valu'"), or
 * UL_ENOMEM. The result has one reference. */
int ul_grammar_compile(const ul_gvocab_t *v, const char *src, size_t len, ul_grammar_t **out,
                       char *err, size_t err_len);
void ul_grammar_ref(ul_grammar_t *g);
void ul_grammar_unref(ul_grammar_t *g);
/* DFA states of all rules (the positions whose token sets are cached). */
int32_t ul_grammar_n_states(const ul_grammar_t *g);

/* ---- matching ------------------------------------------------------------------------ */

typedef struct ul_gmatch_s ul_gmatch_t;

/* A matcher at the start of the text; g must outlive it (take a reference). NULL on ENOMEM. */
ul_gmatch_t *ul_gmatch_new(const ul_grammar_t *g);
void ul_gmatch_free(ul_gmatch_t *m);
/* Copies src's parse state into dst (same grammar). */
void ul_gmatch_copy(ul_gmatch_t *dst, const ul_gmatch_t *src);
/* Feeds bytes: 0 when the text stays a prefix of a sentence of the grammar (m advanced),
 * -1 when it does not (m is left unchanged). */
int ul_gmatch_feed(ul_gmatch_t *m, const char *p, size_t n);
/* 1 when the text so far is a complete sentence (generation may end). */
int ul_gmatch_done(const ul_gmatch_t *m);
/* 1 when token id may come next (an end-of-generation id: when done). */
int ul_gmatch_allows(ul_gmatch_t *m, int32_t id);
/* Advances over token id (end-of-generation ids change nothing); 0 or -1 as feed. */
int ul_gmatch_accept(ul_gmatch_t *m, int32_t id);
/* Writes the allowed tokens as a bitmap: bit (id & 31) of bits[id >> 5], for
 * ceil(n_vocab / 32) words. Needs a vocabulary. */
void ul_gmatch_fill_mask(ul_gmatch_t *m, uint32_t *bits);

/* The sampler's view of a matcher (uvllm/backend.h ul_token_filter_t): allows, accept and
 * fill_mask on the sequence's sampling thread; prefix (speculative decoding's proposals) on a
 * copy of the state. */
typedef struct ul_gfilter_s {
    ul_token_filter_t base; /* first */
    ul_gmatch_t *m;
    /* lazy filters: free text until the trigger, then the grammar (which starts with it) */
    char trigger[64];
    uint32_t trigger_len; /* 0: not lazy */
    int active;           /* the trigger was seen: the grammar decides */
    char tail[64];        /* the last trigger_len - 1 bytes of free text */
    uint32_t tail_len;
    ul_gmatch_t *probe; /* prefix's copy of m (speculative proposals), made on first use */
} ul_gfilter_t;

/* A filter at the start of g's text (g needs a vocabulary and must outlive f). 0 or
 * UL_ENOMEM. */
int ul_gfilter_init(ul_gfilter_t *f, const ul_grammar_t *g);
/* A lazy filter (llama.cpp's lazy grammars; strict tools with tool_choice "auto"): any text
 * until it contains trigger (at most 63 bytes), from which on the text must be a sentence
 * of g (whose sentences start with the trigger). 0, UL_EINVAL (trigger too long) or
 * UL_ENOMEM. */
int ul_gfilter_init_lazy(ul_gfilter_t *f, const ul_grammar_t *g, const char *trigger);
void ul_gfilter_free(ul_gfilter_t *f);

/* Counters for benchmarks and tests. */
typedef struct ul_gmatch_stats_s {
    uint64_t masks;        /* fill_mask calls */
    uint64_t mask_hits;    /* of them answered from the matcher's mask cache */
    uint64_t walked_nodes; /* trie nodes stepped at mask time (the context-dependent part) */
} ul_gmatch_stats_t;
void ul_gmatch_stats(const ul_gmatch_t *m, ul_gmatch_stats_t *out);

#endif
