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

int ul_gpu_sample_pack(const ul_step_seq_t *seq, int32_t row, ul_tw_sample_t *out, int32_t *hist,
                       int32_t hist_cap, int32_t *n_hist, int32_t *bias_ids, float *bias_vals,
                       int32_t bias_cap, int32_t *n_bias) {
    const ul_sampling_t *sp = &seq->sampling;
    /* engine/sampling.c's penalties_active and window; a chained entry's history has its
     * input token after the last (engine/worker.c extend_histories), unknown yet */
    const int chained = seq->chain > 0;
    const int32_t n_h = (seq->history ? seq->n_history : 0) + chained;
    int32_t w = 0;
    if (sp->repeat_last_n != 0 && n_h > 0 &&
        (sp->repeat_penalty != 1.0f || sp->frequency_penalty != 0.0f ||
         sp->presence_penalty != 0.0f))
        w = sp->repeat_last_n < 0 || sp->repeat_last_n > n_h ? n_h : sp->repeat_last_n;
    int32_t nb = sp->logit_bias && sp->n_logit_bias > 0 ? sp->n_logit_bias : 0;
    if (w > hist_cap - *n_hist || nb > bias_cap - *n_bias) return UL_E2BIG;
    memset(out, 0, sizeof *out);
    out->row = row;
    out->temperature = sp->temperature;
    out->top_p = sp->top_p;
    out->min_p = sp->min_p;
    out->top_k = sp->top_k;
    out->repeat_penalty = sp->repeat_penalty;
    out->frequency_penalty = sp->frequency_penalty;
    out->presence_penalty = sp->presence_penalty;
    out->n_logprobs = sp->n_logprobs;
    out->rng[0] = seq->rng[0];
    out->rng[1] = seq->rng[1];
    out->hist_off = *n_hist;
    out->n_hist = w;
    const int32_t from_history = w - (w > 0 && chained);
    if (from_history)
        memcpy(hist + *n_hist, seq->history + (seq->n_history - from_history),
               (size_t)from_history * sizeof *hist);
    if (from_history < w) hist[*n_hist + w - 1] = -1; /* the input token: chain.h's gather */
    *n_hist += w;
    out->bias_off = *n_bias;
    out->n_bias = nb;
    for (int32_t i = 0; i < nb; i++) {
        bias_ids[*n_bias + i] = sp->logit_bias[i].id;
        bias_vals[*n_bias + i] = sp->logit_bias[i].bias;
    }
    *n_bias += nb;
    return 0;
}

void ul_gpu_sample_unpack(const ul_tw_sample_t *s, ul_step_seq_t *seq) {
    seq->out_token = s->token;
    seq->out_logprob = s->logprob;
    seq->out_n_top = s->n_top;
    for (int32_t i = 0; i < s->n_top && i < UL_MAX_LOGPROBS; i++) {
        seq->out_top_ids[i] = s->top_ids[i];
        seq->out_top_logprobs[i] = s->top_lp[i];
    }
    seq->rng[0] = s->rng[0];
    seq->rng[1] = s->rng[1];
}
