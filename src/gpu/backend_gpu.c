/* The CUDA backend behind include/uvllm/backend.h. At create: the model's weights are
 * uploaded once into one device allocation, the KV pool and the scratch into two more,
 * and two slots of pinned host buffers hold steps' inputs and outputs. A step runs on the
 * backend worker's thread (engine/worker.h), which only enqueues, by overlap.h's plan:
 * the step's inputs (token ids, positions, page tables, output rows, sampling rows) into
 * its slot (n % 2), copied on a copy stream while the previous step may still compute,
 * events ordering the copy stream, the compute stream and the host; then on the compute
 * stream the forward pass (kernels through gpu.h, cuBLAS for the products of many
 * tokens), sampling on the device (a parallel argmax for plain greedy rows; the full
 * chain of ul_sample, with per-sequence RNG states, for up to DEV_SAMPLE_ROWS others),
 * D2H copies of the results (and of the logits of rows past those), then
 * cudaLaunchHostFunc with ul_worker_job_done, whose only work is to enqueue. Up to two
 * steps are in flight. The worker finishes a step on its own thread (results out of its
 * slot, ul_sample for overflow rows) and hands it to the loop.
 *
 * Pipelining (uvllm/backend.h): a step may come while the step before it is in flight,
 * with chained entries whose input token that step samples. When it sampled them on the
 * device, a gather on the compute stream (chain.h, chain.cu) copies each token, and the RNG
 * state the device sampler left, into this step's device inputs (and the end of the entry's
 * penalty window) before its embedding gather, and the gathered tokens come back for
 * tokens[tok_offset]; otherwise the step is deferred (UL_WORKER_DEFER) and the worker
 * resolves it on the host once the step before completed.
 *
 * Decode steps (one token per sequence) sampled wholly on the device replay a CUDA graph
 * of their shape (graphs.h: captured on first use, eager when capture or replay fails;
 * UVLLM_CUDA_GRAPHS=0 turns graphs off).
 *
 * A step the device has not finished within step_timeout_ms is failed by the worker's
 * watchdog (engine/worker.h): its requests end with an error, later steps fail at once
 * until the device returns it, and the server keeps answering.
 *
 * Speculative decoding (backend.h) is not done here: base.spec is 0, so the scheduler
 * never proposes for this backend, a step with proposals or a draft's out_probs is refused
 * (UL_ENOTSUP), and `serve --backend cuda` refuses the speculative options at start-up.
 *
 * Every CUDA call is checked. A failure while enqueuing, or a device error seen when the
 * step is finished, fails that step (UL_EIO: its requests end with an error) and the
 * next step starts clean; running out of device memory at create is a start-up error. */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/sampling.h"
#include "engine/worker.h"
#include "gpu/chain.h"
#include "gpu/gpu.h"
#include "gpu/graphs.h"
#include "gpu/overlap.h"
#include "gpu/support.h"
#include "gpu/twin.h"
#include "model/model.h"
#include "model/vocab.h"
#include "uvllm/backend.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

#define MATVEC_MAX_TOK 8        /* more tokens than this: cuBLAS on dequantised tiles */
#define TILE_FLOATS (16u << 20) /* 64 MiB of f32 per dequantised tile */
/* Rows sampled on the device with the full chain per step (the rest on the host, as the
 * CPU backend does), and the penalty windows and logit biases they may carry in all. */
#define DEV_SAMPLE_ROWS 32
#define DEV_HIST_CAP (DEV_SAMPLE_ROWS * 1024)
#define DEV_BIAS_CAP (DEV_SAMPLE_ROWS * 256)

typedef struct {
    const uint8_t *d; /* device copy, GGUF layout */
    int type;
    int64_t n_cols, n_rows;
} dmat_t;

typedef struct {
    dmat_t wq, wk, wv, wo, gate, up, down;
    const float *attn_norm, *ffn_norm; /* device */
    const float *bq, *bk, *bv;         /* qwen2's biases, or NULL */
    const float *q_norm, *k_norm;      /* qwen3's per-head norms, or NULL */
} dlayer_t;

typedef struct gpu_s gpu_t;

/* One step's inputs and host side; two of them: step n uses slot n % 2 (overlap.h), so its
 * inputs are filled and copied while step n - 1 computes. */
typedef struct {
    gpu_t *g;
    /* pinned, one block: tokens | pos | tok_seq | page_off | out_rows [max_tokens] each,
     * then pages [max_pages]; and its device copy */
    int32_t *h_in, *d_in;
    int32_t n_pages, n_tokens;
    int decode; /* every sequence brings one token: a shape worth a CUDA graph */
    /* device sampling (sample.cu): pinned inputs/outputs and their device copies */
    ul_tw_sample_t *h_smp, *d_smp;
    int32_t *h_hist, *d_hist, *h_bias_ids, *d_bias_ids;
    float *h_bias_vals, *d_bias_vals;
    int32_t n_dev, n_hist, n_bias;
    /* pinned outputs: [max_tokens], [max_tokens][n_vocab] rows sampled on the host */
    int32_t *h_ids;
    float *h_lp, *h_logits;
    int32_t *out_seq;  /* host: sequence of each output row */
    int32_t *host_row; /* host: row of h_logits for out row i, or -1 */
    int32_t *dev_row;  /* host: index in h_smp for out row i, or -1 (-1 both: argmax) */
    int32_t n_out, n_host;
    /* chaining (chain.h): how the step samples each entry [max_tokens] (host); its gather
     * pairs [max_tokens] and the tokens they gathered [max_tokens], pinned and on the device */
    ul_ch_place_t *place;
    ul_tw_chain_t *h_chain, *d_chain;
    int32_t *h_chain_tok, *d_chain_tok;
    int32_t n_seqs, n_chain;
    ul_step_t *st;   /* the step enqueued in this slot ... */
    int64_t seqno;   /* ... its number (g->n_steps) ... */
    int live;        /* ... enqueued with a completion and not finished: chains may read it */
    int prev_failed; /* the step it gathered from failed: it fails too */
    ul_worker_job_t job;
    double t0_us;
} slot_t;

