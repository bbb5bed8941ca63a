/* The per-tensor type rules of llama.cpp's src/llama-quant.cpp (llama_tensor_get_type and
 * tensor_type_fallback) for the K-quant mixtures and IQ4, without an importance matrix and
 * without user overrides:
 *  - output.weight, and token_embd.weight when the output is tied to it: Q6_K (Q8_0 when
 *    its rows are not whole blocks of the base type);
 *  - attn_v / attn_qkv / attn_kv_b: Q6_K in the "more bits" layers for Q4_K_M / Q5_K_M
 *    (the first and last eighth and every third in between, counted over these tensors),
 *    Q5_K for IQ4 when n_head / n_head_kv >= 4; Q8_0 with exactly 8 experts;
 *  - attn_k: Q8_0 with exactly 8 experts;
 *  - ffn_down: Q6_K in the "more bits" layers (Q4_K_M, Q5_K_M), Q5_K in the first eighth
 *    for IQ4; the layer is counted over ffn_down tensors, or read from the name when the
 *    model has experts;
 *  - attn_output: Q5_K with exactly 8 experts (Q4_K_M, IQ4);
 *  - then rows that are not whole blocks fall back (Q4_K -> Q5_0, Q5_K -> Q5_1,
 *    Q6_K -> Q8_0, IQ4_XS -> IQ4_NL, and F16 if that still does not fit).
 * Not modelled: Falcon's rules, the 70B attn_v bump (llama.cpp's model-size detection). */
#include "model/quant_mix.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf.h"
#include "uvllm/err.h"

enum { FT_Q4_K_M = 15, FT_Q5_K_M = 17, FT_Q6_K = 18, FT_IQ4_NL = 25, FT_IQ4_XS = 30 };

static const ul_qmix_recipe_t g_recipes[] = {
    {"q4_k_m", FT_Q4_K_M, UL_TYPE_Q4_K},   {"q5_k_m", FT_Q5_K_M, UL_TYPE_Q5_K},
    {"q6_k", FT_Q6_K, UL_TYPE_Q6_K},       {"iq4_nl", FT_IQ4_NL, UL_TYPE_IQ4_NL},
    {"iq4_xs", FT_IQ4_XS, UL_TYPE_IQ4_XS},
};

const ul_qmix_recipe_t *ul_qmix_find(const char *name) {
    for (size_t i = 0; i < sizeof g_recipes / sizeof g_recipes[0]; i++)
        if (!strcmp(name, g_recipes[i].name)) return &g_recipes[i];
    return NULL;
}

const char *ul_qmix_names(void) { return "q4_k_m|q5_k_m|q6_k|iq4_nl|iq4_xs"; }

typedef enum { C_TOKEN_EMBD, C_ATTN_V, C_ATTN_K, C_ATTN_OUT, C_FFN_DOWN, C_OUTPUT, C_OTHER } cat_t;

static int has(const char *s, const char *sub) { return strstr(s, sub) != NULL; }

/* llama.cpp's tensor_get_category, folded to the categories these recipes treat apart */
static cat_t category(const char *n) {
    if (!strcmp(n, "output.weight")) return C_OUTPUT;
    if (!strcmp(n, "token_embd.weight") || !strcmp(n, "per_layer_token_embd.weight"))
        return C_TOKEN_EMBD;
    if (has(n, "attn_qkv.weight") || has(n, "attn_kv_b.weight") || has(n, "attn_v.weight"))
        return C_ATTN_V;
    if (has(n, "attn_k.weight")) return C_ATTN_K;
    if (has(n, "attn_q.weight")) return C_OTHER;
    if (has(n, "attn_output.weight")) return C_ATTN_OUT;
    if (has(n, "ffn_up") || has(n, "ffn_gate")) return C_OTHER;
    if (has(n, "ffn_down")) return C_FFN_DOWN;
    return C_OTHER;
}

/* llama.cpp's tensor_allows_quantization, for the tensor names GGUF language models use */
static int quantizable(const ul_qmix_tensor_t *t) {
    static const char *const never[] = {"_norm.weight",
                                        "ffn_gate_inp.weight",
                                        "ffn_gate_tid2eid.weight",
                                        "altup",
                                        "laurel",
                                        "per_layer_model_proj",
                                        "ssm_conv1d",
                                        "shortconv.conv.weight",
                                        "attn_rel_b.weight",
                                        "time_mix_first.weight",
                                        "time_mix_w0.weight",
                                        "time_mix_w1.weight",
                                        "time_mix_w2.weight",
                                        "time_mix_v0.weight",
                                        "time_mix_v1.weight",
                                        "time_mix_v2.weight",
                                        "time_mix_a0.weight",
                                        "time_mix_a1.weight",
                                        "time_mix_a2.weight",
                                        "time_mix_g1.weight",
                                        "time_mix_g2.weight",
                                        "time_mix_decay_w1.weight",
                                        "time_mix_decay_w2.weight",
                                        "time_mix_lerp_fused.weight",
                                        "indexer.k_proj.weight",
                                        "indexer.q_proj.weight"};
    const size_t len = strlen(t->name);
    if (t->n_dims < 2 || len < 6 || strcmp(t->name + len - 6, "weight")) return 0;
    for (size_t i = 0; i < sizeof never / sizeof never[0]; i++)
        if (has(t->name, never[i])) return 0;
    return strcmp(t->name, "position_embd.weight") && strcmp(t->name, "token_types.weight");
}

