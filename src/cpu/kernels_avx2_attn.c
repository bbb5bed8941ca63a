/* AVX2 + FMA + F16C attention kernels (attn.h).
 *
 * The per-token path keeps the roundings of the scalar reference (forward_attn.c): the
 * query rounded to f16, f32 scores, the online softmax key by key with glibc's expf (here
 * 8 at a time, bit-identical), and the V accumulator rounded to f16 after every update —
 * with F16C those round trips are two instructions per 8 values instead of two calls per
 * value, which is what the scalar path spent most of a prefill on. Only the order in
 * which a score's products are summed differs (8 lanes x 4 chains).
 *
 * The tiled path's products are register tiles of 6 rows x 16 columns (12 accumulators,
 * 2 B vectors and one broadcast: 15 of the 16 ymm registers). */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "cpu/attn.h"
#include "cpu/exp_neg_avx2.h"
#include "cpu/kernels_avx2_impl.h"

/* ---------- the per-token path ---------- */

AI __m256 round16(__m256 x) {
    return _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
}

AI __m256 load8(const void *p, size_t i, int f16) {
    return f16 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)))
               : _mm256_loadu_ps((const float *)p + i);
}

/* The chunk's keys [c0, c0 + m) widened into kf [hd][16] (zero beyond m). */
static void widen_keys(ul_attn_t *a, const void *K, int c0, int m, int f16) {
    const int hd = a->hd, ps = a->ps;
    if (m == UL_ATTN_CH) {
        for (int i = 0; i < hd; i++) {
            const size_t o = (size_t)i * ps + c0;
            _mm256_store_ps(a->kf + 16 * i, load8(K, o, f16));
            _mm256_store_ps(a->kf + 16 * i + 8, load8(K, o + 8, f16));
        }
        return;
    }
    for (int i = 0; i < hd; i++)
        for (int j = 0; j < UL_ATTN_CH; j++) {
            const size_t o = (size_t)i * ps + c0 + j;
            a->kf[16 * i + j] = j >= m ? 0.0f
                                : f16  ? _cvtsh_ss(((const uint16_t *)K)[o])
                                       : ((const float *)K)[o];
        }
}

/* Scores of the chunk's 16 keys for every head into sc[g][0..16), scaled: per half of
 * the keys, four chains over the dimensions (i mod 4), summed as (c0 + c1) + (c2 + c3). */
static void scores(ul_attn_t *a) {
    const int hd = a->hd;
    for (int g = 0; g < a->G; g++) {
        const float *q = a->qf + (size_t)g * hd;
        __m256 lo[4], hi[4];
        for (int c = 0; c < 4; c++) lo[c] = hi[c] = _mm256_setzero_ps();
        int i = 0;
        for (; i + 4 <= hd; i += 4) {
            _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) {
                const __m256 qv = _mm256_broadcast_ss(q + i + c);
                lo[c] = _mm256_fmadd_ps(_mm256_load_ps(a->kf + 16 * (i + c)), qv, lo[c]);
                hi[c] = _mm256_fmadd_ps(_mm256_load_ps(a->kf + 16 * (i + c) + 8), qv, hi[c]);
            }
        }
        for (; i < hd; i++) {
            const __m256 qv = _mm256_broadcast_ss(q + i);
            lo[0] = _mm256_fmadd_ps(_mm256_load_ps(a->kf + 16 * i), qv, lo[0]);
            hi[0] = _mm256_fmadd_ps(_mm256_load_ps(a->kf + 16 * i + 8), qv, hi[0]);
        }
        const __m256 s = _mm256_set1_ps(a->scale);
        float *o = a->sc + (size_t)g * UL_ATTN_CH;
        _mm256_storeu_ps(
            o, _mm256_mul_ps(
                   _mm256_add_ps(_mm256_add_ps(lo[0], lo[1]), _mm256_add_ps(lo[2], lo[3])), s));
        _mm256_storeu_ps(
            o + 8, _mm256_mul_ps(
                       _mm256_add_ps(_mm256_add_ps(hi[0], hi[1]), _mm256_add_ps(hi[2], hi[3])), s));
    }
}

/* Dimensions [d0, d0 + 8 * NV) of head g's accumulator over the chunk's m keys: rescaled
 * by ms[j] when key j raised the max, then + v_j * vs[j], each step rounded to f16 for an
 * f16 cache. The dimensions are independent, so blocks of up to 8 vectors stay in
 * registers for all m keys. */
