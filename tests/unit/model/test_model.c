/* Model loader: the shipped models load with the hyper-parameters their cards state, tied
 * and untied outputs are told apart, vocabulary files load vocabulary-only, and a model
 * whose metadata or weights do not fit the `llama` architecture is refused with a reason
 * naming the key or tensor. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf_write.h"
#include "model/model.h"
#include "test_files.h"
#include "test_gguf_fixture.h"
#include "uvllm/err.h"

static ul_model_t *load_shared(const char *rel, int vocab_only) {
    char path[4096], err[256];
    snprintf(path, sizeof path, "%s/%s", fx_shared(), rel);
    ul_model_t *m = NULL;
    int rc = ul_model_load(path, vocab_only, &m, err, sizeof err);
    cr_assert_eq(rc, 0, "%s: %s", path, err);
    return m;
}

static void expect_layers_complete(const ul_model_t *m) {
    cr_assert_not_null(m->layers);
    for (int i = 0; i < m->hp.n_layer; i++) {
        const ul_layer_t *l = &m->layers[i];
        cr_expect(l->attn_norm && l->wq && l->wk && l->wv && l->wo && l->ffn_norm && l->ffn_gate &&
                      l->ffn_up && l->ffn_down,
                  "layer %d incomplete", i);
    }
}

Test(model, aidreams260K_hparams) {
    ul_model_t *m = load_shared("models/aidreams260K.gguf", 0);
    const ul_hparams_t *hp = &m->hp;
    cr_expect_str_eq(hp->arch, "llama");
    cr_expect_eq(hp->n_embd, 64);
    cr_expect_eq(hp->n_layer, 4);
    cr_expect_eq(hp->n_head, 4);
    cr_expect_eq(hp->n_head_kv, 4);
    cr_expect_eq(hp->n_ff, 172);
    cr_expect_eq(hp->n_ctx_train, 128);
    cr_expect_eq(hp->n_vocab, 512);
    cr_expect_eq(hp->head_dim, 16);
    cr_expect_eq(hp->n_rot, 16);
    cr_expect_eq(hp->rope_freq_base, 10000.0f);
    cr_expect_eq(hp->rope_freq_scale, 1.0f);
    cr_expect_float_eq(hp->rms_eps, 1e-5f, 1e-9f);
    cr_expect_neq(m->output, m->tok_embd, "aidreams has a separate output.weight");
    cr_expect_eq(m->tok_embd->ne[0], 64);
    cr_expect_eq(m->tok_embd->ne[1], 512);
    cr_expect_not_null(m->vocab);
    expect_layers_complete(m);
    ul_model_free(m);
}

Test(model, mini_hparams_every_type) {
    const char *files[] = {"mini-f16", "mini-bf16", "mini-q8_0", "mini-q4_0", "mini-q4_k_m"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char rel[64];
        snprintf(rel, sizeof rel, "models/%s.gguf", files[i]);
        ul_model_t *m = load_shared(rel, 0);
        const ul_hparams_t *hp = &m->hp;
        cr_expect_eq(hp->n_embd, 256, "%s", rel);
        cr_expect_eq(hp->n_layer, 2, "%s", rel);
        cr_expect_eq(hp->n_head, 4, "%s", rel);
        cr_expect_eq(hp->n_head_kv, 2, "%s", rel);
        cr_expect_eq(hp->n_ff, 768, "%s", rel);
        cr_expect_eq(hp->n_vocab, 32000, "%s", rel);
        cr_expect_eq(hp->n_ctx_train, 2048, "%s", rel);
        cr_expect_eq(hp->head_dim, 64, "%s", rel);
        cr_expect_neq(m->output, m->tok_embd, "%s", rel);
        cr_expect_eq(m->layers[0].wk->ne[1], 128, "%s: GQA k rows = 2 heads x 64", rel);
        expect_layers_complete(m);
        ul_model_free(m);
    }
}

Test(model, tiny_bpe_tied_output) {
    ul_model_t *m = load_shared("models/tiny-bpe-f16.gguf", 0);
    cr_expect_eq(m->hp.n_embd, 128);
    cr_expect_eq(m->hp.n_vocab, 50257);
    cr_expect_eq(m->hp.n_head_kv, 2);
    cr_expect_eq(m->output, m->tok_embd, "no output.weight: output tied to token_embd");
    expect_layers_complete(m);
    ul_model_free(m);
}

/* A vocabulary file loads vocab_only (counted: 1) and is refused as a full model. */
static int loads_vocab_only(const char *path, const char *name, void *ctx) {
    char err[256];
    ul_model_t *m = NULL;
    int rc = ul_model_load(path, 1, &m, err, sizeof err);
    cr_expect_eq(rc, 0, "%s: %s", path, err);
    if (rc) return 0;
    cr_expect_null(m->layers, "%s: vocab_only loads no weights", path);
    cr_expect_gt(m->hp.n_vocab, 0);
    ul_model_free(m);
    /* Without vocab_only the same file is refused: it has no weights. */
    rc = ul_model_load(path, 0, &m, err, sizeof err);
    cr_expect_eq(rc, UL_EFORMAT, "%s loads as a full model", path);
    cr_expect(strstr(err, "missing") || strstr(err, "unsupported architecture"), "%s: %s", path,
              err);
    return 1;
}

