/* AVX-512 packed Q4_K and Q6_K weights (pack.h): 16 rows per group, lane r = row r, one
 * 64-byte aligned record per super-block (256 columns) of the group, activations in Q8K.
 *
 * Q4_K record (2368 B, the 16 rows' blocks are 2304 B):
 *   +0    16 f16 d, +32 16 f16 dmin
 *   +64   the 6-bit scales, byte 16 j + r = scale of sub-block j (32 weights) of row r
 *   +192  the 6-bit mins, two vectors: in vector h, lane r holds the mins of sub-blocks
 *         4h..4h+3 of row r (a vpdpbusd operand)
 *   +320  the nibbles: 4 chunks of 64 weights, each 8 vectors; in vector k of chunk c,
 *         lane r holds bytes 32c+4k..+3 of row r's qs as stored: low nibbles are
 *         weights 64c+4k.. (sub-block 2c), high nibbles weights 64c+32+4k.. (2c+1).
 * A sub-block's integer dot product for 16 rows is 8 vpdpbusd against the activation's
 * 4-byte groups broadcast from memory; it is scaled in float by its scales (exact:
 * integers below 2^24 times 6-bit scales) and the super-block's sum by d * d_x. The
 * mins term dmin * sum_j m_j * bsum_j (bsum_j: the activation's sum over sub-block j)
 * is 4 vpdpbusd per super-block and token: bsum_j (|bsum_j| <= 32 * 127) is split into
 * 128 h_j + l_j with signed bytes h_j and l_j in 0..127, computed once per token and
 * super-block for all groups of a call.
 *
 * Q6_K record (3392 B, the 16 rows' blocks are 3360 B):
 *   +0    16 f16 d (+32 unused)
 *   +64   the int8 scales in pairs: byte 32 i + 2 r + e = scale of sub-block 2i+e (16
 *         weights) of row r, so a sign-extended 32-byte load is lane r = (sc_2i, sc_2i+1)
 *         as int16 words: the vpdpwssd operand for the -32 offset, sum_j sc_j bsum_j.
 *   +320  8 records of 384 B for weights 32i..32i+31: 4 nibble vectors N_v then 2 vectors
 *         of high bits H_0, H_1. Lane r of N_v: byte c = q(32i+4v+c) low nibble |
 *         q(32i+16+4v+c) low nibble << 4; lane r of H_e: byte c = the high 2 bits of
 *         q(32i+16e+4v+c) at bits 2v..2v+1 for v < 4. q is the unsigned 6-bit weight.
 * So a weight vector is two or three ALU ops from the stored bytes and the dot product
 * per sub-block is 4 vpdpbusd, scaled in float as for Q4_K. */
#include <immintrin.h>
#include <stddef.h>
#include <string.h>

#include "cpu/kernels_impl.h"
#include "cpu/pack.h"

#include "cpu/kernels_tile.h"

#define Q4K_REC 2368
#define Q5K_REC 2880
#define Q6K_REC 3392
/* super-blocks per pass over a row: the Q4_K mins helper bytes of 4 tokens (8 KiB) */
#define KB 128

static size_t gb_q4_K(int64_t n_cols) { return (size_t)(n_cols / QKK) * Q4K_REC; }
static size_t gb_q5_K(int64_t n_cols) { return (size_t)(n_cols / QKK) * Q5K_REC; }
static size_t gb_q6_K(int64_t n_cols) { return (size_t)(n_cols / QKK) * Q6K_REC; }

static void pack_q4_K(const uint8_t *rows, size_t rs, int64_t n_cols, uint8_t *dst) {
    const int64_t nb = n_cols / QKK;
    memset(dst, 0, gb_q4_K(n_cols));
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *g = dst + (size_t)b * Q4K_REC;
        for (int r = 0; r < UL_PACK_ROWS; r++) {
            const blk_q4_K *s = (const blk_q4_K *)(rows + (size_t)r * rs) + b;
            memcpy(g + 2 * r, &s->d, 2);
            memcpy(g + 32 + 2 * r, &s->dmin, 2);
            for (int j = 0; j < 8; j++) {
                uint8_t sc, mn;
                ul_q4k_scale_min(j, s->scales, &sc, &mn);
                g[64 + 16 * j + r] = sc;
                g[192 + 64 * (j / 4) + 4 * r + j % 4] = mn;
            }
            for (int c = 0; c < 4; c++)
                for (int k = 0; k < 8; k++)
                    memcpy(g + 320 + 512 * c + 64 * k + 4 * r, s->qs + 32 * c + 4 * k, 4);
        }
    }
}

