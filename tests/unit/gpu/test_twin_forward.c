/* The CUDA backend's forward pass replayed on the host, kernel by kernel in the order
 * src/gpu/backend_gpu.c enqueues them, each through its twin.h arithmetic (embedding
 * gather, RMSNorm, dequantising products, RoPE, f16 K/V stored at the page-pool offsets
 * the device uses, paged attention with the online softmax and the grouped-query head
 * mapping, SwiGLU, residual adds, output norm and logits), and compared with the CPU
 * backend's logits of a two-sequence step with scattered pages. So the
 * composition — shapes, head mapping, rope mode, page addressing, qwen2's biases and
 * qwen3's q/k norms — is checked without a GPU, on the shared test models. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/forward.h"
#include "cpu/kernels.h"
#include "gpu/twin.h"
#include "model/model.h"

#include "../shared_model.h"

typedef struct {
    const ul_model_t *m;
    ul_hparams_t hp;
    int32_t ps, n_pages;
    uint16_t *kv;
} twin_t;

static void rmsnorm(const float *x, const float *w, int n, float eps, float *y) {
    float ss = 0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    float sc = ul_tw_rms_scale(ss, n, eps);
    for (int i = 0; i < n; i++) y[i] = (x[i] * sc) * w[i];
}

static void matvec(const ul_gguf_tensor_t *w, const float *x, float *y) {
    const int64_t K = w->ne[0], R = w->ne[1], rb = ul_tw_row_bytes((int)w->type, K);
    for (int64_t r = 0; r < R; r++) {
        const uint8_t *row = (const uint8_t *)w->data + r * rb;
        float lane[32] = {0};
        for (int64_t k = 0; k < K; k++) lane[k % 32] += ul_tw_dq((int)w->type, row, k) * x[k];
        for (int o = 16; o > 0; o >>= 1)
            for (int l = 0; l < o; l++) lane[l] += lane[l + o];
        y[r] = lane[0];
    }
}

static void rope(twin_t *g, float *x, int n_head, int32_t pos) {
    const ul_hparams_t *hp = &g->hp;
    const float *ff = g->m->rope_freqs ? g->m->rope_freqs->data : NULL;
    const int half = hp->n_rot / 2;
    for (int h = 0; h < n_head; h++)
        for (int p = 0; p < half; p++) {
            float *xh = x + h * hp->head_dim;
            float th =
                ul_tw_rope_theta(pos, p, hp->n_rot, hp->rope_freq_base, hp->rope_freq_scale, ff);
            float *a = hp->rope_neox ? xh + p : xh + 2 * p;
            float *b = hp->rope_neox ? xh + p + half : xh + 2 * p + 1;
            ul_tw_rope_pair(a, b, cosf(th), sinf(th));
        }
}

static int64_t off(const twin_t *g, int32_t page, int il, int kind, int h, int slot) {
    return ul_tw_kv_off(page, il, kind, h, slot, g->hp.n_layer, g->hp.n_head_kv, g->ps,
                        g->hp.head_dim);
}

/* The step: per token, its position and the page table of its sequence. Logits of the
 * tokens rows[0..n_rows) into out [n_rows][n_vocab]. */
