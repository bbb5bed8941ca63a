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
#include "cpu/exp_neg_avx2.h" /* <immintrin.h> */
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

/* Token t's attention output, all heads: the scores of every token of its sequence into
 * sc (attn_tmp: room for max_tokens, alloc_scratch), softmax, then the weighted sum of
 * the values. */
static void attend(ul_fwd_t *f, int32_t t, float *sc) {
    const ul_hparams_t *hp = &f->hp;
    const int hd = hp->head_dim, D = f->q_dim;
    const ul_step_seq_t *s = &f->step->seqs[f->tok_seq[t]];
    const int32_t j0 = s->tok_offset, n = s->n_tokens;
    const float scale = 1.0f / sqrtf((float)hd);
    for (int h = 0; h < hp->n_head; h++) {
        const float *q = f->q + (size_t)t * D + (size_t)h * hd;
        float *o = f->att + (size_t)t * D + (size_t)h * hd;
        float mx = -INFINITY, sum = 0;
        for (int32_t j = 0; j < n; j++) {
            sc[j] = dot(q, f->k + (size_t)(j0 + j) * D + (size_t)h * hd, hd) * scale;
            mx = sc[j] > mx ? sc[j] : mx;
        }
        for (int32_t j = 0; j < n; j++) sum += sc[j] = expf(sc[j] - mx);
        const float inv = 1.0f / sum;
        memset(o, 0, (size_t)hd * sizeof *o);
        for (int32_t j = 0; j < n; j++) {
            const float w = sc[j] * inv, *v = f->v + (size_t)(j0 + j) * D + (size_t)h * hd;
            axpy(o, w, v, hd);
        }
    }
}

enum { BQ = 4 }; /* queries per block (attend_rows) */

#if defined(__x86_64__) || defined(__i386__)
/* attend() with AVX2 and FMA for head dims that are a multiple of 8 (every BERT's):
 * attend_rows below. Sums run in another order than attend(): the results differ in the
 * last bits (the goldens' cosine bound covers it). */
#define AVX2_FN __attribute__((target("avx2,fma")))

/* Queries [ta, tb) of one sequence, every head, as small matrix products (BQ queries at a
 * time): the head's keys transposed once (kt [hd][n8]), the block's scores S = Q K^T *
 * scale with 16 keys x BQ queries in registers, a softmax per row, then O = P V with 16
 * output columns x BQ queries in registers. Per query (attend_avx2) every key and value was
 * loaded once per query and the scores summed horizontally: 22% of a bge-small step (64
 * tokens a sequence, head dim 32; perf) for 3% of its multiply-adds. */
#define TILE_FN __attribute__((target("avx2,fma"), always_inline)) static inline

/* p_u[j..j+16) = q_u . kt[.][j..j+16) * scale for u < NQ, j < n16 (a multiple of 16): the
 * 2 x NQ accumulators stay in registers (a constant NQ: a variable count put them on the
 * stack, perf: a fifth of the step) */
TILE_FN void scores_tile(const int NQ, const float *q, size_t qs, const float *kt, int32_t n16,
                         int hd, float scale, float *p) {
    const __m256 sv = _mm256_set1_ps(scale);
    for (int32_t j = 0; j < n16; j += 16) {
        __m256 a[BQ][2];
        _Pragma("GCC unroll 4") for (int u = 0; u < NQ; u++) a[u][0] = a[u][1] =
            _mm256_setzero_ps();
        for (int d = 0; d < hd; d++) {
            const float *kd = kt + (size_t)d * n16 + j;
            const __m256 k0 = _mm256_loadu_ps(kd), k1 = _mm256_loadu_ps(kd + 8);
            _Pragma("GCC unroll 4") for (int u = 0; u < NQ; u++) {
                const __m256 qv = _mm256_broadcast_ss(q + (size_t)u * qs + d);
                a[u][0] = _mm256_fmadd_ps(qv, k0, a[u][0]);
                a[u][1] = _mm256_fmadd_ps(qv, k1, a[u][1]);
            }
        }
        _Pragma("GCC unroll 4") for (int u = 0; u < NQ; u++) {
            _mm256_storeu_ps(p + (size_t)u * n16 + j, _mm256_mul_ps(a[u][0], sv));
            _mm256_storeu_ps(p + (size_t)u * n16 + j + 8, _mm256_mul_ps(a[u][1], sv));
        }
    }
}

/* o_u[c..c+8W) = sum_j p_u[j] v_j[c..c+8W) for u < NQ, W 1 or 2 vectors of columns; values
 * vs floats apart */
