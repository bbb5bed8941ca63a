/* The `bert` / `nomic-bert` encoders' forward pass (model_bert.c has the weights), the
 * whole step in one pool job like forward.c's, as llama.cpp's bert graph computes it:
 *   x = LN(tok_embd[t] + token_types[0] (+ position_embd[pos], bert))
 *   per layer: a = Wo attn(Wq x + bq, Wk x + bk, Wv x + bv) + bo;  x = LN(a + x)
 *              h = Wdown gelu(Wup x + bup) + bdown;                 x = LN(h + x)
 * (nomic-bert: q and k rotated by RoPE in NEOX mode after their biases, and the FFN
 * h = Wdown (silu(Wgate x) * Wup x); every bias is optional)
 * with LayerNorm y = (x - mean) / sqrt(var + eps) * w + b, GELU as ggml's CPU table
 * (ul_fwd_gelu), and attention over every token of the sequence in both directions
 * (scale 1/sqrt(head_dim), softmax in f32). Every step entry is an embedding entry holding
 * its whole sequence (forward.c's prepare checks it), so keys and values are this step's
 * own rows: no KV cache is read or written. Pooling (mean or cls) then reads x directly:
 * the encoder has no output norm. */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#include <math.h>
#include <string.h>

#include "cpu/forward.h"
#include "cpu/pool.h"
#include "uvllm/err.h"

enum { MAT_QKV, MAT_O, MAT_UP, MAT_DOWN, MATS_PER_LAYER }; /* forward.c's mats layout */

/* x += w * y over n floats. Blocks of 16 with restrict: gcc -O2 (its very-cheap vector
 * cost model) vectorizes only loops it needs no runtime alias check nor scalar tail for;
 * the scalar loop was a quarter of a bert-base step (perf, measured). */
static void axpy(float *restrict x, float w, const float *restrict y, int n) {
    int i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++) x[i + l] += w * y[i + l];
    for (; i < n; i++) x[i] += w * y[i];
}

static void add_vec(float *restrict x, const float *restrict b, int n) { axpy(x, 1.0f, b, n); }

/* ggml_norm (mean, then the centred variance, both summed in double here) * w + b */
static void layernorm(float *dst, const float *x, const float *w, const float *b, int n,
                      float eps) {
    double sum = 0;
    for (int i = 0; i < n; i++) sum += x[i];
    const float mean = (float)(sum / n);
    double var = 0;
    for (int i = 0; i < n; i++) var += (double)(x[i] - mean) * (x[i] - mean);
    const float scale = 1.0f / sqrtf((float)(var / n) + eps);
    for (int i = 0; i < n; i++) dst[i] = (x[i] - mean) * scale * w[i] + b[i];
}

/* q . k over n floats, in 16 independent lanes the compiler keeps in vector registers (a
 * single running sum is one serial chain of adds: with the scalar value sums, a third of a
 * bert-base step, perf). */
static float dot(const float *q, const float *k, int n) {
    float acc[16] = {0};
    int i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++) acc[l] += q[i + l] * k[i + l];
    float s = 0;
    for (; i < n; i++) s += q[i] * k[i];
    for (int l = 0; l < 16; l++) s += acc[l];
    return s;
}

/* One head of a token's attention: the scores of q against the n keys k (rows ld floats
 * apart) into sc (attn_tmp: room for max_tokens, alloc_scratch), softmax, then o = the
 * weighted sum of the values v (rows ld apart). */
typedef void head_fn(const ul_fwd_t *f, const float *q, const float *k, const float *v, size_t ld,
                     int hd, int32_t n, float scale, float *sc, float *o);

static void head_scalar(const ul_fwd_t *f, const float *q, const float *k, const float *v,
                        size_t ld, int hd, int32_t n, float scale, float *sc, float *o) {
    (void)f;
    float mx = -INFINITY, sum = 0;
    for (int32_t j = 0; j < n; j++) {
        sc[j] = dot(q, k + (size_t)j * ld, hd) * scale;
        mx = sc[j] > mx ? sc[j] : mx;
    }
    for (int32_t j = 0; j < n; j++) sum += sc[j] = expf(sc[j] - mx);
    const float inv = 1.0f / sum;
    memset(o, 0, (size_t)hd * sizeof *o);
    for (int32_t j = 0; j < n; j++) axpy(o, sc[j] * inv, v + (size_t)j * ld, hd);
}

