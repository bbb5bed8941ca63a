/* The arithmetic of the CUDA kernels, shared with the host: every function here is
 * compiled by nvcc as __host__ __device__ for the kernels (the .cu files here) and by the C
 * compiler as static inline for the host twins that tests/unit/gpu compares against the
 * CPU backend, so a wrong formula fails on a machine without a GPU. Plain C11 and CUDA C++
 * alike: no templates, no C-only syntax.
 *
 * Weight rows are read as bytes in their GGUF layout (no struct packing assumptions):
 *   Q8_0  34 B / 32: f16 d, int8 qs[32]                      w = d * q
 *   Q4_0  18 B / 32: f16 d, u8 qs[16] (lo nibbles 0..15, hi 16..31)  w = d * (q - 8)
 *   Q4_K 144 B / 256: f16 d, f16 dmin, u8 scales[12] (6-bit scale/min pairs), u8 qs[128]
 *   Q6_K 210 B / 256: u8 ql[128], u8 qh[64], int8 scales[16], f16 d
 *   Q4_1  20 B / 32: f16 d, f16 m, u8 qs[16]                 w = d * q + m
 *   Q5_0  22 B / 32: f16 d, u8 qh[4] (fifth bits), u8 qs[16] w = d * (q - 16)
 *   Q5_1  24 B / 32: f16 d, f16 m, u8 qh[4], u8 qs[16]       w = d * q + m
 *   Q5_K 176 B / 256: Q4_K's d, dmin, scales, then u8 qh[32] (bit j of byte l: the fifth bit
 *                     of element 32 j + l), u8 qs[128]
 *   IQ4_NL 18 B / 32: f16 d, u8 qs[16]: w = d * iq4nl[q] (a 16-level non-linear table)
 *   IQ4_XS 136 B / 256: f16 d, u16 scales_h, u8 scales_l[4], u8 qs[128]: eight 32-blocks of
 *                     IQ4_NL with 6-bit scales (minus 32)
 *   F16, BF16 2 B, F32 4 B per element. */
#ifndef UL_GPU_TWIN_H
#define UL_GPU_TWIN_H

#include <math.h>
#include <stdint.h>

#include "engine/sample_chain.h"

#define UL_HD UL_HOST_DEVICE /* base/mix.h: __host__ __device__, or static inline in C */

/* GGUF type ids the kernels read (model/gguf.h's UL_TYPE_*, repeated so that .cu files
 * need no project header). */
enum {
    UL_TW_F32 = 0,
    UL_TW_F16 = 1,
    UL_TW_Q4_0 = 2,
    UL_TW_Q4_1 = 3,
    UL_TW_Q5_0 = 6,
    UL_TW_Q5_1 = 7,
    UL_TW_Q8_0 = 8,
    UL_TW_Q4_K = 12,
    UL_TW_Q5_K = 13,
    UL_TW_Q6_K = 14,
    UL_TW_IQ4_NL = 20,
    UL_TW_IQ4_XS = 23,
    UL_TW_BF16 = 30
};

UL_HD float ul_tw_u2f(uint32_t u) {
    union {
        uint32_t u;
        float f;
    } v;
    v.u = u;
    return v.f;
}

/* Exact f16 -> f32 (denormals, inf, quiet NaN), as cpu/fp16.c. */
UL_HD float ul_tw_f16(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0x1f) return ul_tw_u2f(sign | 0x7f800000 | (man ? 0x400000 : 0) | (man << 13));
    if (exp == 0) {
        float v = (float)man * 5.9604644775390625e-08f; /* 2^-24 */
        return sign ? -v : v;
    }
    return ul_tw_u2f(sign | ((exp + 112) << 23) | (man << 13));
}

UL_HD float ul_tw_bf16(uint16_t h) { return ul_tw_u2f((uint32_t)h << 16); }

UL_HD uint16_t ul_tw_rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

