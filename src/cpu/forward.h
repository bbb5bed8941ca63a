/* The `llama` forward pass of the CPU backend over one batched step: the tokens of many
 * sequences at once (prefill chunks and single decode tokens mixed), K/V read and written
 * through each sequence's page table, logits only for the rows that sample, and the
 * sampling itself, all inside ONE thread-pool job per step (phases separated by
 * ul_pool_barrier) so the workers never sleep between layers.
 *
 * Every buffer is carved from one allocation made by ul_fwd_create for up to
 * max_batch_tokens tokens; ul_fwd_step allocates nothing. Not reentrant: one step at a
 * time per ul_fwd_t (the backend serialises callers). */
#ifndef UL_CPU_FORWARD_H
#define UL_CPU_FORWARD_H

#include <stdatomic.h>
#include <stdint.h>

#include "cpu/kernels.h"
#include "cpu/kv.h"
#include "model/model.h"
#include "uvllm/backend.h"

typedef struct ul_moe_s ul_moe_t;   /* forward_moe.c's router and experts */
typedef struct ul_attn_s ul_attn_t; /* attn.h: one per-token attention item's state */
typedef struct ul_attn_tile_kern_s ul_attn_tile_kern_t;

/* The forward pass's pieces besides the matrix products, per ISA (ops.c: ul_cpu_ops picks
 * the table; the forward pass never compares ISAs). Every entry gives the scalar table's
 * results (bit for bit unless its test says otherwise). The attention entries serve the
 * head dims their predicate accepts; for others, fallback (a lower ISA's table) does. */
typedef struct ul_cpu_ops_s {
    void (*rmsnorm)(float *dst, const float *x, const float *w, int n, float eps);
    void (*rope_norm)(float *x, const float *cs, int n_rot); /* adjacent pairs */
    void (*rope_neox)(float *x, const float *cs, int n_rot); /* (i, i + n_rot / 2) */
    void (*swiglu)(float *g, const float *u, size_t n);      /* g = silu(g) * u */
    void (*geglu)(float *g, const float *u, size_t n);       /* g = gelu(g) * u, gemma3 */
    /* dst[i * stride] = f16(src[i]): KV cache writes (a V row, or a K column) */
    void (*to_f16)(uint16_t *dst, size_t stride, const float *src, int n);
    void (*round_f16)(float *dst, const float *src, int n); /* dst = f32(f16(src)) */
    /* keys [0, n) of one page into a per-token item (attn.h) */
    void (*attn_page)(ul_attn_t *a, const void *K, const void *V, int n, int f16);
    int (*attn_page_hd)(int head_dim);
    const ul_attn_tile_kern_t *attn_tile; /* the tiled path's kernels (attn.h) */
    int (*attn_tile_hd)(int head_dim);
    /* the MoE router (forward_moe.c): y[i] = expf(x[i]) as glibc's for i < n <= 8; the k
     * largest of p[0..n) (kernels.h's ul_topk_avx2 contract: 0, or -1 with p unchanged for
     * a row it does not take, which the scalar table's then takes) */
    void (*expf8)(const float *x, float *y, int n);
    int (*topk)(float *p, int n, int k, int32_t *sel, float *val);
    const struct ul_cpu_ops_s *fallback;
} ul_cpu_ops_t;
const ul_cpu_ops_t *ul_cpu_ops(ul_isa_t isa);

/* One attention work item of a layer: nq > 0, query rows t0..t0+nq-1 (one sequence) of
 * query head `head` on the tiled path; nq == 0, token t0 with the n_gqa heads of KV head
 * `head` on the per-token path (attn.h). cost orders the tiled items, largest first. */
typedef struct {
    int32_t t0, cost;
    int16_t nq, head;
} ul_attn_item_t;