Test(model, vocab_files_load_vocab_only) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tokenizer", fx_shared());
    int n = tf_each(dir, ".gguf", loads_vocab_only, NULL);
    cr_expect_geq(n, 9, "expected the vocabulary files in %s", dir);
}

Test(model, missing_file) {
    ul_model_t *m = (ul_model_t *)1;
    char err[256];
    cr_expect_eq(ul_model_load("/nonexistent.gguf", 0, &m, err, sizeof err), UL_ENOENT);
    cr_expect_null(m);
    cr_expect(strstr(err, "No such file"), "%s", err);
}

/* ---- synthetic models ---- */

static int load_img(img_t *im, ul_model_t **m, char *err, size_t errlen) {
    return ul_model_load_mem(im->buf, im->len, 0, m, err, errlen);
}

static void expect_refused(img_t im, const char *want) {
    ul_model_t *m = NULL;
    char err[256] = "";
    int rc = load_img(&im, &m, err, sizeof err);
    cr_expect_lt(rc, 0, "loaded, expected '%s'", want);
    cr_expect_null(m);
    cr_expect(strstr(err, want), "message '%s' lacks '%s'", err, want);
    if (!rc) ul_model_free(m);
    free(im.buf);
}

static void expect_loads(img_t im, ul_model_t **out) {
    char err[256] = "";
    cr_assert_eq(load_img(&im, out, err, sizeof err), 0, "%s", err);
}

Test(model, synthetic_loads_every_supported_type) {
    const uint32_t types[] = {UL_TYPE_F32,  UL_TYPE_F16,  UL_TYPE_BF16, UL_TYPE_Q8_0,
                              UL_TYPE_Q4_0, UL_TYPE_Q4_1, UL_TYPE_Q5_0, UL_TYPE_Q5_1};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        img_t im = fx_llama(types[i], UL_TYPE_F32, "llama", 0);
        ul_model_t *m;
        expect_loads(im, &m);
        cr_expect_eq(m->hp.n_embd, 32);
        cr_expect_eq(m->hp.n_head_kv, 1);
        cr_expect_eq(m->hp.head_dim, 16);
        cr_expect_eq(m->hp.rope_freq_base, 5000.0f);
        cr_expect_float_eq(m->hp.rms_eps, 1e-6f, 1e-10f);
        cr_expect_eq(m->layers[0].wq->type, types[i], "%s", ul_type_name((int)types[i]));
        ul_model_free(m);
        free(im.buf);
    }
}

Test(model, synthetic_tied) {
    img_t im = fx_llama(UL_TYPE_F16, UL_TYPE_F32, "llama", 1);
    ul_model_t *m;
    expect_loads(im, &m);
    cr_expect_eq(m->output, m->tok_embd);
    ul_model_free(m);
    free(im.buf);
}

static void expect_qwen(const char *file, int biases) {
    ul_model_t *m = load_shared(file, 0);
    cr_expect_eq(m->hp.rope_neox, 1, "%s: NEOX RoPE", file);
    cr_expect_eq(m->output, m->tok_embd, "%s: tied output", file);
    cr_expect_eq(m->hp.head_dim, 32);
    cr_expect_eq(m->hp.rope_freq_base, 1e6f);
    expect_layers_complete(m);
    for (int i = 0; i < m->hp.n_layer; i++) {
        const ul_layer_t *l = &m->layers[i];
        cr_expect_eq(!!l->bq && !!l->bk && !!l->bv, biases, "%s layer %d biases", file, i);
        cr_expect_eq(!!l->q_norm && !!l->k_norm, !biases, "%s layer %d q/k norms", file, i);
        if (biases)
            cr_expect_eq(l->bk->ne[0], 64);
        else
            cr_expect_eq(l->k_norm->ne[0], 32);
    }
    ul_model_free(m);
}

