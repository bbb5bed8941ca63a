/* The loader's gemma3 and phi3 parts, with llama.cpp's semantics (its src/models/gemma3.cpp,
 * phi3.cpp and the generic hparams code):
 *  - gemma3: embeddings scaled by sqrt(n_embd); every `*norm.weight` already holds (1 + w)
 *    (the GGUF converter adds the 1), so the norms are plain RMSNorm; per-head q/k norms,
 *    post-attention and post-FFN norms, GeGLU; Q scaled by 1/sqrt(key_length) before
 *    attention (1/sqrt(n_embd / n_head) for the 62-layer 27B model, as llama.cpp decides it
 *    by layer count); with `attention.sliding_window` > 0, layer il is a sliding-window layer
 *    when il % P < P - 1 for P = `attention.sliding_window_pattern` (default 6; 0: every
 *    layer; an array gives each layer's flag), with RoPE base `rope.freq_base_swa` (default
 *    10000) and frequency scale 1; `final_logit_softcapping` when present.
 *  - phi3: fused `attn_qkv` ([n_embd, q + 2 kv]) or separate q/k/v; `ffn_up` holds gate and
 *    up ([n_embd, 2 n_ff], gate first); Q scaled by 1/sqrt(head_dim) before attention;
 *    LongRoPE factors `rope_factors_long/short` with `rope.scaling.attn_factor`;
 *    `attention.sliding_window` ignored (llama.cpp disables SWA for phi3).
 * Fused tensors become views (row ranges) so the forward pass sees ordinary wq/wk/wv and
 * ffn_gate/ffn_up. What llama.cpp accepts but this engine does not compute (biases on these
 * architectures) is refused by name. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_impl.h"
#include "uvllm/err.h"

enum { V_Q, V_K, V_V, V_GATE, V_UP, VIEWS_PER_LAYER };

static int is(const ul_model_ld_t *l, const char *arch) { return !strcmp(l->m->hp.arch, arch); }

static const ul_gguf_kv_t *arch_key(const ul_model_ld_t *l, const char *suffix, char *key,
                                    size_t n) {
    snprintf(key, n, "%s.%s", l->m->hp.arch, suffix);
    return ul_gguf_find(&l->m->gguf, key);
}

/* An optional float key that may be 0 (off): absent gives 0. */
static int opt_float0(ul_model_ld_t *l, const char *suffix, float *out) {
    char key[96];
    *out = 0;
    if (!arch_key(l, suffix, key, sizeof key)) return 0;
    float v;
    if (ul_gguf_get_f32(&l->m->gguf, key, &v))
        return ul_model_ld_fail(l, "key '%s': not a float", key);
    if (!isfinite(v) || v < 0 || v > 1e6f)
        return ul_model_ld_fail(l, "key '%s' = %g out of range", key, v);
    *out = v;
    return 0;
}

/* Which layers slide (llama.cpp's load_swa_pattern(ml, 6) with set_swa_pattern). */
static int swa_pattern(ul_model_ld_t *l) {
    ul_model_t *m = l->m;
    const int32_t n = m->hp.n_layer;
    char key[96];
    const ul_gguf_kv_t *kv = arch_key(l, "attention.sliding_window_pattern", key, sizeof key);
    if (kv && kv->type == UL_GGUF_ARRAY) {
        if (kv->n != (uint64_t)n)
            return ul_model_ld_fail(l, "key '%s': %llu entries for %d layers", key,
                                    (unsigned long long)kv->n, n);
        for (int32_t il = 0; il < n; il++) {
            int64_t v;
            if (kv->arr_type == UL_GGUF_BOOL)
                v = kv->val[il] != 0;
            else if (ul_gguf_arr_i64(kv, (uint64_t)il, &v))
                return ul_model_ld_fail(l, "key '%s': not an array of integers or bools", key);
            m->layers[il].swa = v != 0;
        }
        return 0;
    }
    int32_t p;
    int rc = ul_model_ld_int(l, "attention.sliding_window_pattern", 6, 0, 1 << 20, &p);
    if (rc) return rc;
    for (int32_t il = 0; il < n; il++) m->layers[il].swa = p == 0 || il % p < p - 1;
    return 0;
}