#if defined(__x86_64__) || defined(__i386__)
/* head_scalar() with AVX2 and FMA, for head dims that are a multiple of 8 (every BERT's): the
 * scores 8 keys at a time (8 dot products, their lanes summed by one transpose of hadds),
 * the weighted sum of values with the output's 4 vectors in registers. The scalar
 * version's per-key horizontal sums and out-of-line axpy calls were a third of a
 * bge-small-shaped step (perf). Sums run in another order than head_scalar(): the results
 * differ in the last bits (the goldens' cosine bound covers it). */
#define AVX2_FN __attribute__((target("avx2,fma")))
#define AI __attribute__((target("avx2,fma"), always_inline)) inline

AVX2_FN static inline __m256 hsum8x8(const __m256 a[8]) {
    const __m256 h01 = _mm256_hadd_ps(a[0], a[1]), h23 = _mm256_hadd_ps(a[2], a[3]);
    const __m256 h45 = _mm256_hadd_ps(a[4], a[5]), h67 = _mm256_hadd_ps(a[6], a[7]);
    const __m256 l = _mm256_hadd_ps(h01, h23), h = _mm256_hadd_ps(h45, h67);
    return _mm256_add_ps(_mm256_permute2f128_ps(l, h, 0x20), _mm256_permute2f128_ps(l, h, 0x31));
}

/* sc[j] = q . k_j * scale for j < n, keys ks floats apart */
AVX2_FN static void scores_avx2(const float *q, const float *k, size_t ks, int hd, int32_t n,
                                float scale, float *sc) {
    int32_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 a[8];
        for (int u = 0; u < 8; u++) a[u] = _mm256_setzero_ps();
        for (int d = 0; d < hd; d += 8) {
            const __m256 qv = _mm256_loadu_ps(q + d);
            for (int u = 0; u < 8; u++)
                a[u] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k + (size_t)(j + u) * ks + d), a[u]);
        }
        _mm256_storeu_ps(sc + j, _mm256_mul_ps(hsum8x8(a), _mm256_set1_ps(scale)));
    }
    for (; j < n; j++) {
        __m256 a = _mm256_setzero_ps();
        for (int d = 0; d < hd; d += 8)
            a = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(k + (size_t)j * ks + d), a);
        __m128 r = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
        r = _mm_hadd_ps(r, r);
        r = _mm_hadd_ps(r, r);
        sc[j] = _mm_cvtss_f32(r) * scale;
    }
}

/* o[d] = sum_j w[j] v_j[d] for NV * 8 columns from d, each column's sum in j order: NV
 * independent chains of FMAs (8 keep both FMA units busy; 4 waited on their latency, perf) */
AI static void wsum_cols(const int NV, const float *w, const float *v, size_t vs, int32_t n,
                         float *o) {
    __m256 a[8];
    _Pragma("GCC unroll 8") for (int u = 0; u < NV; u++) a[u] = _mm256_setzero_ps();
    for (int32_t j = 0; j < n; j++) {
        const float *vj = v + (size_t)j * vs;
        const __m256 wj = _mm256_set1_ps(w[j]);
        _Pragma("GCC unroll 8") for (int u = 0; u < NV; u++) a[u] =
            _mm256_fmadd_ps(wj, _mm256_loadu_ps(vj + 8 * u), a[u]);
    }
    _Pragma("GCC unroll 8") for (int u = 0; u < NV; u++) _mm256_storeu_ps(o + 8 * u, a[u]);
}

/* o[d] = sum_j w[j] v_j[d], d < hd, values vs floats apart; 64 columns at a time */
AVX2_FN static void wsum_avx2(const float *w, const float *v, size_t vs, int hd, int32_t n,
                              float *o) {
    int d = 0;
    for (; d + 64 <= hd; d += 64) wsum_cols(8, w, v + d, vs, n, o + d);
    for (; d + 32 <= hd; d += 32) wsum_cols(4, w, v + d, vs, n, o + d);
    for (; d < hd; d += 8) wsum_cols(1, w, v + d, vs, n, o + d);
}