struct gpu_s {
    ul_backend_t base;
    ul_worker_t worker;
    const ul_model_t *m;
    ul_hparams_t hp;
    int device;
    int32_t max_tokens, q_dim, kv_dim, max_pages; /* max_pages: page-table entries per step */
    cudaStream_t stream, copy;                    /* compute; step inputs (overlap.h) */
    cudaEvent_t ev[UL_OV_N_EVENTS];
    cublasHandle_t blas;
    void *d_weights, *d_scratch;
    ul_gpu_kv_t kv;
    dlayer_t *layers;
    dmat_t tok_embd, output;
    const float *output_norm, *rope_freqs;
    /* scratch (device), shared by the slots: the compute stream orders its users */
    float *x, *xb, *xo, *q, *k, *v, *att, *hb, *hb2, *logits, *tile, *lp;
    int32_t *ids;
    float *d_pl;
    int32_t *d_counts;
    ul_tw_cand_t *d_cand;
    /* the device inputs of the step being enqueued (its slot's d_in) */
    int32_t *tokens, *pos, *tok_seq, *pages, *page_off, *out_rows;
    slot_t slots[UL_OV_SLOTS];
    int64_t n_steps; /* enqueued so far: the next one's plan and slot */
    int32_t dev_rows;
    ul_gc_t graphs;
    int graphs_off;    /* UVLLM_CUDA_GRAPHS=0 */
    void *smp_scratch; /* ul_sample's, zeroed */
};

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* Logs a failed CUDA call and turns it into UL_EIO (UL_ENOMEM for allocations). */
static int cuda_ok(cudaError_t e, const char *what) {
    if (e == cudaSuccess) return 0;
    UL_LOG_ERROR("gpu: %s: %s", what, cudaGetErrorString(e));
    return e == cudaErrorMemoryAllocation ? UL_ENOMEM : UL_EIO;
}
#define CU(call) cuda_ok((call), #call)

static int launch_ok(int rc) {
    if (rc == UL_EIO) {
        char buf[160];
        UL_LOG_ERROR("gpu: kernel %s", ul_gpu_launch_error(buf, sizeof buf));
    }
    return rc;
}
#define K(call) launch_ok(call)

static int blas_ok(cublasStatus_t s, const char *what) {
    if (s == CUBLAS_STATUS_SUCCESS) return 0;
    UL_LOG_ERROR("gpu: %s: cuBLAS status %d", what, (int)s);
    return UL_EIO;
}

/* ---------- the forward pass, enqueued ---------- */

/* y [T][w->n_rows] = x [T][n_cols] W^T: decode sizes through the dequantising matvec, more
 * tokens through cuBLAS SGEMM on row tiles dequantised into g->tile. */
static int matmul(gpu_t *g, const dmat_t *w, const float *x, int32_t T, float *y) {
    if (T <= MATVEC_MAX_TOK)
        return K(ul_gpu_matvec(w->type, w->d, w->n_rows, w->n_cols, x, T, y, g->stream));
    int64_t tile_rows = TILE_FLOATS / w->n_cols;
    if (tile_rows > 65535) tile_rows = 65535;
    const float one = 1.0f, zero = 0.0f;
    for (int64_t r0 = 0; r0 < w->n_rows; r0 += tile_rows) {
        int32_t n = (int32_t)(w->n_rows - r0 < tile_rows ? w->n_rows - r0 : tile_rows);
        int rc = K(ul_gpu_dequant_rows(w->type, w->d, w->n_cols, NULL, r0, n, g->tile, g->stream));
        if (rc) return rc;
        /* column-major: Y^T[r0.., t] = tile^T (n x K) * X^T (K x T) */
        rc = blas_ok(cublasSgemm(g->blas, CUBLAS_OP_T, CUBLAS_OP_N, n, T, (int)w->n_cols, &one,
                                 g->tile, (int)w->n_cols, x, (int)w->n_cols, &zero, y + r0,
                                 (int)w->n_rows),
                     "cublasSgemm");
        if (rc) return rc;
    }
    return 0;
}

/* After the q/k/v products, before RoPE (cpu/forward_arch.c's order): qwen2's biases,
 * qwen3's per-head RMSNorm of q and k. */
static int arch_qkv(gpu_t *g, const dlayer_t *L, int32_t T) {
    const ul_hparams_t *hp = &g->hp;
    int rc = 0;
    if (L->bq && ((rc = K(ul_gpu_add_rows(g->q, L->bq, T, g->q_dim, g->stream))) ||
                  (rc = K(ul_gpu_add_rows(g->k, L->bk, T, g->kv_dim, g->stream))) ||
                  (rc = K(ul_gpu_add_rows(g->v, L->bv, T, g->kv_dim, g->stream)))))
        return rc;
    if (L->q_norm && ((rc = K(ul_gpu_rmsnorm(g->q, L->q_norm, T * hp->n_head, hp->head_dim,
                                             hp->rms_eps, g->q, g->stream))) ||
                      (rc = K(ul_gpu_rmsnorm(g->k, L->k_norm, T * hp->n_head_kv, hp->head_dim,
                                             hp->rms_eps, g->k, g->stream)))))
        return rc;
    return 0;
}

static int layer(gpu_t *g, int il, int32_t T) {
    const ul_hparams_t *hp = &g->hp;
    const dlayer_t *L = &g->layers[il];
    const int32_t E = hp->n_embd;
    const float scale = 1.0f / sqrtf((float)hp->head_dim);
    const float *ff = g->rope_freqs;
    int rc;
    if ((rc = K(ul_gpu_rmsnorm(g->x, L->attn_norm, T, E, hp->rms_eps, g->xb, g->stream))) ||
        (rc = matmul(g, &L->wq, g->xb, T, g->q)) || (rc = matmul(g, &L->wk, g->xb, T, g->k)) ||
        (rc = matmul(g, &L->wv, g->xb, T, g->v)) || (rc = arch_qkv(g, L, T)) ||
        (rc = K(ul_gpu_rope(g->q, g->pos, T, hp->n_head, hp->head_dim, g->q_dim, hp->n_rot,
                            hp->rope_neox, hp->rope_freq_base, hp->rope_freq_scale, ff,
                            g->stream))) ||
        (rc = K(ul_gpu_rope(g->k, g->pos, T, hp->n_head_kv, hp->head_dim, g->kv_dim, hp->n_rot,
                            hp->rope_neox, hp->rope_freq_base, hp->rope_freq_scale, ff,
                            g->stream))) ||
        (rc = K(ul_gpu_kv_store(&g->kv, il, g->k, g->v, T, g->pos, g->tok_seq, g->pages,
                                g->page_off, g->stream))) ||
        (rc = K(ul_gpu_attn(&g->kv, il, g->q, T, hp->n_head, g->pos, g->tok_seq, g->pages,
                            g->page_off, scale, g->att, g->stream))) ||
        (rc = matmul(g, &L->wo, g->att, T, g->xo)) ||
        (rc = K(ul_gpu_add(g->x, g->xo, (int64_t)T * E, g->stream))) ||
        (rc = K(ul_gpu_rmsnorm(g->x, L->ffn_norm, T, E, hp->rms_eps, g->xb, g->stream))) ||
        (rc = matmul(g, &L->gate, g->xb, T, g->hb)) || (rc = matmul(g, &L->up, g->xb, T, g->hb2)) ||
        (rc = K(ul_gpu_swiglu(g->hb, g->hb2, (int64_t)T * hp->n_ff, g->stream))) ||
        (rc = matmul(g, &L->down, g->hb, T, g->xo)) ||
        (rc = K(ul_gpu_add(g->x, g->xo, (int64_t)T * E, g->stream))))
        return rc;
    return 0;
}