Test(model, qwen2_and_qwen3_tensors) {
    expect_qwen("models/qwen2-tiny-f16.gguf", 1);
    expect_qwen("models/qwen3-tiny-f16.gguf", 0);
    ul_model_t *m = load_shared("models/aidreams260K.gguf", 0);
    cr_expect_eq(m->hp.rope_neox, 0, "llama: NORM RoPE");
    ul_model_free(m);
}

/* The tiny model built with other types or another architecture, refused naming why. */
typedef struct {
    int weight_type, norm_type;
    const char *arch, *want;
} built_case_t;

static const built_case_t k_built[] = {
    {UL_TYPE_F16, UL_TYPE_F32, "mamba",
     "unsupported architecture 'mamba' (supported: llama, qwen2, qwen3, qwen3moe, gemma3, phi3, "
     "bert, nomic-bert)"},
    /* a llama-shaped file declared qwen2 / qwen3 lacks the tensors those add: the first one
     * missing is named */
    {UL_TYPE_F16, UL_TYPE_F32, "qwen2", "missing tensor 'blk.0.attn_q.bias'"},
    {UL_TYPE_F16, UL_TYPE_F32, "qwen3", "missing tensor 'blk.0.attn_q_norm.weight'"},
    {UL_TYPE_F16, UL_TYPE_F16, "llama", "tensor 'output_norm.weight': type f16, norms must be f32"},
    {UL_TYPE_Q8_1, UL_TYPE_F32, "llama", "tensor 'token_embd.weight': unsupported type q8_1"},
};

ParameterizedTestParameters(model, refuses_as_built) {
    static int idx[sizeof k_built / sizeof *k_built];
    for (size_t i = 0; i < sizeof idx / sizeof *idx; i++) idx[i] = (int)i;
    return cr_make_param_array(int, idx, sizeof idx / sizeof *idx);
}

ParameterizedTest(int *ip, model, refuses_as_built) {
    const built_case_t *c = &k_built[*ip];
    expect_refused(fx_llama(c->weight_type, c->norm_type, c->arch, 0), c->want);
}

/* The tiny llama with the u32 value of key set to v must be refused with want. */
static void refused_with_u32(const char *key, uint32_t v, const char *want) {
    img_t im = fx_llama(UL_TYPE_F16, UL_TYPE_F32, "llama", 0);
    fx_put_u32(&im, fx_kv_val_off(&im, key), v);
    expect_refused(im, want);
}

static void patch_key(img_t *im, const char *key, const char *repl) {
    size_t o = fx_kv_off(im, key) + 8;
    memcpy(im->buf + o, repl, strlen(repl));
}

/* The tiny llama with a u32 key set to a value it cannot have, refused naming why. */
typedef struct {
    const char *key;
    uint32_t v;
    const char *want;
} u32_case_t;

static const u32_case_t k_u32[] = {
    {"llama.block_count", 0, "key 'llama.block_count' = 0 outside [1, 1024]"},
    {"llama.attention.head_count", 3, "embedding_length 32 is not a multiple of head_count 3"},
    {"llama.attention.head_count_kv", 3, "key 'llama.attention.head_count_kv' = 3 outside [1, 2]"},
    {"llama.attention.head_count_kv", 2,
     "tensor 'blk.0.attn_k.weight': shape [32, 16, 1, 1], expected [32, 32]"},
    {"llama.feed_forward_length", 96,
     "tensor 'blk.0.ffn_gate.weight': shape [32, 64, 1, 1], expected [32, 96]"},
};

ParameterizedTestParameters(model, refuses_key_value) {
    static int idx[sizeof k_u32 / sizeof *k_u32];
    for (size_t i = 0; i < sizeof idx / sizeof *idx; i++) idx[i] = (int)i;
    return cr_make_param_array(int, idx, sizeof idx / sizeof *idx);
}

ParameterizedTest(int *ip, model, refuses_key_value) {
    refused_with_u32(k_u32[*ip].key, k_u32[*ip].v, k_u32[*ip].want);
}

Test(model, refuses_missing_key) {
    img_t im = fx_llama(UL_TYPE_F16, UL_TYPE_F32, "llama", 0);
    patch_key(&im, "llama.block_count", "llama.block_coun_");
    expect_refused(im, "missing key 'llama.block_count'");
}

Test(model, refuses_missing_tensor) {
    img_t im = fx_llama(UL_TYPE_F16, UL_TYPE_F32, "llama", 0);
    memcpy(im.buf + fx_tensor_off(&im, "blk.0.ffn_up.weight") + 8, "blk.0.ffn_uq", 12);
    expect_refused(im, "missing tensor 'blk.0.ffn_up.weight'");
}

