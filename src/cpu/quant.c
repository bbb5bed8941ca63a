/* Row (de)quantisation with llama.cpp's reference semantics: weights dequantised for
 * embedding lookups and tests, rows quantised for tests and tools, and the activation
 * formats the integer dot products consume (quantised once per matmul, shared by every
 * weight row). Rounding mirrors what llama.cpp executes on x86 so greedy outputs match. */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "cpu/kernels_impl.h"

#define F16(h) ul_fp16_to_fp32(h)

static void dequant_q8_0(const blk_q8_0 *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) {
        float d = F16(b[i].d);
        for (int j = 0; j < QK; j++) y[i * QK + j] = d * b[i].qs[j];
    }
}

static void dequant_q4_0(const blk_q4_0 *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) {
        float d = F16(b[i].d);
        for (int j = 0; j < QK / 2; j++) {
            y[i * QK + j] = d * ((b[i].qs[j] & 15) - 8);
            y[i * QK + j + 16] = d * ((b[i].qs[j] >> 4) - 8);
        }
    }
}

static void dequant_q4_1(const blk_q4_1 *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) {
        float d = F16(b[i].d), m = F16(b[i].m);
        for (int j = 0; j < QK / 2; j++) {
            y[i * QK + j] = (b[i].qs[j] & 15) * d + m;
            y[i * QK + j + 16] = (b[i].qs[j] >> 4) * d + m;
        }
    }
}

/* Q5_0 (offset 16) and Q5_1 (min m): nibble plus the fifth bit from qh */
static void dequant_q5(const uint8_t *row, int q5_1, float *y, int64_t nb) {
    const size_t bs = q5_1 ? sizeof(blk_q5_1) : sizeof(blk_q5_0);
    for (int64_t i = 0; i < nb; i++, row += bs) {
        const blk_q5_1 *b1 = (const blk_q5_1 *)row;
        const blk_q5_0 *b0 = (const blk_q5_0 *)row;
        const uint8_t *qs = q5_1 ? b1->qs : b0->qs;
        const uint32_t qh = ul_q5_qh(q5_1 ? b1->qh : b0->qh);
        const float d = F16(q5_1 ? b1->d : b0->d), m = q5_1 ? F16(b1->m) : 0;
        const int off = q5_1 ? 0 : 16;
        for (int j = 0; j < QK / 2; j++) {
            int x0 = (int)((qs[j] & 15) | ((qh >> j) & 1) << 4) - off;
            int x1 = (int)((qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4) - off;
            y[i * QK + j] = x0 * d + m;
            y[i * QK + j + 16] = x1 * d + m;
        }
    }
}

/* dequantize_row_q4_K / dequantize_row_q5_K, one super-block: 8 sub-blocks of 32 with
 * 6-bit scales and mins; qh: Q5_K's fifth bits (16 per element), NULL for Q4_K */
static void dequant_q45_K_blk(const uint8_t *scales, const uint8_t *q, const uint8_t *qh, float d,
                              float dmin, float *y) {
    for (int is = 0; is < 8; is += 2, q += 32, y += 64) {
        uint8_t sc, m;
        ul_q4k_scale_min(is, scales, &sc, &m);
        float d1 = d * sc, m1 = dmin * m;
        ul_q4k_scale_min(is + 1, scales, &sc, &m);
        float d2 = d * sc, m2 = dmin * m;
        for (int l = 0; l < 32; l++)
            y[l] = d1 * ((q[l] & 0xF) + (qh ? ((qh[l] >> is) & 1) << 4 : 0)) - m1;
        for (int l = 0; l < 32; l++)
            y[l + 32] = d2 * ((q[l] >> 4) + (qh ? ((qh[l] >> (is + 1)) & 1) << 4 : 0)) - m2;
    }
}

static void dequant_q4_K(const blk_q4_K *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += QKK)
        dequant_q45_K_blk(b[i].scales, b[i].qs, NULL, F16(b[i].d), F16(b[i].dmin), y);
}

static void dequant_q5_K(const blk_q5_K *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += QKK)
        dequant_q45_K_blk(b[i].scales, b[i].qs, b[i].qh, F16(b[i].d), F16(b[i].dmin), y);
}

static void dequant_q6_K(const blk_q6_K *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) {
        float d = F16(b[i].d);
        const uint8_t *ql = b[i].ql, *qh = b[i].qh;
        const int8_t *sc = b[i].scales;
        for (int n = 0; n < QKK; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; l++) {
                int is = l / 16;
                int q1 = (int)((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                int q2 = (int)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                int q3 = (int)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                int q4 = (int)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l] = d * sc[is] * q1;
                y[l + 32] = d * sc[is + 2] * q2;
                y[l + 64] = d * sc[is + 4] * q3;
                y[l + 96] = d * sc[is + 6] * q4;
            }
        }
    }
}

