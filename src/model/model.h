/* A loaded model: the validated GGUF, hyper-parameters and the weight table of the
 * `llama`, `qwen2`, `qwen3`, `qwen3moe`, `gemma3`, `phi3`, `bert` or `nomic-bert`
 * architecture, plus its vocabulary. Read-only after ul_model_load; shared by every thread. */
#ifndef UL_MODEL_MODEL_H
#define UL_MODEL_MODEL_H

#include "model/gguf.h"
#include "model/vocab.h"

typedef struct ul_hparams_s {
    char arch[32];
    int32_t n_vocab, n_ctx_train, n_embd, n_layer, n_head, n_head_kv, n_ff;
    int32_t head_dim;      /* n_embd / n_head unless attention.key_length says otherwise */
    int32_t n_rot;         /* rope.dimension_count, default head_dim */
    float rope_freq_base;  /* default 10000 */
    float rope_freq_scale; /* 1 / rope.scaling.factor for linear scaling, default 1 */
    float rms_eps;         /* attention.layer_norm_rms_epsilon, default 1e-5 */
    int32_t rope_neox;     /* 1: RoPE rotates pairs (i, i + n_rot/2) (llama.cpp's NEOX mode,
                            * qwen2/qwen3/gemma3/phi3); 0: adjacent pairs (NORM mode, llama) */
    /* gemma3 / phi3 (model_arch.c); zero for the other architectures */
    int32_t n_swa;            /* attention.sliding_window: a sliding-window layer (ul_layer_t.swa)
                               * sees the keys at positions p > pos - n_swa; 0: none */
    float rope_freq_base_swa; /* RoPE base of sliding-window layers (rope.freq_base_swa, default
                               * 10000); their frequency scale is 1 */
    float q_scale;            /* > 0: Q multiplied by it (f32) before attention and the scores not
                               * scaled again, as llama.cpp's gemma3/phi3 graphs; 0: scores scaled
                               * by 1/sqrt(head_dim) */
    float embd_scale;         /* > 0: token embeddings multiplied by it (gemma3: sqrt(n_embd)) */
    float final_softcap;      /* > 0: logits = cap * tanh(logits / cap) (final_logit_softcapping) */
    int32_t ffn_gelu;         /* 1: GeGLU, gelu(gate) * up (gemma3); 0: SwiGLU */
    int32_t n_ctx_orig;       /* rope.scaling.original_context_length: phi3's long RoPE factors
                               * apply to contexts above it, the short ones up to it */
    float rope_attn_factor;   /* rope.scaling.attn_factor (phi3 LongRoPE): multiplies RoPE's cos
                               * and sin; 1 when absent */
    /* mixture of experts (qwen3moe), 0 for dense models: expert_count, expert_used_count,
     * expert_feed_forward_length (default n_ff / n_expert_used, as llama.cpp) */
    int32_t n_expert, n_expert_used, n_ff_exp;
    /* <arch>.pooling_type, llama.cpp's values (backend.h UL_POOL_*: 0 none, 1 mean, 2 cls,
     * 3 last, 4 rank); 0 when absent, as llama.cpp treats a decoder */
    int32_t pooling;
    /* bert, nomic-bert (model_bert.c): an encoder that only embeds (no output matrix, no KV
     * cache), with LayerNorm (attention.layer_norm_epsilon) and bidirectional attention;
     * nomic-bert sets rope_neox (RoPE instead of position_embd) */
    int32_t encoder;       /* 1: bert, nomic-bert */
    float norm_eps;        /* LayerNorm epsilon */
    int32_t n_token_types; /* tokenizer.ggml.token_type_count (rows of tok_types) */
    int32_t n_cls_out;     /* rows of cls_out: <arch>.classifier.output_labels' count, else 1 */
} ul_hparams_t;