/* Greedy rows that need nothing but the argmax and its logprob stay on the device. */
static int device_greedy(const ul_step_seq_t *s) {
    const ul_sampling_t *sp = &s->sampling;
    int pen = sp->repeat_last_n != 0 && ((s->history && s->n_history > 0) || s->chain > 0) &&
              (sp->repeat_penalty != 1.0f || sp->frequency_penalty != 0.0f ||
               sp->presence_penalty != 0.0f);
    return !(sp->temperature > 0.0f) && sp->n_logprobs <= 0 && !pen &&
           !(sp->n_logit_bias > 0 && sp->logit_bias) && !sp->filter;
}

/* The last hidden row of each sampled sequence (gathered by out_rows), the logits, and
 * sampling: the parallel argmax for every row, the full chain for device rows; results
 * into the slot's pinned outputs. Only launches and copies of fixed shape: capturable. */
static int output(gpu_t *g, slot_t *sl) {
    const int32_t E = g->hp.n_embd, V = g->hp.n_vocab, n = sl->n_out;
    int rc;
    if ((rc = K(ul_gpu_dequant_rows(UL_TW_F32, g->x, E, g->out_rows, 0, n, g->xo, g->stream))) ||
        (rc = K(ul_gpu_rmsnorm(g->xo, g->output_norm, n, E, g->hp.rms_eps, g->xb, g->stream))) ||
        (rc = matmul(g, &g->output, g->xb, n, g->logits)) ||
        (rc = K(ul_gpu_argmax(g->logits, n, V, g->ids, g->lp, g->stream))) ||
        (rc = CU(cudaMemcpyAsync(sl->h_ids, g->ids, (size_t)n * sizeof(int32_t),
                                 cudaMemcpyDeviceToHost, g->stream))) ||
        (rc = CU(cudaMemcpyAsync(sl->h_lp, g->lp, (size_t)n * sizeof(float), cudaMemcpyDeviceToHost,
                                 g->stream))))
        return rc;
    if (sl->n_dev > 0 &&
        ((rc = K(ul_gpu_sample(g->logits, V, sl->d_smp, sl->n_dev, sl->d_hist, sl->d_bias_ids,
                               sl->d_bias_vals, g->d_pl, g->d_counts, g->d_cand, g->stream))) ||
         (rc = CU(cudaMemcpyAsync(sl->h_smp, sl->d_smp, (size_t)sl->n_dev * sizeof *sl->h_smp,
                                  cudaMemcpyDeviceToHost, g->stream)))))
        return rc;
    for (int32_t i = 0; i < n && !rc; i++)
        if (sl->host_row[i] >= 0)
            rc = CU(cudaMemcpyAsync(sl->h_logits + (size_t)sl->host_row[i] * V,
                                    g->logits + (size_t)i * V, (size_t)V * sizeof(float),
                                    cudaMemcpyDeviceToHost, g->stream));
    return rc;
}

/* Validates the step (as the CPU backend does) and lays its inputs out in the slot's pinned
 * memory. No CUDA call. */
static int prepare(gpu_t *g, slot_t *sl, ul_step_t *st) {
    const int32_t T = st->n_tokens, ps = g->kv.page_size, mt = g->max_tokens;
    if (T < 1 || T > mt || st->n_seqs < 1 || st->n_seqs > T) return UL_EINVAL;
    int32_t *tok = sl->h_in, *pos = tok + mt, *seq = pos + mt, *poff = seq + mt, *orow = poff + mt,
            *pages = orow + mt;
    int32_t n_open = 0; /* -1 tokens: each must be a chained entry's, gathered on the device */
    for (int32_t t = 0; t < T; t++) {
        if (st->tokens[t] == -1) {
            tok[t] = 0;
            n_open++;
        } else if (st->tokens[t] < 0 || st->tokens[t] >= g->hp.n_vocab) {
            return UL_EINVAL;
        } else {
            tok[t] = st->tokens[t];
        }
        seq[t] = -1;
    }
    int32_t np = 0, n_out = 0, n_host = 0;
    sl->n_dev = sl->n_hist = sl->n_bias = 0;
    sl->decode = st->n_seqs == T;
    for (int32_t si = 0; si < st->n_seqs; si++) {
        const ul_step_seq_t *s = &st->seqs[si];
        if (s->n_tokens < 1 || s->tok_offset < 0 || s->tok_offset > T - s->n_tokens ||
            s->pos0 < 0 || s->pos0 > g->base.n_ctx - s->n_tokens || !s->pages)
            return UL_EINVAL;
        /* speculative entries (backend.h): not verified on the device (base.spec is 0, so
         * the scheduler never builds them for this backend) */
        if (s->spec || s->out_probs || s->out_embd) return UL_ENOTSUP; /* backend.h */
        int32_t need = (s->pos0 + s->n_tokens + ps - 1) / ps;
        if (s->n_pages < need || np + need > g->max_pages) return UL_EINVAL;
        poff[si] = np;
        for (int32_t i = 0; i < need; i++) {
            if (s->pages[i] < 0 || s->pages[i] >= g->kv.n_pages) return UL_EINVAL;
            pages[np++] = s->pages[i];
        }
        for (int32_t i = 0; i < s->n_tokens; i++) {
            int32_t t = s->tok_offset + i;
            if (seq[t] != -1) return UL_EINVAL;
            seq[t] = si;
            pos[t] = s->pos0 + i;
        }
        if (s->chain > 0 && s->n_tokens == 1 && st->tokens[s->tok_offset] == -1) n_open--;
        sl->place[si] = (ul_ch_place_t){UL_CH_NONE, -1, -1};
        if (s->sample) {
            /* greedy rows: the parallel argmax; others: the full chain on the device while
             * its rows and buffers last, then the host's ul_sample; rows with a token filter
             * (JSON mode) always on the host, where the filter lives */
            sl->out_seq[n_out] = si;
            orow[n_out] = s->tok_offset + s->n_tokens - 1;
            sl->host_row[n_out] = sl->dev_row[n_out] = -1;
            sl->place[si] = (ul_ch_place_t){UL_CH_ARGMAX, n_out, -1};
            if (!device_greedy(s)) {
                if (!s->sampling.filter && sl->n_dev < g->dev_rows &&
                    !ul_gpu_sample_pack(s, n_out, &sl->h_smp[sl->n_dev], sl->h_hist, DEV_HIST_CAP,
                                        &sl->n_hist, sl->h_bias_ids, sl->h_bias_vals, DEV_BIAS_CAP,
                                        &sl->n_bias)) {
                    const ul_tw_sample_t *r = &sl->h_smp[sl->n_dev];
                    sl->place[si] = (ul_ch_place_t){
                        UL_CH_DEV, sl->n_dev,
                        s->chain > 0 && r->n_hist > 0 ? r->hist_off + r->n_hist - 1 : -1};
                    sl->dev_row[n_out] = sl->n_dev++;
                } else {
                    sl->place[si] = (ul_ch_place_t){UL_CH_HOST, n_host, -1};
                    sl->host_row[n_out] = n_host++;
                }
            }
            n_out++;
        }
    }
    for (int32_t t = 0; t < T; t++)
        if (seq[t] < 0) return UL_EINVAL;
    if (n_open) return UL_EINVAL;
    sl->n_seqs = st->n_seqs;
    sl->n_out = n_out;
    sl->n_host = n_host;
    sl->n_pages = np;
    sl->n_tokens = T;
    return 0;
}

