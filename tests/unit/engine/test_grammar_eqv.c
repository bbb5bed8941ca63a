/* States that agree up to a depth (grammar_eqv.c) and the token sets derived from them
 * (grammar_mask.c): counted repetitions find their near-equivalent states, and the derived
 * masks equal token-by-token matching whatever order the states are first reached in, over
 * a vocabulary whose tokens are longer than some counts and shorter than others. */
#include <stdio.h>

#include "engine/grammar_impl.h"
#include "grammar_testutil.h"

#define MAX_TOKS 512
static char store[MAX_TOKS][24];
static const char *ptrs[MAX_TOKS];

/* Every string of a, b and space up to 3 bytes, runs of a and of spaces up to 16 bytes, and
 * tokens that cross the rule's end ("a\n", "\n- ", an escape), some into the next item. */
static tvocab_t make_vocab(void) {
    int n = 0;
    const char al[] = "ab ";
    for (int len = 1; len <= 3; len++) {
        int total = 1;
        for (int i = 0; i < len; i++) total *= 3;
        for (int k = 0; k < total; k++) {
            for (int i = 0, x = k; i < len; i++, x /= 3) store[n][i] = al[x % 3];
            store[n++][len] = 0;
        }
    }
    for (int len = 4; len <= 16; len++) {
        memset(store[n], 'a', (size_t)len), store[n++][len] = 0;
        memset(store[n], ' ', (size_t)len), store[n++][len] = 0;
        memset(store[n], 'b', (size_t)len), store[n][len] = 0, store[n++][len - 1] = '\n';
    }
    const char *extra[] = {"\n",      "- ",      "\n- ",      "-",  "\n-",  "a\n",
                           "ab\n- a", "\\n",     "a\\n",      "\\", "n",    "aaaa\\nb",
                           " a\n- b", " ab\n- ", "a\n- ab\n", "x",  "<eos>"};
    for (size_t i = 0; i < sizeof extra / sizeof *extra; i++)
        snprintf(store[n++], 24, "%s", extra[i]);
    for (int i = 0; i < n; i++) ptrs[i] = store[i];
    return (tvocab_t){ptrs, n, n - 1};
}

/* text is too large to be inlined: a rule of its own, called from each copy of the item,
 * its ends shared as exits; the copies' calls return to different states */
static const char *COUNTED = "root ::= (\"- \" text \"\\n\"){1,3}\n"
                             "text ::= [ab ]{1,60}\n";
/* calls inside the counted part: their return states differ, so fewer states agree */
static const char *COUNTED_CALLS = "root ::= (\"- \" text \"\\n\"){1,2}\n"
                                   "text ::= ([ab ] | esc){1,10}\n"
                                   "esc ::= \"\\\\\" [nt]+\n";

Test(grammar_eqv, counted_repetition_states_agree_up_to_their_count) {
    tvocab_t tv = make_vocab();
    ul_gvocab_t *v = tv_new(&tv);
    ul_grammar_t *g = gr(v, COUNTED);
    const geqv_t *e = ul_grammar_eqv(g);
    cr_assert(e);
    int derived = 0, deep = 0;
    for (int32_t s = 0; s < ul_grammar_n_states(g); s++) {
        if (e->rep[s] < 0) continue;
        derived++;
        deep += e->dd[s] >= 8;
        cr_assert_neq(e->rep[s], s);
        /* chains end: a representative agrees deeper, or is a chain's end */
        int32_t r = e->rep[s];
        cr_assert(e->dd[r] > e->dd[s] || e->rep[r] < 0, "state %d -> %d", s, r);
    }
    /* "k more allowed" for k = 1..59 each agree with "59 more" up to k bytes (at most 16,
     * the longest token), and the copies of the item with the first up to their rest */
    cr_assert_geq(derived, 60, "%d states with a representative", derived);
    cr_assert_geq(deep, 50, "%d agree up to 8 bytes or more", deep);
    ul_grammar_unref(g);
    ul_gvocab_free(v);
}

/* Random generations: the mask equals allows() at every step. Each run compiles the grammar
 * anew, so the states' token sets are first computed in that run's order (long tokens
 * first reach the small counts before the large ones). */
static void walks(const char *src, unsigned seed, int prefer_long) {
    tvocab_t tv = make_vocab();
    ul_gvocab_t *v = tv_new(&tv);
    srand(seed);
    for (int run = 0; run < 12; run++) {
        ul_grammar_t *g = gr(v, src);
        ul_gmatch_t *m = ul_gmatch_new(g);
        cr_assert(m);
        for (int i = 0; i < 40; i++) {
            cr_assert_gt(check_mask(m, tv.n), 0, "nothing allowed at step %d", i);
            int32_t pick = -1;
            for (int tries = 0; tries < 4 * tv.n && prefer_long && pick < 0; tries++) {
                int32_t t = rand() % tv.n;
                if (strlen(tv.toks[t]) >= 5 && ul_gmatch_allows(m, t)) pick = t;
            }
            while (pick < 0 || !ul_gmatch_allows(m, pick)) pick = rand() % tv.n;
            if (pick == tv.eog) break;
            cr_assert_eq(ul_gmatch_accept(m, pick), 0);
        }
        ul_gmatch_free(m);
        ul_grammar_unref(g);
    }
    ul_gvocab_free(v);
}

Test(grammar_eqv, derived_masks_equal_token_matching) {
    walks(COUNTED, 3, 0);
    walks(COUNTED, 4, 1);
}

Test(grammar_eqv, derived_masks_equal_token_matching_with_calls) {
    walks(COUNTED_CALLS, 5, 0);
    walks(COUNTED_CALLS, 6, 1);
}

/* The copies of the item differ only in what may follow their text (another item or the
 * end): after the third "-" no token may run on into a fourth item, although the first
 * "-" agrees with it on every shorter token and was computed first. */
Test(grammar_eqv, call_returns_tell_copies_apart) {
    tvocab_t tv = make_vocab();
    ul_gvocab_t *v = tv_new(&tv);
    ul_grammar_t *g = gr(v, COUNTED);
    const char *at[] = {"-", "- a\n-", "- a\n- b\n-", "- a\n- b\n- ab"};
    for (size_t i = 0; i < sizeof at / sizeof *at; i++) {
        ul_gmatch_t *m = ul_gmatch_new(g);
        cr_assert_eq(ul_gmatch_feed(m, at[i], strlen(at[i])), 0);
        cr_assert_gt(check_mask(m, tv.n), 0, "after \"%s\"", at[i]);
        ul_gmatch_free(m);
    }
    ul_grammar_unref(g);
    ul_gvocab_free(v);
}
