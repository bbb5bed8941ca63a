/* Model loader: turns a validated GGUF into hyper-parameters and the weight table of a
 * `llama`, `qwen2` (q/k/v biases), `qwen3` (per-head q/k RMSNorm), `qwen3moe` (qwen3's
 * attention, a routed mixture of expert FFNs), `gemma3` or `phi3` model (their extras in
 * model_arch.c), or a `bert` / `nomic-bert` encoder (model_bert.c). Every hyper-parameter is
 * range-checked and every weight's presence, type and shape is compared with them here, once, so
 * the forward pass can index tensors without re-checking and a bad file fails at load with a
 * sentence naming the tensor or key. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf_util.h"
#include "model/model.h"
#include "model/model_impl.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

/* Bounds far above any real model, low enough that products of two of them fit in int32
 * arithmetic done by the forward pass (n_head * head_dim, n_layer * n_ctx...). */
#define MAX_EMBD (1 << 16)
#define MAX_LAYER 1024
#define MAX_HEAD 1024
#define MAX_FF (1 << 20)
#define MAX_CTX (1 << 24)
#define MAX_VOCAB (1 << 24)
#define MAX_HEAD_DIM 4096
#define MAX_EXPERT 1024 /* llama.cpp's LLAMA_MAX_EXPERTS */

typedef ul_model_ld_t ld_t;

int ul_model_ld_fail(ld_t *l, const char *fmt, ...) {
    if (!l->errlen) return UL_EFORMAT;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l->err, l->errlen, fmt, ap);
    va_end(ap);
    return UL_EFORMAT;
}

/* Reads `<arch>.<suffix>` into *out within [lo, hi]; def < 0 means required. */
static int hp_int(ld_t *l, const char *suffix, int64_t def, int64_t lo, int64_t hi, int32_t *out) {
    char key[96];
    snprintf(key, sizeof key, "%s.%s", l->m->hp.arch, suffix);
    int64_t v;
    int rc = ul_gguf_get_i64(&l->m->gguf, key, &v);
    if (rc == UL_ENOENT) {
        if (def < 0) return ul_model_ld_fail(l, "missing key '%s'", key);
        v = def;
    } else if (rc) {
        return ul_model_ld_fail(l, "key '%s': not an integer", key);
    }
    if (v < lo || v > hi)
        return ul_model_ld_fail(l, "key '%s' = %lld outside [%lld, %lld]", key, (long long)v,
                                (long long)lo, (long long)hi);
    *out = (int32_t)v;
    return 0;
}

/* Reads `<arch>.<suffix>` as a float within (0, hi]; absent gives def. */
static int hp_float(ld_t *l, const char *suffix, float def, float hi, float *out) {
    char key[96];
    snprintf(key, sizeof key, "%s.%s", l->m->hp.arch, suffix);
    float v;
    int rc = ul_gguf_get_f32(&l->m->gguf, key, &v);
    if (rc == UL_ENOENT)
        v = def;
    else if (rc)
        return ul_model_ld_fail(l, "key '%s': not a float", key);
    if (!isfinite(v) || v <= 0 || v > hi)
        return ul_model_ld_fail(l, "key '%s' = %g out of range", key, v);
    *out = v;
    return 0;
}