AI void update_block(const int NV, ul_attn_t *a, int g, int d0, int m, const float *ms,
                     const float *vs, int f16) {
    float *acc = a->acc + (size_t)g * a->hd + d0;
    __m256 r[8];
    _Pragma("GCC unroll 8") for (int c = 0; c < NV; c++) r[c] = _mm256_loadu_ps(acc + 8 * c);
    for (int j = 0; j < m; j++) {
        const float *v = a->vf + (size_t)j * a->hd + d0;
        if (ms[j] != 1) {
            const __m256 msv = _mm256_set1_ps(ms[j]);
            _Pragma("GCC unroll 8") for (int c = 0; c < NV; c++) {
                r[c] = _mm256_mul_ps(r[c], msv);
                if (f16) r[c] = round16(r[c]);
            }
        }
        const __m256 vsv = _mm256_set1_ps(vs[j]);
        _Pragma("GCC unroll 8") for (int c = 0; c < NV; c++) {
            r[c] = _mm256_fmadd_ps(_mm256_loadu_ps(v + 8 * c), vsv, r[c]);
            if (f16) r[c] = round16(r[c]);
        }
    }
    _Pragma("GCC unroll 8") for (int c = 0; c < NV; c++) _mm256_storeu_ps(acc + 8 * c, r[c]);
}

/* Head g over the chunk's m keys: the factors of each key (e^(M - s) when s raises the
 * running max M, else e^(s - M)), then the accumulator and the sum S. */
static void update(ul_attn_t *a, int g, int m, int f16) {
    const float *s = a->sc + (size_t)g * UL_ATTN_CH;
    float M = a->M[g], arg[UL_ATTN_CH] = {0}, e[UL_ATTN_CH], ms[UL_ATTN_CH], vs[UL_ATTN_CH];
    for (int j = 0; j < m; j++) {
        arg[j] = s[j] > M ? M - s[j] : s[j] - M;
        M = s[j] > M ? s[j] : M;
    }
    ul_expf8_avx2(arg, e, m < 8 ? m : 8);
    if (m > 8) ul_expf8_avx2(arg + 8, e + 8, m - 8);
    M = a->M[g];
    float S = a->S[g];
    for (int j = 0; j < m; j++) {
        const int up = s[j] > M;
        ms[j] = up ? e[j] : 1;
        vs[j] = up ? 1 : e[j];
        M = up ? s[j] : M;
        S = fmaf(S, ms[j], vs[j]); /* one instruction here (-mfma), as the scalar path rounds */
    }
    a->M[g] = M;
    a->S[g] = S;
    int d = 0;
    for (; d + 64 <= a->hd; d += 64) update_block(8, a, g, d, m, ms, vs, f16);
    switch ((a->hd - d) / 8) {
    case 1:
        update_block(1, a, g, d, m, ms, vs, f16);
        break;
    case 2:
        update_block(2, a, g, d, m, ms, vs, f16);
        break;
    case 3:
        update_block(3, a, g, d, m, ms, vs, f16);
        break;
    case 4:
        update_block(4, a, g, d, m, ms, vs, f16);
        break;
    case 5:
        update_block(5, a, g, d, m, ms, vs, f16);
        break;
    case 6:
        update_block(6, a, g, d, m, ms, vs, f16);
        break;
    case 7:
        update_block(7, a, g, d, m, ms, vs, f16);
        break;
    default:
        break;
    }
}

void ul_attn_page_avx2(ul_attn_t *a, const void *K, const void *V, int n, int f16) {
    const int hd = a->hd;
    for (int c0 = 0; c0 < n; c0 += UL_ATTN_CH) {
        const int m = n - c0 < UL_ATTN_CH ? n - c0 : UL_ATTN_CH;
        widen_keys(a, K, c0, m, f16);
        scores(a);
        for (int j = 0; j < m; j++) /* V rows widened once for every head */
            for (int d = 0; d < hd; d += 8)
                _mm256_storeu_ps(a->vf + (size_t)j * hd + d,
                                 load8(V, (size_t)(c0 + j) * hd + d, f16));
        for (int g = 0; g < a->G; g++) update(a, g, m, f16);
    }
}

/* ---------- f16 conversions ---------- */

void ul_attn_store_f16_avx2(uint16_t *dst, size_t stride, const float *src, int n) {
    int i = 0;
    if (stride == 1)
        for (; i + 8 <= n; i += 8)
            _mm_storeu_si128((__m128i *)(dst + i),
                             _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) dst[(size_t)i * stride] = _cvtss_sh(src[i], _MM_FROUND_TO_NEAREST_INT);
}

void ul_attn_round_f16_avx2(float *dst, const float *src, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, round16(_mm256_loadu_ps(src + i)));
    for (; i < n; i++) dst[i] = _cvtsh_ss(_cvtss_sh(src[i], _MM_FROUND_TO_NEAREST_INT));
}

/* ---------- the tiled path ---------- */

/* c[r][0..8*NB) (+)= sum_k a[r][k] b[k][0..8*NB) for r < NR; a rows lda apart, b and c rows
 * ldb / ldc apart. */
