/* Portable scalar dot products, one per weight type: the reference every SIMD kernel is
 * tested against, and the path taken on CPUs without AVX2. Integer sums are exact, so
 * the SIMD paths differ from these only by float summation order. */
#include "cpu/kernels_impl.h"

#define F16(h) ul_fp16_to_fp32(h)

static float dot_f32(int64_t n, const void *w, const void *x) {
    const float *a = w, *b = x;
    float s = 0;
    for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

static float dot_f16(int64_t n, const void *w, const void *x) {
    const uint16_t *a = w;
    const float *b = x;
    float s = 0;
    for (int64_t i = 0; i < n; i++) s += F16(a[i]) * b[i];
    return s;
}

static float dot_bf16(int64_t n, const void *w, const void *x) {
    const uint16_t *a = w, *b = x;
    float s = 0;
    for (int64_t i = 0; i < n; i++) s += ul_bf16_to_fp32(a[i]) * ul_bf16_to_fp32(b[i]);
    return s;
}

static float dot_q8_0(int64_t n, const void *w, const void *x) {
    const blk_q8_0 *a = w;
    const blk_q8a *b = x;
    float s = 0;
    for (int64_t i = 0; i < n / QK; i++) {
        int32_t si = 0;
        for (int j = 0; j < QK; j++) si += a[i].qs[j] * b[i].qs[j];
        s += (float)si * (F16(a[i].d) * b[i].d);
    }
    return s;
}

static float dot_q4_0(int64_t n, const void *w, const void *x) {
    const blk_q4_0 *a = w;
    const blk_q8a *b = x;
    float s = 0;
    for (int64_t i = 0; i < n / QK; i++) {
        int32_t si = 0;
        for (int j = 0; j < QK / 2; j++)
            si += ((a[i].qs[j] & 15) - 8) * b[i].qs[j] + ((a[i].qs[j] >> 4) - 8) * b[i].qs[j + 16];
        s += (float)si * (F16(a[i].d) * b[i].d);
    }
    return s;
}

/* Q4_1: w = d q + m, so sum w x = d dx sum(q xq) + m dx sum(xq), the last as m * s
 * (llama.cpp's vec_dot_q4_1_q8_1: s carries the unrounded dx, rounded through f16) */
static float dot_q4_1(int64_t n, const void *w, const void *x) {
    const blk_q4_1 *a = w;
    const blk_q8a1 *b = x;
    float s = 0;
    for (int64_t i = 0; i < n / QK; i++) {
        int32_t si = 0;
        for (int j = 0; j < QK / 2; j++)
            si += (a[i].qs[j] & 15) * b[i].qs[j] + (a[i].qs[j] >> 4) * b[i].qs[j + 16];
        s += (float)si * (F16(a[i].d) * b[i].d) + F16(a[i].m) * b[i].s;
    }
    return s;
}

/* Q5_0 (q - 16, x Q8A) and Q5_1 (d q + m, x Q8A1 as Q4_1): the nibble plus the fifth bit
 * from qh */
static inline float dot_q5(int q5_1, int64_t n, const uint8_t *w, const uint8_t *x) {
    const size_t bs = q5_1 ? sizeof(blk_q5_1) : sizeof(blk_q5_0);
    const size_t xb = q5_1 ? sizeof(blk_q8a1) : sizeof(blk_q8a);
    float s = 0;
    for (int64_t i = 0; i < n / QK; i++, w += bs, x += xb) {
        const blk_q5_0 *a0 = (const blk_q5_0 *)w;
        const blk_q5_1 *a1 = (const blk_q5_1 *)w;
        const uint8_t *qs = q5_1 ? a1->qs : a0->qs;
        const uint32_t qh = ul_q5_qh(q5_1 ? a1->qh : a0->qh);
        const int off = q5_1 ? 0 : 16;
        const blk_q8a *b0 = (const blk_q8a *)x;
        const blk_q8a1 *b1 = (const blk_q8a1 *)x;
        const int8_t *xq = q5_1 ? b1->qs : b0->qs;
        int32_t si = 0;
        for (int j = 0; j < QK / 2; j++) {
            int x0 = (int)((qs[j] & 15) | ((qh >> j) & 1) << 4) - off;
            int x1 = (int)((qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4) - off;
            si += x0 * xq[j] + x1 * xq[j + 16];
        }
        if (q5_1)
            s += (float)si * (F16(a1->d) * b1->d) + F16(a1->m) * b1->s;
        else
            s += (float)si * (F16(a0->d) * b0->d);
    }
    return s;
}
static float dot_q5_0(int64_t n, const void *w, const void *x) { return dot_q5(0, n, w, x); }
static float dot_q5_1(int64_t n, const void *w, const void *x) { return dot_q5(1, n, w, x); }

/* One super-block of Q4_K or Q5_K against Q8K: 8 sub-blocks of 32 with 6-bit scales and
 * mins (the mins against the activation's block sums); qh: Q5_K's fifth bits (bit j of
 * qh[l] for sub-block j), NULL for Q4_K. */
static inline float dot_q45_K_blk(const uint8_t *scales, const uint8_t *qs, const uint8_t *qh,
                                  uint16_t d, uint16_t dmin, const blk_q8K *b) {
    int32_t sumi = 0, summ = 0;
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        ul_q4k_scale_min(j, scales, &sc, &m);
        const uint8_t *q = qs + (j / 2) * 32;
        const int8_t *y = b->qs + j * 32;
        int32_t dj = 0;
        for (int l = 0; l < 32; l++) {
            int v = (j & 1) ? (q[l] >> 4) : (q[l] & 15);
            if (qh) v += ((qh[l] >> j) & 1) << 4;
            dj += v * y[l];
        }
        sumi += sc * dj;
        summ += m * (b->bsums[2 * j] + b->bsums[2 * j + 1]);
    }
    return b->d * (F16(d) * (float)sumi - F16(dmin) * (float)summ);
}

static float dot_q4_K(int64_t n, const void *w, const void *x) {
    const blk_q4_K *a = w;
    const blk_q8K *b = x;
    float s = 0;
    for (int64_t i = 0; i < n / QKK; i++)
        s += dot_q45_K_blk(a[i].scales, a[i].qs, NULL, a[i].d, a[i].dmin, &b[i]);
    return s;
}

static float dot_q5_K(int64_t n, const void *w, const void *x) {
    const blk_q5_K *a = w;
    const blk_q8K *b = x;
    float s = 0;
    for (int64_t i = 0; i < n / QKK; i++)
        s += dot_q45_K_blk(a[i].scales, a[i].qs, a[i].qh, a[i].d, a[i].dmin, &b[i]);
    return s;
}

static float dot_q6_K(int64_t n, const void *w, const void *x) {
    const blk_q6_K *a = w;
    const blk_q8K *b = x;
    float s = 0;
    for (int64_t i = 0; i < n / QKK; i++) {
        int8_t q[QKK];
        const uint8_t *ql = a[i].ql, *qh = a[i].qh;
        for (int n0 = 0; n0 < QKK; n0 += 128, ql += 64, qh += 32) {
            for (int l = 0; l < 32; l++) {
                q[n0 + l] = (int8_t)(((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
                q[n0 + l + 32] = (int8_t)(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
                q[n0 + l + 64] = (int8_t)(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
                q[n0 + l + 96] = (int8_t)(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
            }
        }
        int32_t sumi = 0;
        for (int j = 0; j < 16; j++) {
            int32_t d = 0;
            for (int l = 0; l < 16; l++) d += q[j * 16 + l] * b[i].qs[j * 16 + l];
            sumi += a[i].scales[j] * d;
        }
        s += F16(a[i].d) * b[i].d * (float)sumi;
    }
    return s;
}

/* IQ4_NL x Q8A: table levels times the activation bytes, one scale product per block */
static float dot_iq4_nl(int64_t n, const void *w, const void *x) {
    const blk_iq4_nl *a = w;
    const blk_q8a *b = x;
    const int8_t *v = ul_iq4nl_values;
    float s = 0;
    for (int64_t i = 0; i < n / QK; i++) {
        int32_t si = 0;
        for (int j = 0; j < QK / 2; j++)
            si += v[a[i].qs[j] & 15] * b[i].qs[j] + v[a[i].qs[j] >> 4] * b[i].qs[j + 16];
        s += (float)si * (F16(a[i].d) * b[i].d);
    }
    return s;
}

/* IQ4_XS x Q8K: the signed 6-bit sub-block scales applied in integers, so one float
 * product per super-block */
static float dot_iq4_xs(int64_t n, const void *w, const void *x) {
    const blk_iq4_xs *a = w;
    const blk_q8K *b = x;
    const int8_t *v = ul_iq4nl_values;
    float s = 0;
    for (int64_t i = 0; i < n / QKK; i++) {
        int32_t sumi = 0;
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *q = a[i].qs + 16 * ib;
            const int8_t *y = b[i].qs + 32 * ib;
            int32_t d = 0;
            for (int j = 0; j < 16; j++) d += v[q[j] & 15] * y[j] + v[q[j] >> 4] * y[j + 16];
            sumi += ul_iq4xs_scale(&a[i], ib) * d;
        }
        s += F16(a[i].d) * b[i].d * (float)sumi;
    }
    return s;
}

typedef float (*dot_fn)(int64_t n, const void *w, const void *x);

static inline void mm_generic(dot_fn dot, int64_t n_cols, const uint8_t *w, size_t ws, int nr,
                              const uint8_t *x, size_t xs, int nt, float *y, int64_t ys) {
    for (int r = 0; r < nr; r++)
        for (int t = 0; t < nt; t++) y[t * ys + r] = dot(n_cols, w + r * ws, x + t * xs);
}

#define MM(name)                                                                                   \
    static void mm_##name(int64_t n_cols, const uint8_t *w, size_t ws, int nr, const uint8_t *x,   \
                          size_t xs, int nt, float *y, int64_t ys) {                               \
        mm_generic(dot_##name, n_cols, w, ws, nr, x, xs, nt, y, ys);                               \
    }
MM(f32)
MM(f16)
MM(bf16)
MM(q8_0)
MM(q4_0)
MM(q4_1)
MM(q5_0)
MM(q5_1)
MM(q4_K)
MM(q5_K)
MM(q6_K)
MM(iq4_nl)
MM(iq4_xs)

const ul_cpu_kern_t ul_cpu_kern_scalar = {.mm = {
                                              [UL_TYPE_F32] = mm_f32,
                                              [UL_TYPE_F16] = mm_f16,
                                              [UL_TYPE_BF16] = mm_bf16,
                                              [UL_TYPE_Q8_0] = mm_q8_0,
                                              [UL_TYPE_Q4_0] = mm_q4_0,
                                              [UL_TYPE_Q4_1] = mm_q4_1,
                                              [UL_TYPE_Q5_0] = mm_q5_0,
                                              [UL_TYPE_Q5_1] = mm_q5_1,
                                              [UL_TYPE_Q4_K] = mm_q4_K,
                                              [UL_TYPE_Q5_K] = mm_q5_K,
                                              [UL_TYPE_Q6_K] = mm_q6_K,
                                              [UL_TYPE_IQ4_NL] = mm_iq4_nl,
                                              [UL_TYPE_IQ4_XS] = mm_iq4_xs,
                                          }};