typedef struct ul_layer_s {
    const ul_gguf_tensor_t *attn_norm;         /* [n_embd] f32 */
    const ul_gguf_tensor_t *wq, *wk, *wv, *wo; /* rows of ne[0] inputs */
    const ul_gguf_tensor_t *ffn_norm;          /* [n_embd] f32 */
    const ul_gguf_tensor_t *ffn_gate, *ffn_up, *ffn_down;
    const ul_gguf_tensor_t *bq, *bk, *bv;    /* [q_dim], [kv_dim], [kv_dim] f32 (qwen2), or NULL */
    const ul_gguf_tensor_t *q_norm, *k_norm; /* [head_dim] f32, per-head RMSNorm of q and k
                                              * before RoPE (qwen3, gemma3), or NULL */
    const ul_gguf_tensor_t *attn_post_norm;  /* [n_embd] f32: RMSNorm of the attention output
                                              * before the residual add (gemma3), or NULL */
    const ul_gguf_tensor_t *ffn_post_norm;   /* [n_embd] f32: the same for the FFN output */
    /* bert: [n_embd] f32 (ffn_up_b [n_ff]), each optional; attn_norm and ffn_norm are NULL,
     * ffn_gate too (nomic-bert: set, SwiGLU, and no FFN biases) */
    const ul_gguf_tensor_t *bo, *ffn_up_b, *ffn_down_b;
    const ul_gguf_tensor_t *attn_out_norm, *attn_out_norm_b; /* LayerNorm after attention */
    const ul_gguf_tensor_t *out_norm, *out_norm_b;           /* LayerNorm after the FFN */
    int32_t swa; /* 1: sliding-window layer (hp.n_swa keys, RoPE base rope_freq_base_swa) */
    /* qwen3moe, instead of ffn_gate/up/down (NULL then): the router [n_embd, n_expert]
     * and the experts stacked on ne[2]: gate, up [n_embd, n_ff_exp, n_expert], down
     * [n_ff_exp, n_embd, n_expert] (expert e's matrix starts at row e * ne[1]) */
    const ul_gguf_tensor_t *ffn_gate_inp, *ffn_gate_exps, *ffn_up_exps, *ffn_down_exps;
} ul_layer_t;

struct ul_model_s {
    ul_gguf_t gguf;
    ul_hparams_t hp;
    const ul_gguf_tensor_t *tok_embd;    /* [n_vocab][n_embd] */
    const ul_gguf_tensor_t *output_norm; /* [n_embd] */
    const ul_gguf_tensor_t *output;      /* [n_vocab][n_embd]; == tok_embd when tied */
    const ul_gguf_tensor_t *rope_freqs;  /* [n_rot/2] f32: RoPE frequency i is divided by
                                          * element i (Llama 3.x rope scaling), or NULL */
    const ul_gguf_tensor_t *rope_long;   /* [n_rot/2] f32: phi3 LongRoPE frequency divisors for */
    const ul_gguf_tensor_t *rope_short;  /* contexts above / up to n_ctx_orig, or NULL */
    /* bert: token_types [n_token_types][n_embd] (row 0 added to every token, as llama.cpp),
     * position_embd [n_ctx_train][n_embd] (NULL for nomic-bert), the embeddings' LayerNorm
     * [n_embd] (all f32 but the two tables, any row type); output and output_norm are NULL */
    const ul_gguf_tensor_t *tok_types, *pos_embd, *tok_norm, *tok_norm_b;
    /* bert reranker (pooling rank): the classification head llama.cpp applies to the [CLS]
     * row, each optional as there: cls [n_embd][n_embd] and cls_b [n_embd] (then tanh),
     * cls_out [n_cls_out][n_embd] and cls_out_b [n_cls_out] (f32 biases, any row type) */
    const ul_gguf_tensor_t *cls, *cls_b, *cls_out, *cls_out_b;
    ul_gguf_tensor_t *views; /* owned: row ranges of fused tensors (attn_qkv, phi3's 2*n_ff
                              * ffn_up) that stand in for wq/wk/wv and ffn_gate/ffn_up */
    ul_layer_t *layers;      /* [n_layer] */
    ul_vocab_t *vocab;
};
typedef struct ul_model_s ul_model_t;

/* Opens, validates, reads hyper-parameters, checks every tensor's presence, type and shape.
 * Files with only a vocabulary (no weights) load with layers == NULL when vocab_only.
 * On error: negative UL_E* and a one-line reason in err. */
int ul_model_load(const char *path, int vocab_only, ul_model_t **out, char *err, size_t errlen);
/* Same over a caller-owned GGUF image that must outlive the model (fuzzing, tests). */
int ul_model_load_mem(const void *data, size_t size, int vocab_only, ul_model_t **out, char *err,
                      size_t errlen);
void ul_model_free(ul_model_t *m);

#endif