static int chained(const ul_step_t *st) {
    for (int32_t i = 0; i < st->n_seqs; i++)
        if (st->seqs[i].chain > 0) return 1;
    return 0;
}

/* After prepare, for a chained step: its gather pairs against the step before it, which
 * must still be in flight in the other slot (else the worker resolves the chains on the
 * host: defer), and the RNG states the host knows already. UL_WORKER_DEFER when some entry
 * cannot be resolved on the device; nothing is enqueued yet. */
static int plan_chain(gpu_t *g, slot_t *sl, ul_step_t *st) {
    sl->n_chain = 0;
    if (!chained(st)) return 0;
    if (sl->seqno < 1) return UL_WORKER_DEFER;
    const slot_t *pv = &g->slots[(sl->seqno - 1) % UL_OV_SLOTS];
    if (!pv->live || pv->seqno != sl->seqno - 1) return UL_WORKER_DEFER;
    int rc = ul_ch_plan(st->seqs, st->n_seqs, sl->place, pv->place, pv->n_seqs, sl->h_chain,
                        &sl->n_chain);
    if (rc) return rc == UL_CH_DEFER ? UL_WORKER_DEFER : rc;
    ul_ch_host_rng(sl->h_chain, sl->n_chain, st->seqs, pv->st->seqs, sl->place, sl->h_smp);
    return 0;
}

/* The slot's inputs to the device, on the copy stream. */
static int copy_in(gpu_t *g, slot_t *sl) {
    const size_t mt = (size_t)g->max_tokens;
    int rc;
    if ((rc = CU(cudaMemcpyAsync(sl->d_in, sl->h_in,
                                 (5 * mt + (size_t)sl->n_pages) * sizeof(int32_t),
                                 cudaMemcpyHostToDevice, g->copy))) ||
        (sl->n_chain && (rc = CU(cudaMemcpyAsync(sl->d_chain, sl->h_chain,
                                                 (size_t)sl->n_chain * sizeof *sl->h_chain,
                                                 cudaMemcpyHostToDevice, g->copy)))))
        return rc;
    if (sl->n_dev == 0) return 0;
    if ((rc = CU(cudaMemcpyAsync(sl->d_smp, sl->h_smp, (size_t)sl->n_dev * sizeof *sl->h_smp,
                                 cudaMemcpyHostToDevice, g->copy))) ||
        (sl->n_hist &&
         (rc = CU(cudaMemcpyAsync(sl->d_hist, sl->h_hist, (size_t)sl->n_hist * sizeof(int32_t),
                                  cudaMemcpyHostToDevice, g->copy)))) ||
        (sl->n_bias && ((rc = CU(cudaMemcpyAsync(sl->d_bias_ids, sl->h_bias_ids,
                                                 (size_t)sl->n_bias * sizeof(int32_t),
                                                 cudaMemcpyHostToDevice, g->copy))) ||
                        (rc = CU(cudaMemcpyAsync(sl->d_bias_vals, sl->h_bias_vals,
                                                 (size_t)sl->n_bias * sizeof(float),
                                                 cudaMemcpyHostToDevice, g->copy))))))
        return rc;
    return 0;
}

/* Chained entries, on the compute stream after the slot's inputs arrived and after the
 * step before sampled (stream order): its tokens and RNG states into the slot's device
 * inputs (and sampled rows), the tokens also back to the host for finish. Outside any
 * graph: a captured decode step reads them from the slot like the copied ones. */
static int gather(gpu_t *g, slot_t *sl) {
    const slot_t *pv = &g->slots[(sl->seqno - 1) % UL_OV_SLOTS];
    int rc;
    if ((rc = K(ul_gpu_chain(sl->d_chain, sl->n_chain, sl->d_in, g->ids, pv->d_smp, sl->d_smp,
                             sl->d_hist, sl->d_chain_tok, g->stream))) ||
        (rc = CU(cudaMemcpyAsync(sl->h_chain_tok, sl->d_chain_tok,
                                 (size_t)sl->n_chain * sizeof(int32_t), cudaMemcpyDeviceToHost,
                                 g->stream))))
        return rc;
    return 0;
}

/* The step's kernels and result copies on the compute stream, reading the slot's device
 * inputs. */
static int compute(gpu_t *g, slot_t *sl) {
    const int32_t T = sl->n_tokens, E = g->hp.n_embd, mt = g->max_tokens;
    g->tokens = sl->d_in;
    g->pos = g->tokens + mt;
    g->tok_seq = g->pos + mt;
    g->page_off = g->tok_seq + mt;
    g->out_rows = g->page_off + mt;
    g->pages = g->out_rows + mt;
    int rc = K(
        ul_gpu_dequant_rows(g->tok_embd.type, g->tok_embd.d, E, g->tokens, 0, T, g->x, g->stream));
    for (int il = 0; il < g->hp.n_layer && !rc; il++) rc = layer(g, il, T);
    if (!rc && sl->n_out > 0) rc = output(g, sl);
    return rc;
}

