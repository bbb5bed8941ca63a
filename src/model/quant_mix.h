/* Quantisation recipes ("q4_k_m", "q5_k_m", "q6_k", "iq4_nl", "iq4_xs"): which ggml type
 * each tensor of a model gets, as llama.cpp's llama_model_quantize picks them for the
 * ftype of the same name without an importance matrix. `uvllm quantize` and `uvllm synth`
 * use it; pure only in the sense that it reads names, shapes and a few hyperparameters,
 * never tensor data. */
#ifndef UL_MODEL_QUANT_MIX_H
#define UL_MODEL_QUANT_MIX_H

#include <stdint.h>

typedef struct {
    const char *name; /* "q4_k_m" */
    int ftype;        /* general.file_type (llama_ftype) */
    int base;         /* the type most matrices get */
} ul_qmix_recipe_t;

/* The recipe of that name, or NULL. */
const ul_qmix_recipe_t *ul_qmix_find(const char *name);
/* "q4_k_m|q5_k_m|q6_k|iq4_nl|iq4_xs" for usage texts */
const char *ul_qmix_names(void);

/* What the rules read from the model: block_count, expert_count (0 if absent) and the
 * attention head counts (n_gqa = n_head / n_head_kv). */
typedef struct {
    int n_layer, n_expert, n_head, n_head_kv;
} ul_qmix_model_t;

typedef struct {
    const char *name; /* NUL-terminated tensor name */
    int n_dims;
    int64_t ne0; /* row length */
} ul_qmix_tensor_t;

/* out[i] = the type tensor i gets, or -1 where llama.cpp keeps the tensor as it is (1-d
 * tensors, norms, router weights, ...). The tensors may come in any order: the per-layer
 * rules count them in llama.cpp's order (by layer, then name). Returns 0 or UL_ENOMEM /
 * UL_EINVAL (an ffn_down whose layer is not in [0, n_layer) in a mixture-of-experts). */
int ul_qmix_types(const ul_qmix_recipe_t *r, const ul_qmix_model_t *m, const ul_qmix_tensor_t *t,
                  int n, int *out);

#endif
