/* IQ4_NL and IQ4_XS: 4-bit indices into one fixed non-linear table of 16 levels (denser
 * near zero, where trained weights are), with one f16 scale per 32 elements (IQ4_NL) or
 * one f16 scale per 256 and a 6-bit scale per 32 (IQ4_XS, 4.25 bits per weight).
 *
 * Quantising follows llama.cpp's quantize_iq4_nl / quantize_iq4_xs without an importance
 * matrix (what llama-quantize runs for those types): per 32-block, weights x^2, a first
 * scale from the signed extreme mapped to the table's first level, then 15 trial scales
 * around it, keeping the least-squares optimum of the best; IQ4_XS then rounds the block
 * scales to 6 bits of one super-block scale and re-picks every index. */
#include <math.h>
#include <string.h>

#include "cpu/kernels_impl.h"

const int8_t ul_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                    1,    13,   25,  38,  53,  69,  89,  113};

#define NTRY 7
#define EPS 1e-15f

/* Index of the level nearest to v (ties go up, as ggml's best_index_int8). */
static int nearest_level(float v) {
    const int8_t *t = ul_iq4nl_values;
    if (v <= t[0]) return 0;
    if (v >= t[15]) return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (v < t[mid])
            hi = mid;
        else
            lo = mid;
    }
    return v - t[hi - 1] < t[hi] - v ? hi - 1 : hi;
}

/* round to nearest, ties to even, for |v| < 2^22 (ggml's nearest_int) */
static int nearest_int(float v) {
    float f = v + 12582912.f;
    int32_t i;
    memcpy(&i, &f, 4);
    return (i & 0x007fffff) - 0x00400000;
}

/* Sums for scale 1/id over one block: sum w q x and sum w q^2; writes the indices to L
 * when L is not NULL. */
static void trial(const float *x, const float *w, float id, uint8_t *L, float *sqx, float *sq2) {
    float a = 0, b = 0;
    for (int j = 0; j < 32; j++) {
        int l = nearest_level(id * x[j]);
        if (L) L[j] = (uint8_t)l;
        float q = ul_iq4nl_values[l];
        a += w[j] * q * x[j];
        b += w[j] * q * q;
    }
    *sqx = a, *sq2 = b;
}

/* The best scale of one 32-block (0 for an all-zero block); L gets the indices of the
 * first trial (the final ones are picked again from the rounded scale). */
static float block_scale(const float *x, uint8_t *L) {
    float w[32], amax = 0, max = 0;
    for (int j = 0; j < 32; j++) {
        w[j] = x[j] * x[j];
        if (fabsf(x[j]) > amax) amax = fabsf(x[j]), max = x[j];
    }
    if (amax < EPS) {
        memset(L, 0, 32);
        return 0;
    }
    const float v0 = ul_iq4nl_values[0];
    float sqx, sq2;
    trial(x, w, 1 / (-max / v0), L, &sqx, &sq2);
    float d = sq2 > 0 ? sqx / sq2 : 0.f, best = d * sqx;
    for (int t = -NTRY; t <= NTRY; t++) {
        trial(x, w, (t + v0) / max, NULL, &sqx, &sq2);
        if (sq2 > 0 && sqx * sqx > best * sq2) d = sqx / sq2, best = d * sqx;
    }
    return d;
}

static void pack_nibbles(const uint8_t *L, uint8_t *qs, int n) {
    for (int i = 0; i < n / 32; i++)
        for (int j = 0; j < 16; j++)
            qs[16 * i + j] = (uint8_t)(L[32 * i + j] | L[32 * i + 16 + j] << 4);
}

void ul_cpu_quant_iq4_nl(const float *x, blk_iq4_nl *y, int64_t nb) {
    uint8_t L[32];
    for (int64_t i = 0; i < nb; i++, x += 32) {
        float d = block_scale(x, L);
        y[i].d = ul_fp32_to_fp16(d);
        /* indices from the chosen scale itself (not its f16 rounding), as ggml does; a zero
         * block gets the level nearest 0 */
        const float id = d ? 1 / d : 0.f;
        for (int j = 0; j < 32; j++) L[j] = (uint8_t)nearest_level(id * x[j]);
        pack_nibbles(L, y[i].qs, 32);
    }
}

void ul_cpu_quant_iq4_xs(const float *x, blk_iq4_xs *y, int64_t nb) {
    uint8_t L[QKK];
    float sc[8];
    for (int64_t i = 0; i < nb; i++, x += QKK) {
        float amax = 0, max = 0;
        for (int ib = 0; ib < 8; ib++) {
            sc[ib] = block_scale(x + 32 * ib, L + 32 * ib);
            if (fabsf(sc[ib]) > amax) amax = fabsf(sc[ib]), max = sc[ib];
        }
        memset(y[i].qs, 0, sizeof y[i].qs);
        y[i].scales_h = 0;
        memset(y[i].scales_l, 0, sizeof y[i].scales_l);
        const float d = -max / 32, id = d ? 1 / d : 0.f;
        y[i].d = ul_fp32_to_fp16(d);
        for (int ib = 0; ib < 8; ib++) {
            int l = nearest_int(id * sc[ib]);
            l = l < -32 ? -32 : l > 31 ? 31 : l;
            const float dl = d * (float)l, idl = dl ? 1 / dl : 0.f;
            for (int j = 0; j < 32; j++)
                L[32 * ib + j] = (uint8_t)nearest_level(idl * x[32 * ib + j]);
            l += 32;
            y[i].scales_l[ib / 2] |= (uint8_t)((l & 0xF) << 4 * (ib % 2));
            y[i].scales_h |= (uint16_t)((l >> 4) << 2 * ib);
        }
        pack_nibbles(L, y[i].qs, QKK);
    }
}

void ul_cpu_dequant_iq4_nl(const blk_iq4_nl *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += 32) {
        const float d = ul_fp16_to_fp32(b[i].d);
        for (int j = 0; j < 16; j++) {
            y[j] = d * ul_iq4nl_values[b[i].qs[j] & 0xF];
            y[j + 16] = d * ul_iq4nl_values[b[i].qs[j] >> 4];
        }
    }
}

void ul_cpu_dequant_iq4_xs(const blk_iq4_xs *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) {
        const float d = ul_fp16_to_fp32(b[i].d);
        for (int ib = 0; ib < 8; ib++, y += 32) {
            const float dl = d * (float)ul_iq4xs_scale(&b[i], ib);
            const uint8_t *qs = b[i].qs + 16 * ib;
            for (int j = 0; j < 16; j++) {
                y[j] = dl * ul_iq4nl_values[qs[j] & 0xF];
                y[j + 16] = dl * ul_iq4nl_values[qs[j] >> 4];
            }
        }
    }
}