/* ---- CUDA graphs (graphs.h): decode shapes captured once, replayed after ---- */

static int gc_eager(void *ctx) {
    slot_t *sl = ctx;
    return compute(sl->g, sl);
}

static int gc_capture(void *ctx, void **exec) {
    slot_t *sl = ctx;
    gpu_t *g = sl->g;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t ge = NULL;
    int rc = CU(cudaStreamBeginCapture(g->stream, cudaStreamCaptureModeThreadLocal));
    if (rc) return rc;
    rc = compute(g, sl);
    cudaError_t e = cudaStreamEndCapture(g->stream, &graph); /* always: leaves capture mode */
    if (!rc && e == cudaSuccess) e = cudaGraphInstantiate(&ge, graph, 0);
    if (graph) (void)cudaGraphDestroy(graph);
    if (rc || e != cudaSuccess) {
        (void)cudaGetLastError(); /* capture errors are not sticky: the stream runs on */
        UL_LOG_WARN("cuda: capturing a %d-token decode step failed (%s); it runs without a graph",
                    sl->n_tokens, rc ? ul_strerror(rc) : cudaGetErrorString(e));
        return rc ? rc : UL_EIO;
    }
    *exec = ge;
    return 0;
}

static int gc_launch(void *ctx, void *exec) {
    slot_t *sl = ctx;
    return CU(cudaGraphLaunch((cudaGraphExec_t)exec, sl->g->stream));
}

static void gc_destroy(void *ctx, void *exec) {
    (void)ctx;
    (void)CU(cudaGraphExecDestroy((cudaGraphExec_t)exec));
}

static const ul_gc_ops_t gc_ops = {gc_eager, gc_capture, gc_launch, gc_destroy};

/* Decode steps whose every output is sampled on the device replay a graph of their shape;
 * the rest (prefill chunks, host-sampled rows) run eagerly. */
static int run_compute(gpu_t *g, slot_t *sl) {
    if (g->graphs_off || !sl->decode || sl->n_host > 0) return compute(g, sl);
    ul_gc_key_t key = {(int32_t)(sl - g->slots), sl->n_tokens, sl->n_out, sl->n_dev};
    return ul_gc_run(&g->graphs, key, &gc_ops, sl);
}

/* Worker thread, after the host function: the step's results out of its slot. */
static void finish(void *ctx, ul_step_t *st) {
    slot_t *sl = ctx;
    gpu_t *g = sl->g;
    /* A device fault during the step is sticky: the stream reports it (the host function
     * that brought us here may still be returning, hence NotReady is no error). */
    cudaError_t e = cudaStreamQuery(g->stream);
    if (e != cudaSuccess && e != cudaErrorNotReady) {
        UL_LOG_ERROR("gpu: step of %d tokens failed on the device: %s", st->n_tokens,
                     cudaGetErrorString(e));
        st->status = UL_EIO;
    }
    if (!st->status) st->status = sl->prev_failed;
    for (int32_t i = 0; i < sl->n_chain && !st->status; i++)
        st->tokens[sl->h_chain[i].tok] = sl->h_chain_tok[i];
    for (int32_t i = 0; i < sl->n_out && !st->status; i++) {
        ul_step_seq_t *s = &st->seqs[sl->out_seq[i]];
        if (sl->host_row[i] >= 0) {
            ul_sample(s, sl->h_logits + (size_t)sl->host_row[i] * g->hp.n_vocab, g->hp.n_vocab,
                      g->smp_scratch);
        } else if (sl->dev_row[i] >= 0) {
            ul_gpu_sample_unpack(&sl->h_smp[sl->dev_row[i]], s);
        } else {
            s->out_token = sl->h_ids[i];
            s->out_logprob = sl->h_lp[i];
            s->out_n_top = 0;
        }
    }
    st->compute_us = now_us() - sl->t0_us;
    sl->live = 0;
    slot_t *nx = &g->slots[(sl->seqno + 1) % UL_OV_SLOTS];
    if (st->status && nx->live && nx->seqno == sl->seqno + 1 && nx->n_chain > 0)
        nx->prev_failed = st->status; /* it gathered garbage from this step */
}

/* Enqueues the step by overlap.h's plan: inputs on the copy stream, compute on the compute
 * stream, events between; with callback, the host function that completes it. On failure
 * nothing will call back. UL_WORKER_DEFER: a chained step the device cannot resolve,
 * nothing enqueued (the slot's host side rewritten, nothing else). *out: the step's slot. */
static int enqueue(gpu_t *g, ul_step_t *st, int callback, slot_t **out) {
    const int64_t seqno = g->n_steps++;
    slot_t *sl = &g->slots[seqno % UL_OV_SLOTS];
    ul_ov_op_t ops[UL_OV_MAX_OPS];
    const int n = ul_ov_plan(seqno, chained(st), ops);
    *out = sl;
    sl->t0_us = now_us();
    sl->st = st;
    sl->seqno = seqno;
    sl->live = sl->prev_failed = 0;
    sl->n_chain = 0;
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        const ul_ov_op_t *o = &ops[i];
        cudaEvent_t ev = o->event >= 0 ? g->ev[o->event] : NULL;
        switch (o->kind) {
        case UL_OV_HOST_WAIT:
            rc = CU(cudaEventSynchronize(ev));
            break;
        case UL_OV_HOST_FILL:
            if (!(rc = prepare(g, sl, st))) rc = plan_chain(g, sl, st);
            break;
        case UL_OV_COPY_WAIT:
            rc = CU(cudaStreamWaitEvent(g->copy, ev, 0));
            break;
        case UL_OV_COPY_H2D:
            rc = copy_in(g, sl);
            break;
        case UL_OV_COPY_RECORD:
            rc = CU(cudaEventRecord(ev, g->copy));
            break;
        case UL_OV_COMPUTE_WAIT:
            rc = CU(cudaStreamWaitEvent(g->stream, ev, 0));
            break;
        case UL_OV_COMPUTE_GATHER:
            rc = gather(g, sl);
            break;
        case UL_OV_COMPUTE:
            rc = run_compute(g, sl);
            break;
        case UL_OV_COMPUTE_RECORD:
            rc = CU(cudaEventRecord(ev, g->stream));
            break;
        case UL_OV_COMPLETE:
            if (callback) {
                sl->job =
                    (ul_worker_job_t){.w = &g->worker, .step = st, .finish = finish, .ctx = sl};
                rc = CU(cudaLaunchHostFunc(g->stream, ul_worker_job_done, &sl->job));
                sl->live = !rc;
            }
            break;
        }
    }
    if (rc == UL_WORKER_DEFER) g->n_steps--; /* the slot is this step's again when it returns */
    return rc;
}