static int gemma3_hparams(ul_model_ld_t *l) {
    ul_hparams_t *hp = &l->m->hp;
    int rc = ul_model_ld_int(l, "attention.sliding_window", 0, 0, 1 << 30, &hp->n_swa);
    if (!rc) rc = opt_float0(l, "final_logit_softcapping", &hp->final_softcap);
    if (rc) return rc;
    if (hp->n_swa > 0 &&
        (rc = ul_model_ld_float(l, "rope.freq_base_swa", 10000.0f, 1e12f, &hp->rope_freq_base_swa)))
        return rc;
    /* ggml_scale by sqrtf(n_embd); Q by f_attention_scale */
    hp->embd_scale = sqrtf((float)hp->n_embd);
    hp->q_scale = hp->n_layer == 62 ? 1.0f / sqrtf((float)(hp->n_embd / hp->n_head))
                                    : 1.0f / sqrtf((float)hp->head_dim);
    hp->ffn_gelu = 1;
    return 0;
}

static int phi3_hparams(ul_model_ld_t *l) {
    ul_hparams_t *hp = &l->m->hp;
    if (hp->head_dim * hp->n_head != hp->n_embd)
        return ul_model_ld_fail(
            l, "phi3: head_count %d x key_length %d differs from embedding_length %d", hp->n_head,
            hp->head_dim, hp->n_embd);
    hp->q_scale = 1.0f / sqrtf((float)hp->head_dim);
    return ul_model_ld_int(l, "rope.scaling.original_context_length", hp->n_ctx_train, 1, 1 << 30,
                           &hp->n_ctx_orig);
}

int ul_model_arch_hparams(ul_model_ld_t *l) {
    ul_hparams_t *hp = &l->m->hp;
    hp->rope_attn_factor = 1.0f;
    hp->n_ctx_orig = hp->n_ctx_train;
    if (!is(l, "gemma3") && !is(l, "phi3")) return 0;
    /* llama.cpp multiplies every RoPE's cos and sin by it (phi3's LongRoPE files carry it;
     * llama/qwen files here keep ignoring it, as before) */
    int rc = ul_model_ld_float(l, "rope.scaling.attn_factor", 1.0f, 1e3f, &hp->rope_attn_factor);
    if (rc) return rc;
    /* llama.cpp requires the epsilon for both (the generic default would be wrong) */
    char key[96];
    if (!arch_key(l, "attention.layer_norm_rms_epsilon", key, sizeof key))
        return ul_model_ld_fail(l, "missing key '%s'", key);
    return is(l, "gemma3") ? gemma3_hparams(l) : phi3_hparams(l);
}

/* views[v] = rows [r0, r0 + rows) of t */
static void view(ul_gguf_tensor_t *v, const ul_gguf_tensor_t *t, int64_t r0, int64_t rows) {
    const size_t rb = ul_type_row_bytes((int)t->type, t->ne[0]);
    *v = *t;
    v->ne[1] = rows;
    v->data = (const uint8_t *)t->data + (size_t)r0 * rb;
    v->offset += (uint64_t)r0 * rb;
    v->nbytes = (uint64_t)rows * rb;
}

/* Refuses tensors llama.cpp would load for this architecture but our forward pass ignores. */
static int refuse_extra(ul_model_ld_t *l, int i) {
    static const char *const extra[] = {"attn_qkv.bias", "attn_q.bias", "attn_k.bias",
                                        "attn_v.bias"};
    for (size_t k = 0; k < sizeof extra / sizeof extra[0]; k++) {
        char name[64];
        snprintf(name, sizeof name, "blk.%d.%s", i, extra[k]);
        if (ul_gguf_find_tensor(&l->m->gguf, name))
            return ul_model_ld_fail(l, "tensor '%s' is not supported for %s", name, l->m->hp.arch);
    }
    return 0;
}

/* attn_qkv when the file has it (both architectures may fuse, as llama.cpp's
 * create_tensor_qkv allows): views for wq, wk, wv. */
