/* AVX2 packed Q6_K weights (pack.h, kernels_avx2_pack_k.h): each 16-row group is two halves
 * of 8 rows, a half one record per super-block (256 columns), activations in Q8K.
 *
 * Q6_K half record (1696 B; the 8 rows' blocks are 1680 B):
 *   +0    8 f16 d (+16 unused)
 *   +32   the int8 scales in pairs: byte 16 i + 2 r + e = scale of sub-block 2 i + e (16
 *         weights) of row r, so a sign-extended 16-byte load is lane r = (sc_2i, sc_2i+1):
 *         the vpmaddwd operand of the -32 offset against the activation's bsums pair
 *   +160  16 sub-blocks of 3 vectors V0, V1, V2: lane r of Vg holds the unsigned 6-bit
 *         weights 16 j + 4 g.. + 3 of row r in its low 6 bits, and in the top 2 bits of
 *         its 4 bytes the 2-bit pieces g of the weights 16 j + 12.. + 3 (the fourth group)
 * A weight vector is then one AND (groups 0-2) or eight ALU ops for the fourth; 6-bit
 * weights let two vpmaddubsw outputs share an int16 sum before the vpmaddwd by the
 * sub-block scale. The -32 of every weight is sum_j sc_j bsum_j per super-block and token,
 * subtracted in int32 before the one conversion to float. */
#include "cpu/kernels_avx2_pack_k.h"

#define Q6K_HREC 1696
#define Q6_W 160

static size_t gb_q6_K(int64_t n_cols) { return (size_t)(n_cols / QKK) * 2 * Q6K_HREC; }

/* The 256 unsigned 6-bit weights of a Q6_K block (ggml's dequantize_row_q6_K order). */
static void q6_unpack(const blk_q6_K *s, uint8_t q[QKK]) {
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const uint8_t a = s->ql[64 * h + l], b = s->ql[64 * h + 32 + l], hb = s->qh[32 * h + l];
            uint8_t *o = q + 128 * h + l;
            o[0] = (uint8_t)((a & 0xF) | (hb & 3) << 4);
            o[32] = (uint8_t)((b & 0xF) | ((hb >> 2) & 3) << 4);
            o[64] = (uint8_t)((a >> 4) | ((hb >> 4) & 3) << 4);
            o[96] = (uint8_t)((b >> 4) | ((hb >> 6) & 3) << 4);
        }
}

static void pack_rec(const uint8_t *rows, size_t rs, int64_t b, uint8_t *rec) {
    memset(rec, 0, Q6K_HREC);
    for (int r = 0; r < HALF_ROWS; r++) {
        const blk_q6_K *s = (const blk_q6_K *)(rows + (size_t)r * rs) + b;
        uint8_t q[QKK];
        q6_unpack(s, q);
        memcpy(rec + 2 * r, &s->d, 2);
        for (int j = 0; j < 16; j++) rec[32 + 16 * (j / 2) + 2 * r + j % 2] = (uint8_t)s->scales[j];
        for (int j = 0; j < 16; j++)
            for (int g = 0; g < 3; g++)
                for (int c = 0; c < 4; c++)
                    rec[Q6_W + 96 * j + 32 * g + 4 * r + c] =
                        (uint8_t)(q[16 * j + 4 * g + c] | ((q[16 * j + 12 + c] >> (2 * g)) & 3)
                                                              << 6);
    }
}

static void pack_q6_K(const uint8_t *rows, size_t rs, int64_t n_cols, uint8_t *dst) {
    const int64_t nb = n_cols / QKK;
    for (int h = 0; h < 2; h++)
        for (int64_t b = 0; b < nb; b++)
            pack_rec(rows + (size_t)(HALF_ROWS * h) * rs, rs, b,
                     dst + ((size_t)h * (size_t)nb + (size_t)b) * Q6K_HREC);
}

/* The 4 weight vectors of sub-block j. The top-2-bit pieces are masked in place and
 * shifted down in 16-bit lanes: a masked byte's bits move at most 6 places right, never
 * into the other byte of the lane. */
