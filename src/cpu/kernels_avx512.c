/* AVX-512 kernels (F, BW, VL, DQ, VNNI, BF16). Every type computes a register tile of up
 * to R weight rows x T tokens so each weight block is unpacked once per tile and each
 * activation block is loaded once per tile; decode (one token) degenerates to R rows at a
 * time, which keeps R independent streams of weights in flight.
 *
 * Integer types use vpdpbusd (unsigned x signed bytes):
 *  - Q4_0: the nibbles 0..15 are the unsigned operand as they are; the -8 offset becomes
 *    -8 * sum(activation block), folded into the accumulator's initial value (-sum on
 *    each of the block's 8 lanes).
 *  - Q8_0: the weights are made unsigned by flipping their sign bit (w + 128) and the
 *    extra 128 * sum(activation block) is subtracted through the initial value, like
 *    Q4_0's offset (one XOR per weight block instead of a sign fix per product).
 *  - Q4_K / Q6_K: vpmaddubsw (u8 x s8 -> s16 pairs) then vpdpwssd with the sub-block
 *    scales, as in llama.cpp; mins (Q4_K) and the -32 offset (Q6_K) go through the
 *    activation sums per 16.
 * F16 weights are widened with vcvtph2ps and FMA'd; BF16 uses vdpbf16ps. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "cpu/kernels_avx512_impl.h"
#include "cpu/kernels_impl.h"

#include "cpu/kernels_tile.h"

/* ---- Q4_0 x Q8A ---- */

/* two blocks' nibbles as 64 unsigned bytes in activation order: [lo0 hi0 lo1 hi1] */
AI __m512i q4_0_unpack2(const blk_q4_0 *q, int two) {
    /* [a a c c] then shift the odd 128-bit lanes' words right by 4: lo/hi nibbles */
    __m256i a = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)q[0].qs));
    __m256i c = two ? _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)q[1].qs))
                    : _mm256_setzero_si256();
    __m512i v = join256(a, c);
    v = _mm512_mask_srli_epi16(v, (__mmask32)0xFF00FF00u, v, 4);
    return _mm512_and_si512(v, _mm512_set1_epi8(0x0F));
}

/* The (d, nsum) headers of activation blocks b and b+1 as [dx0 x8, dx1 x8] and
 * [nsum0 x8, nsum1 x8] (zeros for a missing second block): two 8-byte loads and two
 * permutes instead of four broadcasts and two inserts. */
AI void q8a_head2(const blk_q8a *p, int two, __m512 *dx, __m512i *ns) {
    const __m512i idx_d = _mm512_set_epi32(2, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i idx_s = _mm512_set_epi32(3, 3, 3, 3, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1);
    __m128i v = _mm_loadl_epi64((const __m128i *)&p[0]);
    if (two) {
        long long h;
        memcpy(&h, &p[1], 8);
        v = _mm_insert_epi64(v, h, 1);
    }
    __m512i z = _mm512_castsi128_si512(v);
    *dx = _mm512_permutexvar_ps(idx_d, _mm512_castsi512_ps(z));
    *ns = _mm512_permutexvar_epi32(idx_s, z);
}

AI void tile_q4_0(const int NR, const int NT, int64_t n_cols, const uint8_t *w, size_t ws,
                  const uint8_t *x, size_t xs, float *y, int64_t ys) {
    const int64_t nb = n_cols / QK;
    __m512 acc[4][4];
    FOR_RT acc[r][t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b += 2) {
        const int two = b + 1 < nb;
        __m512i W[4];
        __m512 dw[4];
        _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {
            const blk_q4_0 *q = (const blk_q4_0 *)(w + (size_t)r * ws) + b;
            W[r] = q4_0_unpack2(q, two);
            dw[r] = halves_to_ps(q[0].d, two ? q[1].d : 0);
        }
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
            const blk_q8a *p = (const blk_q8a *)(x + (size_t)t * xs) + b;
            __m256i xa = _mm256_loadu_si256((const __m256i *)p[0].qs);
            __m256i xc =
                two ? _mm256_loadu_si256((const __m256i *)p[1].qs) : _mm256_setzero_si256();
            __m512i X = join256(xa, xc);
            __m512i I;
            __m512 dx;
            q8a_head2(p, two, &dx, &I);
            _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {
                __m512i s = _mm512_dpbusd_epi32(I, W[r], X);
                acc[r][t] =
                    _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw[r], dx), acc[r][t]);
            }
        }
    }
    FOR_RT y[t * ys + r] = _mm512_reduce_add_ps(acc[r][t]);
}
MM_DRIVER(q4_0, 4, 4)