static int read_arch(ld_t *l) {
    ul_str_t s;
    int rc = ul_gguf_get_str(&l->m->gguf, "general.architecture", &s);
    if (rc == UL_ENOENT) return ul_model_ld_fail(l, "missing key 'general.architecture'");
    if (rc) return ul_model_ld_fail(l, "key 'general.architecture': not a string");
    if (s.len == 0 || s.len >= sizeof l->m->hp.arch || !ul_utf8_valid(s.ptr, s.len) ||
        memchr(s.ptr, 0, s.len))
        return ul_model_ld_fail(l, "key 'general.architecture': invalid name (%llu bytes)",
                                (unsigned long long)s.len);
    memcpy(l->m->hp.arch, s.ptr, s.len);
    l->m->hp.arch[s.len] = 0;
    const char *arch = l->m->hp.arch;
    if (!l->vocab_only && strcmp(arch, "llama") && strcmp(arch, "qwen2") && strcmp(arch, "qwen3") &&
        strcmp(arch, "qwen3moe") && strcmp(arch, "gemma3") && strcmp(arch, "phi3") &&
        strcmp(arch, "bert") && strcmp(arch, "nomic-bert"))
        return ul_model_ld_fail(
            l,
            "unsupported architecture '%s' (supported: llama, qwen2, qwen3, qwen3moe, "
            "gemma3, phi3, bert, nomic-bert)",
            arch);
    /* llama.cpp's LLAMA_ROPE_TYPE_NEOX architectures among ours */
    l->m->hp.rope_neox = !strcmp(arch, "qwen2") || !strcmp(arch, "qwen3") ||
                         !strcmp(arch, "qwen3moe") || !strcmp(arch, "gemma3") ||
                         !strcmp(arch, "phi3");
    return 0;
}

static int read_n_vocab(ld_t *l) {
    const ul_gguf_kv_t *kv = ul_gguf_find(&l->m->gguf, "tokenizer.ggml.tokens");
    if (!kv) return ul_model_ld_fail(l, "missing key 'tokenizer.ggml.tokens'");
    if (kv->type != UL_GGUF_ARRAY || kv->arr_type != UL_GGUF_STRING)
        return ul_model_ld_fail(l, "key 'tokenizer.ggml.tokens': not an array of strings");
    if (kv->n == 0 || kv->n > MAX_VOCAB)
        return ul_model_ld_fail(l, "key 'tokenizer.ggml.tokens': %llu tokens outside [1, %d]",
                                (unsigned long long)kv->n, MAX_VOCAB);
    l->m->hp.n_vocab = (int32_t)kv->n;
    return 0;
}

/* rope.scaling.type: absent or "linear" scales positions by 1/factor; "none" ignores the
 * factor; anything else changes the rotation itself and is refused rather than run wrong. */
static int read_rope_scaling(ld_t *l) {
    ul_hparams_t *hp = &l->m->hp;
    char key[96];
    snprintf(key, sizeof key, "%s.rope.scaling.type", hp->arch);
    ul_str_t t = {"linear", 6};
    int rc = ul_gguf_get_str(&l->m->gguf, key, &t);
    if (rc && rc != UL_ENOENT) return ul_model_ld_fail(l, "key '%s': not a string", key);
    hp->rope_freq_scale = 1.0f;
    if (ul_str_eq(t, "none")) return 0;
    if (!ul_str_eq(t, "linear"))
        return ul_model_ld_fail(l, "unsupported rope scaling '%.*s'", t.len > 32 ? 32 : (int)t.len,
                                t.ptr);
    float factor = 0;
    snprintf(key, sizeof key, "%s.rope.scaling.factor", hp->arch);
    rc = ul_gguf_get_f32(&l->m->gguf, key, &factor);
    if (rc == UL_ENOENT) {
        snprintf(key, sizeof key, "%s.rope.scale_linear", hp->arch);
        rc = ul_gguf_get_f32(&l->m->gguf, key, &factor);
    }
    if (rc == UL_ENOENT || factor == 0.0f) return 0; /* llama.cpp treats 0 as "no scaling" */
    if (rc || !isfinite(factor) || factor < 0 || factor > 1e6f)
        return ul_model_ld_fail(l, "key '%s': bad rope scaling factor", key);
    hp->rope_freq_scale = 1.0f / factor;
    return 0;
}

/* qwen3moe's router keys; llama.cpp's qwen3moe graph always softmaxes the router logits and
 * renormalises the selected weights to sum 1 (it reads no gating or norm key for it). */