AI void q6_w(const uint8_t *rec, int j, __m256i W[4]) {
    const __m256i m6 = _mm256_set1_epi8(0x3F), hi2 = _mm256_set1_epi8((char)0xC0);
    const uint8_t *p = rec + Q6_W + 96 * j;
    const __m256i v0 = _mm256_load_si256((const __m256i *)p);
    const __m256i v1 = _mm256_load_si256((const __m256i *)(p + 32));
    const __m256i v2 = _mm256_load_si256((const __m256i *)(p + 64));
    W[0] = _mm256_and_si256(v0, m6);
    W[1] = _mm256_and_si256(v1, m6);
    W[2] = _mm256_and_si256(v2, m6);
    __m256i t =
        _mm256_or_si256(_mm256_srli_epi16(_mm256_and_si256(v0, hi2), 2), _mm256_and_si256(v1, hi2));
    t = _mm256_or_si256(_mm256_srli_epi16(t, 2), _mm256_and_si256(v2, hi2));
    W[3] = _mm256_srli_epi16(t, 2);
}

/* 8 rows x NT tokens over super-blocks [b0, b1). */
AI void tile_q6(const int NT, const uint8_t *w, int64_t b0, int64_t b1, const uint8_t *x, size_t xs,
                const uint8_t *aux, float *y, int64_t ys, int add) {
    (void)aux;
    /* lane r = (sc_2i, sc_2i+1) -> (sc_2i, sc_2i) or (sc_2i+1, sc_2i+1) */
    const __m256i dup0 = _mm256_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13, 0, 1,
                                          0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13);
    const __m256i dup1 = _mm256_add_epi8(dup0, _mm256_set1_epi8(2));
    __m256 acc[PK_NT];
    acc_init(NT, acc, y, ys, add);
    for (int64_t b = b0; b < b1; b++) {
        const uint8_t *rec = w + (size_t)b * Q6K_HREC;
        prefetch_rec(NT, rec, Q6K_HREC);
        const blk_q8K *xb[PK_NT];
        __m256i isum[PK_NT], off[PK_NT];
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
            xb[t] = (const blk_q8K *)(x + (size_t)t * xs) + b;
            isum[t] = _mm256_setzero_si256();
            off[t] = _mm256_setzero_si256();
        }
        for (int i = 0; i < 8; i++) {
            const __m256i scp =
                _mm256_cvtepi8_epi16(_mm_load_si128((const __m128i *)(rec + 32 + 16 * i)));
            _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) off[t] =
                acc32(off[t], _mm256_madd_epi16(scp, bcast4(xb[t]->bsums + 2 * i)));
            _Pragma("GCC unroll 2") for (int e = 0; e < 2; e++) {
                const int j = 2 * i + e;
                const __m256i sc = _mm256_shuffle_epi8(scp, e ? dup1 : dup0);
                __m256i W[4];
                q6_w(rec, j, W);
                _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
                    const int8_t *q = xb[t]->qs + 16 * j;
                    const __m256i s0 = _mm256_add_epi16(_mm256_maddubs_epi16(W[0], bcast4(q)),
                                                        _mm256_maddubs_epi16(W[1], bcast4(q + 4)));
                    const __m256i s1 = _mm256_add_epi16(_mm256_maddubs_epi16(W[2], bcast4(q + 8)),
                                                        _mm256_maddubs_epi16(W[3], bcast4(q + 12)));
                    isum[t] = acc32(isum[t], _mm256_add_epi32(_mm256_madd_epi16(s0, sc),
                                                              _mm256_madd_epi16(s1, sc)));
                }
            }
        }
        const __m256 d = ld_f16x8(rec);
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
            const __m256i s = _mm256_sub_epi32(isum[t], _mm256_slli_epi32(off[t], 5));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s),
                                     _mm256_mul_ps(d, _mm256_set1_ps(xb[t]->d)), acc[t]);
        }
    }
    acc_store(NT, acc, y, ys);
}

#define TILE_Q6K(NT, ...) tile_q6(NT, __VA_ARGS__)
PK_MM(q6_K, TILE_Q6K, n_cols / QKK, gb_q6_K(n_cols) / 2, 0, 1, pk_prep_none)

const ul_pack_kern_t ul_pack_q6_K_avx2 = {gb_q6_K, pack_q6_K, mm_q6_K};
