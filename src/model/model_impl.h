/* Loader internals shared by model.c and the per-architecture loaders (model_arch.c: gemma3,
 * phi3). Only the model module includes this. */
#ifndef UL_MODEL_MODEL_IMPL_H
#define UL_MODEL_MODEL_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"

typedef struct ul_model_ld_s {
    ul_model_t *m;
    int vocab_only;
    char *err; /* [errlen]: the one-line reason of a failure */
    size_t errlen;
} ul_model_ld_t;

/* model.c: writes the reason into l->err (when it has room) and returns UL_EFORMAT. */
__attribute__((format(printf, 2, 3))) int ul_model_ld_fail(ul_model_ld_t *l, const char *fmt, ...);
/* model.c's checked readers: `<arch>.<suffix>` as an integer in [lo, hi] (def < 0: required),
 * as a float in (0, hi] (absent: def); a weight by name (kind 0 matrix [ne0 inputs, ne1
 * outputs]; 1 norm, 2 bias, 3 rope factors: 1-d f32 of ne0). Each returns 0 or UL_EFORMAT
 * with the reason, naming the key or tensor, in l->err. */
int ul_model_ld_int(ul_model_ld_t *l, const char *suffix, int64_t def, int64_t lo, int64_t hi,
                    int32_t *out);
int ul_model_ld_float(ul_model_ld_t *l, const char *suffix, float def, float hi, float *out);
int ul_model_ld_weight(ul_model_ld_t *l, const char *name, int kind, int64_t ne0, int64_t ne1,
                       const ul_gguf_tensor_t **out);

/* model_arch.c: the hyper-parameters gemma3 and phi3 add (after the common ones), the
 * tensors they add or fuse for layer i (before the common table, which skips what is set
 * here), and the model-level extras (phi3's RoPE factors). No-ops for other architectures. */
int ul_model_arch_hparams(ul_model_ld_t *l);
int ul_model_arch_layer(ul_model_ld_t *l, int i, ul_layer_t *ly);
int ul_model_arch_model(ul_model_ld_t *l);
/* model_bert.c: bert's hyper-parameters (after the common ones) and all its tensors
 * (m->layers allocated by the caller). */
int ul_model_bert_hparams(ul_model_ld_t *l);
int ul_model_bert_weights(ul_model_ld_t *l);

#endif