static int read_moe_hparams(ld_t *l) {
    ul_hparams_t *hp = &l->m->hp;
    int rc;
    if ((rc = hp_int(l, "expert_count", -1, 1, MAX_EXPERT, &hp->n_expert)) ||
        (rc = hp_int(l, "expert_used_count", -1, 1, hp->n_expert, &hp->n_expert_used)))
        return rc;
    return hp_int(l, "expert_feed_forward_length", hp->n_ff / hp->n_expert_used, 1, MAX_FF,
                  &hp->n_ff_exp);
}

static int read_hparams(ld_t *l) {
    ul_hparams_t *hp = &l->m->hp;
    int rc;
    if ((rc = hp_int(l, "context_length", -1, 1, MAX_CTX, &hp->n_ctx_train)) ||
        (rc = hp_int(l, "embedding_length", -1, 1, MAX_EMBD, &hp->n_embd)) ||
        (rc = hp_int(l, "block_count", -1, 1, MAX_LAYER, &hp->n_layer)) ||
        (rc = hp_int(l, "feed_forward_length", -1, 1, MAX_FF, &hp->n_ff)) ||
        (rc = hp_int(l, "attention.head_count", -1, 1, MAX_HEAD, &hp->n_head)) ||
        (rc = hp_int(l, "attention.head_count_kv", hp->n_head, 1, hp->n_head, &hp->n_head_kv)))
        return rc;
    if (hp->n_head % hp->n_head_kv)
        return ul_model_ld_fail(l, "head_count %d is not a multiple of head_count_kv %d",
                                hp->n_head, hp->n_head_kv);
    char key[96];
    snprintf(key, sizeof key, "%s.attention.key_length", hp->arch);
    if (hp->n_embd % hp->n_head && !ul_gguf_find(&l->m->gguf, key))
        return ul_model_ld_fail(l, "embedding_length %d is not a multiple of head_count %d",
                                hp->n_embd, hp->n_head);
    if ((rc = hp_int(l, "attention.key_length", hp->n_embd / hp->n_head, 1, MAX_HEAD_DIM,
                     &hp->head_dim)))
        return rc;
    int32_t vlen;
    if ((rc = hp_int(l, "attention.value_length", hp->head_dim, 1, MAX_HEAD_DIM, &vlen))) return rc;
    if (vlen != hp->head_dim)
        return ul_model_ld_fail(l, "value_length %d differs from key_length %d (not supported)",
                                vlen, hp->head_dim);
    if ((rc = hp_int(l, "rope.dimension_count", hp->head_dim, 2, hp->head_dim, &hp->n_rot)))
        return rc;
    if (hp->n_rot % 2) return ul_model_ld_fail(l, "rope.dimension_count %d is odd", hp->n_rot);
    if ((rc = hp_float(l, "rope.freq_base", 10000.0f, 1e12f, &hp->rope_freq_base)) ||
        (rc = hp_float(l, "attention.layer_norm_rms_epsilon", 1e-5f, 1.0f, &hp->rms_eps)) ||
        (rc = hp_int(l, "pooling_type", 0, 0, 4, &hp->pooling)))
        return rc;
    if (!strcmp(hp->arch, "qwen3moe") && (rc = read_moe_hparams(l))) return rc;
    if ((rc = read_rope_scaling(l))) return rc;
    if (!strcmp(hp->arch, "bert") || !strcmp(hp->arch, "nomic-bert"))
        return ul_model_bert_hparams(l);
    return ul_model_arch_hparams(l);
}

static int weight_type_ok(uint32_t type) {
    switch (type) {
    case UL_TYPE_F32:
    case UL_TYPE_F16:
    case UL_TYPE_BF16:
    case UL_TYPE_Q8_0:
    case UL_TYPE_Q4_0:
    case UL_TYPE_Q4_1:
    case UL_TYPE_Q5_0:
    case UL_TYPE_Q5_1:
    case UL_TYPE_Q4_K:
    case UL_TYPE_Q5_K:
    case UL_TYPE_Q6_K:
    case UL_TYPE_IQ4_NL:
    case UL_TYPE_IQ4_XS:
        return 1;
    default:
        return 0;
    }
}