/* ---- Q8_0 x Q8A ---- */

AI void tile_q8_0(const int NR, const int NT, int64_t n_cols, const uint8_t *w, size_t ws,
                  const uint8_t *x, size_t xs, float *y, int64_t ys) {
    const int64_t nb = n_cols / QK;
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    __m512 acc[4][4];
    FOR_RT acc[r][t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b += 2) {
        const int two = b + 1 < nb;
        __m512i W[4];
        __m512 dw[4];
        _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {
            const blk_q8_0 *q = (const blk_q8_0 *)(w + (size_t)r * ws) + b;
            __m256i a = _mm256_loadu_si256((const __m256i *)q[0].qs);
            __m256i c = two ? _mm256_loadu_si256((const __m256i *)q[1].qs) : _mm256_setzero_si256();
            W[r] = _mm512_xor_si512(join256(a, c), flip); /* w + 128, unsigned */
            dw[r] = halves_to_ps(q[0].d, two ? q[1].d : 0);
        }
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
            const blk_q8a *p = (const blk_q8a *)(x + (size_t)t * xs) + b;
            __m256i xa = _mm256_loadu_si256((const __m256i *)p[0].qs);
            __m256i xc =
                two ? _mm256_loadu_si256((const __m256i *)p[1].qs) : _mm256_setzero_si256();
            __m512i X = join256(xa, xc);
            /* the extra 128 * sum(x), spread over the block's 8 lanes */
            __m512i I;
            __m512 dx;
            q8a_head2(p, two, &dx, &I);
            I = _mm512_slli_epi32(I, 4); /* -16 * sum per lane, -128 * sum per block */
            _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {
                __m512i s = _mm512_dpbusd_epi32(I, W[r], X);
                acc[r][t] =
                    _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw[r], dx), acc[r][t]);
            }
        }
    }
    FOR_RT y[t * ys + r] = _mm512_reduce_add_ps(acc[r][t]);
}
MM_DRIVER(q8_0, 4, 4)

/* ---- Q4_0 / Q8_0 prefill: 16 rows per vector, one row per 32-bit lane ----
 *
 * With several tokens, the two-blocks-per-vector tiles above pay a convert, a scale
 * multiply and an FMA per (row, token, block pair) and a horizontal sum per (row, token).
 * Here 16 rows are transposed (per block, in chunks of PK_BLOCKS blocks, into a stack
 * buffer that stays in L1) so that lane r holds row r: a block then costs, per token,
 * 8 vpdpbusd with the activation's 4-byte groups broadcast from memory, and one convert,
 * multiply and FMA for all 16 rows; results are stored 16 rows at once. The transposition
 * is paid once per 16 rows and chunk, and shared by every token of the step, so only
 * steps with at least PK_MIN_TOK tokens take this path (decode keeps the kernels above,
 * which are bound by reading the weights anyway).
 * Both types become the same record: unsigned bytes (Q4_0 nibbles as they are, Q8_0
 * weights + 128) and the offset (8 or 128) times minus the activation sum starts the
 * accumulator. */