/* Q5_K: the Q4_K record of the same scales, mins and low nibbles (blk_q5_K shares
 * blk_q4_K's head), then the fifth bits. */
static void pack_q5_K(const uint8_t *rows, size_t rs, int64_t n_cols, uint8_t *dst) {
    const int64_t nb = n_cols / QKK;
    memset(dst, 0, gb_q5_K(n_cols));
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *g = dst + (size_t)b * Q5K_REC;
        for (int r = 0; r < UL_PACK_ROWS; r++) {
            const blk_q5_K *s = (const blk_q5_K *)(rows + (size_t)r * rs) + b;
            blk_q4_K q4;
            memcpy(&q4, s, offsetof(blk_q4_K, qs));
            memcpy(q4.qs, s->qs, sizeof q4.qs);
            uint8_t tmp[Q4K_REC];
            pack_q4_K((const uint8_t *)&q4, 0, QKK, tmp); /* row r in all 16 lanes */
            /* mins and nibbles: 4 bytes of lane r in every vector */
            for (size_t o = 192; o < Q4K_REC; o += 64) memcpy(g + o + 4 * r, tmp + o + 4 * r, 4);
            memcpy(g + 2 * r, &s->d, 2);
            memcpy(g + 32 + 2 * r, &s->dmin, 2);
            for (int j = 0; j < 8; j++) g[64 + 16 * j + r] = tmp[64 + 16 * j + r];
            /* element 32 j + l has bit j of qh[l] */
            for (int c = 0; c < 4; c++)
                for (int hi = 0; hi < 2; hi++)
                    for (int k = 0; k < 8; k++)
                        for (int bb = 0; bb < 4; bb++)
                            g[Q4K_REC + 128 * c + 64 * hi + 4 * r + bb] |=
                                (uint8_t)(((s->qh[4 * k + bb] >> (2 * c + hi)) & 1) << k);
        }
    }
}

/* The unsigned 6-bit weight k (0..255) of a Q6_K block (ggml's dequantize_row_q6_K). */
static int q6_at(const blk_q6_K *s, int k) {
    const int h = k / 128, kk = k % 128, l = kk % 32, qt = kk / 32;
    const uint8_t lb = s->ql[64 * h + 32 * (qt & 1) + l];
    const int lo = qt < 2 ? lb & 0xF : lb >> 4;
    const int hi = (s->qh[32 * h + l] >> (2 * qt)) & 3;
    return lo | hi << 4;
}

static void pack_q6_K(const uint8_t *rows, size_t rs, int64_t n_cols, uint8_t *dst) {
    const int64_t nb = n_cols / QKK;
    memset(dst, 0, gb_q6_K(n_cols));
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *g = dst + (size_t)b * Q6K_REC;
        for (int r = 0; r < UL_PACK_ROWS; r++) {
            const blk_q6_K *s = (const blk_q6_K *)(rows + (size_t)r * rs) + b;
            memcpy(g + 2 * r, &s->d, 2);
            for (int j = 0; j < 16; j++)
                g[64 + 32 * (j / 2) + 2 * r + j % 2] = (uint8_t)s->scales[j];
            for (int i = 0; i < 8; i++) {
                uint8_t *rec = g + 320 + 384 * i;
                for (int v = 0; v < 4; v++)
                    for (int c = 0; c < 4; c++) {
                        const int q0 = q6_at(s, 32 * i + 4 * v + c);
                        const int q1 = q6_at(s, 32 * i + 16 + 4 * v + c);
                        rec[64 * v + 4 * r + c] = (uint8_t)((q0 & 0xF) | (q1 & 0xF) << 4);
                        rec[256 + 4 * r + c] |= (uint8_t)((q0 >> 4) << (2 * v));
                        rec[320 + 4 * r + c] |= (uint8_t)((q1 >> 4) << (2 * v));
                    }
            }
        }
    }
}

/* acc + dpbusd(w, the 4 bytes at p broadcast): the broadcast as the {1to16} memory operand
 * (compilers emit a separate vpbroadcastd otherwise; see kernels_avx512_pack.c). */