/* Finds a weight and checks it: a norm (is_norm 1), bias (2) or rope factor vector (3) is a
 * 1-d f32 vector of ne0, a matrix is 2-d [ne0 inputs, ne1 outputs] of a supported type. */
static int weight(ld_t *l, const char *name, int is_norm, int64_t ne0, int64_t ne1,
                  const ul_gguf_tensor_t **out) {
    const ul_gguf_tensor_t *t = ul_gguf_find_tensor(&l->m->gguf, name);
    if (!t) return ul_model_ld_fail(l, "missing tensor '%s'", name);
    if (is_norm && t->type != UL_TYPE_F32)
        return ul_model_ld_fail(l, "tensor '%s': type %s, %s must be f32", name,
                                ul_type_name((int)t->type),
                                is_norm == 3   ? "rope factors"
                                : is_norm == 2 ? "biases"
                                               : "norms");
    if (!weight_type_ok(t->type))
        return ul_model_ld_fail(l, "tensor '%s': unsupported type %s", name,
                                ul_type_name((int)t->type));
    if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != 1 || t->ne[3] != 1)
        return ul_model_ld_fail(
            l, "tensor '%s': shape [%lld, %lld, %lld, %lld], expected [%lld, %lld]", name,
            (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3],
            (long long)ne0, (long long)ne1);
    *out = t;
    return 0;
}

/* A stack of n matrices [ne0, ne1] on ne[2] (the experts of a MoE layer). */
static int weight3(ld_t *l, const char *name, int64_t ne0, int64_t ne1, int64_t n,
                   const ul_gguf_tensor_t **out) {
    const ul_gguf_tensor_t *t = ul_gguf_find_tensor(&l->m->gguf, name);
    if (!t) return ul_model_ld_fail(l, "missing tensor '%s'", name);
    if (!weight_type_ok(t->type))
        return ul_model_ld_fail(l, "tensor '%s': unsupported type %s", name,
                                ul_type_name((int)t->type));
    if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != n || t->ne[3] != 1)
        return ul_model_ld_fail(
            l, "tensor '%s': shape [%lld, %lld, %lld, %lld], expected [%lld, %lld, %lld]", name,
            (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3],
            (long long)ne0, (long long)ne1, (long long)n);
    *out = t;
    return 0;
}

/* qwen3moe's FFN: the router and the three expert stacks. */
static int moe_layer_weights(ld_t *l, int i, ul_layer_t *ly) {
    const ul_hparams_t *hp = &l->m->hp;
    const int64_t e = hp->n_embd, ff = hp->n_ff_exp, n = hp->n_expert;
    char name[64];
    int rc;
    snprintf(name, sizeof name, "blk.%d.ffn_gate_inp.weight", i);
    if ((rc = weight(l, name, 0, e, n, &ly->ffn_gate_inp))) return rc;
    snprintf(name, sizeof name, "blk.%d.ffn_gate_exps.weight", i);
    if ((rc = weight3(l, name, e, ff, n, &ly->ffn_gate_exps))) return rc;
    snprintf(name, sizeof name, "blk.%d.ffn_up_exps.weight", i);
    if ((rc = weight3(l, name, e, ff, n, &ly->ffn_up_exps))) return rc;
    snprintf(name, sizeof name, "blk.%d.ffn_down_exps.weight", i);
    return weight3(l, name, ff, e, n, &ly->ffn_down_exps);
}

/* The tensors only some architectures have, all required where they exist (as llama.cpp
 * requires them): qwen2's q/k/v biases, qwen3's per-head q/k norms. */