/* sc[j] = expf(sc[j] - mx) for j < n, 8 at a time through expf8 (glibc's bits, as the scalar
 * loop's expf calls, which were a tenth of the attention's time, perf) */
static void exp_shifted(const ul_fwd_t *f, float *sc, int32_t n, float mx) {
    for (int32_t j = 0; j < n; j += 8) {
        const int m = n - j < 8 ? (int)(n - j) : 8;
        float a[8];
        for (int i = 0; i < m; i++) a[i] = sc[j + i] - mx;
        f->ops->expf8(a, sc + j, m);
    }
}

static void head_avx2(const ul_fwd_t *f, const float *q, const float *k, const float *v, size_t ld,
                      int hd, int32_t n, float scale, float *sc, float *o) {
    scores_avx2(q, k, ld, hd, n, scale, sc);
    float mx = -INFINITY, sum = 0;
    for (int32_t j = 0; j < n; j++) mx = sc[j] > mx ? sc[j] : mx;
    exp_shifted(f, sc, n, mx);
    for (int32_t j = 0; j < n; j++) sum += sc[j];
    const float inv = 1.0f / sum;
    for (int32_t j = 0; j < n; j++) sc[j] *= inv;
    wsum_avx2(sc, v, ld, hd, n, o);
}
#else
#define head_avx2 head_scalar
#endif

/* Token t's attention output, all heads, against every token of its sequence. */
static void attend(ul_fwd_t *f, int32_t t, float *sc, head_fn *head) {
    const int hd = f->hp.head_dim, D = f->q_dim;
    const ul_step_seq_t *s = &f->step->seqs[f->tok_seq[t]];
    const int32_t j0 = s->tok_offset, n = s->n_tokens;
    const float scale = 1.0f / sqrtf((float)hd);
    for (int h = 0; h < f->hp.n_head; h++) {
        const size_t off = (size_t)j0 * D + (size_t)h * hd, qo = (size_t)t * D + (size_t)h * hd;
        head(f, f->q + qo, f->k + off, f->v + off, (size_t)D, hd, n, scale, sc, f->att + qo);
    }
}

/* AVX2 (or AVX-512, which has it) where the CPU path runs on one */
static int simd(const ul_fwd_t *f) { return f->isa == UL_ISA_AVX2 || f->isa == UL_ISA_AVX512; }

static void embed_rows(ul_fwd_t *f, int32_t t0, int32_t t1) {
    const ul_model_t *m = f->m;
    const int32_t E = f->hp.n_embd;
    const size_t tb = ul_type_row_bytes((int)m->tok_embd->type, E),
                 pb = m->pos_embd ? ul_type_row_bytes((int)m->pos_embd->type, E) : 0;
    float *tmp = f->xo + (size_t)t0 * E; /* xo rows of this thread: free until attention */
    for (int32_t t = t0; t < t1; t++) {
        float *x = f->x + (size_t)t * E;
        ul_cpu_dequant_row((int)m->tok_embd->type,
                           (const uint8_t *)m->tok_embd->data + (size_t)f->step->tokens[t] * tb, x,
                           E);
        if (m->tok_types) { /* token type 0 ("sentence A") for every token, as llama.cpp */
            ul_cpu_dequant_row((int)m->tok_types->type, m->tok_types->data, tmp, E);
            add_vec(x, tmp, E);
        }
        if (m->pos_embd) {
            ul_cpu_dequant_row((int)m->pos_embd->type,
                               (const uint8_t *)m->pos_embd->data + (size_t)f->tok_pos[t] * pb, tmp,
                               E);
            add_vec(x, tmp, E);
        } else { /* nomic-bert: RoPE */
            const ul_hparams_t *hp = &f->hp;
            ul_fwd_rope_cache(f->rope + (size_t)t * hp->n_rot, f->tok_pos[t], hp->n_rot,
                              hp->rope_freq_base, hp->rope_freq_scale, NULL, 1.0f);
        }
        layernorm(x, x, m->tok_norm->data, m->tok_norm_b->data, E, f->hp.norm_eps);
    }
}