Test(model, refuses_bad_rms_eps) {
    img_t im = fx_llama(UL_TYPE_F16, UL_TYPE_F32, "llama", 0);
    float neg = -1.0f;
    uint32_t bits;
    memcpy(&bits, &neg, 4);
    fx_put_u32(&im, fx_kv_val_off(&im, "llama.attention.layer_norm_rms_epsilon"), bits);
    expect_refused(im, "key 'llama.attention.layer_norm_rms_epsilon' = -1 out of range");
}

Test(model, reports_gguf_errors) {
    img_t im = fx_llama(UL_TYPE_F16, UL_TYPE_F32, "llama", 0);
    im.buf[0] = 'X';
    expect_refused(im, "bad magic");
}

static void hook_yarn(struct ul_gguf_writer_s *w) {
    cr_assert_eq(ul_gguf_w_str(w, "llama.rope.scaling.type", "yarn", 4), 0);
}
static void hook_linear4(struct ul_gguf_writer_s *w) {
    cr_assert_eq(ul_gguf_w_str(w, "llama.rope.scaling.type", "linear", 6), 0);
    cr_assert_eq(ul_gguf_w_f32(w, "llama.rope.scaling.factor", 4.0f), 0);
}
static void hook_odd_rot(struct ul_gguf_writer_s *w) {
    cr_assert_eq(ul_gguf_w_u32(w, "llama.rope.dimension_count", 7), 0);
}
static void hook_key_length(struct ul_gguf_writer_s *w) {
    cr_assert_eq(ul_gguf_w_u32(w, "llama.attention.key_length", 8), 0);
}
static void hook_str_key_length(struct ul_gguf_writer_s *w) {
    cr_assert_eq(ul_gguf_w_str(w, "llama.attention.key_length", "16", 2), 0);
}

/* The tiny f16 llama with hook adding to what fx_llama writes. */
static img_t hooked(void (*hook)(struct ul_gguf_writer_s *w)) {
    fx_llama_hook = hook;
    img_t im = fx_llama(UL_TYPE_F16, UL_TYPE_F32, "llama", 0);
    fx_llama_hook = NULL;
    return im;
}

Test(model, rope_scaling) {
    img_t im = hooked(hook_linear4);
    ul_model_t *m;
    expect_loads(im, &m);
    cr_expect_eq(m->hp.rope_freq_scale, 0.25f);
    ul_model_free(m);
    free(im.buf);
    expect_refused(hooked(hook_yarn), "unsupported rope scaling 'yarn'");
}

/* rope_freqs.weight (Llama 3.x rope scaling): [n_rot/2] f32, loaded for llama */
static float g_ff[16] = {1, 1, 2, 2, 4, 4, 8, 8, 1, 1, 1, 1, 1, 1, 1, 1};
static void hook_rope_freqs8(struct ul_gguf_writer_s *w) {
    cr_assert_eq(ul_gguf_w_tensor(w, "rope_freqs.weight", UL_TYPE_F32, 1, (int64_t[]){8}, g_ff), 0);
}
static void hook_rope_freqs16(struct ul_gguf_writer_s *w) {
    cr_assert_eq(ul_gguf_w_tensor(w, "rope_freqs.weight", UL_TYPE_F32, 1, (int64_t[]){16}, g_ff),
                 0);
}

Test(model, rope_freqs) {
    img_t im = hooked(hook_rope_freqs8); /* head_dim 16: 8 frequencies */
    ul_model_t *m;
    expect_loads(im, &m);
    cr_assert_not_null(m->rope_freqs);
    cr_expect_eq(((const float *)m->rope_freqs->data)[6], 8.0f);
    ul_model_free(m);
    free(im.buf);
    expect_refused(hooked(hook_rope_freqs16),
                   "tensor 'rope_freqs.weight': shape [16, 1, 1, 1], expected [8, 1]");
    im = fx_llama(UL_TYPE_F16, UL_TYPE_F32, "llama", 0);
    expect_loads(im, &m);
    cr_expect_null(m->rope_freqs);
    ul_model_free(m);
    free(im.buf);
}

Test(model, refuses_odd_rope_dims) {
    expect_refused(hooked(hook_odd_rot), "rope.dimension_count 7 is odd");
}

Test(model, key_length_drives_shapes) {
    /* head_dim 8: attn_q must be [32, 16] */
    expect_refused(hooked(hook_key_length),
                   "tensor 'blk.0.attn_q.weight': shape [32, 32, 1, 1], expected [32, 16]");
}

Test(model, refuses_wrongly_typed_key) {
    expect_refused(hooked(hook_str_key_length), "key 'llama.attention.key_length': not an integer");
}