#define PK_BLOCKS 64  /* blocks per chunk: 64 x 576 B = 36 KiB */
#define PK_MIN_TOK 16 /* measured: slower than the tiles above at 8 tokens, faster at 16 */
typedef struct {
    __m512i q[8]; /* q[j] lane r: row r's weights k = 4j..4j+3 (unsigned) */
    __m512 d;     /* lane r: row r's block scale */
} pk_blk;

/* lane r = the 32-bit word at byte offset `off` of block b of row r */
AI __m512i pk_gather(const uint8_t *w, __m512i rowoff, size_t off) {
    return _mm512_i32gather_epi32(rowoff, (const void *)(w + off), 1);
}

AI __m512 pk_scales(const uint8_t *w, __m512i rowoff, size_t off) {
    __m512i v = pk_gather(w, rowoff, off); /* d is the low half of each word */
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v));
}

static void pk_q4_0(const uint8_t *w, __m512i rowoff, int64_t b0, int nb, pk_blk *o) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    for (int i = 0; i < nb; i++) {
        size_t off = (size_t)(b0 + i) * sizeof(blk_q4_0);
        o[i].d = pk_scales(w, rowoff, off);
        for (int j = 0; j < 4; j++) { /* byte 4j+c holds k = 4j+c (low) and 16+4j+c (high) */
            __m512i v = pk_gather(w, rowoff, off + 2 + 4 * (size_t)j);
            o[i].q[j] = _mm512_and_si512(v, m4);
            o[i].q[j + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
        }
    }
}

static void pk_q8_0(const uint8_t *w, __m512i rowoff, int64_t b0, int nb, pk_blk *o) {
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    for (int i = 0; i < nb; i++) {
        size_t off = (size_t)(b0 + i) * sizeof(blk_q8_0);
        o[i].d = pk_scales(w, rowoff, off);
        for (int j = 0; j < 8; j++)
            o[i].q[j] = _mm512_xor_si512(pk_gather(w, rowoff, off + 2 + 4 * (size_t)j), flip);
    }
}

AI __m512i bcast4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

/* y[t][0..16) (+)= the chunk's products for NT tokens; SH: log2 of the weight offset */
AI void pk_tile(const int NT, const int SH, const pk_blk *pk, int nb, const uint8_t *x, size_t xs,
                int64_t b0, float *y, int64_t ys, int add) {
    __m512 acc[4];
    _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
    for (int i = 0; i < nb; i++) {
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
            const blk_q8a *p = (const blk_q8a *)(x + (size_t)t * xs) + b0 + i;
            __m512i s = _mm512_set1_epi32(p->nsum * (1 << SH));
            _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) s =
                _mm512_dpbusd_epi32(s, pk[i].q[j], bcast4(p->qs + 4 * j));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s),
                                     _mm512_mul_ps(pk[i].d, _mm512_set1_ps(p->d)), acc[t]);
        }
    }
    _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
        float *o = y + (int64_t)t * ys;
        if (add) acc[t] = _mm512_add_ps(acc[t], _mm512_loadu_ps(o));
        _mm512_storeu_ps(o, acc[t]);
    }
}

typedef void (*pk_fn)(const uint8_t *w, __m512i rowoff, int64_t b0, int nb, pk_blk *o);