/* BERT's post-norm residual for tokens t0..t1: x = layernorm(xo + bias + x) with the norm's
 * weight w and bias b (bias, when the model has it, added first). */
static void residual_norm(ul_fwd_t *f, int32_t t0, int32_t t1, const ul_gguf_tensor_t *bias,
                          const ul_gguf_tensor_t *w, const ul_gguf_tensor_t *b) {
    const int32_t E = f->hp.n_embd;
    for (int32_t t = t0; t < t1; t++) {
        float *xo = f->xo + (size_t)t * E, *x = f->x + (size_t)t * E;
        if (bias) add_vec(xo, bias->data, E);
        add_vec(xo, x, E);
        layernorm(x, xo, w->data, b->data, E, f->hp.norm_eps);
    }
}

static void bert_layer(ul_fwd_t *f, int il, int32_t t0, int32_t t1, int ith, int nth) {
    const ul_hparams_t *hp = &f->hp;
    const ul_layer_t *L = &f->m->layers[il];
    const int32_t T = f->step->n_tokens, D = f->q_dim, FF = hp->n_ff;
    const ul_cpu_mat_t *M = f->mats + (size_t)il * MATS_PER_LAYER;
    float *y[UL_MAT_PARTS] = {f->q, f->k, f->v};
    ul_cpu_matmul_mat(f->pool, &M[MAT_QKV], f->x, T, y, f->mm_scratch, ith, nth);
    const ul_gguf_tensor_t *qkv[] = {L->wq, L->wk, L->wv};
    for (int i = M[MAT_QKV].n_parts; i < 3; i++) /* mixed types: no stack */
        ul_cpu_matmul(f->pool, qkv[i], f->x, T, y[i], f->mm_scratch, ith, nth);
    for (int32_t t = t0; t < t1; t++) {
        float *q = f->q + (size_t)t * D, *k = f->k + (size_t)t * D;
        if (L->bq) {
            add_vec(q, L->bq->data, D);
            add_vec(k, L->bk->data, D);
            add_vec(f->v + (size_t)t * D, L->bv->data, D);
        }
        if (hp->rope_neox) {
            const float *cs = f->rope + (size_t)t * hp->n_rot;
            for (int h = 0; h < hp->n_head; h++) {
                f->ops->rope_neox(q + (size_t)h * hp->head_dim, cs, hp->n_rot);
                f->ops->rope_neox(k + (size_t)h * hp->head_dim, cs, hp->n_rot);
            }
        }
    }
    ul_pool_barrier(f->pool);
    float *sc = f->attn_tmp + (size_t)ith * f->attn_tmp_floats;
    head_fn *head = simd(f) && hp->head_dim % 8 == 0 ? head_avx2 : head_scalar;
    for (int32_t t = t0; t < t1; t++) attend(f, t, sc, head);
    ul_pool_barrier(f->pool);
    float *yo[UL_MAT_PARTS] = {f->xo};
    ul_cpu_matmul_mat(f->pool, &M[MAT_O], f->att, T, yo, f->mm_scratch, ith, nth);
    residual_norm(f, t0, t1, L->bo, L->attn_out_norm, L->attn_out_norm_b);
    ul_pool_barrier(f->pool);
    float *yu[UL_MAT_PARTS] = {f->hb, f->hb2}; /* bert: up; nomic-bert: gate, up */
    ul_cpu_matmul_mat(f->pool, &M[MAT_UP], f->x, T, yu, f->mm_scratch, ith, nth);
    if (L->ffn_gate && M[MAT_UP].n_parts < 2) /* mixed types: no stack */
        ul_cpu_matmul(f->pool, L->ffn_up, f->x, T, f->hb2, f->mm_scratch, ith, nth);
    for (int32_t t = t0; t < t1; t++) {
        float *h = f->hb + (size_t)t * FF;
        if (L->ffn_gate) {
            f->ops->swiglu(h, f->hb2 + (size_t)t * FF, (size_t)FF);
            continue;
        }
        if (L->ffn_up_b) add_vec(h, L->ffn_up_b->data, FF);
        ul_fwd_gelu(h, (size_t)FF, simd(f));
    }
    ul_pool_barrier(f->pool);
    ul_cpu_matmul_mat(f->pool, &M[MAT_DOWN], f->hb, T, yo, f->mm_scratch, ith, nth);
    residual_norm(f, t0, t1, L->ffn_down_b, L->out_norm, L->out_norm_b);
    ul_pool_barrier(f->pool);
}