static void forward(twin_t *g, const int32_t *tok, const int32_t *pos, const int32_t *const *pt,
                    int T, const int *rows, int n_rows, float *out) {
    const ul_hparams_t *hp = &g->hp;
    const int E = hp->n_embd, HD = hp->head_dim, QD = hp->n_head * HD, KD = hp->n_head_kv * HD;
    float *x = calloc((size_t)T * E, 4), *xb = malloc((size_t)E * 4), *xo = malloc((size_t)E * 4);
    float *q = malloc((size_t)T * QD * 4), *k = malloc((size_t)KD * 4), *v = malloc((size_t)KD * 4);
    float *att = malloc((size_t)T * QD * 4), *hb = malloc((size_t)hp->n_ff * 4),
          *hb2 = malloc((size_t)hp->n_ff * 4);
    const ul_gguf_tensor_t *te = g->m->tok_embd;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < E; i++)
            x[t * E + i] =
                ul_tw_dq((int)te->type,
                         (const uint8_t *)te->data + tok[t] * ul_tw_row_bytes((int)te->type, E), i);
    for (int il = 0; il < hp->n_layer; il++) {
        const ul_layer_t *L = &g->m->layers[il];
        for (int t = 0; t < T; t++) { /* norm, q/k/v, rope, K/V store */
            rmsnorm(x + t * E, L->attn_norm->data, E, hp->rms_eps, xb);
            matvec(L->wq, xb, q + t * QD);
            matvec(L->wk, xb, k);
            matvec(L->wv, xb, v);
            if (L->bq) /* qwen2: biases (ul_gpu_add_rows) */
                for (int i = 0; i < QD; i++) q[t * QD + i] += ((const float *)L->bq->data)[i];
            if (L->bq)
                for (int i = 0; i < KD; i++) {
                    k[i] += ((const float *)L->bk->data)[i];
                    v[i] += ((const float *)L->bv->data)[i];
                }
            if (L->q_norm) { /* qwen3: per-head RMSNorm (ul_gpu_rmsnorm over head rows) */
                for (int h = 0; h < hp->n_head; h++)
                    rmsnorm(q + t * QD + h * HD, L->q_norm->data, HD, hp->rms_eps,
                            q + t * QD + h * HD);
                for (int h = 0; h < hp->n_head_kv; h++)
                    rmsnorm(k + h * HD, L->k_norm->data, HD, hp->rms_eps, k + h * HD);
            }
            rope(g, q + t * QD, hp->n_head, pos[t]);
            rope(g, k, hp->n_head_kv, pos[t]);
            int32_t page = pt[t][pos[t] / g->ps], slot = pos[t] % g->ps;
            for (int h = 0; h < hp->n_head_kv; h++)
                for (int d = 0; d < HD; d++) {
                    g->kv[off(g, page, il, 0, h, slot) + d] = ul_fp32_to_fp16(k[h * HD + d]);
                    g->kv[off(g, page, il, 1, h, slot) + d] = ul_fp32_to_fp16(v[h * HD + d]);
                }
        }
        for (int t = 0; t < T; t++) /* attention, one (token, head) warp each */
            for (int h = 0; h < hp->n_head; h++) {
                const int kvh = h / (hp->n_head / hp->n_head_kv);
                float m = -INFINITY, l = 0, acc[256] = {0};
                for (int32_t p = 0; p <= pos[t]; p++) {
                    int32_t page = pt[t][p / g->ps], slot = p % g->ps;
                    const uint16_t *kr = g->kv + off(g, page, il, 0, kvh, slot);
                    const uint16_t *vr = g->kv + off(g, page, il, 1, kvh, slot);
                    float s = 0, w;
                    for (int d = 0; d < HD; d++) s += q[t * QD + h * HD + d] * ul_tw_f16(kr[d]);
                    float corr = ul_tw_softmax_step(&m, &l, s / sqrtf((float)HD), &w);
                    for (int d = 0; d < HD; d++) acc[d] = acc[d] * corr + w * ul_tw_f16(vr[d]);
                }
                for (int d = 0; d < HD; d++) att[t * QD + h * HD + d] = acc[d] / l;
            }
        for (int t = 0; t < T; t++) { /* wo, residual, ffn */
            matvec(L->wo, att + t * QD, xo);
            for (int i = 0; i < E; i++) x[t * E + i] += xo[i];
            rmsnorm(x + t * E, L->ffn_norm->data, E, hp->rms_eps, xb);
            matvec(L->ffn_gate, xb, hb);
            matvec(L->ffn_up, xb, hb2);
            for (int i = 0; i < hp->n_ff; i++) hb[i] = ul_tw_swiglu(hb[i], hb2[i]);
            matvec(L->ffn_down, hb, xo);
            for (int i = 0; i < E; i++) x[t * E + i] += xo[i];
        }
    }
    for (int i = 0; i < n_rows; i++) { /* the rows that sample, as the backend's output() */
        rmsnorm(x + rows[i] * E, g->m->output_norm->data, E, hp->rms_eps, xb);
        matvec(g->m->output, xb, out + (size_t)i * hp->n_vocab);
    }
    free(x), free(xb), free(xo), free(q), free(k), free(v), free(att), free(hb), free(hb2);
}

/* Two sequences in one step: A (9 tokens, prefill) and B (5 tokens), pages scattered and
 * interleaved; every token's logits compared. tol: largest |twin - cpu| accepted. */
