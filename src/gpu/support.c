/* The CUDA backend's refusal of models it cannot run (support.h). */
#include "gpu/support.h"

#include <stdio.h>
#include <string.h>

#include "gpu/twin.h"
#include "uvllm/err.h"

/* The architectures backend_gpu.c's forward pass implements: pre-norm attention with
 * optional q/k/v biases (qwen2) and per-head q/k norms (qwen3), SwiGLU FFN, RoPE in
 * either pairing. gemma3 (sliding windows, GeGLU, post-norms, soft-capping), phi3
 * (LongRoPE) and qwen3moe (experts) need kernels it does not have. */
static const char *const archs[] = {"llama", "qwen2", "qwen3"};

static int arch_ok(const char *a) {
    for (size_t i = 0; i < sizeof archs / sizeof *archs; i++)
        if (!strcmp(a, archs[i])) return 1;
    return 0;
}

/* A weight the kernels read: a type twin.h dequantises, rows whole blocks. */
static int tensor_ok(const ul_gguf_tensor_t *t, const char *what, char *err, size_t errlen) {
    if (!t) return snprintf(err, errlen, "tensor %s is missing", what), UL_ENOTSUP;
    if (ul_tw_block_bytes((int)t->type) > 0 && t->ne[0] % ul_tw_block_elems((int)t->type) == 0)
        return 0;
    snprintf(err, errlen, "tensor %.*s (%s) of type %s is not supported by the cuda backend",
             (int)(t->name.len < 96 ? t->name.len : 96), t->name.ptr ? t->name.ptr : "", what,
             ul_type_name((int)t->type));
    return UL_ENOTSUP;
}

int ul_gpu_check_model(const ul_model_t *m, char *err, size_t errlen) {
    const ul_hparams_t *hp = &m->hp;
    if (!m->layers) return snprintf(err, errlen, "the model has no weights"), UL_EINVAL;
    if (!arch_ok(hp->arch))
        return snprintf(err, errlen,
                        "architecture %s is not supported by the cuda backend (llama, qwen2, "
                        "qwen3 are); use --backend cpu",
                        hp->arch),
               UL_ENOTSUP;
    if (hp->head_dim > 256 || hp->n_head_kv < 1 || hp->n_head % hp->n_head_kv)
        return snprintf(err, errlen,
                        "head_dim %d with %d/%d heads: the cuda attention kernel takes head_dim "
                        "up to 256 and whole query groups",
                        hp->head_dim, hp->n_head, hp->n_head_kv),
               UL_ENOTSUP;
    int rc;
    if ((rc = tensor_ok(m->tok_embd, "token embedding", err, errlen)) ||
        (rc = tensor_ok(m->output, "output", err, errlen)))
        return rc;
    for (int il = 0; il < hp->n_layer; il++) {
        const ul_layer_t *L = &m->layers[il];
        if (!L->bq != !L->bk || !L->bq != !L->bv || !L->q_norm != !L->k_norm)
            return snprintf(err, errlen, "%s: q/k/v biases or q/k norms only in part", hp->arch),
                   UL_ENOTSUP;
        const ul_gguf_tensor_t *ts[] = {L->wq,       L->wk,     L->wv,      L->wo,
                                        L->ffn_gate, L->ffn_up, L->ffn_down};
        static const char *const names[] = {"attn_q",   "attn_k", "attn_v",  "attn_output",
                                            "ffn_gate", "ffn_up", "ffn_down"};
        for (size_t i = 0; i < sizeof ts / sizeof *ts; i++)
            if ((rc = tensor_ok(ts[i], names[i], err, errlen))) return rc;
    }
    return 0;
}