/* Bytes of one row of n elements, and elements per block. */
UL_HD int ul_tw_block_elems(int type) {
    switch (type) {
    case UL_TW_Q4_K:
    case UL_TW_Q5_K:
    case UL_TW_Q6_K:
    case UL_TW_IQ4_XS:
        return 256;
    case UL_TW_Q4_0:
    case UL_TW_Q4_1:
    case UL_TW_Q5_0:
    case UL_TW_Q5_1:
    case UL_TW_Q8_0:
    case UL_TW_IQ4_NL:
        return 32;
    default:
        return 1;
    }
}
UL_HD int ul_tw_block_bytes(int type) {
    switch (type) {
    case UL_TW_F32:
        return 4;
    case UL_TW_F16:
    case UL_TW_BF16:
        return 2;
    case UL_TW_Q4_0:
    case UL_TW_IQ4_NL:
        return 18;
    case UL_TW_Q4_1:
        return 20;
    case UL_TW_Q5_0:
        return 22;
    case UL_TW_Q5_1:
        return 24;
    case UL_TW_Q8_0:
        return 34;
    case UL_TW_Q4_K:
        return 144;
    case UL_TW_Q5_K:
        return 176;
    case UL_TW_Q6_K:
        return 210;
    case UL_TW_IQ4_XS:
        return 136;
    default:
        return 0;
    }
}
UL_HD int64_t ul_tw_row_bytes(int type, int64_t n) {
    return n / ul_tw_block_elems(type) * ul_tw_block_bytes(type);
}