TILE_FN void values_tile(const int NQ, const int W, const float *p, int32_t n16, int32_t n,
                         const float *v, size_t vs, int c, float *o, size_t os) {
    __m256 a[BQ][2];
    _Pragma("GCC unroll 4") for (int u = 0; u < NQ; u++) a[u][0] = a[u][1] = _mm256_setzero_ps();
    for (int32_t j = 0; j < n; j++) {
        const float *vj = v + (size_t)j * vs + c;
        const __m256 v0 = _mm256_loadu_ps(vj), v1 = W == 2 ? _mm256_loadu_ps(vj + 8) : v0;
        _Pragma("GCC unroll 4") for (int u = 0; u < NQ; u++) {
            const __m256 w = _mm256_broadcast_ss(p + (size_t)u * n16 + j);
            a[u][0] = _mm256_fmadd_ps(w, v0, a[u][0]);
            if (W == 2) a[u][1] = _mm256_fmadd_ps(w, v1, a[u][1]);
        }
    }
    _Pragma("GCC unroll 4") for (int u = 0; u < NQ; u++) {
        _mm256_storeu_ps(o + (size_t)u * os + c, a[u][0]);
        if (W == 2) _mm256_storeu_ps(o + (size_t)u * os + c + 8, a[u][1]);
    }
}

#define NQ_CASES(CALL)                                                                             \
    switch (nq) {                                                                                  \
    case 4:                                                                                        \
        CALL(4);                                                                                   \
        break;                                                                                     \
    case 3:                                                                                        \
        CALL(3);                                                                                   \
        break;                                                                                     \
    case 2:                                                                                        \
        CALL(2);                                                                                   \
        break;                                                                                     \
    default:                                                                                       \
        CALL(1);                                                                                   \
        break;                                                                                     \
    }

AVX2_FN static void scores_block(const float *q, size_t qs, int nq, const float *kt, int32_t n16,
                                 int hd, float scale, float *p){
#define S_(N) scores_tile(N, q, qs, kt, n16, hd, scale, p)
    NQ_CASES(S_)
#undef S_
}

AVX2_FN static void values_block(const float *p, int32_t n16, int nq, int32_t n, const float *v,
                                 size_t vs, int hd, float *o, size_t os) {
    int c = 0;
#define V2_(N) values_tile(N, 2, p, n16, n, v, vs, c, o, os)
#define V1_(N) values_tile(N, 1, p, n16, n, v, vs, c, o, os)
    for (; c + 16 <= hd; c += 16) NQ_CASES(V2_)
    for (; c < hd; c += 8) NQ_CASES(V1_)
#undef V2_
#undef V1_
}

/* r[0..n) = softmax(r[0..n)); r has room for n rounded up to 16 (the block's row) */
AVX2_FN static void softmax_row(float *r, int32_t n) {
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    __m256 mv = ninf;
    int32_t j = 0;
    for (; j + 8 <= n; j += 8) mv = _mm256_max_ps(mv, _mm256_loadu_ps(r + j));
    float mx = -INFINITY, m8[8];
    _mm256_storeu_ps(m8, mv);
    for (int i = 0; i < 8; i++) mx = m8[i] > mx ? m8[i] : mx;
    for (; j < n; j++) mx = r[j] > mx ? r[j] : mx;
    for (j = n; j < ((n + 7) & ~7); j++) r[j] = -INFINITY; /* the tail's lanes give 0 */
    const __m256 mxv = _mm256_set1_ps(mx);
    const __m256 lo = _mm256_set1_ps(-87.3f); /* below: 0 (ul_exp_neg8's range) */
    __m256 sv = _mm256_setzero_ps();
    for (j = 0; j < n; j += 8) {
        const __m256 x = _mm256_sub_ps(_mm256_loadu_ps(r + j), mxv);
        const __m256 e =
            _mm256_and_ps(ul_exp_neg8(_mm256_max_ps(x, lo)), _mm256_cmp_ps(x, lo, _CMP_GT_OQ));
        _mm256_storeu_ps(r + j, e);
        sv = _mm256_add_ps(sv, e);
    }
    float s8[8], sum = 0;
    _mm256_storeu_ps(s8, sv);
    for (int i = 0; i < 8; i++) sum += s8[i];
    const __m256 inv = _mm256_set1_ps(1.0f / sum);
    for (j = 0; j < n; j += 8) _mm256_storeu_ps(r + j, _mm256_mul_ps(_mm256_loadu_ps(r + j), inv));
}

/* layernorm() with AVX2, x first made (x + a1) + a2 in place when given (the residual and
 * its bias, as residual_norm adds them), all in one pass with the mean's sum; sums in double
 * lanes (another order than layernorm's: the last bits of the mean can differ). The scalar
 * passes (layernorm, two add_vec) were a tenth of a bge-small step (perf). */
