/* K-quant quantisers (Q4_K, Q5_K, Q6_K) with the semantics of llama.cpp's reference
 * quantize_row_q{4,5,6}_K_ref, which llama-quantize runs when it has no importance matrix:
 *  - Q4_K / Q5_K: per 32-element sub-block an asymmetric fit (scale and min) minimising the
 *    weighted squared error (weights |x| + rms of the sub-block) over a sweep of trial
 *    scales; the 8 scales and 8 mins are then stored as 6-bit fractions of the super-block
 *    maxima (f16 d, dmin) and every element is re-quantised from the stored values.
 *  - Q6_K: per 16-element sub-block a symmetric fit (weights x^2, 19 trial scales), the 16
 *    scales stored as int8 fractions of one f16 d, elements re-quantised from them. */
#include <math.h>
#include <string.h>

#include "cpu/kernels_impl.h"

#define EPS 1e-15f

/* round to nearest, ties to even, for |v| < 2^22 (ggml's nearest_int) */
static int nearest_int(float v) {
    float f = v + 12582912.f;
    int32_t i;
    memcpy(&i, &f, 4);
    return (i & 0x007fffff) - 0x00400000;
}

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Asymmetric fit of n values to levels 0..nmax: x ~ scale * L - min. Starts from the
 * range, then tries iscale = (rmin + rdelta * k + nmax) / range for k = 0..nstep, each
 * followed by the weighted least-squares (scale, min) for its levels; keeps the least
 * error. Returns scale, *neg_min = -min (>= 0). (ggml make_qkx2_quants, use_mad false) */
static float fit_affine(int n, int nmax, const float *x, const float *w, uint8_t *L, float *neg_min,
                        float rmin, float rdelta, int nstep) {
    float mn = x[0], mx = x[0], sw = w[0], sx = w[0] * x[0];
    for (int i = 1; i < n; i++) {
        mn = x[i] < mn ? x[i] : mn;
        mx = x[i] > mx ? x[i] : mx;
        sw += w[i];
        sx += w[i] * x[i];
    }
    if (mn > 0) mn = 0;
    if (mx == mn) {
        memset(L, 0, (size_t)n);
        *neg_min = -mn;
        return 0.f;
    }
    float iscale = nmax / (mx - mn), scale = 1 / iscale, best = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)clampi(nearest_int(iscale * (x[i] - mn)), 0, nmax);
        float diff = scale * L[i] + mn - x[i];
        best += w[i] * (diff * diff);
    }
    uint8_t La[32];
    for (int k = 0; k <= nstep; k++) {
        iscale = (rmin + rdelta * k + nmax) / (mx - mn);
        float sl = 0, sl2 = 0, sxl = 0;
        for (int i = 0; i < n; i++) {
            int l = clampi(nearest_int(iscale * (x[i] - mn)), 0, nmax);
            La[i] = (uint8_t)l;
            sl += w[i] * l;
            sl2 += w[i] * l * l;
            sxl += w[i] * l * x[i];
        }
        float D = sw * sl2 - sl * sl;
        if (!(D > 0)) continue;
        float s = (sw * sxl - sx * sl) / D, m = (sl2 * sx - sl * sxl) / D;
        if (m > 0) m = 0, s = sxl / sl2;
        float err = 0;
        for (int i = 0; i < n; i++) {
            float diff = s * La[i] + m - x[i];
            err += w[i] * (diff * diff);
        }
        if (err < best) {
            memcpy(L, La, (size_t)n);
            best = err, scale = s, mn = m;
        }
    }
    *neg_min = -mn;
    return scale;
}

/* Stores the 6-bit scale ls and min lm of sub-block j in the 12-byte Q4_K/Q5_K layout
 * (the inverse of ul_q4k_scale_min); the bytes must start zeroed. */
static void put_scale_min(uint8_t *q, int j, int ls, int lm) {
    if (j < 4) {
        q[j] = (uint8_t)ls;
        q[j + 4] = (uint8_t)lm;
    } else {
        q[j + 4] = (uint8_t)((ls & 0xF) | (lm & 0xF) << 4);
        q[j - 4] |= (uint8_t)((ls >> 4) << 6);
        q[j] |= (uint8_t)((lm >> 4) << 6);
    }
}

/* The shared part of Q4_K (nmax 15) and Q5_K (nmax 31): fills d, dmin, scales and the
 * levels L[256] of one super-block. */
static void kq_super(const float *x, int nmax, uint16_t *dh, uint16_t *dminh, uint8_t *scales,
                     uint8_t *L) {
    float sc[8], mins[8], w[32], max_sc = 0, max_min = 0;
    const float rmin = nmax == 15 ? -1.f : -0.5f;
    const int nstep = nmax == 15 ? 20 : 15;
    for (int j = 0; j < 8; j++) {
        const float *xb = x + 32 * j;
        float s2 = 0;
        for (int l = 0; l < 32; l++) s2 += xb[l] * xb[l];
        const float av = sqrtf(s2 / 32);
        for (int l = 0; l < 32; l++) w[l] = av + fabsf(xb[l]);
        sc[j] = fit_affine(32, nmax, xb, w, L + 32 * j, &mins[j], rmin, 0.1f, nstep);
        max_sc = sc[j] > max_sc ? sc[j] : max_sc;
        max_min = mins[j] > max_min ? mins[j] : max_min;
    }
    const float isc = max_sc > 0 ? 63.f / max_sc : 0.f, imin = max_min > 0 ? 63.f / max_min : 0.f;
    memset(scales, 0, 12);
    for (int j = 0; j < 8; j++) {
        /* ggml stores nearest_int into a uint8_t before its MIN(63, .) */
        int ls = (uint8_t)nearest_int(isc * sc[j]), lm = (uint8_t)nearest_int(imin * mins[j]);
        put_scale_min(scales, j, ls < 63 ? ls : 63, lm < 63 ? lm : 63);
    }
    *dh = ul_fp32_to_fp16(max_sc / 63.f);
    *dminh = ul_fp32_to_fp16(max_min / 63.f);
    for (int j = 0; j < 8; j++) {
        uint8_t s, m;
        ul_q4k_scale_min(j, scales, &s, &m);
        const float d = ul_fp16_to_fp32(*dh) * s;
        if (!d) continue;
        const float dm = ul_fp16_to_fp32(*dminh) * m;
        for (int i = 0; i < 32; i++)
            L[32 * j + i] = (uint8_t)clampi(nearest_int((x[32 * j + i] + dm) / d), 0, nmax);
    }
}

