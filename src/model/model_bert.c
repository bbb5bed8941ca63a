/* The loader's `bert` and `nomic-bert` part, with llama.cpp's semantics (its
 * src/models/bert.cpp, nomic-bert.cpp and the generic hparams code): an encoder whose output
 * is the hidden state itself (embeddings only: no output matrix, no output norm). Post-norm
 * layers with LayerNorm (weight and bias): after the summed token and token-type
 * embeddings, after the attention residual, after the FFN residual. Attention is
 * bidirectional (attention.causal false, the only value accepted here); Q/K/V (separate or
 * a fused attn_qkv, as create_tensor_qkv allows) and O may carry biases (optional, as
 * there).
 *  - bert: absolute position embeddings added to the input; FFN up -> GELU -> down with
 *    optional biases.
 *  - nomic-bert: no position table; RoPE (NEOX) on q and k with rope.freq_base; FFN
 *    SwiGLU (gate, up, down) without biases (llama.cpp's graph passes none, so ffn biases
 *    in the file are not loaded).
 * A reranker (pooling_type rank) adds llama.cpp's classification head (src/models/bert.cpp:
 * cls.weight/bias and cls.output.weight/bias, each optional; forward.c applies it to the
 * [CLS] row). Tensors llama.cpp's bert graph would also use but this engine does not compute
 * (attention q/k norms, a second attention norm, a fused qkv bias) are refused by name
 * rather than ignored. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_impl.h"
#include "uvllm/err.h"

int ul_model_bert_hparams(ul_model_ld_t *l) {
    ul_hparams_t *hp = &l->m->hp;
    const ul_gguf_t *g = &l->m->gguf;
    char key[96];
    snprintf(key, sizeof key, "%s.attention.layer_norm_epsilon", hp->arch);
    if (!ul_gguf_find(g, key)) return ul_model_ld_fail(l, "missing key '%s'", key);
    int rc = ul_model_ld_float(l, "attention.layer_norm_epsilon", 1e-12f, 1.0f, &hp->norm_eps);
    if (rc) return rc;
    int causal = 0;
    snprintf(key, sizeof key, "%s.attention.causal", hp->arch);
    rc = ul_gguf_get_bool(g, key, &causal);
    if (rc && rc != UL_ENOENT) return ul_model_ld_fail(l, "key '%s': not a bool", key);
    if (causal) return ul_model_ld_fail(l, "key '%s': causal %s is not supported", key, hp->arch);
    int64_t nt;
    rc = ul_gguf_get_i64(g, "tokenizer.ggml.token_type_count", &nt);
    if (rc == UL_ENOENT)
        return ul_model_ld_fail(l, "missing key 'tokenizer.ggml.token_type_count' (bert)");
    if (rc || nt < 1 || nt > 1024)
        return ul_model_ld_fail(l, "key 'tokenizer.ggml.token_type_count': bad value");
    hp->n_token_types = (int32_t)nt;
    snprintf(key, sizeof key, "%s.classifier.output_labels", hp->arch);
    const ul_gguf_kv_t *labels = ul_gguf_find(g, key);
    hp->n_cls_out = labels && labels->n > 0 && labels->n < 65536 ? (int32_t)labels->n : 1;
    if (hp->n_head_kv != hp->n_head)
        return ul_model_ld_fail(l, "%s: head_count_kv %d differs from head_count %d", hp->arch,
                                hp->n_head_kv, hp->n_head);
    /* the q/k/v/o matrices are [n_embd, n_embd] (llama.cpp's shapes): the heads tile n_embd */
    if ((int64_t)hp->head_dim * hp->n_head != hp->n_embd)
        return ul_model_ld_fail(l,
                                "%s: head_count %d x key_length %d differs from "
                                "embedding_length %d",
                                hp->arch, hp->n_head, hp->head_dim, hp->n_embd);
    hp->encoder = 1;
    hp->rope_neox = !strcmp(hp->arch, "nomic-bert");
    return 0;
}

static int refuse(ul_model_ld_t *l, const char *name) {
    if (ul_gguf_find_tensor(&l->m->gguf, name))
        return ul_model_ld_fail(l, "tensor '%s' is not supported for %s", name, l->m->hp.arch);
    return 0;
}

/* views[0..3) = the q, k, v rows of a fused attn_qkv [n_embd, 3 n_embd] */
static void qkv_views(ul_gguf_tensor_t *v, const ul_gguf_tensor_t *t, int64_t e) {
    const size_t rb = ul_type_row_bytes((int)t->type, t->ne[0]);
    for (int k = 0; k < 3; k++) {
        v[k] = *t;
        v[k].ne[1] = e;
        v[k].data = (const uint8_t *)t->data + (size_t)(k * e) * rb;
        v[k].offset += (uint64_t)(k * e) * rb;
        v[k].nbytes = (uint64_t)e * rb;
    }
}