AI __m512i dpbusd_bcst(__m512i acc, __m512i w, const void *p) {
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*(const int32_t *)p));
    return acc;
}
AI __m512i dpwssd_bcst(__m512i acc, __m512i w, const void *p) {
    __asm__("vpdpwssd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*(const int32_t *)p));
    return acc;
}

AI const blk_q8K *xblk(const uint8_t *x, size_t xs, int t, int64_t b) {
    return (const blk_q8K *)(x + (size_t)t * xs) + b;
}

/* 8 products of the weight vectors W with the activation bytes at q (4 per vector), in
 * two chains. */
AI __m512i dot8(const __m512i W[8], const int8_t *q) {
    __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
    _Pragma("GCC unroll 4") for (int k = 0; k < 8; k += 2) {
        s0 = dpbusd_bcst(s0, W[k], q + 4 * k);
        s1 = dpbusd_bcst(s1, W[k + 1], q + 4 * k + 4);
    }
    return _mm512_add_epi32(s0, s1);
}
AI __m512i dot4(const __m512i W[4], const int8_t *q) {
    __m512i s0 = dpbusd_bcst(_mm512_setzero_si512(), W[0], q);
    __m512i s1 = dpbusd_bcst(_mm512_setzero_si512(), W[1], q + 4);
    s0 = dpbusd_bcst(s0, W[2], q + 8);
    s1 = dpbusd_bcst(s1, W[3], q + 12);
    return _mm512_add_epi32(s0, s1);
}

/* The mins helper of one Q8K block: bytes 0..7 l_j, 8..15 h_j, bsum_j = 128 h_j + l_j. */
AI void q4k_aux(const blk_q8K *p, uint8_t *o) {
    const __m256i bs =
        _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)p->bsums), _mm256_set1_epi16(1));
    _mm_storel_epi64((__m128i *)o,
                     _mm256_cvtepi32_epi8(_mm256_and_si256(bs, _mm256_set1_epi32(127))));
    _mm_storel_epi64((__m128i *)(o + 8), _mm256_cvtepi32_epi8(_mm256_srai_epi32(bs, 7)));
}

/* One group of Q4_K (Q5: Q5_K), NT tokens, super-blocks [b0, b1): y[t*ys + 0..16) (+)=
 * products. aux: the tokens' mins helpers, (t * KB + b - b0) * 16. */
AI void tile_q45_K(const int Q5, const int NT, const uint8_t *g0, int64_t b0, int64_t b1,
                   const uint8_t *x, size_t xs, const uint8_t *aux, float *y, int64_t ys, int add) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512 acc[4], sf[4];
    _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) acc[t] =
        add ? _mm512_loadu_ps(y + (int64_t)t * ys) : _mm512_setzero_ps();
    for (int64_t b = b0; b < b1; b++) {
        const uint8_t *g = g0 + (size_t)b * (Q5 ? Q5K_REC : Q4K_REC);
        const __m512i M0 = _mm512_load_si512((const void *)(g + 192));
        const __m512i M1 = _mm512_load_si512((const void *)(g + 256));
        const __m512 DM = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(g + 32)));
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
            const uint8_t *a = aux + ((size_t)t * KB + (size_t)(b - b0)) * 16;
            __m512i ml = dpbusd_bcst(dpbusd_bcst(_mm512_setzero_si512(), M0, a), M1, a + 4);
            __m512i mh = dpbusd_bcst(dpbusd_bcst(_mm512_setzero_si512(), M0, a + 8), M1, a + 12);
            __m512i mi = _mm512_add_epi32(ml, _mm512_slli_epi32(mh, 7));
            const __m512 dm = _mm512_mul_ps(DM, _mm512_set1_ps(xblk(x, xs, t, b)->d));
            acc[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mi), dm, acc[t]);
        }
        _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) {
            const uint8_t *q = g + 320 + 512 * c;
            _Pragma("GCC unroll 2") for (int hi = 0; hi < 2; hi++) {
                const int j = 2 * c + hi;
                __m512i W[8];
                _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) {
                    __m512i v = _mm512_load_si512((const void *)(q + 64 * k));
                    W[k] = _mm512_and_si512(hi ? _mm512_srli_epi16(v, 4) : v, m4);
                }
                if (Q5) { /* bit k of lane r's byte: the fifth bit of W[k]'s byte */
                    const __m512i h =
                        _mm512_load_si512((const void *)(g + Q4K_REC + 128 * c + 64 * hi));
                    _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) {
                        const __m512i hs = k < 4    ? _mm512_slli_epi16(h, 4 - k)
                                           : k == 4 ? h
                                                    : _mm512_srli_epi16(h, k - 4);
                        W[k] = _mm512_ternarylogic_epi64(W[k], hs, _mm512_set1_epi8(0x10), 0xF8);
                    }
                }
                const __m512 SC = _mm512_cvtepi32_ps(
                    _mm512_cvtepu8_epi32(_mm_load_si128((const __m128i *)(g + 64 + 16 * j))));
                _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
                    const __m512 s =
                        _mm512_cvtepi32_ps(dot8(W, xblk(x, xs, t, b)->qs + 64 * c + 32 * hi));
                    sf[t] = j == 0 ? _mm512_mul_ps(s, SC) : _mm512_fmadd_ps(s, SC, sf[t]);
                }
            }
        }
        const __m512 D = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)g));
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) acc[t] =
            _mm512_fmadd_ps(sf[t], _mm512_mul_ps(D, _mm512_set1_ps(xblk(x, xs, t, b)->d)), acc[t]);
    }
    _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++)
        _mm512_storeu_ps(y + (int64_t)t * ys, acc[t]);
}