static int arch_layer_weights(ld_t *l, int i, ul_layer_t *ly) {
    const ul_hparams_t *hp = &l->m->hp;
    const int64_t q = (int64_t)hp->n_head * hp->head_dim,
                  kv = (int64_t)hp->n_head_kv * hp->head_dim;
    const int qwen2 = !strcmp(hp->arch, "qwen2"),
              qwen3 = !strcmp(hp->arch, "qwen3") || !strcmp(hp->arch, "qwen3moe");
    const struct {
        int on;
        const char *suffix;
        int kind;
        int64_t ne0;
        const ul_gguf_tensor_t **out;
    } w[] = {
        {qwen2, "attn_q.bias", 2, q, &ly->bq},
        {qwen2, "attn_k.bias", 2, kv, &ly->bk},
        {qwen2, "attn_v.bias", 2, kv, &ly->bv},
        {qwen3, "attn_q_norm.weight", 1, hp->head_dim, &ly->q_norm},
        {qwen3, "attn_k_norm.weight", 1, hp->head_dim, &ly->k_norm},
    };
    for (size_t k = 0; k < sizeof w / sizeof w[0]; k++) {
        if (!w[k].on) continue;
        char name[64];
        snprintf(name, sizeof name, "blk.%d.%s", i, w[k].suffix);
        int rc = weight(l, name, w[k].kind, w[k].ne0, 1, w[k].out);
        if (rc) return rc;
    }
    return 0;
}

static int layer_weights(ld_t *l, int i, ul_layer_t *ly) {
    const ul_hparams_t *hp = &l->m->hp;
    int64_t e = hp->n_embd, q = (int64_t)hp->n_head * hp->head_dim;
    int64_t kv = (int64_t)hp->n_head_kv * hp->head_dim, ff = hp->n_ff;
    const struct {
        const char *suffix;
        int norm;
        int64_t ne0, ne1;
        const ul_gguf_tensor_t **out;
    } w[] = {
        {"attn_norm", 1, e, 1, &ly->attn_norm}, {"attn_q", 0, e, q, &ly->wq},
        {"attn_k", 0, e, kv, &ly->wk},          {"attn_v", 0, e, kv, &ly->wv},
        {"attn_output", 0, q, e, &ly->wo},      {"ffn_norm", 1, e, 1, &ly->ffn_norm},
        {"ffn_gate", 0, e, ff, &ly->ffn_gate},  {"ffn_up", 0, e, ff, &ly->ffn_up},
        {"ffn_down", 0, ff, e, &ly->ffn_down},
    };
    int rc = ul_model_arch_layer(l, i, ly); /* sets the fused ones (phi3, attn_qkv) */
    if (rc) return rc;
    const size_t n_w = sizeof w / sizeof w[0] - (hp->n_expert ? 3 : 0); /* no dense FFN */
    for (size_t k = 0; k < n_w; k++) {
        if (*w[k].out) continue;
        char name[64];
        snprintf(name, sizeof name, "blk.%d.%s.weight", i, w[k].suffix);
        if ((rc = weight(l, name, w[k].norm, w[k].ne0, w[k].ne1, w[k].out))) return rc;
    }
    if (hp->n_expert && (rc = moe_layer_weights(l, i, ly))) return rc;
    return arch_layer_weights(l, i, ly);
}

static int load_weights(ld_t *l) {
    ul_model_t *m = l->m;
    const ul_hparams_t *hp = &m->hp;
    int rc;
    if (hp->encoder) {
        m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
        if (!m->layers) return UL_ENOMEM;
        return ul_model_bert_weights(l);
    }
    if ((rc = weight(l, "token_embd.weight", 0, hp->n_embd, hp->n_vocab, &m->tok_embd)) ||
        (rc = weight(l, "output_norm.weight", 1, hp->n_embd, 1, &m->output_norm)))
        return rc;
    if (ul_gguf_find_tensor(&m->gguf, "output.weight")) {
        if ((rc = weight(l, "output.weight", 0, hp->n_embd, hp->n_vocab, &m->output))) return rc;
    } else {
        m->output = m->tok_embd; /* tied embeddings */
    }
    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) return UL_ENOMEM;
    for (int i = 0; i < hp->n_layer; i++)
        if ((rc = layer_weights(l, i, &m->layers[i]))) return rc;
    /* Llama 3.x rope scaling: the converter bakes it into per-frequency divisors, which
     * llama.cpp's llama graph applies (its qwen2/qwen3 graphs pass none) */
    if (ul_gguf_find_tensor(&m->gguf, "rope_freqs.weight")) {
        if (strcmp(hp->arch, "llama"))
            UL_LOG_WARN("model: tensor 'rope_freqs.weight' is ignored for %s", hp->arch);
        else if ((rc = weight(l, "rope_freqs.weight", 3, hp->n_rot / 2, 1, &m->rope_freqs)))
            return rc;
    }
    return ul_model_arch_model(l);
}