typedef struct ul_fwd_s {
    const ul_model_t *m;
    ul_hparams_t hp;
    int32_t n_ctx;      /* longest sequence accepted */
    int32_t max_tokens; /* tokens per step the scratch holds */
    int32_t q_dim, kv_dim, n_gqa;
    int32_t logit_rows; /* rows of the logits buffer; output is computed in chunks of it */
    ul_pool_t *pool;
    int own_pool; /* 0: another ul_fwd_t's (ul_fwd_create_on) */
    int nth;
    ul_isa_t isa;
    const ul_cpu_ops_t *ops; /* ul_cpu_ops(isa) */
    /* [n_rot/2] RoPE frequency divisors (rope_freqs, phi3's LongRoPE factors for n_ctx), or NULL */
    const float *rope_ff;
    ul_kv_t kv;
    /* the weights as multiplied: per layer wq|wk|wv, wo, gate|up, down; then output */
    ul_cpu_mat_t *mats;
    uint8_t *packed; /* the packed copies of mats, one allocation (ul_cpu_alloc_weights) */
    ul_moe_t *moe;   /* mixture-of-experts FFNs (qwen3moe), or NULL */

    /* scratch, one allocation (mem) */
    void *mem;
    float *x;         /* [max_tokens][n_embd] residual stream */
    float *xb;        /* [max_tokens][n_embd] normed input of a matmul */
    float *xo;        /* [max_tokens][n_embd] matmul output added to x */
    float *q;         /* [max_tokens][q_dim] */
    float *k, *v;     /* [max_tokens][kv_dim] */
    float *att;       /* [max_tokens][q_dim] attention output */
    float *hb, *hb2;  /* [max_tokens][n_ff] */
    float *rope;      /* [max_tokens][n_rot] (cos, sin) pairs */
    float *rope_swa;  /* [max_tokens][n_rot] the same for sliding-window layers, or NULL */
    float *logits;    /* [logit_rows][n_vocab] */
    void *mm_scratch; /* ul_cpu_matmul's, shared by the threads */
    float *attn_tmp;  /* [nth][attn_tmp_floats] per-thread attention state */
    size_t attn_tmp_floats;
    uint8_t *smp_scratch; /* [nth][smp_bytes] per-thread sampling scratch (zeroed) */
    size_t smp_bytes;
    int32_t *tok_pos;           /* [max_tokens] position of each token */
    int32_t *tok_seq;           /* [max_tokens] index of its sequence in step->seqs */
    int32_t *out_rows;          /* [max_tokens] token rows whose logits are computed */
    int32_t *out_seq;           /* [max_tokens] sequence sampling from that row, or -1 */
    atomic_int *attn_next;      /* [n_layer] work counters of the attention phase */
    ul_attn_item_t *attn_items; /* the step's attention items, the same for every layer */
    int32_t n_attn_items;
    int attn_tiled; /* 1: sequences with >= UL_ATTN_TILE tokens in a step take the tiled path
                     * (off with batch_invariant; UVLLM_ATTN_TILED=0 too, for A/B runs) */
    /* UVLLM_PROFILE=1: wall time of the steps and of their attention phases (thread 0,
     * barrier to barrier), logged by ul_fwd_free (bench/attn_share.sh reads it) */
    int prof;
    uint64_t prof_step_ns, prof_attn_ns;

    /* the step in flight */
    ul_step_t *step;
    float *logits_all;
    int32_t n_out;
    int32_t n_embd_seqs; /* its embedding entries (backend.h), pooled after the layers */
} ul_fwd_t;

/* Uses the model's mmap'ed weights, copying those the ISA multiplies faster in a packed
 * layout (pack.h) once; allocates KV pool, scratch and the thread pool. Returns 0, UL_EINVAL (bad
 * config), UL_ENOTSUP (architecture or weight type the kernels lack) or UL_ENOMEM. */
int ul_fwd_create(const ul_model_t *m, const ul_cpu_config_t *cfg, ul_fwd_t **out);
/* The same on pool (NULL: its own), which it does not free: a draft model computing on its
 * target's threads (ul_cpu_backend_create_beside); the caller never runs both at once. */
int ul_fwd_create_on(const ul_model_t *m, const ul_cpu_config_t *cfg, ul_pool_t *pool,
                     ul_fwd_t **out);
void ul_fwd_free(ul_fwd_t *f);

/* Runs one step on the calling thread plus the pool: validates it (UL_EINVAL on a bad
 * token id, page table, position or size; nothing is computed then), writes K/V of every
 * token into its page, samples for every sequence with sample=1 (outputs in its
 * ul_step_seq_t), verifying the proposals of entries that carry some (backend.h,
 * "Speculative decoding": logits of their last n_draft + 1 rows, engine/spec.h). If logits_all is
 * not NULL it receives the logits of EVERY token, [step->n_tokens][n_vocab] (teacher-forced
 * evaluation, tests). */
int ul_fwd_step(ul_fwd_t *f, ul_step_t *step, float *logits_all);

/* Attention of one (token, KV head) pair: the n_gqa query heads that share the KV head,
 * over the token's sequence's positions [0, pos] read through its page table.
 * tmp: attn_tmp_floats floats private to the calling thread. (forward_attn.c) */
void ul_fwd_attn_item(const ul_fwd_t *f, int il, int32_t t, int32_t kvh, float *tmp);
size_t ul_fwd_attn_tmp_floats(int32_t n_gqa, int32_t head_dim, int32_t page_size);
/* The tiled path (forward_attn_tiled.c): query rows t0..t0+nq-1 (nq <= UL_ATTN_TILE, one
 * sequence, consecutive positions) of query head hq; tmp: ul_fwd_attn_tile_floats floats
 * private to the calling thread. */