/* A step that failed while being enqueued: let both streams drain so the next step's copies
 * cannot race this one's, then fail it (UL_EINVAL: refused before any device work). */
static int failed(gpu_t *g, slot_t *sl, ul_step_t *st, int rc) {
    if (rc != UL_EINVAL) {
        /* the step's own error is reported already; these only drain and reset */
        (void)cuda_ok(cudaStreamSynchronize(g->copy), "cudaStreamSynchronize (failed step)");
        (void)cuda_ok(cudaStreamSynchronize(g->stream), "cudaStreamSynchronize (failed step)");
        (void)cudaGetLastError(); /* clear a non-sticky error for the next step */
        rc = UL_EIO;
    }
    st->status = rc;
    st->compute_us = now_us() - sl->t0_us;
    UL_LOG_WARN("gpu: step of %d tokens failed: %s", st->n_tokens, ul_strerror(rc));
    return rc;
}

static int gpu_step(void *ctx, ul_step_t *st) {
    gpu_t *g = ctx;
    slot_t *sl;
    st->status = 0;
    int rc = enqueue(g, st, 1, &sl);
    if (!rc) return UL_WORKER_PENDING;
    if (rc == UL_WORKER_DEFER) return UL_WORKER_DEFER;
    failed(g, sl, st, rc);
    return UL_WORKER_DONE;
}

static int gpu_submit(ul_backend_t *b, ul_step_t *st) {
    return ul_worker_submit(&((gpu_t *)b)->worker, st);
}

/* The synchronous twin (CLI tools, tests): the same enqueue, waited for on this thread.
 * Never mixed with submit (backend.h). */
static int gpu_run(ul_backend_t *b, ul_step_t *st) {
    gpu_t *g = (gpu_t *)b;
    slot_t *sl;
    st->status = 0;
    if (chained(st)) return st->status = UL_EINVAL; /* nothing is in flight to chain to */
    int rc = enqueue(g, st, 0, &sl);
    if (!rc) rc = CU(cudaStreamSynchronize(g->stream));
    if (rc) return failed(g, sl, st, rc);
    finish(sl, st);
    return st->status;
}

/* ---------- create / destroy ---------- */

static void gpu_destroy(ul_backend_t *b) {
    gpu_t *g = (gpu_t *)b;
    ul_worker_free(&g->worker);
    if (ul_worker_orphaned(&g->worker)) {
        /* the device never returned a step: its host function may still run and touch
         * g, and synchronising would hang; leave it all to process exit */
        UL_LOG_ERROR("cuda: device unresponsive at shutdown; its memory is not freed");
        return;
    }
    if (g->copy) (void)CU(cudaStreamSynchronize(g->copy));
    if (g->stream) (void)CU(cudaStreamSynchronize(g->stream));
    ul_gc_clear(&g->graphs, &gc_ops, NULL);
    if (g->blas) (void)blas_ok(cublasDestroy(g->blas), "cublasDestroy");
    for (int i = 0; i < UL_OV_N_EVENTS; i++)
        if (g->ev[i]) (void)CU(cudaEventDestroy(g->ev[i]));
    if (g->copy) (void)CU(cudaStreamDestroy(g->copy));
    if (g->stream) (void)CU(cudaStreamDestroy(g->stream));
    (void)CU(cudaFree(g->d_weights)); /* logged; nothing more to do at destroy */
    (void)CU(cudaFree(g->d_scratch));
    (void)CU(cudaFree(g->kv.kv));
    for (int i = 0; i < UL_OV_SLOTS; i++) {
        slot_t *sl = &g->slots[i];
        (void)CU(cudaFreeHost(sl->h_smp)); /* the slot's one pinned block */
        free(sl->place);
        free(sl->out_seq);
        free(sl->host_row);
        free(sl->dev_row);
    }
    free(g->layers);
    free(g->smp_scratch);
    free(g);
}

static const ul_backend_vtbl_t gpu_vtbl = {
    .name = "cuda",
    .submit = gpu_submit,
    .run = gpu_run,
    .destroy = gpu_destroy,
};

#define ALIGN(n) (((n) + 255) & ~(size_t)255)

/* Size pass (dst NULL) and copy pass over every weight the forward reads. */
static int weights(gpu_t *g, uint8_t *dst, size_t *off) {
    const ul_model_t *m = g->m;
    int rc = 0;
#define PUT(t, out_ptr)                                                                            \
    do {                                                                                           \
        size_t at = *off;                                                                          \
        *off += ALIGN((size_t)(t)->nbytes);                                                        \
        if (dst) {                                                                                 \
            rc = rc ? rc                                                                           \
                    : CU(cudaMemcpy(dst + at, (t)->data, (t)->nbytes, cudaMemcpyHostToDevice));    \
            out_ptr = (const void *)(dst + at);                                                    \
        }                                                                                          \
    } while (0)
#define MAT(t, dm)                                                                                 \
    do {                                                                                           \
        const void *p_ = NULL;                                                                     \
        PUT(t, p_);                                                                                \
        dm = (dmat_t){p_, (int)(t)->type, (t)->ne[0], (t)->ne[1]};                                 \
    } while (0)
    const void *p = NULL;
    MAT(m->tok_embd, g->tok_embd);
    if (m->output != m->tok_embd) {
        MAT(m->output, g->output);
    } else {
        g->output = g->tok_embd;
    }
    PUT(m->output_norm, p);
    g->output_norm = p;
    if (m->rope_freqs) {
        PUT(m->rope_freqs, p);
        g->rope_freqs = p;
    }
    for (int il = 0; il < g->hp.n_layer; il++) {
        const ul_layer_t *L = &m->layers[il];
        dlayer_t *D = &g->layers[il];
        MAT(L->wq, D->wq);
        MAT(L->wk, D->wk);
        MAT(L->wv, D->wv);
        MAT(L->wo, D->wo);
        MAT(L->ffn_gate, D->gate);
        MAT(L->ffn_up, D->up);
        MAT(L->ffn_down, D->down);
        PUT(L->attn_norm, p);
        D->attn_norm = p;
        PUT(L->ffn_norm, p);
        D->ffn_norm = p;
        const ul_gguf_tensor_t *ex[] = {L->bq, L->bk, L->bv, L->q_norm, L->k_norm};
        const float **dx[] = {&D->bq, &D->bk, &D->bv, &D->q_norm, &D->k_norm};
        for (int i = 0; i < 5; i++)
            if (ex[i]) {
                PUT(ex[i], p);
                *dx[i] = p;
            }
    }
#undef MAT
#undef PUT
    return rc;
}

