/* AVX2 packed Q4_K and Q5_K weights (pack.h, kernels_avx2_pack_k.h): each 16-row group is two
 * halves of 8 rows, a half one record per super-block (256 columns), activations in Q8K.
 *
 * Q4_K half record (1184 B; the 8 rows' blocks are 1152 B):
 *   +0    8 f16 d, +16 8 f16 dmin
 *   +32   the 6-bit scales, byte 8 j + r = scale of sub-block j (32 weights) of row r
 *   +96   the 6-bit mins in pairs, byte 16 i + 2 r + e = min of sub-block 2 i + e of row r,
 *         so a zero-extended 16-byte load is lane r = (m_2i, m_2i+1), a vpmaddwd operand
 *   +160  the nibbles, 4 chunks of 64 weights, each 8 vectors: in vector k of chunk c, lane
 *         r holds bytes 32 c + 4 k.. + 3 of row r's qs as stored, so the low nibbles are
 *         weights 64 c + 4 k.. (sub-block 2 c) and the high ones 64 c + 32 + 4 k.. (2 c + 1)
 * Q5_K adds, at +1184, the fifth bits (256 B): for chunk c and nibble half e, a vector where
 * bit k of lane r's byte b is the fifth bit of byte b of weight vector k.
 *
 * Per sub-block, 8 rows and one token: 8 vpmaddubsw against the activation's 4-byte groups
 * broadcast from memory, added in int16 (Q5_K: in two runs of 4), one vpmaddwd by the
 * sub-block scales, one add into the super-block's int32 sum, which is scaled in float by
 * d * d_x. The mins term dmin * sum_j m_j * bsum_j (bsum_j: the activation's sum over
 * sub-block j) is 4 vpmaddwd per super-block and token against the bsum pairs, which the
 * driver computes once per token for all the groups of a call. */
#include "cpu/kernels_avx2_pack_k.h"

#define Q4K_HREC 1184
#define Q5K_HREC 1440
#define QS_OFF 160
/* the driver's helper bytes: 8 int16 bsum pairs per super-block, passes of 64 */
#define Q45_AUXB 16
#define Q45_KB 64

static size_t gb_q4_K(int64_t n_cols) { return (size_t)(n_cols / QKK) * 2 * Q4K_HREC; }
static size_t gb_q5_K(int64_t n_cols) { return (size_t)(n_cols / QKK) * 2 * Q5K_HREC; }

/* One super-block of 8 rows (row r's block at rows + r * rs) into rec. Q5_K's block shares
 * Q4_K's head (d, dmin, scales); qs and qh are passed apart. */
static void pack_rec(int q5, const uint8_t *rows, size_t rs, int64_t b, uint8_t *rec) {
    memset(rec, 0, q5 ? Q5K_HREC : Q4K_HREC);
    for (int r = 0; r < HALF_ROWS; r++) {
        const uint8_t *blk =
            rows + (size_t)r * rs + (size_t)b * (q5 ? sizeof(blk_q5_K) : sizeof(blk_q4_K));
        const blk_q4_K *k4 = (const blk_q4_K *)blk;
        const blk_q5_K *k5 = (const blk_q5_K *)blk;
        const uint8_t *qs = q5 ? k5->qs : k4->qs;
        memcpy(rec + 2 * r, &k4->d, 2);
        memcpy(rec + 16 + 2 * r, &k4->dmin, 2);
        for (int j = 0; j < 8; j++) {
            uint8_t sc, mn;
            ul_q4k_scale_min(j, k4->scales, &sc, &mn);
            rec[32 + 8 * j + r] = sc;
            rec[96 + 16 * (j / 2) + 2 * r + j % 2] = mn;
        }
        for (int c = 0; c < 4; c++)
            for (int k = 0; k < 8; k++)
                memcpy(rec + QS_OFF + 256 * c + 32 * k + 4 * r, qs + 32 * c + 4 * k, 4);
        if (!q5) continue;
        /* weight 32 j + l has bit j of qh[l]; here j = 2 c + e, l = 4 k + bb */
        for (int c = 0; c < 4; c++)
            for (int e = 0; e < 2; e++)
                for (int k = 0; k < 8; k++)
                    for (int bb = 0; bb < 4; bb++)
                        rec[Q4K_HREC + 64 * c + 32 * e + 4 * r + bb] |=
                            (uint8_t)(((k5->qh[4 * k + bb] >> (2 * c + e)) & 1) << k);
    }
}

static void pack_any(int q5, const uint8_t *rows, size_t rs, int64_t n_cols, uint8_t *dst) {
    const int64_t nb = n_cols / QKK;
    const size_t hrec = q5 ? Q5K_HREC : Q4K_HREC;
    for (int h = 0; h < 2; h++)
        for (int64_t b = 0; b < nb; b++)
            pack_rec(q5, rows + (size_t)(HALF_ROWS * h) * rs, rs, b,
                     dst + ((size_t)h * (size_t)nb + (size_t)b) * hrec);
}
static void pack_q4_K(const uint8_t *rows, size_t rs, int64_t n_cols, uint8_t *dst) {
    pack_any(0, rows, rs, n_cols, dst);
}
static void pack_q5_K(const uint8_t *rows, size_t rs, int64_t n_cols, uint8_t *dst) {
    pack_any(1, rows, rs, n_cols, dst);
}