void ul_fwd_bert_job(ul_fwd_t *f, int ith, int nth) {
    const int32_t T = f->step->n_tokens;
    const int32_t t0 = (int32_t)((int64_t)T * ith / nth),
                  t1 = (int32_t)((int64_t)T * (ith + 1) / nth);
    embed_rows(f, t0, t1);
    ul_pool_barrier(f->pool);
    for (int il = 0; il < f->hp.n_layer; il++) bert_layer(f, il, t0, t1, ith, nth);
    ul_fwd_pool_embd(f, ith, nth);
}

/* llama.cpp's build_pooling for LLAMA_POOLING_TYPE_RANK on bert: the [CLS] row, then
 * h = tanh(cls x + cls_b) and score = cls_out h + cls_out_b, each step when the model has
 * the tensor; llama-server answers the first output as the score, raw (no sigmoid). A row
 * of a head matrix at a time is dequantized into the entry's xo [CLS] row (free after the
 * last layer), h goes to its xb row: E^2 multiply-adds per entry, nothing next to the
 * encoder's. */
void ul_fwd_bert_rank(ul_fwd_t *f, ul_step_seq_t *s) {
    const ul_model_t *m = f->m;
    const int32_t E = f->hp.n_embd;
    const float *x = f->x + (size_t)s->tok_offset * E;
    float *h = f->xb + (size_t)s->tok_offset * E, *row = f->xo + (size_t)s->tok_offset * E;
    if (m->cls) {
        const size_t rb = ul_type_row_bytes((int)m->cls->type, E);
        for (int32_t i = 0; i < E; i++) {
            ul_cpu_dequant_row((int)m->cls->type, (const uint8_t *)m->cls->data + (size_t)i * rb,
                               row, E);
            const float b = m->cls_b ? ((const float *)m->cls_b->data)[i] : 0.0f;
            h[i] = tanhf(dot(row, x, E) + b);
        }
        x = h;
    }
    float score = x[0];
    if (m->cls_out) {
        ul_cpu_dequant_row((int)m->cls_out->type, m->cls_out->data, row, E);
        score = dot(row, x, E) + (m->cls_out_b ? ((const float *)m->cls_out_b->data)[0] : 0.0f);
    }
    memset(s->out_embd, 0, (size_t)E * sizeof *s->out_embd);
    s->out_embd[0] = score;
}

int ul_fwd_bert_check(const ul_model_t *m) {
    const ul_hparams_t *hp = &m->hp;
    if (!m->layers || !m->tok_embd || (!m->pos_embd && !hp->rope_neox) || !m->tok_norm ||
        !m->tok_norm_b || hp->n_head_kv != hp->n_head || hp->n_rot > hp->head_dim || hp->n_rot % 2)
        return UL_EINVAL;
    if (!ul_type_block_elems((int)m->tok_embd->type) ||
        (m->pos_embd && !ul_type_block_elems((int)m->pos_embd->type)) ||
        (m->tok_types && !ul_type_block_elems((int)m->tok_types->type)) ||
        (m->cls && !ul_type_block_elems((int)m->cls->type)) ||
        (m->cls_out && !ul_type_block_elems((int)m->cls_out->type)))
        return UL_ENOTSUP;
    for (int il = 0; il < hp->n_layer; il++) {
        const ul_layer_t *L = &m->layers[il];
        const ul_gguf_tensor_t *ws[] = {L->wq,     L->wk,       L->wv,      L->wo,
                                        L->ffn_up, L->ffn_down, L->ffn_gate};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
            if (ws[i] && !ul_cpu_type_supported((int)ws[i]->type)) return UL_ENOTSUP;
    }
    return 0;
}
