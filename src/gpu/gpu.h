/* The only entry to the CUDA kernels: plain C, no CUDA header. Each function launches one
 * kernel family's kernel on the given stream (a cudaStream_t passed as void *, never the
 * default stream), checks its shapes first (UL_EINVAL, nothing launched) and returns 0 or
 * UL_EIO when the launch itself fails (cudaGetLastError). The launch is asynchronous: the
 * result is in device memory once the stream reaches it. Every pointer is device memory
 * unless said otherwise. The arithmetic of each kernel is in twin.h, shared with the host.
 *
 * One kernel family per file: dequant.cu, matvec.cu, norm.cu, rope.cu, act.cu, attn.cu,
 * sample.cu, chain.cu. */
#ifndef UL_GPU_GPU_H
#define UL_GPU_GPU_H

#include <stdint.h>

#include "gpu/twin.h" /* ul_tw_sample_t, ul_tw_cand_t, ul_tw_chain_t */

#ifdef __cplusplus
extern "C" {
#endif

/* dst[i][k] = element k of weight row rows[i] (rows NULL: row r0 + i), as f32.
 * w: [.][row_bytes] in GGUF layout of type (twin.h); n_cols a multiple of the block. Used
 * for the embedding gather (rows = token ids) and for GEMM tiles. (dequant.cu) */
int ul_gpu_dequant_rows(int type, const void *w, int64_t n_cols, const int32_t *rows, int64_t r0,
                        int32_t n_rows, float *dst, void *stream);

/* y[t][r] = sum_k W[r][k] x[t][k] for t < n_tok (decode: few tokens), W rows dequantised on
 * the fly: one warp per row. x [n_tok][n_cols], y [n_tok][n_rows]. (matvec.cu) */
int ul_gpu_matvec(int type, const void *w, int64_t n_rows, int64_t n_cols, const float *x,
                  int32_t n_tok, float *y, void *stream);

/* y[t] = x[t] * rms_scale(x[t]) * w, rows of n; y may be x. Also per head (qwen3's q/k
 * norms): rows = tokens x heads, n = head_dim. (norm.cu) */
int ul_gpu_rmsnorm(const float *x, const float *w, int32_t n_rows, int32_t n, float eps, float *y,
                   void *stream);

/* RoPE in place on n_tok rows of n_head heads of head_dim (row stride row_floats): the
 * first n_rot dims of each head, NORM (neox 0) or NEOX pairing, at pos[t]; ff: [n_rot/2]
 * frequency factors or NULL. (rope.cu) */
int ul_gpu_rope(float *x, const int32_t *pos, int32_t n_tok, int32_t n_head, int32_t head_dim,
                int32_t row_floats, int32_t n_rot, int neox, float base, float freq_scale,
                const float *ff, void *stream);

/* g[i] = silu(g[i]) * u[i]; x[i] += y[i]. (act.cu) */
int ul_gpu_swiglu(float *g, const float *u, int64_t n, void *stream);
int ul_gpu_add(float *x, const float *y, int64_t n, void *stream);
/* x[r][i] += b[i] for r < n_rows, i < n (a bias broadcast over tokens). (act.cu) */
int ul_gpu_add_rows(float *x, const float *b, int32_t n_rows, int32_t n, void *stream);

/* Paged KV, f16: kv [n_pages][n_layer][2][n_head_kv][page_size][head_dim] (K then V).
 * A token's sequence is tok_seq[t]; its page table starts at pages + page_off[s]. */
typedef struct ul_gpu_kv_s {
    uint16_t *kv;
    int32_t n_pages, n_layer, n_head_kv, page_size, head_dim;
} ul_gpu_kv_t;

/* Writes k, v ([n_tok][n_head_kv * head_dim]) of layer il at each token's position.
 * (attn.cu) */
int ul_gpu_kv_store(const ul_gpu_kv_t *kv, int32_t il, const float *k, const float *v,
                    int32_t n_tok, const int32_t *pos, const int32_t *tok_seq, const int32_t *pages,
                    const int32_t *page_off, void *stream);
/* out[t][h] = softmax(q[t][h] . K[0..pos[t]] * scale) V over the token's pages, for every
 * token of the step (decode tokens and prefill chunks alike: causal by position), with
 * n_head query heads sharing n_head_kv KV heads. q, out [n_tok][n_head * head_dim]. */
int ul_gpu_attn(const ul_gpu_kv_t *kv, int32_t il, const float *q, int32_t n_tok, int32_t n_head,
                const int32_t *pos, const int32_t *tok_seq, const int32_t *pages,
                const int32_t *page_off, float scale, float *out, void *stream);

/* For each of n_rows rows of logits [n_rows][n_vocab]: the largest value's id (ties to
 * the lowest) into ids[r] and its log-softmax into logprob[r]. (sample.cu) */
int ul_gpu_argmax(const float *logits, int32_t n_rows, int32_t n_vocab, int32_t *ids,
                  float *logprob, void *stream);

/* Samples n_rows rows with every parameter of ul_sample (twin.h's ul_tw_sample_row):
 * rows [n_rows] (device) name their logits row and parameters and receive the token,
 * logprob, top candidates and advanced RNG. hist, bias_ids, bias_vals: the arrays the
 * rows' offsets index. Scratch per row i: pl + i * n_vocab, cand + i * n_vocab, and
 * counts + i * n_vocab, which must be zero and is left zero. (sample.cu) */
int ul_gpu_sample(const float *logits, int32_t n_vocab, ul_tw_sample_t *rows, int32_t n_rows,
                  const int32_t *hist, const int32_t *bias_ids, const float *bias_vals, float *pl,
                  int32_t *counts, ul_tw_cand_t *cand, void *stream);

/* Chained entries (gpu/chain.h): for each of n pairs, twin.h's ul_tw_chain_apply: the token
 * the previous step sampled (ids: its argmax ids, or prev: its sampled rows) into
 * tokens[pairs[i].tok], hist[pairs[i].hist] and out[i], and prev's RNG state into
 * rows[pairs[i].rng]. pairs [n], out [n]. (chain.cu) */
int ul_gpu_chain(const ul_tw_chain_t *pairs, int32_t n, int32_t *tokens, const int32_t *ids,
                 const ul_tw_sample_t *prev, ul_tw_sample_t *rows, int32_t *hist, int32_t *out,
                 void *stream);

/* The last failed launch on this thread: "kernel: CUDA message" into buf. (act.cu) */
const char *ul_gpu_launch_error(char *buf, int len);

#ifdef __cplusplus
}
#endif

#endif