AVX2_FN static void layernorm_avx2(float *dst, float *x, const float *a1, const float *a2,
                                   const float *w, const float *b, int n, float eps) {
    __m256d s0 = _mm256_setzero_pd(), s1 = s0;
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        if (a1) v = _mm256_add_ps(v, _mm256_loadu_ps(a1 + i));
        if (a2) v = _mm256_add_ps(v, _mm256_loadu_ps(a2 + i));
        if (a1 || a2) _mm256_storeu_ps(x + i, v);
        s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
        s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
    }
    double d4[4], sum = 0;
    _mm256_storeu_pd(d4, _mm256_add_pd(s0, s1));
    for (; i < n; i++) {
        if (a1) x[i] += a1[i];
        if (a2) x[i] += a2[i];
        sum += x[i];
    }
    sum += (d4[0] + d4[1]) + (d4[2] + d4[3]);
    const float mean = (float)(sum / n);
    const __m256 mv = _mm256_set1_ps(mean);
    s0 = s1 = _mm256_setzero_pd();
    for (i = 0; i + 8 <= n; i += 8) {
        const __m256 c = _mm256_sub_ps(_mm256_loadu_ps(x + i), mv);
        const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(c)),
                      hi = _mm256_cvtps_pd(_mm256_extractf128_ps(c, 1));
        s0 = _mm256_fmadd_pd(lo, lo, s0); /* exact products of floats in double */
        s1 = _mm256_fmadd_pd(hi, hi, s1);
    }
    double var = 0;
    _mm256_storeu_pd(d4, _mm256_add_pd(s0, s1));
    for (int k = i; k < n; k++) var += (double)(x[k] - mean) * (x[k] - mean);
    var += (d4[0] + d4[1]) + (d4[2] + d4[3]);
    const float scale = 1.0f / sqrtf((float)(var / n) + eps);
    const __m256 sc = _mm256_set1_ps(scale);
    for (i = 0; i + 8 <= n; i += 8) {
        const __m256 c = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv), sc);
        _mm256_storeu_ps(dst + i, _mm256_add_ps(_mm256_mul_ps(c, _mm256_loadu_ps(w + i)),
                                                _mm256_loadu_ps(b + i)));
    }
    for (; i < n; i++) dst[i] = (x[i] - mean) * scale * w[i] + b[i];
}

static void attend_rows(ul_fwd_t *f, int32_t ta, int32_t tb, float *tmp) {
    const ul_hparams_t *hp = &f->hp;
    const int hd = hp->head_dim, D = f->q_dim;
    const ul_step_seq_t *s = &f->step->seqs[f->tok_seq[ta]];
    const int32_t j0 = s->tok_offset, n = s->n_tokens, n16 = (n + 15) & ~15;
    const float scale = 1.0f / sqrtf((float)hd);
    float *kt = tmp, *p = tmp + (size_t)hd * n16;
    for (int h = 0; h < hp->n_head; h++) {
        const float *k = f->k + (size_t)j0 * D + (size_t)h * hd;
        for (int d = 0; d < hd; d++)
            for (int32_t j = 0; j < n16; j++)
                kt[(size_t)d * n16 + j] = j < n ? k[(size_t)j * D + d] : 0;
        for (int32_t t = ta; t < tb; t += BQ) {
            const int nq = tb - t < BQ ? (int)(tb - t) : BQ;
            scores_block(f->q + (size_t)t * D + (size_t)h * hd, (size_t)D, nq, kt, n16, hd, scale,
                         p);
            for (int u = 0; u < nq; u++) softmax_row(p + (size_t)u * n16, n);
            values_block(p, n16, nq, n, f->v + (size_t)j0 * D + (size_t)h * hd, (size_t)D, hd,
                         f->att + (size_t)t * D + (size_t)h * hd, (size_t)D);
        }
    }
}

/* tokens [t0, t1) of this thread, a run of one sequence's tokens at a time */
static void attend_avx2_all(ul_fwd_t *f, int32_t t0, int32_t t1, float *tmp) {
    for (int32_t ta = t0; ta < t1;) {
        int32_t tb = ta + 1;
        while (tb < t1 && f->tok_seq[tb] == f->tok_seq[ta]) tb++;
        attend_rows(f, ta, tb, tmp);
        ta = tb;
    }
}
#else
static void attend_avx2_all(ul_fwd_t *f, int32_t t0, int32_t t1, float *tmp) {
    for (int32_t t = t0; t < t1; t++) attend(f, t, tmp);
}
static void layernorm_avx2(float *dst, float *x, const float *a1, const float *a2, const float *w,
                           const float *b, int n, float eps) {
    if (a1) add_vec(x, a1, n);
    if (a2) add_vec(x, a2, n);
    layernorm(dst, x, w, b, n, eps);
}
#endif

size_t ul_fwd_bert_attn_tmp_floats(int32_t head_dim, int32_t max_tokens, int32_t n_ctx) {
    const size_t n = (size_t)(max_tokens < n_ctx ? max_tokens : n_ctx),
                 n16 = (n + 15) & ~(size_t)15;
    const size_t fl = (size_t)head_dim * n16 + BQ * n16 + 16; /* kt, p (attend_rows) */
    return ((fl > (size_t)max_tokens ? fl : (size_t)max_tokens) + 15) & ~(size_t)15;
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
        if (simd(f)) {
            layernorm_avx2(x, xo, bias ? bias->data : NULL, x, w->data, b->data, E, f->hp.norm_eps);
            continue;
        }
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
    if (simd(f) && hp->head_dim % 8 == 0)
        attend_avx2_all(f, t0, t1, sc);
    else
        for (int32_t t = t0; t < t1; t++) attend(f, t, sc);
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
        ul_fwd_gelu(h, (size_t)FF, f->isa == UL_ISA_AVX512 ? 2 : simd(f));
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