static float absmax(const float *x, int n) {
    float a = 0;
    for (int j = 0; j < n; j++) a = fmaxf(a, fabsf(x[j]));
    return a;
}

/* quantize_row_q8_0_ref */
static void quant_q8_0(const float *x, blk_q8_0 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += QK) {
        float d = absmax(x, QK) / 127.f, id = d ? 1.0f / d : 0.0f;
        y[i].d = ul_fp32_to_fp16(d);
        for (int j = 0; j < QK; j++) y[i].qs[j] = (int8_t)roundf(x[j] * id);
    }
}

/* quantize_row_q4_0_ref: scale from the signed extreme so it maps to -8 exactly */
static void quant_q4_0(const float *x, blk_q4_0 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += QK) {
        float amax = 0, max = 0;
        for (int j = 0; j < QK; j++)
            if (fabsf(x[j]) > amax) amax = fabsf(x[j]), max = x[j];
        float d = max / -8, id = d ? 1.0f / d : 0.0f;
        y[i].d = ul_fp32_to_fp16(d);
        for (int j = 0; j < QK / 2; j++) {
            int a = (int8_t)(x[j] * id + 8.5f), b = (int8_t)(x[j + 16] * id + 8.5f);
            a = a < 15 ? a : 15;
            b = b < 15 ? b : 15;
            y[i].qs[j] = (uint8_t)(a | (b << 4));
        }
    }
}

/* quantize_row_q4_1_ref: min and (max - min) / 15 */
static void quant_q4_1(const float *x, blk_q4_1 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += QK) {
        float mn = x[0], mx = x[0];
        for (int j = 1; j < QK; j++) mn = fminf(mn, x[j]), mx = fmaxf(mx, x[j]);
        float d = (mx - mn) / 15, id = d ? 1.0f / d : 0.0f;
        y[i].d = ul_fp32_to_fp16(d);
        y[i].m = ul_fp32_to_fp16(mn);
        for (int j = 0; j < QK / 2; j++) {
            int a = (int8_t)((x[j] - mn) * id + 0.5f), b = (int8_t)((x[j + 16] - mn) * id + 0.5f);
            y[i].qs[j] = (uint8_t)((a < 15 ? a : 15) | (b < 15 ? b : 15) << 4);
        }
    }
}

/* quantize_row_q5_0_ref / quantize_row_q5_1_ref */
static void quant_q5(const float *x, uint8_t *row, int q5_1, int64_t nb) {
    const size_t bs = q5_1 ? sizeof(blk_q5_1) : sizeof(blk_q5_0);
    for (int64_t i = 0; i < nb; i++, x += QK, row += bs) {
        float d, mn = 0, off;
        if (q5_1) {
            float mx = x[0];
            mn = x[0];
            for (int j = 1; j < QK; j++) mn = fminf(mn, x[j]), mx = fmaxf(mx, x[j]);
            d = (mx - mn) / 31, off = 0.5f;
        } else {
            float amax = 0, max = 0;
            for (int j = 0; j < QK; j++)
                if (fabsf(x[j]) > amax) amax = fabsf(x[j]), max = x[j];
            d = max / -16, off = 16.5f;
        }
        const float id = d ? 1.0f / d : 0.0f;
        uint8_t *qs = row + (q5_1 ? offsetof(blk_q5_1, qs) : offsetof(blk_q5_0, qs));
        uint32_t qh = 0;
        for (int j = 0; j < QK / 2; j++) {
            int a, b;
            if (q5_1) {
                a = (uint8_t)((x[j] - mn) * id + off), b = (uint8_t)((x[j + 16] - mn) * id + off);
            } else {
                a = (int8_t)(x[j] * id + off), b = (int8_t)(x[j + 16] * id + off);
                a = a < 31 ? a : 31, b = b < 31 ? b : 31;
            }
            qs[j] = (uint8_t)((a & 15) | (b & 15) << 4);
            qh |= (uint32_t)((a >> 4) & 1) << j | (uint32_t)((b >> 4) & 1) << (j + 16);
        }
        uint16_t dh = ul_fp32_to_fp16(d), mh = ul_fp32_to_fp16(mn);
        memcpy(row, &dh, 2);
        if (q5_1) memcpy(row + 2, &mh, 2);
        uint8_t qb[4] = {(uint8_t)qh, (uint8_t)(qh >> 8), (uint8_t)(qh >> 16), (uint8_t)(qh >> 24)};
        memcpy(row + (q5_1 ? offsetof(blk_q5_1, qh) : offsetof(blk_q5_0, qh)), qb, 4);
    }
}