/* Rows [0, nr & ~15) through the packed path; returns how many rows it did. */
static int mm_pk(pk_fn pack, int sh, int64_t n_cols, const uint8_t *w, size_t ws, int nr,
                 const uint8_t *x, size_t xs, int nt, float *y, int64_t ys) {
    const int64_t nb = n_cols / QK;
    /* gather offsets are int32: rows of a group must be within 2 GiB */
    if ((uint64_t)ws * 15 > INT32_MAX) return 0;
    const __m512i rowoff =
        _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                           _mm512_set1_epi32((int)ws));
    pk_blk pk[PK_BLOCKS];
    int r = 0;
    for (; r + 16 <= nr; r += 16) {
        const uint8_t *wr = w + (size_t)r * ws;
        for (int64_t b0 = 0; b0 < nb; b0 += PK_BLOCKS) {
            int n = nb - b0 < PK_BLOCKS ? (int)(nb - b0) : PK_BLOCKS;
            pack(wr, rowoff, b0, n, pk);
            int t = 0;
            for (; t + 4 <= nt; t += 4)
                if (sh == 3)
                    pk_tile(4, 3, pk, n, x + (size_t)t * xs, xs, b0, y + t * ys + r, ys, b0 > 0);
                else
                    pk_tile(4, 7, pk, n, x + (size_t)t * xs, xs, b0, y + t * ys + r, ys, b0 > 0);
            for (; t < nt; t++)
                if (sh == 3)
                    pk_tile(1, 3, pk, n, x + (size_t)t * xs, xs, b0, y + t * ys + r, ys, b0 > 0);
                else
                    pk_tile(1, 7, pk, n, x + (size_t)t * xs, xs, b0, y + t * ys + r, ys, b0 > 0);
        }
    }
    return r;
}

/* ---- Q4_0 / Q8_0 decode (one token): 8 rows per pass ----
 * With a single token the tiles above spend, per block pair, as much on the activation
 * (two loads, the header permutes) as on one row; taking 8 rows per pass halves that
 * share and gives 8 independent accumulator chains. 8 x (weights, scale, accumulator)
 * plus the activation fit in the 32 vector registers. */
#define DEC_R 8
AI void dec_q(const int Q8, int64_t n_cols, const uint8_t *w, size_t ws, const uint8_t *x,
              float *y) {
    const int64_t nb = n_cols / QK;
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    __m512 acc[DEC_R];
    _Pragma("GCC unroll 8") for (int r = 0; r < DEC_R; r++) acc[r] = _mm512_setzero_ps();
    const blk_q8a *xb = (const blk_q8a *)x;
    for (int64_t b = 0; b < nb; b += 2) {
        const int two = b + 1 < nb;
        const blk_q8a *p = xb + b;
        __m256i xa = _mm256_loadu_si256((const __m256i *)p[0].qs);
        __m256i xc = two ? _mm256_loadu_si256((const __m256i *)p[1].qs) : _mm256_setzero_si256();
        __m512i X = join256(xa, xc);
        __m512i I;
        __m512 dx;
        q8a_head2(p, two, &dx, &I);
        if (Q8) I = _mm512_slli_epi32(I, 4);
        _Pragma("GCC unroll 8") for (int r = 0; r < DEC_R; r++) {
            __m512i W;
            __m512 dw;
            if (Q8) {
                const blk_q8_0 *q = (const blk_q8_0 *)(w + (size_t)r * ws) + b;
                __m256i a = _mm256_loadu_si256((const __m256i *)q[0].qs);
                __m256i c =
                    two ? _mm256_loadu_si256((const __m256i *)q[1].qs) : _mm256_setzero_si256();
                W = _mm512_xor_si512(join256(a, c), flip);
                dw = halves_to_ps(q[0].d, two ? q[1].d : 0);
            } else {
                const blk_q4_0 *q = (const blk_q4_0 *)(w + (size_t)r * ws) + b;
                W = q4_0_unpack2(q, two);
                dw = halves_to_ps(q[0].d, two ? q[1].d : 0);
            }
            __m512i s = _mm512_dpbusd_epi32(I, W, X);
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, dx), acc[r]);
        }
    }
    _Pragma("GCC unroll 8") for (int r = 0; r < DEC_R; r++) y[r] = _mm512_reduce_add_ps(acc[r]);
}

/* Rows [0, nr & ~7) of a one-token step; returns how many rows it did. */
static int mm_dec(int q8, int64_t n_cols, const uint8_t *w, size_t ws, int nr, const uint8_t *x,
                  float *y) {
    int r = 0;
    for (; r + DEC_R <= nr; r += DEC_R)
        if (q8)
            dec_q(1, n_cols, w + (size_t)r * ws, ws, x, y + r);
        else
            dec_q(0, n_cols, w + (size_t)r * ws, ws, x, y + r);
    return r;
}