static int layer_of(const char *name) {
    int l = -1;
    return sscanf(name, "blk.%d.", &l) == 1 ? l : -1;
}

typedef struct {
    int layer, idx;
    const char *name;
} sort_key_t;

/* llama_model_loader's weight_name_comparer: layer (-1 for none), then name */
static int by_layer_name(const void *a, const void *b) {
    const sort_key_t *x = a, *y = b;
    return x->layer != y->layer ? (x->layer < y->layer ? -1 : 1) : strcmp(x->name, y->name);
}

static int more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

typedef struct {
    const ul_qmix_recipe_t *r;
    const ul_qmix_model_t *m;
    int n_wv, i_wv, i_down, tied;
} state_t;

static int pick(state_t *s, const ul_qmix_tensor_t *t, int *type) {
    const int ft = s->r->ftype, iq4 = ft == FT_IQ4_NL || ft == FT_IQ4_XS;
    const int km = ft == FT_Q4_K_M || ft == FT_Q5_K_M;
    const int gqa = s->m->n_head_kv > 0 ? s->m->n_head / s->m->n_head_kv : 1;
    int nt = s->r->base;
    const cat_t c = category(t->name);
    if (c == C_OUTPUT || (s->tied && c == C_TOKEN_EMBD)) {
        if (t->ne0 % ul_type_block_elems(nt))
            nt = UL_TYPE_Q8_0;
        else if (nt != UL_TYPE_Q8_0)
            nt = UL_TYPE_Q6_K;
    } else if (c == C_ATTN_V) {
        if (iq4 && gqa >= 4)
            nt = UL_TYPE_Q5_K;
        else if (km && more_bits(s->i_wv, s->n_wv))
            nt = UL_TYPE_Q6_K;
        if (s->m->n_expert == 8) nt = UL_TYPE_Q8_0;
        s->i_wv++;
    } else if (c == C_ATTN_K) {
        if (s->m->n_expert == 8) nt = UL_TYPE_Q8_0;
    } else if (c == C_FFN_DOWN) {
        int il = s->i_down, nl = s->m->n_layer;
        if (s->m->n_expert > 1) {
            il = layer_of(t->name);
            if (il < 0 || il >= nl) return UL_EINVAL;
        }
        if (km && more_bits(il, nl))
            nt = UL_TYPE_Q6_K;
        else if (iq4 && il < nl / 8)
            nt = UL_TYPE_Q5_K;
        s->i_down++;
    } else if (c == C_ATTN_OUT) {
        if (s->m->n_expert == 8 && (ft == FT_Q4_K_M || iq4)) nt = UL_TYPE_Q5_K;
    }
    *type = nt;
    return 0;
}

/* tensor_type_fallback: rows that are not whole blocks of the type */
static int fallback(int type, int64_t ne0) {
    if (ne0 % ul_type_block_elems(type) == 0) return type;
    switch (type) {
    case UL_TYPE_IQ4_XS:
        type = UL_TYPE_IQ4_NL;
        break;
    case UL_TYPE_Q4_K:
        type = UL_TYPE_Q5_0;
        break;
    case UL_TYPE_Q5_K:
        type = UL_TYPE_Q5_1;
        break;
    case UL_TYPE_Q6_K:
        type = UL_TYPE_Q8_0;
        break;
    default:
        break;
    }
    return ne0 % ul_type_block_elems(type) ? UL_TYPE_F16 : type;
}

int ul_qmix_types(const ul_qmix_recipe_t *r, const ul_qmix_model_t *m, const ul_qmix_tensor_t *t,
                  int n, int *out) {
    sort_key_t *order = malloc(sizeof *order * (size_t)(n > 0 ? n : 1));
    if (!order) return UL_ENOMEM;
    state_t s = {.r = r, .m = m, .tied = 1};
    for (int i = 0; i < n; i++) {
        order[i] = (sort_key_t){layer_of(t[i].name), i, t[i].name};
        out[i] = -1;
        s.n_wv += category(t[i].name) == C_ATTN_V;
        if (category(t[i].name) == C_OUTPUT) s.tied = 0;
    }
    qsort(order, (size_t)n, sizeof *order, by_layer_name);
    int rc = 0;
    for (int k = 0; k < n && !rc; k++) {
        const ul_qmix_tensor_t *ti = &t[order[k].idx];
        if (!quantizable(ti)) continue;
        int type;
        rc = pick(&s, ti, &type);
        if (!rc) out[order[k].idx] = fallback(type, ti->ne0);
    }
    free(order);
    return rc;
}
