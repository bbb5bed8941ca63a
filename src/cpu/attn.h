/* Private to the attention files (forward_attn.c, forward_attn_tiled.c and the per-ISA
 * kernels): the state of one attention work item and the kernels each ISA provides.
 *
 * Two algorithms, chosen per sequence of a step as llama.cpp's CPU flash-attention chooses
 * per batch (its tiled path from GGML_FA_TILE_Q = 64 query rows on):
 *  - per token (decode, short prompts): one (token, KV head) item walks the keys in chunks
 *    of 16 with the f16 roundings of llama.cpp's one-row path (forward_attn.c);
 *  - tiled (a sequence with >= UL_ATTN_TILE tokens in the step): one item is up to 64 query
 *    rows of one head against the keys in tiles of 64, all in f32, the scores and the
 *    output two small matrix products and an online softmax per tile
 *    (forward_attn_tiled.c). */
#ifndef UL_CPU_ATTN_H
#define UL_CPU_ATTN_H

#include <stddef.h>
#include <stdint.h>

#define UL_ATTN_CH 16   /* keys per chunk of the per-token path (one 16-lane score vector) */
#define UL_ATTN_TILE 64 /* query rows and keys per tile of the tiled path */

/* One per-token item's state: n_gqa query heads sharing one KV head. */
typedef struct ul_attn_s {
    int32_t G, hd, ps; /* heads, head_dim, page_size */
    float scale;
    float *acc;   /* [G][hd] V accumulator (f16 cache: f16 values, exactly representable) */
    float *qf;    /* [G][hd] the query, rounded to f16 for an f16 cache */
    float *vf;    /* [CH][hd] the chunk's V rows widened */
    float *kf;    /* [hd][CH] the chunk's keys widened */
    float *sc;    /* [G][CH] scores */
    float *M, *S; /* [G] running max and sum */
} ul_attn_t;

/* Keys [0, n) of one page (K transposed [hd][ps], V [ps][hd], f16 or f32) into the item's
 * state: the scalar reference (forward_attn.c, any hd), AVX-512 (hd 16, 32, 64, 96, 128,
 * 256) and AVX2 (below; hd a multiple of 8). */
void ul_attn_page_scalar(ul_attn_t *a, const void *K, const void *V, int n, int f16);
void ul_attn_page_avx512(ul_attn_t *a, const void *K, const void *V, int n, int f16);

/* Keys [0, n) of one page (K transposed [hd][ps], V [ps][hd], f16 or f32) into the item's
 * state, with the roundings of the scalar path; hd a multiple of 8. AVX2+FMA+F16C. */
void ul_attn_page_avx2(ul_attn_t *a, const void *K, const void *V, int n, int f16);

/* F16C conversions for the KV cache and the query (AVX2 + F16C; any ISA above too):
 * dst[i * stride] = f16(src[i]) (a V row: stride 1; a K column: stride page_size), and
 * dst[i] = f32(f16(src[i])), round to nearest even as ul_fp32_to_fp16. */
void ul_attn_store_f16_avx2(uint16_t *dst, size_t stride, const float *src, int n);
void ul_attn_round_f16_avx2(float *dst, const float *src, int n);

/* The tiled path's kernels (scalar reference and AVX2), over one tile of 64 keys:
 *  qk:      kq[r][j] = scale * sum_i q[r][i] k[i][j]   r < nq, j < 64; q [nq][hd], k [hd][64]
 *  softmax: for each row r: entries with masked[r] bits... see forward_attn_tiled.c: the
 *           row's scores kq[r][0..64) (already -inf where masked) update M[r], S[r], scale
 *           o[r] when M rises, and become probabilities
 *  pv:      o[r][d] += sum_{j < n} p[r][j] v[j][d]   d < hd; v [64][hd]
 *  cvt:     dst[i] = src[i] (f16 or f32) as f32, i < n */
typedef struct ul_attn_tile_kern_s {
    void (*qk)(const float *q, int nq, int hd, const float *k, float scale, float *kq);
    void (*softmax)(float *kq, int nq, float *o, int hd, float *M, float *S);
    void (*pv)(const float *p, int nq, const float *v, int n, int hd, float *o);
    void (*cvt)(float *dst, const void *src, int n, int f16);
} ul_attn_tile_kern_t;

extern const ul_attn_tile_kern_t ul_attn_tile_scalar;
extern const ul_attn_tile_kern_t ul_attn_tile_avx2;

#endif
