/* Embedding goldens: vectors from llama.cpp's llama-embedding (scripts/golden_embed.sh) for
 * the same tokens and pooling, compared by cosine after L2 normalisation (as both serve
 * them). Tolerance: cos >= 0.9999. Both sides compute in f32 over f16 weights, but llama.cpp
 * rounds a matmul's activations to f16 (ggml's vec_dot_f16) and orders its sums otherwise:
 * per element that is ~1e-3 relative, on vectors of n_embd such elements a cosine within
 * 1e-5 of 1 (measured: worst 0.9999997 over the file), so 1e-4 leaves room for longer
 * prompts, and a missing output norm already moves it to 0.9975 (measured; test_embed.c
 * checks the pooling itself exactly).
 *   qwen3-tiny-embed.jsonl: the shared qwen3-tiny-f16 (a decoder) with mean, cls and last
 *   pooling, forced as llama-embedding --pooling does (Qwen3-Embedding's is last). */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/forward.h"
#include "golden_check.h"
#include "model/model.h"
#include "uvllm/err.h"

#define COS_MIN 0.9999

static int32_t pooling_of(const char *s) {
    return !strcmp(s, "mean") ? UL_POOL_MEAN : !strcmp(s, "cls") ? UL_POOL_CLS : UL_POOL_LAST;
}

static double cosine(const float *a, const double *b, int n) {
    double ab = 0, aa = 0, bb = 0;
    for (int i = 0; i < n; i++) ab += a[i] * b[i], aa += (double)a[i] * a[i], bb += b[i] * b[i];
    return ab / sqrt(aa * bb);
}

/* Every line of the golden file through a step of its own; returns the worst cosine. */
static double check_file(const char *model_path, const char *golden) {
    ul_model_t *m = golden_load(model_path);
    ul_cpu_config_t cfg = golden_cfg;
    cfg.n_ctx = 512;
    ul_fwd_t *f;
    cr_assert_eq(ul_fwd_create(m, &cfg, &f), 0);
    const int E = m->hp.n_embd;
    float *v = malloc((size_t)E * sizeof *v);
    double *g = malloc((size_t)E * sizeof *g), worst = 1;
    int32_t pages[64];
    for (int i = 0; i < 64; i++) pages[i] = (f->kv.n_pages - 1 - i) % f->kv.n_pages;
    char *text = golden_slurp(golden), *save = NULL;
    int lines = 0;
    for (char *ln = strtok_r(text, "\n", &save); ln; ln = strtok_r(NULL, "\n", &save), lines++) {
        cJSON *j = cJSON_Parse(ln);
        cr_assert_not_null(j, "%s: line %d is not JSON", golden, lines + 1);
        int n, ne;
        int32_t *toks = golden_int_array(cJSON_GetObjectItem(j, "tokens"), &n);
        const cJSON *emb = cJSON_GetObjectItem(j, "embedding");
        ne = cJSON_GetArraySize(emb);
        cr_assert_eq(ne, E, "line %d: %d dimensions, the model has %d", lines + 1, ne, E);
        for (int i = 0; i < E; i++) g[i] = cJSON_GetArrayItem(emb, i)->valuedouble;
        ul_step_seq_t s = {.n_tokens = n,
                           .pages = pages,
                           .n_pages = (n + 15) / 16,
                           .out_embd = v,
                           .pooling = pooling_of(cJSON_GetObjectItem(j, "pooling")->valuestring)};
        ul_step_t st = {.n_tokens = n, .tokens = toks, .n_seqs = 1, .seqs = &s};
        cr_assert_eq(ul_fwd_step(f, &st, NULL), 0);
        double c = cosine(v, g, E);
        cr_assert_geq(c, COS_MIN, "%s line %d (%s pooling, %d tokens): cos %.7f", golden, lines + 1,
                      cJSON_GetObjectItem(j, "pooling")->valuestring, n, c);
        worst = c < worst ? c : worst;
        free(toks);
        cJSON_Delete(j);
    }
    cr_assert_gt(lines, 0, "%s is empty", golden);
    free(text), free(v), free(g);
    ul_fwd_free(f);
    ul_model_free(m);
    return worst;
}

static void shared_model(char *out, size_t cap, const char *name) {
    const char *e = getenv("UVLLM_SHARED");
    if (e && *e)
        snprintf(out, cap, "%s/models/%s", e, name);
    else
        snprintf(out, cap, "%s/../shared/models/%s", UVLLM_SOURCE_DIR, name);
}

