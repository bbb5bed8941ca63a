/* The mask against token-by-token matching on a real vocabulary (GPT-2's 50257 tokens, of
 * ../shared/models/qwen2-tiny-f16.gguf) along random generations, for schemas of the
 * corpus (tests/e2e/corpus): per-state caches, exits and dead ends all show up there. */
#include <cjson/cJSON.h>
#include <stdio.h>

#include "base/buf.h"
#include "engine/grammar.h"
#include "engine/json_gbnf.h"
#include "grammar_testutil.h"
#include "model/gguf.h"
#include "model/vocab.h"

static int vpiece(void *ctx, int32_t id, char *out, int cap) {
    return ul_token_to_piece(ctx, id, 0, out, cap);
}
static int veog(void *ctx, int32_t id) { return ul_vocab_is_eog(ctx, id); }

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    cr_assert(f, "%s", path);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return buf;
}

Test(grammar_vocab, corpus_masks_equal_token_matching) {
    char path[512];
    const char *shared = getenv("UVLLM_SHARED");
    snprintf(path, sizeof path, "%s/models/qwen2-tiny-f16.gguf",
             shared ? shared : UVLLM_SOURCE_DIR "/../shared");
    ul_gguf_t gf;
    ul_vocab_t *vocab = NULL;
    char err[256];
    cr_assert_eq(ul_gguf_open(&gf, path), 0, "%s", path);
    cr_assert_eq(ul_vocab_load(&gf, &vocab, err, sizeof err), 0, "%s", err);
    int32_t nv = ul_vocab_n_tokens(vocab);
    ul_gvocab_t *gv = ul_gvocab_new(nv, vocab, vpiece, veog);
    cr_assert(gv);
    static const char *const names[] = {"zod-int_multiple",   "zod-email",     "zod-discriminated",
                                        "pydantic-recursive", "pydantic-user", "zod-tuple"};
    srand(11);
    for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
        snprintf(path, sizeof path, UVLLM_SOURCE_DIR "/tests/e2e/corpus/%s.json", names[k]);
        cJSON *js = cJSON_Parse(slurp(path));
        ul_buf_t b = {0};
        cr_assert_eq(ul_json_schema_gbnf(js, &b, err, sizeof err), 0, "%s: %s", names[k], err);
        ul_grammar_t *g = NULL;
        cr_assert_eq(ul_grammar_compile(gv, b.p, b.len, &g, err, sizeof err), 0, "%s", err);
        for (int run = 0; run < 3; run++) {
            ul_gmatch_t *m = ul_gmatch_new(g);
            uint32_t *bits = calloc((size_t)nv / 32 + 1, sizeof *bits);
            for (int step = 0; step < 25; step++) {
                ul_gmatch_fill_mask(m, bits);
                int n = 0;
                for (int32_t id = 0; id < nv; id++) {
                    int bm = (int)(bits[id >> 5] >> (id & 31) & 1);
                    cr_assert_eq(bm, ul_gmatch_allows(m, id), "%s step %d token %d", names[k], step,
                                 id);
                    n += bm;
                }
                cr_assert_gt(n, 0, "%s: nothing allowed at step %d", names[k], step);
                int32_t pick;
                do pick = rand() % nv;
                while (!(bits[pick >> 5] >> (pick & 31) & 1));
                if (ul_gvocab_is_eog(gv, pick)) break;
                cr_assert_eq(ul_gmatch_accept(m, pick), 0);
            }
            free(bits);
            ul_gmatch_free(m);
        }
        ul_grammar_unref(g);
        ul_buf_free(&b);
        cJSON_Delete(js);
    }
    ul_gvocab_free(gv);
    ul_vocab_free(vocab);
    ul_gguf_free(&gf);
}

Test(grammar_vocab, dead_ends_are_pruned) {
    /* after "ab" the only way on is a class that matches nothing: "ab" must not be allowed */
    ul_grammar_t *g = gr(NULL, "root ::= \"a\" ( \"b\" [^\\x00-\\U0010FFFF] | \"c\" )\n");
    expect_lang(g, YES("ac"), NULL, DEAD("ab"));
    ul_grammar_unref(g);
    ul_grammar_t *bad = NULL;
    char err[128];
    const char *src = "root ::= [^\\x00-\\U0010FFFF]\n";
    cr_assert_eq(ul_grammar_compile(NULL, src, strlen(src), &bad, err, sizeof err), -22);
    cr_assert(strstr(err, "no complete sentence"), "%s", err);
}