static void mm_q4_0_any(int64_t n_cols, const uint8_t *w, size_t ws, int nr, const uint8_t *x,
                        size_t xs, int nt, float *y, int64_t ys) {
    int done = nt == 1            ? mm_dec(0, n_cols, w, ws, nr, x, y)
               : nt >= PK_MIN_TOK ? mm_pk(pk_q4_0, 3, n_cols, w, ws, nr, x, xs, nt, y, ys)
                                  : 0;
    if (done < nr) mm_q4_0(n_cols, w + (size_t)done * ws, ws, nr - done, x, xs, nt, y + done, ys);
}

static void mm_q8_0_any(int64_t n_cols, const uint8_t *w, size_t ws, int nr, const uint8_t *x,
                        size_t xs, int nt, float *y, int64_t ys) {
    int done = nt == 1            ? mm_dec(1, n_cols, w, ws, nr, x, y)
               : nt >= PK_MIN_TOK ? mm_pk(pk_q8_0, 7, n_cols, w, ws, nr, x, xs, nt, y, ys)
                                  : 0;
    if (done < nr) mm_q8_0(n_cols, w + (size_t)done * ws, ws, nr - done, x, xs, nt, y + done, ys);
}

/* ---- F16 / F32 weights x f32 activations; BF16 x BF16 ---- */

AI __m512 load_f16(const uint8_t *row, int64_t k, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)row + k));
}
AI __m512 load_f32w(const uint8_t *row, int64_t k, __mmask16 m) {
    return _mm512_maskz_loadu_ps(m, (const float *)row + k);
}

#define FLOAT_TILE(name, LOADW)                                                                    \
    AI void tile_##name(const int NR, const int NT, int64_t n_cols, const uint8_t *w, size_t ws,   \
                        const uint8_t *x, size_t xs, float *y, int64_t ys) {                       \
        __m512 acc[4][4];                                                                          \
        FOR_RT acc[r][t] = _mm512_setzero_ps();                                                    \
        for (int64_t k = 0; k < n_cols; k += 16) {                                                 \
            __mmask16 m =                                                                          \
                n_cols - k >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n_cols - k)) - 1);      \
            __m512 W[4];                                                                           \
            _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) W[r] =                            \
                LOADW(w + (size_t)r * ws, k, m);                                                   \
            _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {                                 \
                __m512 X = _mm512_maskz_loadu_ps(m, (const float *)(x + (size_t)t * xs) + k);      \
                _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) acc[r][t] =                   \
                    _mm512_fmadd_ps(W[r], X, acc[r][t]);                                           \
            }                                                                                      \
        }                                                                                          \
        FOR_RT y[t * ys + r] = _mm512_reduce_add_ps(acc[r][t]);                                    \
    }
FLOAT_TILE(f16, load_f16)
FLOAT_TILE(f32, load_f32w)
MM_DRIVER(f16, 4, 4)
MM_DRIVER(f32, 4, 4)

AI void tile_bf16(const int NR, const int NT, int64_t n_cols, const uint8_t *w, size_t ws,
                  const uint8_t *x, size_t xs, float *y, int64_t ys) {
    __m512 acc[4][4];
    FOR_RT acc[r][t] = _mm512_setzero_ps();
    for (int64_t k = 0; k < n_cols; k += 32) {
        __mmask32 m =
            n_cols - k >= 32 ? (__mmask32)0xFFFFFFFFu : (__mmask32)((1u << (n_cols - k)) - 1);
        __m512i W[4];
        _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) W[r] =
            _mm512_maskz_loadu_epi16(m, (const uint16_t *)(w + (size_t)r * ws) + k);
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
            __m512i X = _mm512_maskz_loadu_epi16(m, (const uint16_t *)(x + (size_t)t * xs) + k);
            _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) acc[r][t] =
                _mm512_dpbf16_ps(acc[r][t], (__m512bh)W[r], (__m512bh)X);
        }
    }
    FOR_RT y[t * ys + r] = _mm512_reduce_add_ps(acc[r][t]);
}
MM_DRIVER(bf16, 4, 4)

