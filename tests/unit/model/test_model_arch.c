/* The gemma3 / phi3 loader (model_arch.c) on the tiny models in tests/models: what it reads
 * (sliding-window pattern, Q scale, embedding scale, softcap, LongRoPE, fused-tensor views)
 * and what it refuses, by name: a file copied without one tensor or key, or with a tensor
 * the engine does not compute, fails to load with that name in the message. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "test_model_util.h"
#include "uvllm/err.h"

static void expect_refused(const char *name, const char *drop, const char *add, int64_t n,
                           const char *needle) {
    char err[256] = "";
    int rc = tm_load_variant(name, &(tm_variant_t){.drop = drop, .add = add, .n_add = n}, err,
                             sizeof err);
    cr_expect_neq(rc, 0, "%s without %s / with %s loaded", name, drop ? drop : "-",
                  add ? add : "-");
    cr_expect(strstr(err, needle) != NULL, "error '%s' does not name '%s'", err, needle);
}

Test(model_arch, gemma3_hparams_and_layers) {
    ul_model_t *m = tm_load_ok("gemma3-tiny-f16");
    const ul_hparams_t *hp = &m->hp;
    cr_expect_eq(hp->n_swa, 8);
    cr_expect_eq(hp->rope_neox, 1);
    cr_expect_float_eq(hp->rope_freq_base_swa, 10000.0f, 0);
    cr_expect_float_eq(hp->q_scale, 1.0f / sqrtf(32.0f), 0); /* key_length 32, not 64 / 4 */
    cr_expect_float_eq(hp->embd_scale, 8.0f, 0);
    cr_expect_float_eq(hp->final_softcap, 4.0f, 0);
    cr_expect_eq(hp->ffn_gelu, 1);
    for (int il = 0; il < hp->n_layer; il++) { /* pattern 6: every 6th layer global */
        cr_expect_eq(m->layers[il].swa, il % 6 < 5, "layer %d", il);
        cr_expect(m->layers[il].attn_post_norm && m->layers[il].ffn_post_norm);
        cr_expect(m->layers[il].q_norm && m->layers[il].k_norm);
    }
    cr_expect_eq(m->output, m->tok_embd, "tied output");
    ul_model_free(m);
}

Test(model_arch, phi3_fused_tensors_become_views) {
    ul_model_t *m = tm_load_ok("phi3-tiny-f16");
    const ul_hparams_t *hp = &m->hp;
    cr_expect_eq(hp->n_swa, 0, "phi3's sliding_window is ignored, as llama.cpp does");
    cr_expect_eq(hp->n_ctx_orig, 2048);
    cr_expect_float_eq(hp->rope_attn_factor, sqrtf(1.0f + logf(2.0f) / logf(2048.0f)), 1e-6f);
    cr_expect(m->rope_long && m->rope_short);
    const ul_layer_t *L = &m->layers[1];
    char name[64];
    snprintf(name, sizeof name, "blk.1.attn_qkv.weight");
    const ul_gguf_tensor_t *qkv = ul_gguf_find_tensor(&m->gguf, name),
                           *up = ul_gguf_find_tensor(&m->gguf, "blk.1.ffn_up.weight");
    cr_assert(qkv && up);
    const size_t rb = ul_type_row_bytes((int)qkv->type, qkv->ne[0]);
    cr_expect_eq(L->wq->ne[1], 128);
    cr_expect_eq(L->wk->ne[1], 64);
    cr_expect_eq(L->wv->ne[1], 64);
    cr_expect_eq(L->wq->data, qkv->data);
    cr_expect_eq((const uint8_t *)L->wk->data, (const uint8_t *)qkv->data + 128 * rb);
    cr_expect_eq((const uint8_t *)L->wv->data, (const uint8_t *)qkv->data + 192 * rb);
    cr_expect_eq(L->ffn_gate->data, up->data, "gate is the first half of ffn_up");
    cr_expect_eq((const uint8_t *)L->ffn_up->data, (const uint8_t *)up->data + 256 * rb);
    cr_expect_eq(L->ffn_up->ne[1], 256);
    ul_model_free(m);
}

Test(model_arch, missing_tensors_and_keys_are_named) {
    expect_refused("gemma3-tiny-f16", "blk.5.post_ffw_norm.weight", NULL, 0,
                   "blk.5.post_ffw_norm.weight");
    expect_refused("gemma3-tiny-f16", "blk.0.post_attention_norm.weight", NULL, 0,
                   "blk.0.post_attention_norm.weight");
    expect_refused("gemma3-tiny-f16", "blk.2.attn_k_norm.weight", NULL, 0,
                   "blk.2.attn_k_norm.weight");
    expect_refused("gemma3-tiny-f16", "gemma3.attention.layer_norm_rms_epsilon", NULL, 0,
                   "gemma3.attention.layer_norm_rms_epsilon");
    expect_refused("phi3-tiny-f16", "blk.1.attn_qkv.weight", NULL, 0, "blk.1.attn_qkv.weight");
    expect_refused("phi3-tiny-f16", "blk.0.ffn_up.weight", NULL, 0, "blk.0.ffn_up.weight");
    expect_refused("phi3-tiny-f16", "phi3.attention.layer_norm_rms_epsilon", NULL, 0,
                   "phi3.attention.layer_norm_rms_epsilon");
}

Test(model_arch, tensors_the_engine_does_not_compute_are_refused) {
    expect_refused("phi3-tiny-f16", NULL, "blk.0.attn_qkv.bias", 256, "blk.0.attn_qkv.bias");
    expect_refused("gemma3-tiny-f16", NULL, "blk.3.attn_q.bias", 128, "blk.3.attn_q.bias");
}