static int load(ld_t *l) {
    int rc = read_arch(l);
    if (!rc) rc = read_n_vocab(l);
    if (rc) return rc;
    if (l->vocab_only) {
        /* Vocabulary files carry the hyper-parameters of some model, often of another
         * architecture; they are informative only, so a missing or odd one is no error. */
        char save[1] = {0};
        ld_t quiet = {l->m, 1, save, 0};
        (void)read_hparams(&quiet);
    } else if ((rc = read_hparams(l)) || (rc = load_weights(l))) {
        return rc;
    }
    rc = ul_vocab_load(&l->m->gguf, &l->m->vocab, l->err, l->errlen);
    if (rc && l->errlen && !l->err[0])
        snprintf(l->err, l->errlen, "vocabulary: %s", ul_strerror(rc));
    return rc;
}

static int finish(ul_model_t *m, int rc, int vocab_only, ul_model_t **out, char *err,
                  size_t errlen) {
    if (rc) {
        if (errlen && !err[0])
            snprintf(err, errlen, "%s", m->gguf.err[0] ? m->gguf.err : ul_strerror(rc));
        ul_model_free(m);
        return rc;
    }
    ld_t l = {m, vocab_only, err, errlen};
    rc = load(&l);
    if (rc) {
        if (errlen && !err[0]) snprintf(err, errlen, "%s", ul_strerror(rc));
        if (errlen) ul_sanitize_line(err);
        ul_model_free(m);
        return rc;
    }
    *out = m;
    return 0;
}

int ul_model_load(const char *path, int vocab_only, ul_model_t **out, char *err, size_t errlen) {
    *out = NULL;
    if (errlen) err[0] = 0;
    ul_model_t *m = calloc(1, sizeof *m);
    if (!m) return UL_ENOMEM;
    int rc = ul_gguf_open(&m->gguf, path);
    return finish(m, rc, vocab_only, out, err, errlen);
}

int ul_model_load_mem(const void *data, size_t size, int vocab_only, ul_model_t **out, char *err,
                      size_t errlen) {
    *out = NULL;
    if (errlen) err[0] = 0;
    ul_model_t *m = calloc(1, sizeof *m);
    if (!m) return UL_ENOMEM;
    int rc = ul_gguf_open_mem(&m->gguf, data, size);
    return finish(m, rc, vocab_only, out, err, errlen);
}

void ul_model_free(ul_model_t *m) {
    if (!m) return;
    if (m->vocab) ul_vocab_free(m->vocab);
    free(m->layers);
    free(m->views);
    ul_gguf_free(&m->gguf);
    free(m);
}

/* ---- for the per-architecture loaders (model_impl.h) ---- */

int ul_model_ld_int(ul_model_ld_t *l, const char *suffix, int64_t def, int64_t lo, int64_t hi,
                    int32_t *out) {
    return hp_int(l, suffix, def, lo, hi, out);
}

int ul_model_ld_float(ul_model_ld_t *l, const char *suffix, float def, float hi, float *out) {
    return hp_float(l, suffix, def, hi, out);
}

int ul_model_ld_weight(ul_model_ld_t *l, const char *name, int kind, int64_t ne0, int64_t ne1,
                       const ul_gguf_tensor_t **out) {
    return weight(l, name, kind, ne0, ne1, out);
}
