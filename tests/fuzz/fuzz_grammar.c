/* libFuzzer harness for the grammar engine (src/engine/gbnf.c, grammar_*.c). The input is
 * GBNF text, a NUL byte, then document bytes. Whatever the text, compiling must not crash
 * or leak and a refusal must say why; when it compiles, the document is fed byte by byte
 * until a byte is refused, and: feeding the accepted prefix at once agrees; at the first 16
 * accepted prefixes the mask over a small vocabulary (tokens that cross rule boundaries)
 * equals asking about each token. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../unit/engine/tvocab.h"
#include "engine/grammar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const toks[] = {"a",   "b", "ab", "\"",   "\",", "{", "}", "{\"",  "\":", " ",
                                   "\n",  "1", "12", "(",    ")",   ".", "é", "\xc3", "x.",  "yes",
                                   "no!", "!", "c",  "true", ",",   ":", "[", "]",    "<e>"};
#define NT ((int32_t)(sizeof toks / sizeof *toks))

static tvocab_t g_tv = {toks, NT, NT - 1};

static ul_gvocab_t *g_vocab;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g_vocab && !(g_vocab = tv_vocab(&g_tv))) abort();
    const uint8_t *nul = memchr(data, 0, size);
    size_t slen = nul ? (size_t)(nul - data) : size;
    const char *doc = nul ? (const char *)nul + 1 : "";
    size_t dlen = nul ? size - slen - 1 : 0;
    char err[200] = "";
    ul_grammar_t *g = NULL;
    if (ul_grammar_compile(g_vocab, (const char *)data, slen, &g, err, sizeof err)) {
        if (g || !err[0]) abort(); /* a refusal always says why */
        return 0;
    }
    ul_gmatch_t *m = ul_gmatch_new(g), *w = ul_gmatch_new(g);
    if (!m || !w) abort();
    uint32_t bits[(NT + 31) / 32];
    size_t n = 0;
    for (;; n++) {
        if (n < 16) {
            ul_gmatch_fill_mask(m, bits);
            for (int32_t id = 0; id < NT; id++)
                if ((int)(bits[id >> 5] >> (id & 31) & 1) != ul_gmatch_allows(m, id)) abort();
        }
        if (n == dlen || ul_gmatch_feed(m, doc + n, 1)) break;
    }
    if (ul_gmatch_feed(w, doc, n) != 0 || ul_gmatch_done(w) != ul_gmatch_done(m)) abort();
    ul_gmatch_free(m);
    ul_gmatch_free(w);
    ul_grammar_unref(g);
    return 0;
}