/* Carves the scratch allocation; dst NULL measures it. */
static size_t carve(gpu_t *g, uint8_t *base) {
    const ul_hparams_t *hp = &g->hp;
    const size_t T = (size_t)g->max_tokens, E = (size_t)hp->n_embd, V = (size_t)hp->n_vocab;
    size_t off = 0;
#define TAKE(ptr, n, type)                                                                         \
    do {                                                                                           \
        if (base) ptr = (type *)(base + off);                                                      \
        off += ALIGN((n) * sizeof(type));                                                          \
    } while (0)
    TAKE(g->x, T * E, float);
    TAKE(g->xb, T * E, float);
    TAKE(g->xo, T * E, float);
    TAKE(g->q, T * (size_t)g->q_dim, float);
    TAKE(g->att, T * (size_t)g->q_dim, float);
    TAKE(g->k, T * (size_t)g->kv_dim, float);
    TAKE(g->v, T * (size_t)g->kv_dim, float);
    TAKE(g->hb, T * (size_t)hp->n_ff, float);
    TAKE(g->hb2, T * (size_t)hp->n_ff, float);
    TAKE(g->logits, T * V, float);
    TAKE(g->tile, (size_t)TILE_FLOATS, float);
    TAKE(g->lp, T, float);
    TAKE(g->ids, T, int32_t);
    const size_t D = (size_t)g->dev_rows;
    TAKE(g->d_pl, D * V, float);
    TAKE(g->d_counts, D * V, int32_t);
    TAKE(g->d_cand, D * V, ul_tw_cand_t);
    for (int i = 0; i < UL_OV_SLOTS; i++) {
        slot_t *sl = &g->slots[i];
        /* in prepare()'s pinned order: tokens | pos | tok_seq | page_off | out_rows | pages */
        TAKE(sl->d_in, 5 * T + (size_t)g->max_pages, int32_t);
        TAKE(sl->d_smp, D, ul_tw_sample_t);
        TAKE(sl->d_hist, (size_t)DEV_HIST_CAP, int32_t);
        TAKE(sl->d_bias_ids, (size_t)DEV_BIAS_CAP, int32_t);
        TAKE(sl->d_bias_vals, (size_t)DEV_BIAS_CAP, float);
        TAKE(sl->d_chain, T, ul_tw_chain_t);
        TAKE(sl->d_chain_tok, T, int32_t);
    }
#undef TAKE
    return off;
}

static int pick_device(int device, char *err, size_t errlen) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0)
        return snprintf(err, errlen, "no CUDA device available (%s)",
                        e != cudaSuccess ? cudaGetErrorString(e) : "0 devices"),
               UL_ENOTSUP;
    if (device < 0 || device >= n)
        return snprintf(err, errlen, "--device %d: there are %d CUDA devices", device, n),
               UL_EINVAL;
    if ((e = cudaSetDevice(device)) != cudaSuccess)
        return snprintf(err, errlen, "cudaSetDevice(%d): %s", device, cudaGetErrorString(e)),
               UL_ENOTSUP;
    return 0;
}

static int alloc_all(gpu_t *g, const ul_gpu_config_t *c, char *err, size_t errlen) {
    const ul_hparams_t *hp = &g->hp;
    size_t wbytes = 0;
    weights(g, NULL, &wbytes);
    size_t sbytes = carve(g, NULL);
    /* pinned per slot, one block: sampling rows first (8-byte aligned), then int32/f32 */
    const size_t mt = (size_t)g->max_tokens, V = (size_t)hp->n_vocab, D = (size_t)g->dev_rows;
    size_t pinned = D * sizeof(ul_tw_sample_t) +
                    ((size_t)DEV_HIST_CAP + 2 * (size_t)DEV_BIAS_CAP) * sizeof(int32_t) +
                    (5 * mt + (size_t)g->max_pages) * sizeof(int32_t) + 2 * mt * sizeof(int32_t) +
                    mt * V * sizeof(float) + mt * (sizeof(ul_tw_chain_t) + sizeof(int32_t));
    cudaError_t e;
    if ((e = cudaMalloc(&g->d_weights, wbytes)) != cudaSuccess ||
        (e = cudaMalloc(&g->d_scratch, sbytes)) != cudaSuccess)
        return snprintf(err, errlen,
                        "out of device memory for %.1f MiB of weights and %.1f MiB "
                        "of scratch: %s",
                        wbytes / 1048576.0, sbytes / 1048576.0, cudaGetErrorString(e)),
               UL_ENOMEM;
    carve(g, g->d_scratch);
    for (int i = 0; i < UL_OV_SLOTS; i++) {
        slot_t *sl = &g->slots[i];
        if ((e = cudaMallocHost((void **)&sl->h_smp, pinned)) != cudaSuccess)
            return snprintf(err, errlen, "cannot pin 2 x %.1f MiB of host memory: %s",
                            pinned / 1048576.0, cudaGetErrorString(e)),
                   UL_ENOMEM;
        sl->h_hist = (int32_t *)(sl->h_smp + D);
        sl->h_bias_ids = sl->h_hist + DEV_HIST_CAP;
        sl->h_bias_vals = (float *)(sl->h_bias_ids + DEV_BIAS_CAP);
        sl->h_in = (int32_t *)(sl->h_bias_vals + DEV_BIAS_CAP);
        sl->h_ids = sl->h_in + 5 * mt + (size_t)g->max_pages;
        sl->h_lp = (float *)(sl->h_ids + mt);
        sl->h_logits = sl->h_lp + mt;
        sl->h_chain = (ul_tw_chain_t *)(sl->h_logits + mt * V);
        sl->h_chain_tok = (int32_t *)(sl->h_chain + mt);
    }
    for (int i = 0; i < UL_OV_N_EVENTS; i++)
        if ((e = cudaEventCreateWithFlags(&g->ev[i], cudaEventDisableTiming)) != cudaSuccess)
            return snprintf(err, errlen, "cudaEventCreate: %s", cudaGetErrorString(e)), UL_EIO;
    /* the sampler's counts start zero and every row leaves them so */
    if ((e = cudaMemset(g->d_counts, 0,
                        (size_t)g->dev_rows * (size_t)hp->n_vocab * sizeof(int32_t))) !=
        cudaSuccess)
        return snprintf(err, errlen, "cudaMemset: %s", cudaGetErrorString(e)), UL_EIO;
    size_t off = 0;
    if (weights(g, g->d_weights, &off))
        return snprintf(err, errlen, "uploading the weights failed"), UL_EIO;
    /* KV pool: the budget, or half of what is left; at least one full context */
    size_t free_b = 0, total_b = 0;
    if ((e = cudaMemGetInfo(&free_b, &total_b)) != cudaSuccess)
        return snprintf(err, errlen, "cudaMemGetInfo: %s", cudaGetErrorString(e)), UL_EIO;
    size_t page = (size_t)hp->n_layer * 2 * (size_t)hp->n_head_kv * (size_t)g->kv.page_size *
                  (size_t)hp->head_dim * sizeof(uint16_t);
    size_t budget = c->kv_bytes > 0 ? (size_t)c->kv_bytes : free_b / 2;
    int64_t n_pages = (int64_t)(budget / page),
            need = (g->base.n_ctx + g->kv.page_size - 1) / g->kv.page_size;
    if (n_pages > INT32_MAX / g->kv.page_size) n_pages = INT32_MAX / g->kv.page_size;
    if (n_pages < need)
        return snprintf(err, errlen,
                        "KV pool of %.1f MiB holds %lld pages, one context needs "
                        "%lld (device has %.1f MiB free)",
                        budget / 1048576.0, (long long)n_pages, (long long)need,
                        free_b / 1048576.0),
               UL_ENOMEM;
    if ((e = cudaMalloc((void **)&g->kv.kv, (size_t)n_pages * page)) != cudaSuccess)
        return snprintf(err, errlen, "out of device memory for the KV pool (%.1f MiB): %s",
                        (double)n_pages * page / 1048576.0, cudaGetErrorString(e)),
               UL_ENOMEM;
    g->kv.n_pages = (int32_t)n_pages;
    return 0;
}

