/* AArch64 NEON attention kernels (attn.h) for ops.c's AArch64 table, hd a multiple of 4.
 * Per token (forward_attn.c's scalar steps, key by key): the dimensions 4 at a time, the
 * heads' exponentials with glibc's expf 8 at a time (kernels_neon_expf.c). Tiled
 * (forward_attn_tiled.c): the scores and the output as small matrix products in register
 * tiles of 4 rows x 16 columns (16 accumulators, 4 B vectors and one broadcast of the 32
 * vector registers), the online softmax with glibc's expf, and the f16 -> f32 widening of
 * the cache. Against the scalar kernels only the sums differ: the score's double sum runs in
 * 2 x 2 lanes, the products' inner sums are fused multiply-adds in one chain per output
 * (the scalar C is unfused under AArch64's -ffp-contract=off), the softmax row sum is taken
 * in 4 lanes. */
#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "cpu/kernels.h"
#include "cpu/kernels_neon_attn.h"

#define AI static inline __attribute__((always_inline))

/* ---------- the per-token path ---------- */

AI float32x4_t round16(float32x4_t x) { return vcvt_f32_f16(vcvt_f16_f32(x)); }

AI float32x4_t load4(const void *p, size_t i, int f16) {
    return f16 ? vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)p + i)))
               : vld1q_f32((const float *)p + i);
}

/* The scalar path's steps key by key (forward_attn.c), the dimensions 4 at a time: the
 * score's f32 products summed in double (in 2 x 2 lanes, not one chain), expf of the heads'
 * arguments 8 at a time (glibc's bits), the accumulator's rescale and fused update each
 * rounded to f16 for an f16 cache as there. hd a multiple of 4. */
void ul_attn_page_neon(ul_attn_t *a, const void *K, const void *V, int n, int f16) {
    const int hd = a->hd, ps = a->ps, G = a->G;
    float *k = a->vf, *v = a->vf + hd; /* the key's widened rows */
    float *sc = a->sc, *arg = a->sc + G, e[8];
    for (int j = 0; j < n; j++) {
        for (int i = 0; i < hd; i++)
            k[i] = f16 ? ul_fp16_to_fp32(((const uint16_t *)K)[(size_t)i * ps + j])
                       : ((const float *)K)[(size_t)i * ps + j];
        for (int i = 0; i < hd; i += 4) vst1q_f32(v + i, load4(V, (size_t)j * hd + i, f16));
        for (int g = 0; g < G; g++) {
            const float *qg = a->qf + (size_t)g * hd;
            float64x2_t d0 = vdupq_n_f64(0), d1 = vdupq_n_f64(0);
            for (int i = 0; i < hd; i += 4) {
                const float32x4_t p = vmulq_f32(vld1q_f32(k + i), vld1q_f32(qg + i));
                d0 = vaddq_f64(d0, vcvt_f64_f32(vget_low_f32(p)));
                d1 = vaddq_f64(d1, vcvt_high_f64_f32(p));
            }
            sc[g] = (float)vaddvq_f64(vaddq_f64(d0, d1)) * a->scale;
            arg[g] = sc[g] > a->M[g] ? a->M[g] - sc[g] : sc[g] - a->M[g];
        }
        for (int g0 = 0; g0 < G; g0 += 8) {
            const int m = G - g0 < 8 ? G - g0 : 8;
            ul_expf8_neon(arg + g0, e, m);
            for (int g = g0; g < g0 + m; g++) {
                float *acc = a->acc + (size_t)g * hd;
                const float s = sc[g];
                float ms = 1, vs = 1;
                if (s > a->M[g]) {
                    ms = e[g - g0];
                    a->M[g] = s;
                    const float32x4_t msv = vdupq_n_f32(ms);
                    for (int i = 0; i < hd; i += 4) {
                        const float32x4_t r = vmulq_f32(vld1q_f32(acc + i), msv);
                        vst1q_f32(acc + i, f16 ? round16(r) : r);
                    }
                } else {
                    vs = e[g - g0];
                }
                const float32x4_t vsv = vdupq_n_f32(vs);
                for (int i = 0; i < hd; i += 4) {
                    const float32x4_t r = vfmaq_f32(vld1q_f32(acc + i), vld1q_f32(v + i), vsv);
                    vst1q_f32(acc + i, f16 ? round16(r) : r);
                }
                a->S[g] = a->S[g] * ms + vs;
            }
        }
    }
}

/* ---------- the tiled path ---------- */

/* c[r][0..4*NB) (+)= sum_k a[r][k] b[k][0..4*NB) for r < NR; a rows lda apart, b and c rows
 * ldb / ldc apart. */