/* ---- K-quants x Q8K ---- */

/* the tile: tile_kq, kernels_avx512_impl.h */
MM_DRIVER_FN(static void mm_q4_K, tile_kq, 2, 4, KQ_Q4_K)
MM_DRIVER_FN(static void mm_q6_K, tile_kq, 2, 4, KQ_Q6_K)

/* For one to three tokens the AVX2 K-quant kernels are faster (measured: 0.39 vs 0.92 ms
 * for a 5632 x 2048 Q4_K decode): their per-super-block setup is cheaper, and with so
 * few tokens setup, not multiply-adds, is the cost. */
static void mm_q4_K_any(int64_t n_cols, const uint8_t *w, size_t ws, int nr, const uint8_t *x,
                        size_t xs, int nt, float *y, int64_t ys) {
    (nt < 4 ? ul_cpu_kern_avx2.mm[UL_TYPE_Q4_K] : mm_q4_K)(n_cols, w, ws, nr, x, xs, nt, y, ys);
}
static void mm_q6_K_any(int64_t n_cols, const uint8_t *w, size_t ws, int nr, const uint8_t *x,
                        size_t xs, int nt, float *y, int64_t ys) {
    (nt < 4 ? ul_cpu_kern_avx2.mm[UL_TYPE_Q6_K] : mm_q6_K)(n_cols, w, ws, nr, x, xs, nt, y, ys);
}

/* ---- activation conversion, byte-identical to quant.c's scalar code ---- */

/* One Q8A / Q8A1 block: qs and the f16-rounded d; returns the sum of qs, *du the unrounded
 * scale (quant.c's quant_x_blk). */
AI int32_t xq_blk(const float *x, int8_t *qs, float *d, float *du) {
    const __m512 sign = _mm512_set1_ps(-0.0f);
    __m512 a = _mm512_loadu_ps(x), b = _mm512_loadu_ps(x + 16);
    float amax =
        _mm512_reduce_max_ps(_mm512_max_ps(_mm512_andnot_ps(sign, a), _mm512_andnot_ps(sign, b)));
    float id = amax != 0 ? 127.f / amax : 0.0f;
    *du = amax / 127.f;
    *d = ul_fp16_to_fp32(ul_fp32_to_fp16(*du));
    if (*d == 0) id = 0; /* as the scalar code */
    /* the current rounding mode (nearest even) = nearbyintf */
    __m512i qa = _mm512_cvtps_epi32(_mm512_mul_ps(a, _mm512_set1_ps(id)));
    __m512i qb = _mm512_cvtps_epi32(_mm512_mul_ps(b, _mm512_set1_ps(id)));
    _mm_storeu_si128((__m128i *)qs, _mm512_cvtepi32_epi8(qa));
    _mm_storeu_si128((__m128i *)(qs + 16), _mm512_cvtepi32_epi8(qb));
    return _mm512_reduce_add_epi32(_mm512_add_epi32(qa, qb));
}

static void xq_q8a(const float *x, void *dst, int64_t n) {
    blk_q8a *y = dst;
    float du;
    for (int64_t i = 0; i < n / QK; i++, x += QK) y[i].nsum = -xq_blk(x, y[i].qs, &y[i].d, &du);
}

static void xq_q8a1(const float *x, void *dst, int64_t n) {
    blk_q8a1 *y = dst;
    float du;
    for (int64_t i = 0; i < n / QK; i++, x += QK) {
        int32_t s = xq_blk(x, y[i].qs, &y[i].d, &du);
        y[i].s = ul_fp16_to_fp32(ul_fp32_to_fp16((float)s * du));
    }
}