AI void tile_q4_K(const int NT, const uint8_t *g0, int64_t b0, int64_t b1, const uint8_t *x,
                  size_t xs, const uint8_t *aux, float *y, int64_t ys, int add) {
    tile_q45_K(0, NT, g0, b0, b1, x, xs, aux, y, ys, add);
}
AI void tile_q5_K(const int NT, const uint8_t *g0, int64_t b0, int64_t b1, const uint8_t *x,
                  size_t xs, const uint8_t *aux, float *y, int64_t ys, int add) {
    tile_q45_K(1, NT, g0, b0, b1, x, xs, aux, y, ys, add);
}

/* Weight vector v (0..3) of half e of a Q6_K pair record. */
AI __m512i q6_w(const uint8_t *rec, int e, int v) {
    const __m512i n = _mm512_load_si512((const void *)(rec + 64 * v));
    const __m512i h = _mm512_load_si512((const void *)(rec + 256 + 64 * e));
    const __m512i lo = _mm512_and_si512(e ? _mm512_srli_epi16(n, 4) : n, _mm512_set1_epi8(0x0F));
    const __m512i hs = v == 0   ? _mm512_slli_epi16(h, 4)
                       : v == 1 ? _mm512_slli_epi16(h, 2)
                       : v == 2 ? h
                                : _mm512_srli_epi16(h, 2);
    /* lo | (hs & 0x30) */
    return _mm512_ternarylogic_epi64(lo, hs, _mm512_set1_epi8(0x30), 0xF8);
}

AI void tile_q6_K(const int NT, const uint8_t *g0, int64_t b0, int64_t b1, const uint8_t *x,
                  size_t xs, const uint8_t *aux, float *y, int64_t ys, int add) {
    (void)aux;
    __m512 acc[4], sf[4];
    _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) acc[t] =
        add ? _mm512_loadu_ps(y + (int64_t)t * ys) : _mm512_setzero_ps();
    for (int64_t b = b0; b < b1; b++) {
        const uint8_t *g = g0 + (size_t)b * Q6K_REC;
        /* sum_j sc_j bsum_j: the -32 offset */
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
            const int16_t *bs = xblk(x, xs, t, b)->bsums;
            __m512i o0 = _mm512_setzero_si512(), o1 = _mm512_setzero_si512();
            _Pragma("GCC unroll 8") for (int i = 0; i < 8; i += 2) {
                o0 = dpwssd_bcst(
                    o0, _mm512_cvtepi8_epi16(_mm256_load_si256((const __m256i *)(g + 64 + 32 * i))),
                    bs + 2 * i);
                o1 = dpwssd_bcst(o1,
                                 _mm512_cvtepi8_epi16(
                                     _mm256_load_si256((const __m256i *)(g + 64 + 32 * i + 32))),
                                 bs + 2 * i + 2);
            }
            sf[t] =
                _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(o0, o1)), _mm512_set1_ps(-32.f));
        }
        _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) {
            const uint8_t *rec = g + 320 + 384 * i;
            const __m512i P =
                _mm512_cvtepi8_epi16(_mm256_load_si256((const __m256i *)(g + 64 + 32 * i)));
            _Pragma("GCC unroll 2") for (int e = 0; e < 2; e++) {
                __m512i W[4];
                _Pragma("GCC unroll 4") for (int v = 0; v < 4; v++) W[v] = q6_w(rec, e, v);
                const __m512 SC = _mm512_cvtepi32_ps(
                    e ? _mm512_srai_epi32(P, 16) : _mm512_srai_epi32(_mm512_slli_epi32(P, 16), 16));
                _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
                    const __m512 s =
                        _mm512_cvtepi32_ps(dot4(W, xblk(x, xs, t, b)->qs + 32 * i + 16 * e));
                    sf[t] = _mm512_fmadd_ps(s, SC, sf[t]);
                }
            }
        }
        const __m512 D = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)g));
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) acc[t] =
            _mm512_fmadd_ps(sf[t], _mm512_mul_ps(D, _mm512_set1_ps(xblk(x, xs, t, b)->d)), acc[t]);
    }
    _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++)
        _mm512_storeu_ps(y + (int64_t)t * ys, acc[t]);
}