int ul_gpu_backend_create(const ul_model_t *m, const ul_gpu_config_t *cfg, ul_backend_t **out,
                          char *err, size_t errlen) {
    *out = NULL;
    ul_gpu_config_t c = cfg ? *cfg : (ul_gpu_config_t){0};
    if (!c.page_size) c.page_size = 16;
    if (!c.max_batch_tokens) c.max_batch_tokens = 512;
    if (!c.step_timeout_ms) c.step_timeout_ms = 30000;
    if (!c.n_ctx) c.n_ctx = m->hp.n_ctx_train;
    if (c.page_size < 1 || c.max_batch_tokens < 1 || c.max_batch_tokens > 65535 || c.n_ctx < 1 ||
        c.step_timeout_ms < 1)
        return snprintf(err, errlen, "invalid CUDA backend configuration"), UL_EINVAL;
    int rc = ul_gpu_check_model(m, err, errlen); /* before any device call */
    if (rc || (rc = pick_device(c.device, err, errlen))) return rc;
    gpu_t *g = calloc(1, sizeof *g);
    if (!g) return UL_ENOMEM;
    g->m = m;
    g->hp = m->hp;
    g->device = c.device;
    g->max_tokens = c.max_batch_tokens;
    g->q_dim = m->hp.n_head * m->hp.head_dim;
    g->kv_dim = m->hp.n_head_kv * m->hp.head_dim;
    g->max_pages = g->max_tokens * ((c.n_ctx + c.page_size - 1) / c.page_size);
    g->kv = (ul_gpu_kv_t){.n_layer = m->hp.n_layer,
                          .n_head_kv = m->hp.n_head_kv,
                          .page_size = c.page_size,
                          .head_dim = m->hp.head_dim};
    g->base = (ul_backend_t){.vt = &gpu_vtbl,
                             .model = m,
                             .n_vocab = m->hp.n_vocab,
                             .n_ctx = c.n_ctx,
                             .page_size = c.page_size,
                             .eos_id = m->vocab ? ul_vocab_eos(m->vocab) : -1,
                             .max_step_tokens = c.max_batch_tokens,
                             .max_in_flight = UL_OV_SLOTS};
    g->layers = calloc((size_t)m->hp.n_layer, sizeof *g->layers);
    for (int i = 0; i < UL_OV_SLOTS; i++) {
        slot_t *sl = &g->slots[i];
        sl->g = g;
        sl->out_seq = calloc((size_t)g->max_tokens, sizeof *sl->out_seq);
        sl->host_row = calloc((size_t)g->max_tokens, sizeof *sl->host_row);
        sl->dev_row = calloc((size_t)g->max_tokens, sizeof *sl->dev_row);
        sl->place = calloc((size_t)g->max_tokens, sizeof *sl->place);
        if (!sl->out_seq || !sl->host_row || !sl->dev_row || !sl->place) rc = UL_ENOMEM;
    }
    g->dev_rows = g->max_tokens < DEV_SAMPLE_ROWS ? g->max_tokens : DEV_SAMPLE_ROWS;
    const char *gr = getenv("UVLLM_CUDA_GRAPHS");
    g->graphs_off = gr && !strcmp(gr, "0");
    g->smp_scratch = calloc(1, ul_sample_scratch_size(m->hp.n_vocab));
    if (!g->layers || !g->smp_scratch) rc = UL_ENOMEM;
    if (!rc && ((rc = CU(cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking))) ||
                (rc = CU(cudaStreamCreateWithFlags(&g->copy, cudaStreamNonBlocking)))))
        snprintf(err, errlen, "cannot create the CUDA streams");
    if (!rc && (rc = blas_ok(cublasCreate(&g->blas), "cublasCreate")))
        snprintf(err, errlen, "cannot initialise cuBLAS");
    if (!rc && (rc = blas_ok(cublasSetStream(g->blas, g->stream), "cublasSetStream")))
        snprintf(err, errlen, "cannot bind cuBLAS to the stream");
    if (!rc) rc = alloc_all(g, &c, err, errlen);
    g->base.n_pages = g->kv.n_pages;
    const ul_worker_ops_t ops = {.step = gpu_step,
                                 .max_in_flight = UL_OV_SLOTS,
                                 .chains_on_device = 1,
                                 .step_timeout_ns = (int64_t)c.step_timeout_ms * 1000000};
    if (!rc) rc = ul_worker_init(&g->worker, &g->base, &ops, g);
    if (rc) {
        gpu_destroy(&g->base);
        return rc;
    }
    UL_LOG_INFO("cuda: device %d, %d KV pages of %d tokens, steps up to %d tokens", c.device,
                g->kv.n_pages, c.page_size, g->max_tokens);
    *out = &g->base;
    return 0;
}