void ul_cpu_quant_q4_K(const float *x, blk_q4_K *y, int64_t nb) {
    uint8_t L[QKK];
    for (int64_t i = 0; i < nb; i++, x += QKK) {
        kq_super(x, 15, &y[i].d, &y[i].dmin, y[i].scales, L);
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 32; l++)
                y[i].qs[32 * j + l] = (uint8_t)(L[64 * j + l] | L[64 * j + 32 + l] << 4);
    }
}

void ul_cpu_quant_q5_K(const float *x, blk_q5_K *y, int64_t nb) {
    uint8_t L[QKK];
    for (int64_t i = 0; i < nb; i++, x += QKK) {
        kq_super(x, 31, &y[i].d, &y[i].dmin, y[i].scales, L);
        memset(y[i].qh, 0, sizeof y[i].qh);
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 32; l++) {
                const int a = L[64 * j + l], b = L[64 * j + 32 + l];
                y[i].qs[32 * j + l] = (uint8_t)((a & 15) | (b & 15) << 4);
                y[i].qh[l] |= (uint8_t)((a >> 4) << (2 * j) | (b >> 4) << (2 * j + 1));
            }
    }
}

/* Symmetric fit of n values to levels -nmax..nmax-1 with weights x^2: the scale from the
 * signed extreme, then 18 trial scales around it, keeping the best least-squares scale
 * (ggml make_qx_quants, rmse_type 1). Returns the scale; L gets level + nmax. */
static float fit_sym(int n, int nmax, const float *x, int8_t *L) {
    float amax = 0, max = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) amax = fabsf(x[i]), max = x[i];
    if (amax < EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = -nmax / max, slx = 0, sl2 = 0;
    for (int i = 0; i < n; i++) {
        int l = clampi(nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)(l + nmax);
        float w = x[i] * x[i];
        slx += w * x[i] * l;
        sl2 += w * l * l;
    }
    float scale = sl2 ? slx / sl2 : 0.0f, best = scale * slx;
    for (int k = -9; k <= 9; k++) {
        if (!k) continue;
        iscale = -(nmax + 0.1f * k) / max;
        slx = sl2 = 0;
        for (int i = 0; i < n; i++) {
            int l = clampi(nearest_int(iscale * x[i]), -nmax, nmax - 1);
            float w = x[i] * x[i];
            slx += w * x[i] * l;
            sl2 += w * l * l;
        }
        if (sl2 > 0 && slx * slx > best * sl2) {
            for (int i = 0; i < n; i++)
                L[i] = (int8_t)(nmax + clampi(nearest_int(iscale * x[i]), -nmax, nmax - 1));
            scale = slx / sl2, best = scale * slx;
        }
    }
    return scale;
}

void ul_cpu_quant_q6_K(const float *x, blk_q6_K *y, int64_t nb) {
    int8_t L[QKK];
    float sc[16];
    for (int64_t i = 0; i < nb; i++, x += QKK) {
        float amax = 0, max = 0;
        for (int j = 0; j < 16; j++) {
            sc[j] = fit_sym(16, 32, x + 16 * j, L + 16 * j);
            if (fabsf(sc[j]) > amax) amax = fabsf(sc[j]), max = sc[j];
        }
        if (amax < EPS) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        const float iscale = -128.f / max;
        y[i].d = ul_fp32_to_fp16(1 / iscale);
        for (int j = 0; j < 16; j++) {
            int s = nearest_int(iscale * sc[j]);
            y[i].scales[j] = (int8_t)(s < 127 ? s : 127);
        }
        for (int j = 0; j < 16; j++) {
            const float d = ul_fp16_to_fp32(y[i].d) * y[i].scales[j];
            if (!d) continue;
            for (int l = 0; l < 16; l++)
                L[16 * j + l] = (int8_t)(clampi(nearest_int(x[16 * j + l] / d), -32, 31) + 32);
        }
        uint8_t *ql = y[i].ql, *qh = y[i].qh;
        for (int n = 0; n < QKK; n += 128, ql += 64, qh += 32)
            for (int l = 0; l < 32; l++) {
                const int a = L[n + l], b = L[n + l + 32], c = L[n + l + 64], e = L[n + l + 96];
                ql[l] = (uint8_t)((a & 0xF) | (c & 0xF) << 4);
                ql[l + 32] = (uint8_t)((b & 0xF) | (e & 0xF) << 4);
                qh[l] = (uint8_t)(a >> 4 | (b >> 4) << 2 | (c >> 4) << 4 | (e >> 4) << 6);
            }
    }
}