static int bert_layer(ul_model_ld_t *l, int i, ul_layer_t *ly) {
    ul_model_t *m = l->m;
    const ul_hparams_t *hp = &m->hp;
    const int64_t e = hp->n_embd, ff = hp->n_ff;
    const int nomic = hp->rope_neox;
    char name[96];
    int rc;
    snprintf(name, sizeof name, "blk.%d.attn_qkv.weight", i);
    const int fused = ul_gguf_find_tensor(&m->gguf, name) != NULL;
    if (fused) {
        const ul_gguf_tensor_t *t;
        if ((rc = ul_model_ld_weight(l, name, 0, e, 3 * e, &t))) return rc;
        ul_gguf_tensor_t *v = m->views + (size_t)i * 3;
        qkv_views(v, t, e);
        ly->wq = &v[0], ly->wk = &v[1], ly->wv = &v[2];
    }
    const struct {
        const char *name;
        int kind; /* as ul_model_ld_weight: 0 matrix, 1 norm, 2 bias */
        int need; /* 1 required, 0 optional (as llama.cpp), -1 not read */
        int64_t ne0, ne1;
        const ul_gguf_tensor_t **out;
    } w[] = {
        {"attn_q.weight", 0, fused ? -1 : 1, e, e, &ly->wq},
        {"attn_q.bias", 2, 0, e, 1, &ly->bq},
        {"attn_k.weight", 0, fused ? -1 : 1, e, e, &ly->wk},
        {"attn_k.bias", 2, 0, e, 1, &ly->bk},
        {"attn_v.weight", 0, fused ? -1 : 1, e, e, &ly->wv},
        {"attn_v.bias", 2, 0, e, 1, &ly->bv},
        {"attn_output.weight", 0, 1, e, e, &ly->wo},
        {"attn_output.bias", 2, 0, e, 1, &ly->bo},
        {"attn_output_norm.weight", 1, 1, e, 1, &ly->attn_out_norm},
        {"attn_output_norm.bias", 2, 1, e, 1, &ly->attn_out_norm_b},
        {"ffn_gate.weight", 0, nomic ? 1 : -1, e, ff, &ly->ffn_gate},
        {"ffn_up.weight", 0, 1, e, ff, &ly->ffn_up},
        {"ffn_up.bias", 2, nomic ? -1 : 0, ff, 1, &ly->ffn_up_b},
        {"ffn_down.weight", 0, 1, ff, e, &ly->ffn_down},
        {"ffn_down.bias", 2, nomic ? -1 : 0, e, 1, &ly->ffn_down_b},
        {"layer_output_norm.weight", 1, 1, e, 1, &ly->out_norm},
        {"layer_output_norm.bias", 2, 1, e, 1, &ly->out_norm_b},
    };
    static const char *const extra[] = {"attn_qkv.bias", "attn_q_norm.weight", "attn_k_norm.weight",
                                        "attn_norm_2.weight"};
    for (size_t k = 0; k < sizeof extra / sizeof extra[0]; k++) {
        snprintf(name, sizeof name, "blk.%d.%s", i, extra[k]);
        if ((rc = refuse(l, name))) return rc;
    }
    if (!nomic) {
        snprintf(name, sizeof name, "blk.%d.ffn_gate.weight", i);
        if ((rc = refuse(l, name))) return rc;
    }
    for (size_t k = 0; k < sizeof w / sizeof w[0]; k++) {
        snprintf(name, sizeof name, "blk.%d.%s", i, w[k].name);
        if (w[k].need < 0 || (!w[k].need && !ul_gguf_find_tensor(&m->gguf, name))) continue;
        if ((rc = ul_model_ld_weight(l, name, w[k].kind, w[k].ne0, w[k].ne1, w[k].out))) return rc;
    }
    /* the three q/k/v biases come together or not at all (the forward pass adds all) */
    if (!ly->bq != !ly->bk || !ly->bk != !ly->bv)
        return ul_model_ld_fail(l, "blk.%d: some of attn_q/k/v.bias missing", i);
    return 0;
}

/* The reranker's head: every part optional (llama.cpp's TENSOR_NOT_REQUIRED), checked in
 * shape when present. */
static int cls_head(ul_model_ld_t *l) {
    ul_model_t *m = l->m;
    const int64_t e = m->hp.n_embd, n = m->hp.n_cls_out;
    const struct {
        const char *name;
        int kind;
        int64_t ne0, ne1;
        const ul_gguf_tensor_t **out;
    } w[] = {
        {"cls.weight", 0, e, e, &m->cls},
        {"cls.bias", 2, e, 1, &m->cls_b},
        {"cls.output.weight", 0, e, n, &m->cls_out},
        {"cls.output.bias", 2, n, 1, &m->cls_out_b},
    };
    for (size_t k = 0; k < sizeof w / sizeof w[0]; k++) {
        if (!ul_gguf_find_tensor(&m->gguf, w[k].name)) continue;
        int rc = ul_model_ld_weight(l, w[k].name, w[k].kind, w[k].ne0, w[k].ne1, w[k].out);
        if (rc) return rc;
    }
    return 0;
}

int ul_model_bert_weights(ul_model_ld_t *l) {
    ul_model_t *m = l->m;
    const ul_hparams_t *hp = &m->hp;
    const int64_t e = hp->n_embd;
    int rc;
    if (!(m->views = calloc((size_t)hp->n_layer * 3, sizeof *m->views))) return UL_ENOMEM;
    if ((rc = ul_model_ld_weight(l, "token_embd.weight", 0, e, hp->n_vocab, &m->tok_embd)) ||
        (!hp->rope_neox && (rc = ul_model_ld_weight(l, "position_embd.weight", 0, e,
                                                    hp->n_ctx_train, &m->pos_embd))) ||
        (rc = ul_model_ld_weight(l, "token_embd_norm.weight", 1, e, 1, &m->tok_norm)) ||
        (rc = ul_model_ld_weight(l, "token_embd_norm.bias", 2, e, 1, &m->tok_norm_b)))
        return rc;
    /* optional in llama.cpp (then nothing is added) */
    if (ul_gguf_find_tensor(&m->gguf, "token_types.weight") &&
        (rc = ul_model_ld_weight(l, "token_types.weight", 0, e, hp->n_token_types, &m->tok_types)))
        return rc;
    for (int i = 0; i < hp->n_layer; i++)
        if ((rc = bert_layer(l, i, &m->layers[i]))) return rc;
    return cls_head(l);
}