/* The driver's per-token helper: for each super-block, bsum_j = bsums[2 j] + bsums[2 j + 1]
 * as 8 int16, so the dword i is the pair (bsum_2i, bsum_2i+1) the mins multiply. */
AI void prep_bsums(const uint8_t *x, uint8_t *aux, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) {
        const int16_t *bs = ((const blk_q8K *)x + b)->bsums;
        const __m128i s = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)bs),
                                         _mm_loadu_si128((const __m128i *)(bs + 8)));
        _mm_store_si128((__m128i *)(aux + (b - b0) * Q45_AUXB), s);
    }
}

/* Weight vector k of sub-block 2 c + e of a record: the nibbles (and fifth bits). */
AI __m256i q45_w(const int Q5, const uint8_t *rec, int c, int e, int k) {
    const __m256i v = _mm256_load_si256((const __m256i *)(rec + QS_OFF + 256 * c + 32 * k));
    __m256i w = _mm256_and_si256(e ? _mm256_srli_epi16(v, 4) : v, _mm256_set1_epi8(0x0F));
    if (Q5) { /* bit k of each byte to bit 4: 16-bit shifts never carry a kept bit across */
        const __m256i h = _mm256_load_si256((const __m256i *)(rec + Q4K_HREC + 64 * c + 32 * e));
        const __m256i hs = k < 4    ? _mm256_slli_epi16(h, 4 - k)
                           : k == 4 ? h
                                    : _mm256_srli_epi16(h, k - 4);
        w = _mm256_or_si256(w, _mm256_and_si256(hs, _mm256_set1_epi8(0x10)));
    }
    return w;
}

/* 8 rows x NT tokens of Q4_K (Q5: Q5_K) over super-blocks [b0, b1). */
AI void tile_q45(const int Q5, const int NT, const uint8_t *w, int64_t b0, int64_t b1,
                 const uint8_t *x, size_t xs, const uint8_t *aux, float *y, int64_t ys, int add) {
    const size_t hrec = Q5 ? Q5K_HREC : Q4K_HREC;
    __m256 acc[PK_NT];
    acc_init(NT, acc, y, ys, add);
    for (int64_t b = b0; b < b1; b++) {
        const uint8_t *rec = w + (size_t)b * hrec;
        prefetch_rec(NT, rec, hrec);
        const int8_t *xq[PK_NT];
        __m256i isum[PK_NT];
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
            xq[t] = ((const blk_q8K *)(x + (size_t)t * xs) + b)->qs;
            isum[t] = _mm256_setzero_si256();
        }
        for (int c = 0; c < 4; c++) {
            _Pragma("GCC unroll 2") for (int e = 0; e < 2; e++) {
                const int j = 2 * c + e;
                const __m256i sc = scale_dup_u8(rec + 32 + 8 * j);
                __m256i s16[PK_NT];
                _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) s16[t] =
                    _mm256_setzero_si256();
                _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) {
                    const __m256i wk = q45_w(Q5, rec, c, e, k);
                    _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) s16[t] =
                        acc16(s16[t], _mm256_maddubs_epi16(wk, bcast4(xq[t] + 32 * j + 4 * k)));
                    if (Q5 && k == 3) /* four 5-bit products are as many as int16 holds */
                        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
                            isum[t] = acc32(isum[t], _mm256_madd_epi16(s16[t], sc));
                            s16[t] = _mm256_setzero_si256();
                        }
                }
                _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) isum[t] =
                    acc32(isum[t], _mm256_madd_epi16(s16[t], sc));
            }
        }
        const __m256 d = ld_f16x8(rec), dmin = ld_f16x8(rec + 16);
        __m256i mn[4];
        _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) mn[i] =
            _mm256_cvtepu8_epi16(_mm_load_si128((const __m128i *)(rec + 96 + 16 * i)));
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
            const uint8_t *a = aux + ((size_t)t * Q45_KB + (size_t)(b - b0)) * Q45_AUXB;
            __m256i m01 = _mm256_add_epi32(_mm256_madd_epi16(mn[0], bcast4(a)),
                                           _mm256_madd_epi16(mn[1], bcast4(a + 4)));
            __m256i m23 = _mm256_add_epi32(_mm256_madd_epi16(mn[2], bcast4(a + 8)),
                                           _mm256_madd_epi16(mn[3], bcast4(a + 12)));
            const __m256 dx = _mm256_set1_ps(((const blk_q8K *)(x + (size_t)t * xs) + b)->d);
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_mul_ps(d, dx), acc[t]);
            acc[t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(m01, m23)),
                                      _mm256_mul_ps(dmin, dx), acc[t]);
        }
    }
    acc_store(NT, acc, y, ys);
}

#define TILE_Q4K(NT, ...) tile_q45(0, NT, __VA_ARGS__)
#define TILE_Q5K(NT, ...) tile_q45(1, NT, __VA_ARGS__)
PK_MM(q4_K, TILE_Q4K, n_cols / QKK, gb_q4_K(n_cols) / 2, Q45_AUXB, Q45_KB, prep_bsums)
PK_MM(q5_K, TILE_Q5K, n_cols / QKK, gb_q5_K(n_cols) / 2, Q45_AUXB, Q45_KB, prep_bsums)

const ul_pack_kern_t ul_pack_q4_K_avx2 = {gb_q4_K, pack_q4_K, mm_q4_K};
const ul_pack_kern_t ul_pack_q5_K_avx2 = {gb_q5_K, pack_q5_K, mm_q5_K};
