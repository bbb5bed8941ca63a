/* The grammar engine: GBNF parsing and its errors, matching (classes over UTF-8, repetition,
 * recursion, rule calls), and the mask against token-by-token matching along random
 * generations, over a small vocabulary whose tokens cross rule boundaries. */
#include <pthread.h>

#include "grammar_testutil.h"

static const char *const toks[] = {
    "{",    "}",       "[",   "]",     "\"",    ":",   ",",     " ",  "\n",  "  ",
    "\"a",  "a\"",     "\",", "\":",   "\"}",   "a",   "b",     "ab", "abc", "é",
    "\xc3", "\xa9",    "1",   "12",    "0",     "-",   ".",     "e",  "1,",  "2}",
    "true", "tr",      "ue",  "null",  "false", "{\"", "\"]",   "}]", "],",  "\\",
    "\\n",  "\\u00e9", "x",   "\"a\"", "a\":",  "1.5", "\",\"", "{}", "[]",  "<eos>"};
static tvocab_t TV = {toks, (int)(sizeof toks / sizeof *toks),
                      (int)(sizeof toks / sizeof *toks) - 1};

static const char *JSON =
    "root   ::= value\n"
    "value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\")\n"
    "object ::= \"{\" ws ( string \":\" ws value (\",\" ws string \":\" ws value)* )? \"}\"\n"
    "array  ::= \"[\" ws ( value (\",\" ws value)* )? \"]\"\n"
    "string ::= \"\\\"\" ( [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" "
    "[0-9a-fA-F]{4}) )* \"\\\"\" ws\n"
    "number ::= (\"-\"? ([0-9] | [1-9] [0-9]{0,15})) (\".\" [0-9]+)? ([eE] [-+]? [0-9]+)? ws\n"
    "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";

Test(grammar, parses_and_matches_json) {
    ul_grammar_t *g = gr(NULL, JSON);
    expect_lang(g,
                YES("{\"a\": [1, 2.5, \"x\\u00e9\", true, null], \"b\": {}}", "\"caf\xc3\xa9\"",
                    "-12.5e+3"),
                NO("{\"a\" 1}", "{\"a\": 1"), NULL);
    cr_assert(prefix(g, "{\"a\": 1"));
    cr_assert(!prefix(g, "{\"a\": 01"));
    cr_assert(!prefix(g, "\"\xc3\x28"));     /* broken UTF-8 */
    cr_assert(!prefix(g, "\"\xed\xa0\x80")); /* a surrogate */
    cr_assert(!prefix(g, "\"\x01"));
    ul_grammar_unref(g);
}

Test(grammar, repetition_counts_and_classes) {
    ul_grammar_t *g = gr(NULL, "root ::= [a-c]{2,3} \"-\" [^a-z]+ . \"!\"?\n");
    expect_lang(g, YES("ab-9\xe2\x82\xac", "abc-XYZ.!"), NO("a-9x", "abcd-9x"), DEAD("ab-a"));
    ul_grammar_unref(g);
}

Test(grammar, multi_line_rules_comments_and_escapes) {
    ul_grammar_t *g = gr(NULL, "# a comment\n"
                               "root ::= (\n  \"x\" |\n  \"y\" # inner\n) tail\n"
                               "tail ::=\n  \"\\t\\u00e9\\x41\"\n");
    cr_assert(sentence(g, "y\t\xc3\xa9"
                          "A"));
    cr_assert(!sentence(g, "z\t\xc3\xa9"
                           "A"));
    ul_grammar_unref(g);
}

