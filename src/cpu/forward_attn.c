/* Causal attention through page tables, with the numerics of llama.cpp's CPU
 * flash-attention (the path its golden runs take with an f16 KV cache): the query is
 * rounded to f16, each score is an f16 x f16 dot product, softmax is online key by key
 * (running max M and sum S), and the V accumulator is kept in f16 — rescaled when M rises,
 * then acc = f16(acc + v * e^(s - M)) — and divided by S at the end. Matching these
 * roundings is what keeps greedy decoding identical to llama.cpp on near-tied logits;
 * with an f32 cache everything stays f32.
 *
 * One work item is a (token, KV head) pair: the n_gqa query heads sharing that KV head
 * walk the keys together, so each K/V row is loaded once for all of them. No buffer of
 * n_ctx scores is needed. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "cpu/forward.h"

size_t ul_fwd_attn_tmp_floats(int32_t n_gqa, int32_t head_dim, int32_t page_size) {
    /* q16 [G][hd] u16 | acc16 [G][hd] u16 | acc32 [G][hd] | qf [G][hd] | kf, vf [hd] |
     * M, S [G] */
    (void)page_size;
    size_t n = (size_t)n_gqa * (size_t)head_dim * 3 + (size_t)head_dim * 2 + (size_t)n_gqa * 2;
    return (n + 15) & ~(size_t)15; /* keeps every thread's slice 64-byte aligned */
}

typedef struct {
    const ul_fwd_t *f;
    int32_t G, hd;
    float scale;
    uint16_t *q16, *acc16;
    float *acc32, *qf, *kf, *vf, *M, *S;
} attn_t;

/* ---------- scalar reference (any CPU) ---------- */

static float dot16_scalar(const uint16_t *x, const uint16_t *y, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)(ul_fp16_to_fp32(x[i]) * ul_fp16_to_fp32(y[i]));
    return (float)s;
}

static void key16_scalar(attn_t *a, const uint16_t *k, const uint16_t *v) {
    const int hd = a->hd;
    for (int g = 0; g < a->G; g++) {
        uint16_t *acc = a->acc16 + (size_t)g * hd;
        float s = dot16_scalar(k, a->q16 + (size_t)g * hd, hd) * a->scale, ms = 1, vs = 1;
        if (s > a->M[g]) {
            ms = expf(a->M[g] - s);
            a->M[g] = s;
            for (int i = 0; i < hd; i++) acc[i] = ul_fp32_to_fp16(ul_fp16_to_fp32(acc[i]) * ms);
        } else {
            vs = expf(s - a->M[g]);
        }
        for (int i = 0; i < hd; i++)
            acc[i] = ul_fp32_to_fp16(fmaf(ul_fp16_to_fp32(v[i]), vs, ul_fp16_to_fp32(acc[i])));
        a->S[g] = a->S[g] * ms + vs;
    }
}

static void key32_scalar(attn_t *a, const float *k, const float *v, const float *q) {
    const int hd = a->hd;
    for (int g = 0; g < a->G; g++) {
        float *acc = a->acc32 + (size_t)g * hd;
        const float *qg = q + (size_t)g * hd;
        double d = 0;
        for (int i = 0; i < hd; i++) d += (double)(k[i] * qg[i]);
        float s = (float)d * a->scale, ms = 1, vs = 1;
        if (s > a->M[g]) {
            ms = expf(a->M[g] - s);
            a->M[g] = s;
            for (int i = 0; i < hd; i++) acc[i] *= ms;
        } else {
            vs = expf(s - a->M[g]);
        }
        for (int i = 0; i < hd; i++) acc[i] = fmaf(v[i], vs, acc[i]);
        a->S[g] = a->S[g] * ms + vs;
    }
}

/* ---------- AVX-512: ggml's f16 dot (4 accumulators over 64 lanes, then the scalar tail
 * in double) and 16-lane f16 scale/mad ---------- */

#define AVX512 __attribute__((target("avx512f,f16c,fma")))

/* x, y: f16 values already widened to f32 (exact), so the products and sums are those of
 * ggml_vec_dot_f16 on the f16 rows. */
AVX512 static inline float dot16_avx512(const float *x, const float *y, int n) {
    const int np = n & ~63;
    double s = 0;
    if (np) {
        __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                         _mm512_setzero_ps()};
        for (int i = 0; i < np; i += 64)
            for (int j = 0; j < 4; j++)
                acc[j] = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + j * 16),
                                         _mm512_loadu_ps(y + i + j * 16), acc[j]);
        acc[0] = _mm512_add_ps(acc[0], acc[2]);
        acc[1] = _mm512_add_ps(acc[1], acc[3]);
        acc[0] = _mm512_add_ps(acc[0], acc[1]);
        s = (double)_mm512_reduce_add_ps(acc[0]);
    }
    for (int i = np; i < n; i++) s += (double)(x[i] * y[i]);
    return (float)s;
}

AVX512 static inline void widen16_avx512(float *dst, const uint16_t *src, int n) {
    int i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + i))));
    for (; i < n; i++) dst[i] = ul_fp16_to_fp32(src[i]);
}