static void xq_q8k(const float *x, void *dst, int64_t n) {
    blk_q8K *y = dst;
    const __m512 sign = _mm512_set1_ps(-0.0f);
    for (int64_t i = 0; i < n / QKK; i++, x += QKK) {
        __m512 m = _mm512_setzero_ps();
        for (int j = 0; j < QKK; j += 16)
            m = _mm512_max_ps(m, _mm512_andnot_ps(sign, _mm512_loadu_ps(x + j)));
        float iscale;
        if (!ul_q8k_iscale(x, _mm512_reduce_max_ps(m), &iscale)) {
            memset(&y[i], 0, sizeof(y[i]));
            continue;
        }
        const __m512 vs = _mm512_set1_ps(iscale);
        const __m512i lim = _mm512_set1_epi32(127);
        for (int j = 0; j < QKK; j += 16) {
            __m512i q = _mm512_min_epi32(
                _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + j), vs)), lim);
            _mm_storeu_si128((__m128i *)(y[i].qs + j), _mm512_cvtepi32_epi8(q));
            y[i].bsums[j / 16] = (int16_t)_mm512_reduce_add_epi32(q);
        }
        y[i].d = 1 / iscale;
    }
}

static void xq_f16r(const float *x, void *dst, int64_t n) {
    float *o = dst;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(o + i, _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_loadu_ps(x + i),
                                                                _MM_FROUND_TO_NEAREST_INT)));
    for (; i < n; i++) o[i] = ul_fp16_to_fp32(ul_fp32_to_fp16(x[i]));
}

static void xq_bf16(const float *x, void *dst, int64_t n) {
    /* integer rounding like ul_fp32_to_bf16 (vcvtneps2bf16 would flush denormals) */
    uint16_t *o = dst;
    int64_t i = 0;
    const __m512i abs = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
    for (; i + 16 <= n; i += 16) {
        __m512i u = _mm512_loadu_si512(x + i);
        __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, abs), inf);
        __m512i r = _mm512_add_epi32(
            u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff),
                                _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1))));
        r = _mm512_srli_epi32(r, 16);
        r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(64));
        _mm256_storeu_si256((__m256i *)(o + i), _mm512_cvtepi32_epi16(r));
    }
    for (; i < n; i++) o[i] = ul_fp32_to_bf16(x[i]);
}

const ul_cpu_kern_t ul_cpu_kern_avx512 = {.mm =
                                              {
                                                  [UL_TYPE_F32] = mm_f32,
                                                  [UL_TYPE_F16] = mm_f16,
                                                  [UL_TYPE_BF16] = mm_bf16,
                                                  [UL_TYPE_Q8_0] = mm_q8_0_any,
                                                  [UL_TYPE_Q4_0] = mm_q4_0_any,
                                                  [UL_TYPE_Q4_1] = ul_cpu_mm_q4_1_avx512,
                                                  [UL_TYPE_Q5_0] = ul_cpu_mm_q5_0_avx512,
                                                  [UL_TYPE_Q5_1] = ul_cpu_mm_q5_1_avx512,
                                                  [UL_TYPE_Q4_K] = mm_q4_K_any,
                                                  [UL_TYPE_Q5_K] = ul_cpu_mm_q5_K_avx512,
                                                  [UL_TYPE_Q6_K] = mm_q6_K_any,
                                                  [UL_TYPE_IQ4_NL] = ul_cpu_mm_iq4_nl_avx512,
                                                  [UL_TYPE_IQ4_XS] = ul_cpu_mm_iq4_xs_avx512,
                                              },
                                          .xq = {
                                              [XF_F16R] = xq_f16r,
                                              [XF_BF16] = xq_bf16,
                                              [XF_Q8A] = xq_q8a,
                                              [XF_Q8A1] = xq_q8a1,
                                              [XF_Q8K] = xq_q8k,
                                          }};