static void dequant_q5_0(const uint8_t *q, float *y, int64_t nb) { dequant_q5(q, 0, y, nb); }
static void dequant_q5_1(const uint8_t *q, float *y, int64_t nb) { dequant_q5(q, 1, y, nb); }
static void quant_q5_0(const float *x, uint8_t *q, int64_t nb) { quant_q5(x, q, 0, nb); }
static void quant_q5_1(const float *x, uint8_t *q, int64_t nb) { quant_q5(x, q, 1, nb); }

/* Both directions of a weight row in one switch: dequantise the n elements of type at q
 * into f (deq), or quantise f into q. Returns 0 for a type it does not know. */
static int convert_row(int type, int deq, float *f, void *q, int64_t n) {
    uint16_t *h = q;
    switch (type) {
    case UL_TYPE_F32:
        deq ? memcpy(f, q, (size_t)n * sizeof(float)) : memcpy(q, f, (size_t)n * sizeof(float));
        break;
    case UL_TYPE_F16:
        for (int64_t i = 0; i < n; i++)
            deq ? (void)(f[i] = F16(h[i])) : (void)(h[i] = ul_fp32_to_fp16(f[i]));
        break;
    case UL_TYPE_BF16:
        for (int64_t i = 0; i < n; i++)
            deq ? (void)(f[i] = ul_bf16_to_fp32(h[i])) : (void)(h[i] = ul_fp32_to_bf16(f[i]));
        break;
        /* a quantised type: nb blocks of qk elements, dequantised by D or quantised by Q */
#define ROW(type, qk, D, Q)                                                                        \
    case type:                                                                                     \
        deq ? D(q, f, n / (qk)) : Q(f, q, n / (qk));                                               \
        break
        ROW(UL_TYPE_Q8_0, QK, dequant_q8_0, quant_q8_0);
        ROW(UL_TYPE_Q4_0, QK, dequant_q4_0, quant_q4_0);
        ROW(UL_TYPE_Q4_1, QK, dequant_q4_1, quant_q4_1);
        ROW(UL_TYPE_Q5_0, QK, dequant_q5_0, quant_q5_0);
        ROW(UL_TYPE_Q5_1, QK, dequant_q5_1, quant_q5_1);
        ROW(UL_TYPE_Q4_K, QKK, dequant_q4_K, ul_cpu_quant_q4_K);
        ROW(UL_TYPE_Q5_K, QKK, dequant_q5_K, ul_cpu_quant_q5_K);
        ROW(UL_TYPE_Q6_K, QKK, dequant_q6_K, ul_cpu_quant_q6_K);
        ROW(UL_TYPE_IQ4_NL, QK, ul_cpu_dequant_iq4_nl, ul_cpu_quant_iq4_nl);
        ROW(UL_TYPE_IQ4_XS, QKK, ul_cpu_dequant_iq4_xs, ul_cpu_quant_iq4_xs);
#undef ROW
    default:
        return 0;
    }
    return 1;
}

/* (convert_row only reads q when it dequantises, and f when it quantises) */
void ul_cpu_dequant_row(int type, const void *row, float *dst, int64_t n) {
    if (!convert_row(type, 1, dst, (void *)row, n)) UL_ASSERT(!"dequant: unsupported type");
}

size_t ul_cpu_quant_row(int type, const float *src, void *dst, int64_t n) {
    return convert_row(type, 0, (float *)src, dst, n) ? ul_type_row_bytes(type, n) : 0;
}

/* ---- activation formats ---- */

ul_xfmt_t ul_cpu_xfmt(int type) {
    switch (type) {
    case UL_TYPE_F16:
        return XF_F16R;
    case UL_TYPE_BF16:
        return XF_BF16;
    case UL_TYPE_Q8_0:
    case UL_TYPE_Q4_0:
    case UL_TYPE_Q5_0:
    case UL_TYPE_IQ4_NL: /* llama.cpp: vec_dot_type Q8_0 */
        return XF_Q8A;
    case UL_TYPE_Q4_1:
    case UL_TYPE_Q5_1: /* vec_dot_type Q8_1 */
        return XF_Q8A1;
    case UL_TYPE_Q4_K:
    case UL_TYPE_Q5_K:
    case UL_TYPE_Q6_K:
    case UL_TYPE_IQ4_XS: /* vec_dot_type Q8_K */
        return XF_Q8K;
    default:
        return XF_F32;
    }
}

