/* The bert / nomic-bert loader (model_bert.c) and the WordPiece tokenizer (wpm.c) on
 * tests/models/bert-tiny-f16.gguf (tools/gguf_bert.py --seed 7) and nomic-bert-tiny-f16.gguf
 * (--arch nomic-bert --seed 11): what the loader reads, what it refuses by name, and the token ids
 * of llama.cpp's llama-tokenize (de3ff81) for the same file and texts: lowercasing, accent
 * stripping, punctuation and CJK split off, greedy longest pieces with continuations, [UNK] for a
 * word no pieces cover, [CLS] ... [SEP]. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/model.h"
#include "test_model_util.h"
#include "uvllm/err.h"

Test(model_bert, hparams_and_tensors) {
    ul_model_t *m = tm_load_ok("bert-tiny-f16");
    cr_expect_str_eq(m->hp.arch, "bert");
    cr_expect_eq(m->hp.encoder, 1);
    cr_expect_eq(m->hp.n_embd, 64);
    cr_expect_eq(m->hp.n_layer, 2);
    cr_expect_eq(m->hp.n_ctx_train, 128);
    cr_expect_eq(m->hp.n_token_types, 2);
    cr_expect_eq(m->hp.pooling, 1, "bert.pooling_type mean");
    cr_expect_float_eq(m->hp.norm_eps, 1e-12f, 1e-18f);
    cr_expect_null(m->output, "an encoder has no output matrix");
    cr_expect_not_null(m->pos_embd);
    cr_expect_not_null(m->tok_types);
    cr_expect_not_null(m->layers[1].ffn_down_b);
    cr_expect_null(m->layers[1].ffn_gate);
    ul_model_free(m);
    m = tm_load_ok("nomic-bert-tiny-f16");
    cr_expect_eq(m->hp.encoder, 1);
    cr_expect_eq(m->hp.rope_neox, 1);
    cr_expect_float_eq(m->hp.rope_freq_base, 1000.0f, 1e-3f);
    cr_expect_null(m->pos_embd, "RoPE, no position table");
    cr_expect_not_null(m->layers[0].ffn_gate);
    cr_expect_null(m->layers[0].bq);
    cr_expect_eq(m->layers[0].wk->ne[1], 64, "k: a view of attn_qkv's rows");
    cr_expect_eq((const uint8_t *)m->layers[0].wk->data - (const uint8_t *)m->layers[0].wq->data,
                 64 * 64 * 2, "k starts 64 f16 rows after q");
    ul_model_free(m);
}

/* load_variant with an extra u32 key g_key = g_val (NULL: none). */
static const char *g_key;
static uint32_t g_val;

static int load_variant(const char *name, const char *drop, const char *add, int64_t n, char *err,
                        size_t errlen) {
    tm_variant_t v = {.drop = drop, .add = add, .n_add = n, .key = g_key, .val = g_val};
    return tm_load_variant(name, &v, err, errlen);
}

static void expect_refused(const char *name, const char *drop, const char *add,
                           const char *needle) {
    char err[256] = "";
    int rc = load_variant(name, drop, add, 64, err, sizeof err);
    cr_expect_neq(rc, 0, "loaded without %s / with %s", drop ? drop : "-", add ? add : "-");
    cr_expect(strstr(err, needle) != NULL, "error '%s' does not name '%s'", err, needle);
}

Test(model_bert, refuses_by_name) {
    char err[256] = "";
    const char *b = "bert-tiny-f16", *nb = "nomic-bert-tiny-f16";
    cr_assert_eq(load_variant(b, NULL, NULL, 0, err, sizeof err), 0, "the plain copy: %s", err);
    /* optional in llama.cpp, so here */
    cr_expect_eq(load_variant(b, "blk.1.ffn_up.bias", NULL, 0, err, sizeof err), 0, "%s", err);
    expect_refused(b, "bert.attention.layer_norm_epsilon", NULL, "layer_norm_epsilon");
    expect_refused(b, "tokenizer.ggml.token_type_count", NULL, "token_type_count");
    g_key = "bert.attention.key_length", g_val = 8; /* 4 heads of 8 do not tile n_embd 64 */
    expect_refused(b, NULL, NULL, "key_length 8");
    g_key = NULL;
    expect_refused(b, "blk.1.attn_k.bias", NULL, "attn_q/k/v.bias");
    expect_refused(b, "blk.1.ffn_up.weight", NULL, "blk.1.ffn_up.weight");
    expect_refused(b, "blk.0.layer_output_norm.weight", NULL, "blk.0.layer_output_norm.weight");
    expect_refused(b, "position_embd.weight", NULL, "position_embd.weight");
    expect_refused(b, NULL, "blk.0.attn_q_norm.weight", "blk.0.attn_q_norm.weight");
    expect_refused(b, NULL, "blk.1.ffn_gate.weight", "blk.1.ffn_gate.weight");
    expect_refused(b, NULL, "cls.weight", "cls.weight"); /* 1-d: not the head's shape */
    /* a reranker: its head loads; one of a shape other than llama.cpp's is refused by name */
    const char *rr = "bert-rerank-tiny-f16";
    cr_assert_eq(load_variant(rr, NULL, NULL, 0, err, sizeof err), 0, "the reranker: %s", err);
    cr_expect_eq(load_variant(rr, "cls.bias", NULL, 0, err, sizeof err), 0, "%s", err);
    expect_refused(rr, "cls.output.bias", "cls.output.bias", "cls.output.bias"); /* [64] */
    cr_assert_eq(load_variant(nb, NULL, NULL, 0, err, sizeof err), 0, "nomic copy: %s", err);
    expect_refused(nb, "blk.1.ffn_gate.weight", NULL, "blk.1.ffn_gate.weight");
    expect_refused(nb, "blk.0.attn_qkv.weight", NULL, "blk.0.attn_q.weight");
    expect_refused(nb, NULL, "blk.0.attn_qkv.bias", "blk.0.attn_qkv.bias");
}