/* Tokens in tiles of 4, each tile over every group of the call (as kernels_avx512_pack.c),
 * the row in passes of KB super-blocks. */
#define MM_PACK_K(name, REC, AUX)                                                                  \
    static void mm_##name(int64_t n_cols, const uint8_t *wp, int n_groups, const uint8_t *x,       \
                          size_t xs, int nt, float *y, int64_t ys) {                               \
        const int64_t nb = n_cols / QKK;                                                           \
        const size_t gb = (size_t)nb * (REC);                                                      \
        _Alignas(64) uint8_t aux[4 * KB * 16];                                                     \
        for (int t = 0; t < nt;) {                                                                 \
            const int tn = nt - t < 4 ? nt - t : 4;                                                \
            const uint8_t *xt = x + (size_t)t * xs;                                                \
            for (int64_t b0 = 0; b0 < nb; b0 += KB) {                                              \
                const int64_t b1 = nb < b0 + KB ? nb : b0 + KB;                                    \
                if (AUX)                                                                           \
                    for (int tt = 0; tt < tn; tt++)                                                \
                        for (int64_t b = b0; b < b1; b++)                                          \
                            q4k_aux(xblk(xt, xs, tt, b),                                           \
                                    aux + ((size_t)tt * KB + (size_t)(b - b0)) * 16);              \
                for (int gi = 0; gi < n_groups; gi++) {                                            \
                    const uint8_t *g = wp + (size_t)gi * gb;                                       \
                    float *yg = y + (int64_t)gi * UL_PACK_ROWS + (int64_t)t * ys;                  \
                    const int add = b0 > 0;                                                        \
                    switch (tn) {                                                                  \
                    case 1:                                                                        \
                        tile_##name(1, g, b0, b1, xt, xs, aux, yg, ys, add);                       \
                        break;                                                                     \
                    case 2:                                                                        \
                        tile_##name(2, g, b0, b1, xt, xs, aux, yg, ys, add);                       \
                        break;                                                                     \
                    case 3:                                                                        \
                        tile_##name(3, g, b0, b1, xt, xs, aux, yg, ys, add);                       \
                        break;                                                                     \
                    default:                                                                       \
                        tile_##name(4, g, b0, b1, xt, xs, aux, yg, ys, add);                       \
                        break;                                                                     \
                    }                                                                              \
                }                                                                                  \
            }                                                                                      \
            t += tn;                                                                               \
        }                                                                                          \
    }
MM_PACK_K(q4_K, Q4K_REC, 1)
MM_PACK_K(q5_K, Q5K_REC, 1)
MM_PACK_K(q6_K, Q6K_REC, 0)

const ul_pack_kern_t ul_pack_q4_K_avx512 = {gb_q4_K, pack_q4_K, mm_q4_K};
const ul_pack_kern_t ul_pack_q5_K_avx512 = {gb_q5_K, pack_q5_K, mm_q5_K};
const ul_pack_kern_t ul_pack_q6_K_avx512 = {gb_q6_K, pack_q6_K, mm_q6_K};