/* Entries of 5, 13 and 38 tokens in one step (two threads: the token split cuts the middle
 * one) give the vectors each gets alone: attention runs per sequence, in blocks of queries
 * (forward_bert.c attend_rows), never across entries. The steps differ in size, so the
 * matmul tiles do too: equal within 1e-4, not bit for bit. */
static void batched_matches_alone(const char *name) {
    char path[1200];
    snprintf(path, sizeof path, "%s/tests/models/%s", UVLLM_SOURCE_DIR, name);
    ul_model_t *m = golden_load(path);
    ul_cpu_config_t cfg = golden_cfg;
    cfg.n_ctx = 512;
    ul_fwd_t *f;
    cr_assert_eq(ul_fwd_create(m, &cfg, &f), 0);
    const int E = m->hp.n_embd, len[3] = {5, 13, 38};
    int32_t toks[56], pages[64];
    for (int i = 0; i < 56; i++) toks[i] = (int32_t)((i * 37 + 11) % m->hp.n_vocab);
    for (int i = 0; i < 64; i++) pages[i] = i;
    float *alone = calloc(3 * (size_t)E, sizeof *alone),
          *both = calloc(3 * (size_t)E, sizeof *both);
    ul_step_seq_t seqs[3];
    for (int e = 0, off = 0; e < 3; off += len[e++]) {
        seqs[e] = (ul_step_seq_t){.seq_id = e + 1,
                                  .tok_offset = off,
                                  .n_tokens = len[e],
                                  .pages = pages + 8 * e,
                                  .n_pages = 8,
                                  .out_embd = both + (size_t)e * E,
                                  .pooling = UL_POOL_MEAN};
        ul_step_seq_t one = seqs[e];
        one.tok_offset = 0;
        one.out_embd = alone + (size_t)e * E;
        ul_step_t st = {.n_tokens = len[e], .tokens = toks + off, .n_seqs = 1, .seqs = &one};
        cr_assert_eq(ul_fwd_step(f, &st, NULL), 0);
    }
    ul_step_t st = {.n_tokens = 56, .tokens = toks, .n_seqs = 3, .seqs = seqs};
    cr_assert_eq(ul_fwd_step(f, &st, NULL), 0);
    for (int e = 0; e < 3; e++) {
        double d = 0, norm = 0;
        for (int i = 0; i < E; i++) {
            const size_t k = (size_t)e * E + i;
            d = fmax(d, fabs((double)alone[k] - both[k]));
            norm += (double)alone[k] * alone[k];
        }
        cr_assert_gt(norm, 1e-6, "%s entry %d: a vector was written", name, e);
        cr_assert_lt(d, 1e-4, "%s entry %d (%d tokens): batched vs alone %g", name, e, len[e], d);
    }
    free(alone), free(both);
    ul_fwd_free(f);
    ul_model_free(m);
}

Test(embed_golden, bert_entries_batched_match_alone) {
    batched_matches_alone("bert-tiny-f16.gguf");
    batched_matches_alone("nomic-bert-tiny-f16.gguf");
}

/* The bert encoder (forward_bert.c) on the committed tools/gguf_bert.py model. */
Test(embed_golden, bert_tiny_mean_cls) {
    char model[1200], golden[1200];
    snprintf(model, sizeof model, "%s/tests/models/bert-tiny-f16.gguf", UVLLM_SOURCE_DIR);
    snprintf(golden, sizeof golden, "%s/tests/golden/bert-tiny-embed.jsonl", UVLLM_SOURCE_DIR);
    double worst = check_file(model, golden);
    cr_log_info("bert-tiny embeddings vs llama-embedding: worst cos %.7f", worst);
}

/* nomic-bert: RoPE instead of a position table, fused attn_qkv, SwiGLU, no biases. */
Test(embed_golden, nomic_bert_tiny_mean_cls) {
    char model[1200], golden[1200];
    snprintf(model, sizeof model, "%s/tests/models/nomic-bert-tiny-f16.gguf", UVLLM_SOURCE_DIR);
    snprintf(golden, sizeof golden, "%s/tests/golden/nomic-bert-tiny-embed.jsonl",
             UVLLM_SOURCE_DIR);
    double worst = check_file(model, golden);
    cr_log_info("nomic-bert-tiny embeddings vs llama-embedding: worst cos %.7f", worst);
}

Test(embed_golden, qwen3_tiny_mean_cls_last) {
    char model[1200], golden[1200];
    shared_model(model, sizeof model, "qwen3-tiny-f16.gguf");
    snprintf(golden, sizeof golden, "%s/tests/golden/qwen3-tiny-embed.jsonl", UVLLM_SOURCE_DIR);
    double worst = check_file(model, golden);
    cr_log_info("qwen3-tiny embeddings vs llama-embedding: worst cos %.7f", worst);
}