static void expect_ids(const ul_model_t *m, const char *text, int parse_special,
                       const int32_t *want, int n_want) {
    int32_t got[256];
    int n = ul_tokenize(m->vocab, text, strlen(text), 1, parse_special, got, 256);
    cr_assert_geq(n, 0, "'%s': rc %d", text, n);
    char gs[1024] = "", ws[1024] = "";
    for (int i = 0, o = 0; i < n; i++) o += snprintf(gs + o, sizeof gs - (size_t)o, " %d", got[i]);
    for (int i = 0, o = 0; i < n_want; i++)
        o += snprintf(ws + o, sizeof ws - (size_t)o, " %d", want[i]);
    cr_expect(n == n_want && !memcmp(got, want, sizeof *want * (size_t)n),
              "'%s': got [%s ], llama.cpp [%s ]", text, gs, ws);
}

#define IDS(...) (const int32_t[]){__VA_ARGS__}, (int)(sizeof((int32_t[]){__VA_ARGS__}) / 4)

/* llama-tokenize -m tests/models/bert-tiny-f16.gguf -p TEXT --ids (parse_special on unless
 * --no-parse-special) */
Test(model_bert, wordpiece_matches_llama_tokenize) {
    ul_model_t *m = tm_load_ok("bert-tiny-f16");
    expect_ids(m, "The quick brown fox jumps over the lazy dog", 1,
               IDS(2, 5, 6, 7, 8, 9, 45, 10, 5, 11, 12, 3));
    expect_ids(m, "hello", 1, IDS(2, 13, 3));
    expect_ids(m, "Hello, WORLD! It's unplayable; isn't it?", 1,
               IDS(2, 13, 127, 77, 105, 108, 102, 94, 131, 41, 136, 73, 43, 106, 102, 91, 114, 54,
                   1, 39, 104, 136, 74, 41, 132, 3));
    expect_ids(m,
               "\xc3\x89t\xc3\xa9 \xc3\xa0 Paris: \xc3\x89"
               "COLE na\xc3\xafve",
               1,
               IDS(2, 59, 109, 95, 37, 70, 91, 108, 99, 45, 139, 59, 93, 105, 102, 95, 68, 91, 99,
                   111, 95, 3));
    expect_ids(m, "\xe4\xb8\xad\xe6\x96\x87 text \xe4\xb8\xad", 1, IDS(2, 141, 1, 16, 141, 3));
    expect_ids(m, "  tabs\tand\nnewlines  ", 1,
               IDS(2, 74, 91, 92, 45, 36, 68, 95, 112, 102, 99, 104, 95, 45, 3));
    expect_ids(m, "jumping embeddings documentation", 1,
               IDS(2, 9, 46, 14, 50, 45, 29, 91, 109, 99, 105, 104, 3));
    expect_ids(
        m, "x@y#z $5 ~tilde~ [CLS] inside", 1,
        IDS(2, 78, 1, 79, 1, 80, 1, 86, 1, 74, 99, 102, 94, 95, 1, 2, 42, 45, 99, 94, 95, 3));
    expect_ids(m, "x@y#z $5 ~tilde~ [CLS] inside", 0,
               IDS(2, 78, 1, 79, 1, 80, 1, 86, 1, 74, 99, 102, 94, 95, 1, 1, 57, 102, 45, 1, 42, 45,
                   99, 94, 95, 3));
    expect_ids(
        m,
        "\xce\xa9\xce\xbc\xce\xad\xce\xb3\xce\xb1 \xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82",
        1, IDS(2, 1, 1, 3));
    ul_model_free(m);
}