AI void gemm_tile(const int NR, const int NB, const float *a, int lda, const float *b, int ldb,
                  int kn, float *c, int ldc, int add) {
    float32x4_t acc[4][4];
    _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++)
        _Pragma("GCC unroll 4") for (int j = 0; j < NB; j++) acc[r][j] =
            add ? vld1q_f32(c + (size_t)r * ldc + 4 * j) : vdupq_n_f32(0.0f);
    for (int k = 0; k < kn; k++) {
        float32x4_t bv[4];
        _Pragma("GCC unroll 4") for (int j = 0; j < NB; j++) bv[j] =
            vld1q_f32(b + (size_t)k * ldb + 4 * j);
        _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {
            const float32x4_t av = vdupq_n_f32(a[(size_t)r * lda + k]);
            _Pragma("GCC unroll 4") for (int j = 0; j < NB; j++) acc[r][j] =
                vfmaq_f32(acc[r][j], av, bv[j]);
        }
    }
    _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++)
        _Pragma("GCC unroll 4") for (int j = 0; j < NB; j++)
            vst1q_f32(c + (size_t)r * ldc + 4 * j, acc[r][j]);
}

#define GEMM_ROWS(NB)                                                                              \
    switch (nr) {                                                                                  \
    case 1:                                                                                        \
        gemm_tile(1, NB, a, lda, b + col, ldb, kn, c + col, ldc, add);                             \
        break;                                                                                     \
    case 2:                                                                                        \
        gemm_tile(2, NB, a, lda, b + col, ldb, kn, c + col, ldc, add);                             \
        break;                                                                                     \
    case 3:                                                                                        \
        gemm_tile(3, NB, a, lda, b + col, ldb, kn, c + col, ldc, add);                             \
        break;                                                                                     \
    default:                                                                                       \
        gemm_tile(4, NB, a, lda, b + col, ldb, kn, c + col, ldc, add);                             \
        break;                                                                                     \
    }

/* c (+)= a b for m rows, n columns (a multiple of 4), kn inner. */
static void gemm(const float *a, int lda, int m, const float *b, int ldb, int n, int kn, float *c,
                 int ldc, int add) {
    for (int r0 = 0; r0 < m; r0 += 4, a += 4 * (size_t)lda, c += 4 * (size_t)ldc) {
        const int nr = m - r0 < 4 ? m - r0 : 4;
        int col = 0;
        for (; col + 16 <= n; col += 16) GEMM_ROWS(4)
        for (; col + 4 <= n; col += 4) GEMM_ROWS(1)
    }
}

static void qk_neon(const float *q, int nq, int hd, const float *k, float scale, float *kq) {
    gemm(q, hd, nq, k, UL_ATTN_TILE, UL_ATTN_TILE, hd, kq, UL_ATTN_TILE, 0);
    const float32x4_t s = vdupq_n_f32(scale);
    for (int i = 0; i < nq * UL_ATTN_TILE; i += 4)
        vst1q_f32(kq + i, vmulq_f32(vld1q_f32(kq + i), s));
}

static void pv_neon(const float *p, int nq, const float *v, int n, int hd, float *o) {
    gemm(p, UL_ATTN_TILE, nq, v, hd, hd, n, o, hd, 1);
}

static void softmax_neon(float *kq, int nq, float *o, int hd, float *M, float *S) {
    for (int r = 0; r < nq; r++) {
        float *row = kq + (size_t)r * UL_ATTN_TILE;
        float32x4_t mx = vld1q_f32(row);
        for (int j = 4; j < UL_ATTN_TILE; j += 4) mx = vmaxq_f32(mx, vld1q_f32(row + j));
        const float tmax = vmaxvq_f32(mx);
        if (tmax == -INFINITY) { /* every key of the tile masked for this row */
            memset(row, 0, UL_ATTN_TILE * sizeof *row);
            continue;
        }
        if (tmax > M[r]) {
            const float ms = expf(M[r] - tmax);
            const float32x4_t msv = vdupq_n_f32(ms);
            float *orow = o + (size_t)r * hd;
            int d = 0;
            for (; d + 4 <= hd; d += 4) vst1q_f32(orow + d, vmulq_f32(vld1q_f32(orow + d), msv));
            for (; d < hd; d++) orow[d] *= ms;
            S[r] *= ms;
            M[r] = tmax;
        }
        const float32x4_t mv = vdupq_n_f32(M[r]);
        float32x4_t sum = vdupq_n_f32(0.0f);
        for (int j = 0; j < UL_ATTN_TILE; j += 8) {
            float x[8];
            vst1q_f32(x, vsubq_f32(vld1q_f32(row + j), mv));
            vst1q_f32(x + 4, vsubq_f32(vld1q_f32(row + j + 4), mv));
            ul_expf8_neon(x, row + j, 8);
            for (int i = 0; i < 8; i++) /* masked keys: exactly 0, as the scalar kernel */
                if (x[i] == -INFINITY) row[j + i] = 0.0f;
            sum = vaddq_f32(sum, vaddq_f32(vld1q_f32(row + j), vld1q_f32(row + j + 4)));
        }
        S[r] += vaddvq_f32(sum);
    }
}

static void cvt_neon(float *dst, const void *src, int n, int f16) {
    int i = 0;
    if (f16) {
        const uint16_t *h = src;
        for (; i + 4 <= n; i += 4)
            vst1q_f32(dst + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h + i))));
        for (; i < n; i++) dst[i] = ul_fp16_to_fp32(h[i]);
    } else {
        memcpy(dst, src, (size_t)n * sizeof *dst);
    }
}

const ul_attn_tile_kern_t ul_attn_tile_neon = {qk_neon, softmax_neon, pv_neon, cvt_neon};