static void compare(const char *name, double tol) {
    ul_model_t *m = shared_model(name);
    const int PS = 4, NPG = 8, V = m->hp.n_vocab;
    ul_cpu_config_t cfg = {.n_threads = 1,
                           .kv_type = UL_TYPE_F16,
                           .page_size = PS,
                           .max_batch_tokens = 16,
                           .n_ctx = 32};
    cfg.kv_bytes = NPG * (int64_t)ul_kv_page_bytes(UL_TYPE_F16, m->hp.n_layer, m->hp.n_head_kv,
                                                   m->hp.head_dim, PS);
    ul_fwd_t *f;
    cr_assert_eq(ul_fwd_create(m, &cfg, &f), 0);
    enum { NA = 9, NB = 5, T = NA + NB };
    int32_t tok[T], pos[T];
    const int32_t pa[] = {6, 1, 4}, pb[] = {3, 0};
    const int32_t *pt[T];
    for (int t = 0; t < T; t++) {
        tok[t] = (int32_t)((t * 7919 + 13) % V);
        pos[t] = t < NA ? t : t - NA;
        pt[t] = t < NA ? pa : pb;
    }
    ul_step_seq_t seqs[2] = {
        {.seq_id = 1, .tok_offset = 0, .n_tokens = NA, .pages = pa, .n_pages = 3},
        {.seq_id = 2, .tok_offset = NA, .n_tokens = NB, .pages = pb, .n_pages = 2}};
    ul_step_t st = {.n_tokens = T, .tokens = tok, .n_seqs = 2, .seqs = seqs};
    /* every token goes through the layers; logits compared where a sequence samples (its
     * last token) and at the first token (which attends only to itself): the vocabulary
     * product is most of the host's work, and the sanitizer builds run this too */
    const int rows[] = {0, NA - 1, T - 1}, n_rows = 3;
    float *cpu = malloc((size_t)T * V * 4), *tw = malloc((size_t)n_rows * V * 4);
    cr_assert_eq(ul_fwd_step(f, &st, cpu), 0);
    twin_t g = {.m = m, .hp = m->hp, .ps = PS, .n_pages = NPG};
    g.kv = calloc((size_t)NPG * m->hp.n_layer * 2 * m->hp.n_head_kv * PS * m->hp.head_dim, 2);
    forward(&g, tok, pos, pt, T, rows, n_rows, tw);
    double worst = 0, amax = 0;
    int top_diff = 0;
    for (int r = 0; r < n_rows; r++) {
        const float *c = cpu + (size_t)rows[r] * V, *w = tw + (size_t)r * V;
        int ac = 0, at = 0;
        for (int i = 0; i < V; i++) {
            double d = fabs((double)w[i] - c[i]);
            if (d > worst) worst = d;
            if (fabs(c[i]) > amax) amax = fabs(c[i]);
            if (c[i] > c[ac]) ac = i;
            if (w[i] > w[at]) at = i;
        }
        /* a different top token only where the CPU's own margin is within tol */
        if (ac != at && c[ac] - c[at] > tol) top_diff++;
    }
    printf("forward twin %-14s largest |twin - cpu| logit %.3g (tolerance %g; largest |logit| "
           "%.3g), %d top tokens differ beyond it\n",
           name, worst, tol, amax, top_diff);
    cr_assert_leq(worst, tol, "%s", name);
    cr_assert_eq(top_diff, 0, "%s", name);
    free(g.kv), free(cpu), free(tw);
    ul_fwd_free(f);
    ul_model_free(m);
}

/* Tolerances: the CPU rounds activations as llama.cpp does (f16 for F16 weights, 8 bits
 * per block for the quantised types, bf16 for BF16) where the GPU keeps f32; the golden
 * test's table (tests/unit/cpu/test_golden.c) has the same causes. Measured here (largest
 * |diff| / largest |logit|): aidreams F32 0.0021 / 10, mini F16 0.0047 / 4.7, Q4_0 0.10 /
 * 4.7, Q4_K_M 0.12 / 4.6, spread evenly over the tokens (the first one too, which attends
 * only to itself): rounding noise, where a wrong head mapping or rope mode moves logits by
 * whole units. */
Test(twin_forward, aidreams_f32_head_dim_16) { compare("aidreams260K", 5e-3); }
Test(twin_forward, mini_f16_gqa) { compare("mini-f16", 1e-2); }
Test(twin_forward, mini_q4_0) { compare("mini-q4_0", 0.2); }
Test(twin_forward, mini_q4_k_m) { compare("mini-q4_k_m", 0.25); }
Test(twin_forward, mini_q5_k_m) { compare("mini-q5_k_m", 0.25); }
Test(twin_forward, qwen2_biases_neox) { compare("qwen2-tiny-f16", 5e-3); }
Test(twin_forward, qwen3_qk_norm_neox) { compare("qwen3-tiny-f16", 5e-3); }