Test(grammar, errors_name_the_problem) {
    static const struct {
        const char *src, *words;
    } bad[] = {
        {"root ::= valu\n", "undefined rule 'valu'"},
        {"start ::= \"a\"\n", "no rule named 'root'"},
        {"root ::= \"a\nroot2 ::= \"b\"", "literal"},
        {"root ::= [b-a]\n", "out of order"},
        {"root ::= root \"a\" | \"b\"\n", "left-recursive"},
        {"root ::= x\nx ::= y? x \"a\" | \"b\"\ny ::= \"c\"\n", "left-recursive"},
        {"root ::= \"a\" ::=\n", "unexpected"},
        {"root ::= (\"a\"\n", "expected ')'"},
        {"root ::= \"a\"{3,1}\n", "out of order"},
        {"root ::= \"a\"\nroot ::= \"b\"\n", "defined twice"},
        {"root ::= \"\\q\"\n", "unknown escape"},
        /* a DFA that tracks every count of the repetition at once (the fuzzer's find:
         * seconds of compile time on the loop thread) */
        {"root ::= x+\nx ::= [^()\\n]{33} | \"a\"\n", "too ambiguous"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ul_grammar_t *g = NULL;
        char err[256] = "";
        int rc = ul_grammar_compile(NULL, bad[i].src, strlen(bad[i].src), &g, err, sizeof err);
        cr_assert_neq(rc, 0, "compiled: %s", bad[i].src);
        cr_assert(strstr(err, bad[i].words), "'%s' for %s", err, bad[i].src);
        cr_assert_null(g);
    }
}

Test(grammar, ambiguous_but_bounded_repetitions_compile) {
    ul_grammar_t *g = gr(NULL, "root ::= (\"a\" | [a-z]{1,60} \",\")+\n");
    cr_assert(sentence(g, "aab,a"));
    ul_grammar_unref(g);
    g = gr(NULL, "root ::= x+\nx ::= [^\\n]{10} | \"a\"\n");
    cr_assert(sentence(g, "aaaaaaaaaaa"));
    ul_grammar_unref(g);
}

Test(grammar, right_recursion_and_deep_nesting) {
    ul_grammar_t *g = gr(NULL, "root ::= \"(\" root \")\" | \"x\"\n");
    char buf[200];
    int k = 50;
    for (int i = 0; i < k; i++) buf[i] = '(';
    buf[k] = 'x';
    for (int i = 0; i < k; i++) buf[k + 1 + i] = ')';
    buf[2 * k + 1] = 0;
    cr_assert(sentence(g, buf));
    cr_assert(!sentence(g, "((x)"));
    ul_grammar_unref(g);
}

/* Random generation: at each step the mask must equal allows() for every token, and the
 * chosen token is one the mask allows. */
static void random_walks(const char *src, int steps, unsigned seed) {
    ul_gvocab_t *v = tv_new(&TV);
    ul_grammar_t *g = gr(v, src);
    srand(seed);
    for (int run = 0; run < 40; run++) {
        ul_gmatch_t *m = ul_gmatch_new(g);
        cr_assert(m);
        for (int i = 0; i < steps; i++) {
            int n = check_mask(m, TV.n);
            cr_assert_gt(n, 0, "nothing allowed at step %d", i);
            int32_t pick;
            do pick = rand() % TV.n;
            while (!ul_gmatch_allows(m, pick));
            if (pick == TV.eog) break;
            cr_assert_eq(ul_gmatch_accept(m, pick), 0);
        }
        ul_gmatch_free(m);
    }
    ul_grammar_unref(g);
    ul_gvocab_free(v);
}

Test(grammar, mask_equals_token_matching_json) { random_walks(JSON, 30, 1); }

Test(grammar, mask_equals_token_matching_calls_and_ends) {
    random_walks("root ::= item (\",\" item)* \"]\"?\n"
                 "item ::= \"a\"+ | num | \"\\\"\" [a-c]* \"\\\"\" tail\n"
                 "num ::= [0-9]+ (\".\" [0-9]+)?\n"
                 "tail ::= \":\" num | \"\"\n",
                 25, 2);
}

Test(grammar, eog_only_when_complete) {
    ul_gvocab_t *v = tv_new(&TV);
    ul_grammar_t *g = gr(v, "root ::= \"ab\" \"c\"?\n");
    ul_gmatch_t *m = ul_gmatch_new(g);
    cr_assert(!ul_gmatch_allows(m, TV.eog));
    cr_assert_eq(ul_gmatch_accept(m, 17), 0); /* "ab" */
    cr_assert(ul_gmatch_allows(m, TV.eog));
    cr_assert_eq(check_mask(m, TV.n), 1); /* "c" is no token: only <eos> */
    ul_gmatch_free(m);
    ul_grammar_unref(g);
    ul_gvocab_free(v);
}

Test(grammar, mask_cache_hits_on_repeated_states) {
    ul_gvocab_t *v = tv_new(&TV);
    ul_grammar_t *g = gr(v, "root ::= \"\\\"\" [a-z]* \"\\\"\"\n");
    ul_gmatch_t *m = ul_gmatch_new(g);
    uint32_t bits[4];
    cr_assert_eq(ul_gmatch_accept(m, 4), 0); /* " */
    for (int i = 0; i < 5; i++) {
        ul_gmatch_fill_mask(m, bits);
        cr_assert(bits[15 >> 5] >> 15 & 1); /* "a" */
        cr_assert_eq(ul_gmatch_accept(m, 15), 0);
    }
    ul_gmatch_stats_t st;
    ul_gmatch_stats(m, &st);
    cr_assert_eq(st.masks, 5);
    cr_assert_eq(st.mask_hits, 3); /* after "\"" and after "\"a": two DFA states */
    ul_gmatch_free(m);
    ul_grammar_unref(g);
    ul_gvocab_free(v);
}

/* A rule that may be empty, repeated, is an epsilon cycle: the closure must visit each stack
 * once and not recurse (the fuzzer's find: it overflowed the stack, then took seconds per
 * byte). Run on a 256 KiB stack, as small as a worker thread's could be. */
static const char *EMPTY_LOOPS = "root ::= x+ \".\" | \"(\" root \"(\"\n"
                                 "x ::= [^()\\n]{0,3} | \"e\"+ y*\n"
                                 "y ::= (\"a\"?)* | root\n";

static void *empty_loops(void *arg) {
    (void)arg;
    ul_gvocab_t *v = tv_new(&TV);
    ul_grammar_t *g = gr(v, EMPTY_LOOPS);
    expect_lang(g, YES("ab.", "((ab.((", "eea(e.(a."), NO("(ab.(("), NULL);
    cr_assert(prefix(g, "((((((((((((((((((((((((((((((ab"));
    ul_gmatch_t *m = ul_gmatch_new(g);
    cr_assert(m);
    for (int i = 0; i < 12; i++) { /* x+ over "a"s: the mask agrees with matching */
        cr_assert_gt(check_mask(m, TV.n), 0);
        cr_assert_eq(ul_gmatch_accept(m, 15), 0);
    }
    ul_gmatch_free(m);
    ul_grammar_unref(g);
    ul_gvocab_free(v);
    return NULL;
}

Test(grammar, empty_rules_repeated_on_a_small_stack) {
    pthread_attr_t at;
    pthread_t th;
    cr_assert_eq(pthread_attr_init(&at), 0);
    cr_assert_eq(pthread_attr_setstacksize(&at, 256 * 1024), 0);
    cr_assert_eq(pthread_create(&th, &at, empty_loops, NULL), 0);
    cr_assert_eq(pthread_join(th, NULL), 0);
    pthread_attr_destroy(&at);
}
