/* The per-architecture pieces of the forward pass, kept out of forward.c's `llama` body:
 * qwen2's q/k/v biases, qwen3's per-head q/k RMSNorm, and RoPE in NEOX mode (pairs
 * (i, i + n_rot/2), llama.cpp's LLAMA_ROPE_TYPE_NEOX for both). Order as llama.cpp's
 * graphs: q = Wq x (+ bq) -> per-head norm -> RoPE; v = Wv x (+ bv). */
#include <math.h>

#include "cpu/forward.h"

static void add_vec(float *x, const float *b, int n) {
    for (int i = 0; i < n; i++) x[i] += b[i];
}

/* ggml_rms_norm (double sum of squares) then ggml_mul by w, in place over one head */
static void head_rmsnorm(float *x, const float *w, int n, float eps) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (double)(x[i] * x[i]);
    const float scale = 1.0f / sqrtf((float)(ss / n) + eps);
    for (int i = 0; i < n; i++) x[i] = (x[i] * scale) * w[i];
}

void ul_fwd_arch_qkv(ul_fwd_t *f, const ul_layer_t *L, int32_t t) {
    const ul_hparams_t *hp = &f->hp;
    const int hd = hp->head_dim;
    float *q = f->q + (size_t)t * f->q_dim, *k = f->k + (size_t)t * f->kv_dim;
    float *v = f->v + (size_t)t * f->kv_dim;
    if (L->bq) {
        add_vec(q, L->bq->data, f->q_dim);
        add_vec(k, L->bk->data, f->kv_dim);
        add_vec(v, L->bv->data, f->kv_dim);
    }
    if (L->q_norm) {
        for (int h = 0; h < hp->n_head; h++)
            head_rmsnorm(q + (size_t)h * hd, L->q_norm->data, hd, hp->rms_eps);
        for (int h = 0; h < hp->n_head_kv; h++)
            head_rmsnorm(k + (size_t)h * hd, L->k_norm->data, hd, hp->rms_eps);
    }
}

/* ggml's rotate_pairs for NEOX: the cache is the NORM one ((cos, sin) of theta_i at 2i). */
void ul_fwd_rope_neox(float *x, const float *cs, int n_rot) {
    const int half = n_rot / 2;
    for (int i = 0; i < half; i++) {
        float x0 = x[i], x1 = x[i + half], c = cs[2 * i], s = cs[2 * i + 1];
        x[i] = x0 * c - x1 * s;
        x[i + half] = x0 * s + x1 * c;
    }
}