AVX512 static inline void scale16_avx512(uint16_t *y, float v, int n) {
    const __m512 vv = _mm512_set1_ps(v);
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 a = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(y + i)));
        _mm256_storeu_si256((__m256i *)(y + i),
                            _mm512_cvtps_ph(_mm512_mul_ps(a, vv), _MM_FROUND_TO_NEAREST_INT));
    }
    for (; i < n; i++) y[i] = ul_fp32_to_fp16(ul_fp16_to_fp32(y[i]) * v);
}

AVX512 static inline void mad16_avx512(uint16_t *y, const float *x, float v, int n) {
    const __m512 vv = _mm512_set1_ps(v);
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 a = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(y + i)));
        _mm256_storeu_si256((__m256i *)(y + i),
                            _mm512_cvtps_ph(_mm512_fmadd_ps(_mm512_loadu_ps(x + i), vv, a),
                                            _MM_FROUND_TO_NEAREST_INT));
    }
    for (; i < n; i++) y[i] = ul_fp32_to_fp16(fmaf(x[i], v, ul_fp16_to_fp32(y[i])));
}

/* One key for all G query heads: K and V rows are widened once, then each head takes its
 * score, its online-softmax update and its f16 accumulation. */
AVX512 static void key16_avx512(attn_t *a, const uint16_t *k, const uint16_t *v) {
    const int hd = a->hd;
    widen16_avx512(a->kf, k, hd);
    widen16_avx512(a->vf, v, hd);
    for (int g = 0; g < a->G; g++) {
        uint16_t *acc = a->acc16 + (size_t)g * hd;
        float s = dot16_avx512(a->kf, a->qf + (size_t)g * hd, hd) * a->scale, ms = 1, vs = 1;
        if (s > a->M[g]) {
            ms = expf(a->M[g] - s);
            a->M[g] = s;
            scale16_avx512(acc, ms, hd);
        } else {
            vs = expf(s - a->M[g]);
        }
        mad16_avx512(acc, a->vf, vs, hd);
        a->S[g] = a->S[g] * ms + vs;
    }
}

/* ---------- the item ---------- */

void ul_fwd_attn_item(const ul_fwd_t *f, int il, int32_t t, int32_t kvh, float *tmp) {
    const ul_step_seq_t *s = &f->step->seqs[f->tok_seq[t]];
    const int32_t pos = f->tok_pos[t], hd = f->hp.head_dim, ps = f->kv.page_size;
    attn_t a = {.f = f, .G = f->n_gqa, .hd = hd, .scale = 1.0f / sqrtf((float)hd)};
    const size_t gh = (size_t)a.G * hd;
    a.q16 = (uint16_t *)tmp;
    a.acc16 = a.q16 + gh;
    a.acc32 = tmp + gh;
    a.qf = a.acc32 + gh;
    a.kf = a.qf + gh;
    a.vf = a.kf + hd;
    a.M = a.vf + hd;
    a.S = a.M + a.G;
    const float *q = f->q + (size_t)t * f->q_dim + (size_t)kvh * gh;
    const int f16 = f->kv.type == UL_TYPE_F16, simd = f->isa == UL_ISA_AVX512;
    if (f16) {
        for (size_t i = 0; i < gh; i++) {
            a.q16[i] = ul_fp32_to_fp16(q[i]);
            a.qf[i] = ul_fp16_to_fp32(a.q16[i]);
        }
        memset(a.acc16, 0, gh * sizeof *a.acc16);
    } else {
        memset(a.acc32, 0, gh * sizeof *a.acc32);
    }
    for (int g = 0; g < a.G; g++) {
        a.M[g] = -INFINITY;
        a.S[g] = 0;
    }
    for (int32_t p0 = 0; p0 <= pos; p0 += ps) {
        const int32_t n = pos + 1 - p0 < ps ? pos + 1 - p0 : ps, page = s->pages[p0 / ps];
        const void *K = ul_kv_head(&f->kv, page, il, 0, kvh),
                   *V = ul_kv_head(&f->kv, page, il, 1, kvh);
        for (int32_t j = 0; j < n; j++) {
            if (f16) {
                const uint16_t *k = (const uint16_t *)K + (size_t)j * hd;
                const uint16_t *v = (const uint16_t *)V + (size_t)j * hd;
                if (simd)
                    key16_avx512(&a, k, v);
                else
                    key16_scalar(&a, k, v);
            } else {
                key32_scalar(&a, (const float *)K + (size_t)j * hd,
                             (const float *)V + (size_t)j * hd, q);
            }
        }
    }
    float *out = f->att + (size_t)t * f->q_dim + (size_t)kvh * gh;
    for (int g = 0; g < a.G; g++) {
        const float inv = a.S[g] == 0 ? 0 : 1.0f / a.S[g];
        for (int i = 0; i < hd; i++) {
            size_t o = (size_t)g * hd + i;
            out[o] = (f16 ? ul_fp16_to_fp32(a.acc16[o]) : a.acc32[o]) * inv;
        }
    }
}
