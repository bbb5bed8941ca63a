/* The per-token cost of structured output's mask (src/engine/grammar*.c), measured directly:
 * a document is tokenized with the model's own tokenizer and replayed through B matchers
 * at once (batch B, one grammar shared as in the server), and every step of every sequence
 * computes the full allowed-token mask (the sampler needs it only when the model's own
 * choice is refused: this is the worst case). Two passes: "cold" on a freshly compiled
 * grammar (its per-state token sets are built as states are first met) and "warm" (the
 * same grammar again, new matchers: a later request with the same schema).
 * usage: grammar_mask VOCAB.gguf (SCHEMA.json | GRAMMAR.gbnf) DOCUMENT BATCH
 * prints one JSON line per pass. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/buf.h"
#include "base/small_file.h"
#include "engine/grammar.h"
#include "engine/json_gbnf.h"
#include "model/gguf.h"
#include "model/vocab.h"

static int piece(void *ctx, int32_t id, char *out, int cap) {
    return ul_token_to_piece(ctx, id, 0, out, cap);
}
static int eog(void *ctx, int32_t id) { return ul_vocab_is_eog(ctx, id); }

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void pass(const char *name, ul_grammar_t *g, const int32_t *ids, int n, int batch,
                 int32_t n_vocab) {
    ul_gmatch_t **m = calloc((size_t)batch, sizeof *m);
    uint32_t *bits = malloc(((size_t)n_vocab / 32 + 1) * sizeof *bits);
    double *step = calloc((size_t)n, sizeof *step), total = 0;
    for (int b = 0; b < batch; b++) m[b] = ul_gmatch_new(g);
    int steps = 0;
    for (int i = 0; i < n; i++) {
        double t0 = now_us();
        for (int b = 0; b < batch; b++) ul_gmatch_fill_mask(m[b], bits);
        step[i] = now_us() - t0;
        total += step[i];
        steps++;
        if (!(bits[ids[i] >> 5] >> (ids[i] & 31) & 1)) {
            fprintf(stderr,
                    "token %d (step %d) refused by the mask: the document does not "
                    "match the grammar\n",
                    ids[i], i);
            exit(1);
        }
        for (int b = 0; b < batch; b++)
            if (ul_gmatch_accept(m[b], ids[i])) exit(2);
    }
    ul_gmatch_stats_t st;
    ul_gmatch_stats(m[0], &st);
    qsort(step, (size_t)steps, sizeof *step, cmp_d);
    printf("{\"pass\":\"%s\",\"batch\":%d,\"steps\":%d,\"step_us_mean\":%.1f,"
           "\"step_us_median\":%.1f,\"step_us_p90\":%.1f,\"step_us_max\":%.1f,"
           "\"per_token_us\":%.2f,\"cache_hits\":%llu,\"walked_nodes\":%llu,\"done\":%d}\n",
           name, batch, steps, total / steps, step[steps / 2], step[steps * 9 / 10],
           step[steps - 1], total / steps / batch, (unsigned long long)st.mask_hits,
           (unsigned long long)st.walked_nodes, ul_gmatch_done(m[0]));
    for (int b = 0; b < batch; b++) ul_gmatch_free(m[b]);
    free(m);
    free(bits);
    free(step);
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: grammar_mask VOCAB.gguf (SCHEMA.json | GRAMMAR.gbnf) DOCUMENT "
                        "BATCH\n");
        return 2;
    }
    ul_gguf_t gf;
    ul_vocab_t *vocab = NULL;
    char err[256];
    if (ul_gguf_open(&gf, argv[1]) || ul_vocab_load(&gf, &vocab, err, sizeof err)) {
        fprintf(stderr, "%s: cannot load the vocabulary\n", argv[1]);
        return 1;
    }
    int32_t nv = ul_vocab_n_tokens(vocab);
    double t0 = now_us();
    ul_gvocab_t *gv = ul_gvocab_new(nv, vocab, piece, eog);
    double t_vocab = now_us() - t0;
    size_t n;
    char *src = ul_small_file_dup(argv[2], &n), *doc = NULL;
    size_t dn;
    if (!src || !(doc = ul_small_file_dup(argv[3], &dn))) return 1;
    ul_buf_t gb = {0};
    if (strstr(argv[2], ".json")) {
        cJSON *js = cJSON_Parse(src);
        if (!js || ul_json_schema_gbnf(js, &gb, err, sizeof err)) {
            fprintf(stderr, "schema: %s\n", err);
            return 1;
        }
        cJSON_Delete(js);
    } else {
        ul_buf_append(&gb, src, n);
    }
    if (strstr(argv[3], ".json")) /* the file's last newline is not the document's */
        while (dn && doc[dn - 1] == '\n') dn--;
    int32_t *ids = malloc((dn + 8) * sizeof *ids);
    int nt = ul_tokenize(vocab, doc, dn, 0, 0, ids, (int)dn + 8);
    int batch = atoi(argv[4]);
    for (int p = 0; p < 2; p++) {
        ul_grammar_t *g = NULL;
        static ul_grammar_t *keep;
        t0 = now_us();
        if (!p && ul_grammar_compile(gv, gb.p, gb.len, &g, err, sizeof err)) {
            fprintf(stderr, "grammar: %s\n", err);
            return 1;
        }
        if (!p) {
            printf("{\"vocab\":%d,\"trie_nodes\":%d,\"vocab_index_ms\":%.1f,\"compile_ms\":%.2f,"
                   "\"states\":%d,\"doc_tokens\":%d}\n",
                   nv, 0, t_vocab / 1e3, (now_us() - t0) / 1e3, ul_grammar_n_states(g), nt);
            keep = g;
        }
        pass(p ? "warm" : "cold", keep, ids, nt, batch, nv);
    }
    return 0;
}
