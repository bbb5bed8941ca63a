/* AVX2 packed IQ4_XS (x Q8K) and IQ4_NL (x Q8A, llama.cpp's Q8_0 activations) weights
 * (pack.h, kernels_avx2_pack_k.h): each 16-row group is two halves of 8 rows, each half's
 * records one after the other.
 *
 * In a nibble vector lane r holds 4 bytes of row r's qs as stored: within a 32-weight
 * block, the low nibbles are weights 4 v.. + 3 and the high ones 16 + 4 v.. + 3 (vector v
 * of the block). The nibbles index the 16 signed levels (one vpshufb), which do not fit
 * vpmaddubsw's unsigned operand, so the products take the sign trick the other way round:
 * vpmaddubsw(|x|, w * sign(x)), |x| computed once per token and call by the driver (so
 * a weight vector costs one lookup, not two), exact since |w|, |x| <= 127 keep a pair sum
 * within int16 (which is also why every vpmaddubsw output goes through its own vpmaddwd).
 *
 * IQ4_XS half record (1104 B, as the 8 rows' blocks): +0 the nibbles, 8 sub-blocks x 4
 * vectors; +1024 the signed 6-bit sub-block scales, byte 8 ib + r for sub-block ib of row r;
 * +1088 8 f16 d. The vpmaddwd applies the sub-block scale; one conversion per super-block.
 * IQ4_NL half: blocks in pairs of 288 B, [8 f16 d of block 2p][of 2p + 1][nibbles of 2p,
 * 4 vectors][of 2p + 1] (an odd last block leaves its pair's second half zero); the
 * vpmaddwd adds the pairs, and each block is scaled in float by d * d_x. */
#include "cpu/kernels_avx2_pack_k.h"

#define XS_HREC 1104
#define XS_SC 1024
#define XS_D 1088
#define NL_PAIR 288

static size_t gb_iq4_xs(int64_t n_cols) { return (size_t)(n_cols / QKK) * 2 * XS_HREC; }
static size_t nl_half(int64_t n_cols) { return (size_t)((n_cols / QK + 1) / 2) * NL_PAIR; }
static size_t gb_iq4_nl(int64_t n_cols) { return 2 * nl_half(n_cols); }

static void pack_iq4_xs(const uint8_t *rows, size_t rs, int64_t n_cols, uint8_t *dst) {
    const int64_t nb = n_cols / QKK;
    for (int h = 0; h < 2; h++)
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *rec = dst + ((size_t)h * (size_t)nb + (size_t)b) * XS_HREC;
            for (int r = 0; r < HALF_ROWS; r++) {
                const blk_iq4_xs *s =
                    (const blk_iq4_xs *)(rows + (size_t)(HALF_ROWS * h + r) * rs) + b;
                memcpy(rec + XS_D + 2 * r, &s->d, 2);
                for (int ib = 0; ib < 8; ib++) {
                    rec[XS_SC + 8 * ib + r] = (uint8_t)(int8_t)ul_iq4xs_scale(s, ib);
                    for (int v = 0; v < 4; v++)
                        memcpy(rec + 128 * ib + 32 * v + 4 * r, s->qs + 16 * ib + 4 * v, 4);
                }
            }
        }
}

static void pack_iq4_nl(const uint8_t *rows, size_t rs, int64_t n_cols, uint8_t *dst) {
    const int64_t nb = n_cols / QK;
    memset(dst, 0, gb_iq4_nl(n_cols));
    for (int h = 0; h < 2; h++)
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *pair = dst + (size_t)h * nl_half(n_cols) + (size_t)(b / 2) * NL_PAIR;
            for (int r = 0; r < HALF_ROWS; r++) {
                const blk_iq4_nl *s =
                    (const blk_iq4_nl *)(rows + (size_t)(HALF_ROWS * h + r) * rs) + b;
                memcpy(pair + 16 * (b % 2) + 2 * r, &s->d, 2);
                for (int v = 0; v < 4; v++)
                    memcpy(pair + 32 + 128 * (b % 2) + 32 * v + 4 * r, s->qs + 4 * v, 4);
            }
        }
}

/* The driver's helper bytes: each token's |activation bytes| (vpmaddubsw's unsigned
 * operand), per super-block (IQ4_XS) or 32-block (IQ4_NL), 16 KiB for 4 tokens a pass. */
#define XS_AUXB 256
#define XS_KB 16
#define NL_AUXB 32
#define NL_KB 128

AI void prep_abs_q8k(const uint8_t *x, uint8_t *aux, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) {
        const int8_t *q = ((const blk_q8K *)x + b)->qs;
        _Pragma("GCC unroll 8") for (int i = 0; i < QKK / 32; i++)
            _mm256_store_si256((__m256i *)(aux + (b - b0) * XS_AUXB + 32 * i),
                               _mm256_abs_epi8(_mm256_loadu_si256((const __m256i *)(q + 32 * i))));
    }
}
AI void prep_abs_q8a(const uint8_t *x, uint8_t *aux, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++)
        _mm256_store_si256(
            (__m256i *)(aux + (b - b0) * NL_AUXB),
            _mm256_abs_epi8(_mm256_loadu_si256((const __m256i *)((const blk_q8a *)x + b)->qs)));
}

/* The levels of the two nibble halves of the vector at p. */
AI void iq4_w(__m256i lv, const uint8_t *p, __m256i w[2]) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i v = _mm256_loadu_si256((const __m256i *)p);
    w[0] = _mm256_shuffle_epi8(lv, _mm256_and_si256(v, m4));
    w[1] = _mm256_shuffle_epi8(lv, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
}