size_t ul_cpu_xrow_bytes(ul_xfmt_t f, int64_t n) {
    switch (f) {
    case XF_F32:
    case XF_F16R:
        return (size_t)n * 4;
    case XF_BF16:
        return (size_t)n * 2;
    case XF_Q8A:
        return (size_t)(n / QK) * sizeof(blk_q8a);
    case XF_Q8A1:
        return (size_t)(n / QK) * sizeof(blk_q8a1);
    case XF_Q8K:
        return (size_t)(n / QKK) * sizeof(blk_q8K);
    }
    return 0;
}

/* Round half to even without a libm call (x86-64's baseline has no roundss, so
 * nearbyintf is a call per element): exact for |v| < 2^22, and our |v| <= 127. */
static inline int round_even(float v) {
    const float m = 12582912.0f; /* 1.5 * 2^23: the sum's ulp is 1 (IEEE, no fast-math) */
    return (int)((v + m) - m);
}

/* One block as llama.cpp's AVX quantize_row_q8_0 / _q8_1: id = 127/amax (not 1/d), round
 * half to even. Writes qs and the f16-rounded d; returns the sum of qs, *du the unrounded
 * scale. */
static inline int32_t quant_x_blk(const float *x, int8_t *qs, float *d, float *du) {
    float amax = absmax(x, QK);
    float id = amax != 0 ? 127.f / amax : 0.0f;
    *du = amax / 127.f;
    *d = F16(ul_fp32_to_fp16(*du));
    if (*d == 0) id = 0; /* the block contributes 0 anyway; avoids inf * x */
    int32_t s = 0;
    for (int j = 0; j < QK; j++) {
        qs[j] = (int8_t)round_even(x[j] * id);
        s += qs[j];
    }
    return s;
}

static void quant_x_q8a(const float *x, blk_q8a *y, int64_t nb) {
    float du;
    for (int64_t i = 0; i < nb; i++, x += QK) y[i].nsum = -quant_x_blk(x, y[i].qs, &y[i].d, &du);
}

/* quantize_row_q8_1: s = fp16(sum * d) with the unrounded d */
static void quant_x_q8a1(const float *x, blk_q8a1 *y, int64_t nb) {
    float du;
    for (int64_t i = 0; i < nb; i++, x += QK) {
        int32_t s = quant_x_blk(x, y[i].qs, &y[i].d, &du);
        y[i].s = F16(ul_fp32_to_fp16((float)s * du));
    }
}

/* quantize_row_q8_K_ref: scale from the signed extreme, -127/max, nearest (even). */
static void quant_x_q8k(const float *x, blk_q8K *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += QKK) {
        float amax = 0, max = 0;
        for (int j = 0; j < QKK; j++)
            if (fabsf(x[j]) > amax) amax = fabsf(x[j]), max = x[j];
        if (amax == 0) {
            memset(&y[i], 0, sizeof(y[i]));
            continue;
        }
        float iscale = -127.f / max;
        if (isinf(iscale)) { /* denormal max: d = 0, the block contributes nothing */
            memset(&y[i], 0, sizeof(y[i]));
            continue;
        }
        for (int j = 0; j < QKK; j++) {
            int v = round_even(iscale * x[j]);
            y[i].qs[j] = (int8_t)(v < 127 ? v : 127);
        }
        for (int j = 0; j < QKK / 16; j++) {
            int s = 0;
            for (int l = 0; l < 16; l++) s += y[i].qs[j * 16 + l];
            y[i].bsums[j] = (int16_t)s;
        }
        y[i].d = 1 / iscale;
    }
}

static void quant_x_scalar(ul_xfmt_t f, const float *x, void *dst, int64_t n) {
    float *o = dst;
    uint16_t *h = dst;
    switch (f) {
    case XF_F32:
        memcpy(dst, x, (size_t)n * 4);
        break;
    case XF_F16R:
        for (int64_t i = 0; i < n; i++) o[i] = F16(ul_fp32_to_fp16(x[i]));
        break;
    case XF_BF16:
        for (int64_t i = 0; i < n; i++) h[i] = ul_fp32_to_bf16(x[i]);
        break;
    case XF_Q8A:
        quant_x_q8a(x, dst, n / QK);
        break;
    case XF_Q8A1:
        quant_x_q8a1(x, dst, n / QK);
        break;
    case XF_Q8K:
        quant_x_q8k(x, dst, n / QKK);
        break;
    }
}

void ul_cpu_quant_x_isa(ul_xfmt_t f, ul_isa_t isa, const float *x, void *dst, int64_t n) {
    const ul_cpu_kern_t *k = ul_cpu_kern(isa);
    if (k->xq[f])
        k->xq[f](x, dst, n);
    else
        quant_x_scalar(f, x, dst, n);
}

void ul_cpu_quant_x(ul_xfmt_t f, const float *x, void *dst, int64_t n) {
    ul_cpu_quant_x_isa(f, ul_cpu_isa(), x, dst, n);
}