static int fused_qkv(ul_model_ld_t *l, int i, ul_layer_t *ly, ul_gguf_tensor_t *v) {
    const ul_hparams_t *hp = &l->m->hp;
    const int64_t q = (int64_t)hp->n_head * hp->head_dim,
                  kv = (int64_t)hp->n_head_kv * hp->head_dim;
    char name[64];
    snprintf(name, sizeof name, "blk.%d.attn_qkv.weight", i);
    if (!ul_gguf_find_tensor(&l->m->gguf, name)) {
        snprintf(name, sizeof name, "blk.%d.attn_q.weight", i);
        if (is(l, "phi3") && !ul_gguf_find_tensor(&l->m->gguf, name))
            return ul_model_ld_fail(l, "missing tensor 'blk.%d.attn_qkv.weight' (or attn_q/k/v)",
                                    i);
        return 0; /* separate q/k/v: the common table loads them */
    }
    const ul_gguf_tensor_t *t;
    int rc = ul_model_ld_weight(l, name, 0, hp->n_embd, q + 2 * kv, &t);
    if (rc) return rc;
    view(&v[V_Q], t, 0, q);
    view(&v[V_K], t, q, kv);
    view(&v[V_V], t, q + kv, kv);
    ly->wq = &v[V_Q], ly->wk = &v[V_K], ly->wv = &v[V_V];
    return 0;
}

/* phi3's ffn_up [n_embd, 2 n_ff]: gate rows first, then up (ggml_swiglu's halves). */
static int phi3_ffn(ul_model_ld_t *l, int i, ul_layer_t *ly, ul_gguf_tensor_t *v) {
    const ul_hparams_t *hp = &l->m->hp;
    char name[64];
    snprintf(name, sizeof name, "blk.%d.ffn_up.weight", i);
    const ul_gguf_tensor_t *t;
    int rc = ul_model_ld_weight(l, name, 0, hp->n_embd, 2 * (int64_t)hp->n_ff, &t);
    if (rc) return rc;
    view(&v[V_GATE], t, 0, hp->n_ff);
    view(&v[V_UP], t, hp->n_ff, hp->n_ff);
    ly->ffn_gate = &v[V_GATE], ly->ffn_up = &v[V_UP];
    return 0;
}

static int gemma3_layer(ul_model_ld_t *l, int i, ul_layer_t *ly) {
    const ul_hparams_t *hp = &l->m->hp;
    const struct {
        const char *suffix;
        int64_t ne0;
        const ul_gguf_tensor_t **out;
    } w[] = {
        {"attn_q_norm", hp->head_dim, &ly->q_norm},
        {"attn_k_norm", hp->head_dim, &ly->k_norm},
        {"post_attention_norm", hp->n_embd, &ly->attn_post_norm},
        {"post_ffw_norm", hp->n_embd, &ly->ffn_post_norm},
    };
    for (size_t k = 0; k < sizeof w / sizeof w[0]; k++) {
        char name[64];
        snprintf(name, sizeof name, "blk.%d.%s.weight", i, w[k].suffix);
        int rc = ul_model_ld_weight(l, name, 1, w[k].ne0, 1, w[k].out);
        if (rc) return rc;
    }
    return 0;
}

int ul_model_arch_layer(ul_model_ld_t *l, int i, ul_layer_t *ly) {
    const int gemma3 = is(l, "gemma3"), phi3 = is(l, "phi3");
    if (!gemma3 && !phi3) return 0;
    ul_model_t *m = l->m;
    if (!m->views &&
        !(m->views = calloc((size_t)m->hp.n_layer * VIEWS_PER_LAYER, sizeof *m->views)))
        return UL_ENOMEM;
    ul_gguf_tensor_t *v = m->views + (size_t)i * VIEWS_PER_LAYER;
    int rc = refuse_extra(l, i);
    if (!rc) rc = fused_qkv(l, i, ly, v);
    if (!rc && phi3) rc = phi3_ffn(l, i, ly, v);
    if (!rc && gemma3) rc = gemma3_layer(l, i, ly);
    return rc;
}

int ul_model_arch_model(ul_model_ld_t *l) {
    ul_model_t *m = l->m;
    const ul_hparams_t *hp = &m->hp;
    if (is(l, "gemma3")) {
        if (hp->n_swa > 0) return swa_pattern(l);
        return 0;
    }
    if (!is(l, "phi3")) return 0;
    const char *names[] = {"rope_factors_long.weight", "rope_factors_short.weight"};
    const ul_gguf_tensor_t **outs[] = {&m->rope_long, &m->rope_short};
    for (int k = 0; k < 2; k++) {
        if (!ul_gguf_find_tensor(&m->gguf, names[k])) continue;
        int rc = ul_model_ld_weight(l, names[k], 3, hp->n_rot / 2, 1, outs[k]);
        if (rc) return rc;
    }
    return 0;
}