/* int16 pair sums of w * x for the 4 activation bytes at q broadcast (a: their absolute
 * values): vpmaddubsw(|x|, w * sign(x)). */
AI __m256i iq4_dot(__m256i w, const int8_t *q, const uint8_t *a) {
    return _mm256_maddubs_epi16(bcast4(a), _mm256_sign_epi8(w, bcast4(q)));
}

AI __m256i load_levels(void) {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)ul_iq4nl_values));
}

/* IQ4_XS: 8 rows x NT tokens over super-blocks [b0, b1). */
AI void tile_xs(const int NT, const uint8_t *w, int64_t b0, int64_t b1, const uint8_t *x, size_t xs,
                const uint8_t *aux, float *y, int64_t ys, int add) {
    const __m256i lv = load_levels();
    __m256 acc[PK_NT];
    acc_init(NT, acc, y, ys, add);
    for (int64_t b = b0; b < b1; b++) {
        const uint8_t *rec = w + (size_t)b * XS_HREC;
        prefetch_rec(NT, rec, XS_HREC);
        const blk_q8K *xb[PK_NT];
        const uint8_t *xa[PK_NT];
        __m256i isum[PK_NT];
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
            xb[t] = (const blk_q8K *)(x + (size_t)t * xs) + b;
            xa[t] = aux + ((size_t)t * XS_KB + (size_t)(b - b0)) * XS_AUXB;
            isum[t] = _mm256_setzero_si256();
        }
        for (int ib = 0; ib < 8; ib++) {
            const __m256i sc = scale_dup_s8((const int8_t *)rec + XS_SC + 8 * ib);
            _Pragma("GCC unroll 4") for (int v = 0; v < 4; v++) {
                __m256i wv[2];
                iq4_w(lv, rec + 128 * ib + 32 * v, wv);
                const int o = 32 * ib + 4 * v;
                _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) isum[t] = acc32(
                    acc32(isum[t], _mm256_madd_epi16(iq4_dot(wv[0], xb[t]->qs + o, xa[t] + o), sc)),
                    _mm256_madd_epi16(iq4_dot(wv[1], xb[t]->qs + o + 16, xa[t] + o + 16), sc));
            }
        }
        const __m256 d = ld_f16x8(rec + XS_D);
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) acc[t] = _mm256_fmadd_ps(
            _mm256_cvtepi32_ps(isum[t]), _mm256_mul_ps(d, _mm256_set1_ps(xb[t]->d)), acc[t]);
    }
    acc_store(NT, acc, y, ys);
}

/* IQ4_NL: 8 rows x NT tokens over blocks [b0, b1) (b0 even: the driver's passes are). */
AI void tile_nl(const int NT, const uint8_t *w, int64_t b0, int64_t b1, const uint8_t *x, size_t xs,
                const uint8_t *aux, float *y, int64_t ys, int add) {
    const __m256i lv = load_levels(), one = _mm256_set1_epi16(1);
    __m256 acc[PK_NT];
    acc_init(NT, acc, y, ys, add);
    for (int64_t b = b0; b < b1; b++) {
        const uint8_t *pair = w + (size_t)(b / 2) * NL_PAIR;
        if (b % 2 == 0) prefetch_rec(NT, pair, NL_PAIR);
        const uint8_t *q4 = pair + 32 + 128 * (b % 2);
        const blk_q8a *xb[PK_NT];
        const uint8_t *xa[PK_NT];
        __m256i isum[PK_NT];
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
            xb[t] = (const blk_q8a *)(x + (size_t)t * xs) + b;
            xa[t] = aux + ((size_t)t * NL_KB + (size_t)(b - b0)) * NL_AUXB;
            isum[t] = _mm256_setzero_si256();
        }
        _Pragma("GCC unroll 4") for (int v = 0; v < 4; v++) {
            __m256i wv[2];
            iq4_w(lv, q4 + 32 * v, wv);
            _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) isum[t] = acc32(
                acc32(isum[t],
                      _mm256_madd_epi16(iq4_dot(wv[0], xb[t]->qs + 4 * v, xa[t] + 4 * v), one)),
                _mm256_madd_epi16(iq4_dot(wv[1], xb[t]->qs + 16 + 4 * v, xa[t] + 16 + 4 * v), one));
        }
        const __m256 d = ld_f16x8(pair + 16 * (b % 2));
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) acc[t] = _mm256_fmadd_ps(
            _mm256_cvtepi32_ps(isum[t]), _mm256_mul_ps(d, _mm256_set1_ps(xb[t]->d)), acc[t]);
    }
    acc_store(NT, acc, y, ys);
}

#define TILE_XS(NT, ...) tile_xs(NT, __VA_ARGS__)
#define TILE_NL(NT, ...) tile_nl(NT, __VA_ARGS__)
PK_MM(iq4_xs, TILE_XS, n_cols / QKK, gb_iq4_xs(n_cols) / 2, XS_AUXB, XS_KB, prep_abs_q8k)
PK_MM(iq4_nl, TILE_NL, n_cols / QK, nl_half(n_cols), NL_AUXB, NL_KB, prep_abs_q8a)

const ul_pack_kern_t ul_pack_iq4_xs_avx2 = {gb_iq4_xs, pack_iq4_xs, mm_iq4_xs};
const ul_pack_kern_t ul_pack_iq4_nl_avx2 = {gb_iq4_nl, pack_iq4_nl, mm_iq4_nl};