/* Q4_K's packed 6-bit scale and min of sub-block j (0..7). */
UL_HD void ul_tw_q4k_sm(const uint8_t *s, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/* Element i (0 <= i < block elems) of the block at b. */
UL_HD float ul_tw_dq_q8_0(const uint8_t *b, int i) {
    return ul_tw_f16(ul_tw_rd16(b)) * (float)(int8_t)b[2 + i];
}
UL_HD float ul_tw_dq_q4_0(const uint8_t *b, int i) {
    int q = i < 16 ? (b[2 + i] & 15) : (b[2 + i - 16] >> 4);
    return ul_tw_f16(ul_tw_rd16(b)) * (float)(q - 8);
}
UL_HD float ul_tw_dq_q4_k(const uint8_t *b, int i) {
    int j = i / 32; /* sub-block: 64-element chunks, low nibbles then high nibbles */
    int sc, m;
    ul_tw_q4k_sm(b + 4, j, &sc, &m);
    const uint8_t *q = b + 16 + (i / 64) * 32;
    int v = (j & 1) ? (q[i % 32] >> 4) : (q[i % 32] & 0xF);
    float d = ul_tw_f16(ul_tw_rd16(b)), dmin = ul_tw_f16(ul_tw_rd16(b + 2));
    return d * (float)sc * (float)v - dmin * (float)m;
}
UL_HD float ul_tw_dq_q6_k(const uint8_t *b, int i) {
    const uint8_t *ql = b + (i / 128) * 64, *qh = b + 128 + (i / 128) * 32;
    const int8_t *sc = (const int8_t *)(b + 192) + (i / 128) * 8;
    int r = i % 128, part = r / 32, l = r % 32;
    int lo = part & 1 ? ql[l + 32] : ql[l];
    lo = part < 2 ? lo & 0xF : lo >> 4;
    int q = (lo | (((qh[l] >> (2 * part)) & 3) << 4)) - 32;
    float d = ul_tw_f16(ul_tw_rd16(b + 208));
    return d * (float)sc[l / 16 + 2 * part] * (float)q;
}

UL_HD float ul_tw_dq_q4_1(const uint8_t *b, int i) {
    int q = i < 16 ? (b[4 + i] & 15) : (b[4 + i - 16] >> 4);
    return (float)q * ul_tw_f16(ul_tw_rd16(b)) + ul_tw_f16(ul_tw_rd16(b + 2));
}
/* Q5_0 (q5_1 0: offset 16, no min; the CPU adds a zero min too, so -0 becomes +0 alike) and
 * Q5_1: the nibble plus bit i of the little-endian qh word. */
UL_HD float ul_tw_dq_q5(const uint8_t *b, int q5_1, int i) {
    const uint8_t *qh = b + (q5_1 ? 4 : 2), *qs = qh + 4;
    uint32_t h =
        (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
    int lo = i < 16 ? (qs[i] & 15) : (qs[i - 16] >> 4);
    int q = (int)(lo | ((h >> i) & 1) << 4) - (q5_1 ? 0 : 16);
    float m = q5_1 ? ul_tw_f16(ul_tw_rd16(b + 2)) : 0.0f;
    return (float)q * ul_tw_f16(ul_tw_rd16(b)) + m;
}
UL_HD float ul_tw_dq_q5_k(const uint8_t *b, int i) {
    int j = i / 32;
    int sc, m;
    ul_tw_q4k_sm(b + 4, j, &sc, &m);
    const uint8_t *qh = b + 16, *q = b + 48 + (i / 64) * 32;
    int v = ((j & 1) ? (q[i % 32] >> 4) : (q[i % 32] & 0xF)) + (((qh[i % 32] >> j) & 1) << 4);
    float d = ul_tw_f16(ul_tw_rd16(b)), dmin = ul_tw_f16(ul_tw_rd16(b + 2));
    return d * (float)sc * (float)v - dmin * (float)m;
}
/* ggml's kvalues_iq4nl. */
UL_HD float ul_tw_iq4nl(int q) {
    const int8_t v[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
    return (float)v[q & 15];
}
UL_HD float ul_tw_dq_iq4_nl(const uint8_t *b, int i) {
    int q = i < 16 ? (b[2 + i] & 15) : (b[2 + i - 16] >> 4);
    return ul_tw_f16(ul_tw_rd16(b)) * ul_tw_iq4nl(q);
}
UL_HD float ul_tw_dq_iq4_xs(const uint8_t *b, int i) {
    int ib = i / 32, e = i % 32;
    int sh = ul_tw_rd16(b + 2);
    int sc = (((b[4 + ib / 2] >> 4 * (ib % 2)) & 0xF) | (((sh >> 2 * ib) & 3) << 4)) - 32;
    const uint8_t *qs = b + 8 + 16 * ib;
    int q = e < 16 ? (qs[e] & 15) : (qs[e - 16] >> 4);
    return ul_tw_f16(ul_tw_rd16(b)) * (float)sc * ul_tw_iq4nl(q);
}

/* Element k of a row of the given type. */
UL_HD float ul_tw_dq(int type, const uint8_t *row, int64_t k) {
    switch (type) {
    case UL_TW_F32:
        return ul_tw_u2f((uint32_t)row[4 * k] | (uint32_t)row[4 * k + 1] << 8 |
                         (uint32_t)row[4 * k + 2] << 16 | (uint32_t)row[4 * k + 3] << 24);
    case UL_TW_F16:
        return ul_tw_f16(ul_tw_rd16(row + 2 * k));
    case UL_TW_BF16:
        return ul_tw_bf16(ul_tw_rd16(row + 2 * k));
    case UL_TW_Q8_0:
        return ul_tw_dq_q8_0(row + (k / 32) * 34, (int)(k % 32));
    case UL_TW_Q4_0:
        return ul_tw_dq_q4_0(row + (k / 32) * 18, (int)(k % 32));
    case UL_TW_Q4_K:
        return ul_tw_dq_q4_k(row + (k / 256) * 144, (int)(k % 256));
    case UL_TW_Q6_K:
        return ul_tw_dq_q6_k(row + (k / 256) * 210, (int)(k % 256));
    case UL_TW_Q4_1:
        return ul_tw_dq_q4_1(row + (k / 32) * 20, (int)(k % 32));
    case UL_TW_Q5_0:
        return ul_tw_dq_q5(row + (k / 32) * 22, 0, (int)(k % 32));
    case UL_TW_Q5_1:
        return ul_tw_dq_q5(row + (k / 32) * 24, 1, (int)(k % 32));
    case UL_TW_Q5_K:
        return ul_tw_dq_q5_k(row + (k / 256) * 176, (int)(k % 256));
    case UL_TW_IQ4_NL:
        return ul_tw_dq_iq4_nl(row + (k / 32) * 18, (int)(k % 32));
    case UL_TW_IQ4_XS:
        return ul_tw_dq_iq4_xs(row + (k / 256) * 136, (int)(k % 256));
    default:
        return NAN;
    }
}

/* ---- RMSNorm: y = x * scale * w, scale from the sum of squares ---- */
UL_HD float ul_tw_rms_scale(float sumsq, int n, float eps) {
    return 1.0f / sqrtf(sumsq / (float)n + eps);
}

/* ---- RoPE: the angle of pair p (0 <= p < n_rot/2) at pos, with the CPU cache's
 * arithmetic (theta advanced by repeated multiplication, frequency factors divided first,
 * then freq_scale) so both round alike. ff: [n_rot/2] or NULL. ---- */
UL_HD float ul_tw_rope_theta(int32_t pos, int p, int n_rot, float base, float freq_scale,
                             const float *ff) {
    const float theta_scale = powf(base, -2.0f / (float)n_rot);
    float theta = (float)pos;
    for (int i = 0; i < p; i++) theta *= theta_scale;
    return (ff ? theta / ff[p] : theta) * freq_scale;
}

/* Rotates the pair (x0, x1) by theta. NORM mode pairs (2p, 2p+1); NEOX pairs (p,
 * p + n_rot/2); the angle depends on p alone in both. */
UL_HD void ul_tw_rope_pair(float *x0, float *x1, float c, float s) {
    float a = *x0, b = *x1;
    *x0 = a * c - b * s;
    *x1 = a * s + b * c;
}

/* ---- SwiGLU: silu(g) * u ---- */
UL_HD float ul_tw_swiglu(float g, float u) { return g / (1.0f + expf(-g)) * u; }

/* ---- paged KV: the element offset of (page, layer, K or V, kv head, slot) in the pool
 * [n_pages][n_layer][2][n_head_kv][page_size][head_dim] (gpu.h's ul_gpu_kv_t) ---- */
UL_HD int64_t ul_tw_kv_off(int32_t page, int il, int kind, int h, int slot, int n_layer,
                           int n_head_kv, int page_size, int head_dim) {
    return ((((int64_t)page * n_layer + il) * 2 + kind) * n_head_kv + h) * (int64_t)page_size *
               head_dim +
           (int64_t)slot * head_dim;
}

/* ---- attention: online softmax over scores, one running (max, sum) per query head ----
 * Adds score s (already scaled) of a value row: returns the factor that rescales the
 * accumulated output and sum, and sets *w to the weight of the new row. */
UL_HD float ul_tw_softmax_step(float *m, float *l, float s, float *w) {
    float m_new = s > *m ? s : *m;
    float corr = expf(*m - m_new); /* exp(-inf) = 0 on the first row */
    *w = expf(s - m_new);
    *l = *l * corr + *w;
    *m = m_new;
    return corr;
}

/* ---- greedy sampling: the largest value, ties to the lowest id (ul_sample's rule), and
 * the log-sum-exp for its logprob, combined pairwise so a tree reduction and a loop give
 * the same answer up to the sum's rounding ---- */
typedef struct {
    float max;
    int32_t id;
    float sum; /* sum of exp(x - max) */
} ul_tw_amax_t;

UL_HD ul_tw_amax_t ul_tw_amax_one(float x, int32_t id) {
    ul_tw_amax_t r;
    r.max = x;
    r.id = id;
    r.sum = 1.0f;
    return r;
}
UL_HD ul_tw_amax_t ul_tw_amax_merge(ul_tw_amax_t a, ul_tw_amax_t b) {
    if (b.id < 0) return a;
    if (a.id < 0) return b;
    ul_tw_amax_t r;
    if (b.max > a.max || (b.max == a.max && b.id < a.id)) {
        r.max = b.max;
        r.id = b.id;
    } else {
        r.max = a.max;
        r.id = a.id;
    }
    r.sum = a.sum * expf(a.max - r.max) + b.sum * expf(b.max - r.max);
    return r;
}

/* ---- full sampling on the device: the chain of engine/sample_chain.h, the one the CPU's
 * ul_sample runs, so the same logits, parameters and RNG state draw the same token as
 * ul_sample (its portable path; its AVX-512 exponentials round differently in the last
 * bits). Sequential per row: the device runs it on one thread per row (sample.cu). ---- */

#define UL_TW_MAX_LOGPROBS 20 /* uvllm/backend.h's UL_MAX_LOGPROBS */

/* One row to sample, filled by the host, completed by ul_tw_sample_row. */
typedef struct ul_tw_sample_s {
    /* in */
    int32_t row; /* of the logits */
    float temperature, top_p, min_p;
    int32_t top_k;
    float repeat_penalty, frequency_penalty, presence_penalty;
    int32_t hist_off, n_hist; /* the penalty window (the last repeat_last_n tokens; n_hist 0
                               * when no penalty applies) in the history array */
    int32_t bias_off, n_bias; /* in the bias id / value arrays */
    int32_t n_logprobs;
    int32_t pad_;
    uint64_t rng[2]; /* in/out: xoshiro128++ state */
    /* out */
    int32_t token, n_top;
    float logprob;
    int32_t top_ids[UL_TW_MAX_LOGPROBS];
    float top_lp[UL_TW_MAX_LOGPROBS];
} ul_tw_sample_t;

typedef ul_sc_cand_t ul_tw_cand_t;

/* The stochastic part over the biased and penalised logits l. */
UL_HD int32_t ul_tw_draw(ul_tw_sample_t *s, const float *l, int32_t n_vocab, ul_tw_cand_t *c) {
    ul_sc_params_t p;
    p.temperature = s->temperature;
    p.top_p = s->top_p;
    p.min_p = s->min_p;
    p.top_k = s->top_k;
    const float mx = ul_sc_vmax(l, n_vocab);
    if (!ul_sc_truncates(&p, n_vocab)) {
        double sum = ul_sc_weights(l, NULL, n_vocab, mx, 1.0f / s->temperature);
        return ul_sc_draw_all(s->rng, l, NULL, n_vocab, mx, s->temperature, sum);
    }
    double z_all = ul_sc_needs_z_all(&p, n_vocab) ? ul_sc_sumexp(l, n_vocab, mx) : 0;
    return ul_sc_draw_truncated(&p, s->rng, l, n_vocab, c, mx, z_all);
}

/* The raw log-softmax at tok and the n_logprobs most likely raw candidates. */
UL_HD void ul_tw_logprobs(ul_tw_sample_t *s, const float *logits, int32_t n_vocab) {
    float mx = ul_sc_vmax(logits, n_vocab);
    float lse = mx + (float)log(ul_sc_sumexp(logits, n_vocab, mx));
    s->logprob = logits[s->token] - lse;
    s->n_top = ul_sc_top_logprobs(logits, n_vocab, lse, s->n_logprobs, UL_TW_MAX_LOGPROBS,
                                  s->top_ids, s->top_lp);
}

/* Bias and penalties into pl (a copy of the row the caller made), counts [n_vocab] zero
 * and left zero. */
UL_HD void ul_tw_adjust(const ul_tw_sample_t *s, float *pl, int32_t n_vocab, const int32_t *hist,
                        const int32_t *bias_ids, const float *bias_vals, int32_t *counts) {
    for (int32_t i = 0; i < s->n_bias; i++) {
        int32_t id = bias_ids[s->bias_off + i];
        if (id >= 0 && id < n_vocab) pl[id] += bias_vals[s->bias_off + i];
    }
    ul_sc_penalties(pl, n_vocab, hist + s->hist_off, s->n_hist, counts, s->repeat_penalty,
                    s->frequency_penalty, s->presence_penalty);
}

/* The whole chain for one row, after pl = logits: token, logprob, top candidates, rng. */
UL_HD void ul_tw_sample_row(ul_tw_sample_t *s, const float *logits, float *pl, int32_t n_vocab,
                            const int32_t *hist, const int32_t *bias_ids, const float *bias_vals,
                            int32_t *counts, ul_tw_cand_t *c) {
    ul_tw_adjust(s, pl, n_vocab, hist, bias_ids, bias_vals, counts);
    s->token = !(s->temperature > 0.0f) ? ul_sc_first_of(pl, n_vocab, ul_sc_vmax(pl, n_vocab))
                                        : ul_tw_draw(s, pl, n_vocab, c);
    ul_tw_logprobs(s, logits, n_vocab);
}

/* ---- chained entries (uvllm/backend.h "Pipelining", gpu/chain.h): the input token of a
 * step's entry (also the last of its penalty window), and the RNG state of its sampled row,
 * gathered from the outputs the step
 * before left on the device. One pair per chained entry, planned on the host. ---- */
typedef struct {
    int32_t tok;  /* into: this step's token index (the entry's tok_offset) */
    int32_t ids;  /* from: the previous step's argmax row (its ids[]), or -1 ... */
    int32_t smp;  /* ... its device-sampled row (token and RNG state), or -1 */
    int32_t rng;  /* into: this step's device-sampled row taking smp's RNG state, or -1 */
    int32_t hist; /* into: the token's place in this step's penalty windows, or -1 */
    int32_t seq;  /* host only: the entry's index in this step's seqs ... */
    int32_t prev; /* ... and in the previous step's */
} ul_tw_chain_t;

/* One pair: the token into tokens[p->tok], hist[p->hist] and *out, the RNG state into
 * rows[p->rng]. ids: the previous step's argmax ids; prev, rows: its and this step's
 * sampled rows; hist: this step's penalty windows. */
UL_HD void ul_tw_chain_apply(const ul_tw_chain_t *p, int32_t *tokens, const int32_t *ids,
                             const ul_tw_sample_t *prev, ul_tw_sample_t *rows, int32_t *hist,
                             int32_t *out) {
    const int32_t t = p->ids >= 0 ? ids[p->ids] : prev[p->smp].token;
    tokens[p->tok] = t;
    if (p->hist >= 0) hist[p->hist] = t;
    *out = t;
    if (p->rng >= 0 && p->smp >= 0) {
        rows[p->rng].rng[0] = prev[p->smp].rng[0];
        rows[p->rng].rng[1] = prev[p->smp].rng[1];
    }
}

#endif