void ul_fwd_attn_tile(const ul_fwd_t *f, int il, int32_t t0, int32_t nq, int32_t hq, float *tmp);
size_t ul_fwd_attn_tile_floats(int32_t head_dim);

/* Architecture extras on token t's q, k, v after their product, before RoPE: biases
 * (qwen2), per-head RMSNorm of q and k (qwen3); nothing for llama. (forward_arch.c) */
void ul_fwd_arch_qkv(ul_fwd_t *f, const ul_layer_t *L, int32_t t);
/* The mixture-of-experts FFN (forward_moe.c). init: packs the router and expert matrices and
 * allocates their scratch for max_tokens (nothing for dense models; 0, UL_EINVAL, UL_ENOTSUP
 * or UL_ENOMEM). ul_fwd_moe: called by every pool thread after the FFN norm of layer il
 * (input f->xb, complete); adds the FFN output to f->x rows [t0, t1) of this thread and
 * uses f->xo as scratch. */
int ul_fwd_moe_init(ul_fwd_t *f);
void ul_fwd_moe_free(ul_fwd_t *f);
void ul_fwd_moe(ul_fwd_t *f, int il, int32_t t0, int32_t t1, int ith, int nth);
/* ggml's rope cache for position pos (forward.c): (cos, sin) of theta_i = pos * freq_scale *
 * base^(-2i/n_rot) (divided by ff[i] when ff), times mscale, into cs[0..n_rot). */
void ul_fwd_rope_cache(float *cs, int32_t pos, int n_rot, float base, float freq_scale,
                       const float *ff, float mscale);
/* RoPE in NEOX mode on one head: pairs (i, i + n_rot/2), cs as forward.c's rope cache. */
void ul_fwd_rope_neox(float *x, const float *cs, int n_rot);

/* gemma3 (forward_gemma3.c). ul_fwd_gemma3_init fills the GELU table once; call it before
 * any thread uses ul_fwd_geglu (ul_fwd_create does, for gemma3). */
void ul_fwd_gemma3_init(void);
/* g[i] = gelu(g[i]) * u[i], i < n, as ggml's CPU geglu computes it (tanh approximation,
 * through its f16 table); avx512: the AVX-512 path (same bits; the caller checks the CPU). */
void ul_fwd_geglu(float *g, const float *u, size_t n, int avx512);
/* x[i] = cap * tanh(x[i] / cap), i < n (final_logit_softcapping). */
void ul_fwd_softcap(float *x, size_t n, float cap);
/* Embedding entries (backend.h): the output norm (none for an encoder) of the rows their
 * pooling reads (into their own xb rows, which nothing else reads now), pooled into
 * out_embd; entries spread over the threads. Called by every pool thread after the last
 * layer; a barrier must follow before xb is reused. (forward.c) */
void ul_fwd_pool_embd(ul_fwd_t *f, int ith, int nth);
/* bert (forward_bert.c): the model's weights and types (0, UL_EINVAL, UL_ENOTSUP), and the
 * whole step of an encoder, run by every pool thread (embedding entries only). */
int ul_fwd_bert_check(const ul_model_t *m);
void ul_fwd_bert_job(ul_fwd_t *f, int ith, int nth);
/* The attention scratch (floats per thread) an encoder step of up to max_tokens tokens and
 * sequences of up to n_ctx needs (forward_bert.c). */
size_t ul_fwd_bert_attn_tmp_floats(int32_t head_dim, int32_t max_tokens, int32_t n_ctx);
/* A reranker entry's score (pooling rank) into s->out_embd[0], from its [CLS] row of f->x;
 * uses the entry's own xb and xo rows as scratch (ul_fwd_pool_embd's caller). */
void ul_fwd_bert_rank(ul_fwd_t *f, ul_step_seq_t *s);
/* x[i] = gelu(x[i]), i < n, as ggml's CPU gelu (the f16 table of ul_fwd_geglu; call
 * ul_fwd_gemma3_init first); level 1: with AVX2 and F16C, 2: with AVX-512 (the same bits).
 * (forward_gemma3.c) */
void ul_fwd_gelu(float *x, size_t n, int level);
/* phi3 (forward_phi3.c): the RoPE frequency divisors for sequences of up to n_ctx tokens:
 * rope_freqs (llama), or phi3's long factors above n_ctx_orig and short ones up to it
 * (llama.cpp's get_rope_factors); NULL for none. */
const float *ul_fwd_rope_factors(const ul_model_t *m, int32_t n_ctx);

#endif