/* A reranker (tools/gguf_bert.py --pooling rank --seed 23: bert-tiny's shape plus cls.weight,
 * cls.bias, cls.output.weight, cls.output.bias) against llama-server --rerank's scores
 * (scripts/golden_rerank.py: per document the tokens it scored, [CLS] q [SEP] d [SEP], and
 * its relevance_score). The score is a raw logit (3.5 to 6.8 here), not normalised, so the
 * bound is absolute: 0.02. The encoder's rows differ from llama.cpp's by what the cosines
 * above show (f16 activations, sum order: ~1e-3 relative per element); the head then sums 64
 * tanh outputs with weights of size ~1 (gguf_bert.py makes them wide so that documents'
 * scores spread), which grows that to 0.0062 at worst over the file (measured; rounding the
 * head's inputs to f16 as ggml does made it 0.010, not better). Dropping cls.bias moves a
 * score by 0.059 at least, dropping cls.output.bias by 0.70, tanh by 4 (all seen failing).
 * The closest two scores of a set are 0.031 apart: llama-server's order is checked too. */
#define RANK_TOL 0.02

Test(embed_golden, bert_rerank_tiny_scores) {
    char model[1200], golden[1200];
    snprintf(model, sizeof model, "%s/tests/models/bert-rerank-tiny-f16.gguf", UVLLM_SOURCE_DIR);
    snprintf(golden, sizeof golden, "%s/tests/golden/bert-rerank-tiny.jsonl", UVLLM_SOURCE_DIR);
    ul_model_t *m = golden_load(model);
    cr_assert_eq(m->hp.pooling, UL_POOL_RANK);
    ul_cpu_config_t cfg = golden_cfg;
    cfg.n_ctx = 512;
    ul_fwd_t *f;
    cr_assert_eq(ul_fwd_create(m, &cfg, &f), 0);
    float *v = malloc((size_t)m->hp.n_embd * sizeof *v);
    int32_t pages[64];
    for (int i = 0; i < 64; i++) pages[i] = (f->kv.n_pages - 1 - i) % f->kv.n_pages;
    char *text = golden_slurp(golden), *save = NULL;
    double worst = 0;
    int lines = 0;
    for (char *ln = strtok_r(text, "\n", &save); ln; ln = strtok_r(NULL, "\n", &save), lines++) {
        cJSON *j = cJSON_Parse(ln);
        cr_assert_not_null(j);
        const cJSON *toks = cJSON_GetObjectItem(j, "tokens"),
                    *sc = cJSON_GetObjectItem(j, "scores");
        const int nd = cJSON_GetArraySize(toks);
        double got[16];
        cr_assert_leq(nd, 16);
        for (int d = 0; d < nd; d++) {
            int n;
            int32_t *ids = golden_int_array(cJSON_GetArrayItem(toks, d), &n);
            ul_step_seq_t s = {.n_tokens = n,
                               .pages = pages,
                               .n_pages = (n + 15) / 16,
                               .out_embd = v,
                               .pooling = UL_POOL_RANK};
            ul_step_t st = {.n_tokens = n, .tokens = ids, .n_seqs = 1, .seqs = &s};
            cr_assert_eq(ul_fwd_step(f, &st, NULL), 0);
            got[d] = v[0];
            const double want = cJSON_GetArrayItem(sc, d)->valuedouble, err = fabs(got[d] - want);
            cr_expect_leq(err, RANK_TOL, "line %d document %d: score %.6f, llama-server %.6f",
                          lines + 1, d, got[d], want);
            worst = err > worst ? err : worst;
            free(ids);
        }
        /* llama-server's order: every adjacent pair in it is in order here too */
        const cJSON *ord = cJSON_GetObjectItem(j, "order");
        for (int k = 0; k + 1 < nd; k++) {
            const int a = cJSON_GetArrayItem(ord, k)->valueint,
                      b = cJSON_GetArrayItem(ord, k + 1)->valueint;
            cr_expect_geq(got[a], got[b], "line %d: document %d ranks above %d in llama-server",
                          lines + 1, a, b);
        }
        cJSON_Delete(j);
    }
    cr_assert_gt(lines, 0);
    cr_log_info("bert-rerank-tiny scores vs llama-server: worst |diff| %.7f", worst);
    free(text), free(v);
    ul_fwd_free(f);
    ul_model_free(m);
}