AI void gemm_tile(const int NR, const int NB, const float *a, int lda, const float *b, int ldb,
                  int kn, float *c, int ldc, int add) {
    __m256 acc[6][2];
    _Pragma("GCC unroll 6") for (int r = 0; r < NR; r++)
        _Pragma("GCC unroll 2") for (int j = 0; j < NB; j++) acc[r][j] =
            add ? _mm256_loadu_ps(c + (size_t)r * ldc + 8 * j) : _mm256_setzero_ps();
    for (int k = 0; k < kn; k++) {
        __m256 bv[2];
        _Pragma("GCC unroll 2") for (int j = 0; j < NB; j++) bv[j] =
            _mm256_loadu_ps(b + (size_t)k * ldb + 8 * j);
        _Pragma("GCC unroll 6") for (int r = 0; r < NR; r++) {
            const __m256 av = _mm256_broadcast_ss(a + (size_t)r * lda + k);
            _Pragma("GCC unroll 2") for (int j = 0; j < NB; j++) acc[r][j] =
                _mm256_fmadd_ps(av, bv[j], acc[r][j]);
        }
    }
    _Pragma("GCC unroll 6") for (int r = 0; r < NR; r++)
        _Pragma("GCC unroll 2") for (int j = 0; j < NB; j++)
            _mm256_storeu_ps(c + (size_t)r * ldc + 8 * j, acc[r][j]);
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
    case 4:                                                                                        \
        gemm_tile(4, NB, a, lda, b + col, ldb, kn, c + col, ldc, add);                             \
        break;                                                                                     \
    case 5:                                                                                        \
        gemm_tile(5, NB, a, lda, b + col, ldb, kn, c + col, ldc, add);                             \
        break;                                                                                     \
    default:                                                                                       \
        gemm_tile(6, NB, a, lda, b + col, ldb, kn, c + col, ldc, add);                             \
        break;                                                                                     \
    }

/* c (+)= a b for m rows, n columns (a multiple of 8), kn inner. */
static void gemm(const float *a, int lda, int m, const float *b, int ldb, int n, int kn, float *c,
                 int ldc, int add) {
    for (int r0 = 0; r0 < m; r0 += 6, a += 6 * (size_t)lda, c += 6 * (size_t)ldc) {
        const int nr = m - r0 < 6 ? m - r0 : 6;
        int col = 0;
        for (; col + 16 <= n; col += 16) GEMM_ROWS(2)
        if (col < n) GEMM_ROWS(1)
    }
}

static void qk_avx2(const float *q, int nq, int hd, const float *k, float scale, float *kq) {
    gemm(q, hd, nq, k, UL_ATTN_TILE, UL_ATTN_TILE, hd, kq, UL_ATTN_TILE, 0);
    const __m256 s = _mm256_set1_ps(scale);
    for (int i = 0; i < nq * UL_ATTN_TILE; i += 8)
        _mm256_storeu_ps(kq + i, _mm256_mul_ps(_mm256_loadu_ps(kq + i), s));
}

static void pv_avx2(const float *p, int nq, const float *v, int n, int hd, float *o) {
    gemm(p, UL_ATTN_TILE, nq, v, hd, hd, n, o, hd, 1);
}

static void softmax_avx2(float *kq, int nq, float *o, int hd, float *M, float *S) {
    const __m256 lo = _mm256_set1_ps(-87.3f);
    for (int r = 0; r < nq; r++) {
        float *row = kq + (size_t)r * UL_ATTN_TILE;
        const float tmax = max_row8(row, UL_ATTN_TILE);
        if (tmax == -INFINITY) { /* every key of the tile masked for this row */
            memset(row, 0, UL_ATTN_TILE * sizeof *row);
            continue;
        }
        if (tmax > M[r]) {
            const float ms = expf(M[r] - tmax);
            const __m256 msv = _mm256_set1_ps(ms);
            for (int d = 0; d < hd; d += 8)
                _mm256_storeu_ps(o + (size_t)r * hd + d,
                                 _mm256_mul_ps(_mm256_loadu_ps(o + (size_t)r * hd + d), msv));
            S[r] *= ms;
            M[r] = tmax;
        }
        const __m256 mv = _mm256_set1_ps(M[r]);
        __m256 sum = _mm256_setzero_ps();
        for (int j = 0; j < UL_ATTN_TILE; j += 8) {
            const __m256 x = _mm256_sub_ps(_mm256_loadu_ps(row + j), mv);
            /* masked keys (-inf) and underflow become exactly 0 */
            const __m256 p =
                _mm256_and_ps(ul_exp_neg8(_mm256_max_ps(x, lo)), _mm256_cmp_ps(x, lo, _CMP_GT_OQ));
            _mm256_storeu_ps(row + j, p);
            sum = _mm256_add_ps(sum, p);
        }
        __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps(sum, 1));
        s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
        s4 = _mm_add_ss(s4, _mm_movehdup_ps(s4));
        S[r] += _mm_cvtss_f32(s4);
    }
}

static void cvt_avx2(float *dst, const void *src, int n, int f16) {
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load8(src, (size_t)i, f16));
    for (; i < n; i++)
        dst[i] = f16 ? _cvtsh_ss(((const uint16_t *)src)[i]) : ((const float *)src)[i];
}

const ul_attn_tile_kern_t ul_attn_tile_avx2 = {qk_avx2, softmax_avx2, pv_avx2, cvt_avx2};
