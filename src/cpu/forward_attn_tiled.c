/* The tiled attention path (attn.h): one work item is up to UL_ATTN_TILE consecutive
 * query rows (tokens of one sequence) of one query head, against the keys in tiles of
 * UL_ATTN_TILE. Per key tile: the tile's K and V are widened to f32 once (read through
 * the page table), the scores are one small matrix product, masked by causality and the
 * sliding window, an online softmax per row turns them into probabilities (rescaling the
 * row's output when its max rises), and the output gains one more matrix product. Tiles
 * no row can see are skipped.
 *
 * Numerics are llama.cpp's tiled CPU flash-attention (used from 64 query rows in a
 * batch): f32 throughout — the query unrounded, K and V widened from the f16 cache, an
 * f32 accumulator — the scale applied to the scores after the product. Each key is read
 * once per 64 query rows instead of once per row, so long prompts cost matrix-product
 * time instead of the per-key walk's f16 round trips. */
#include <math.h>
#include <string.h>

#include "cpu/attn.h"
#include "cpu/forward.h"

size_t ul_fwd_attn_tile_floats(int32_t head_dim) {
    /* q [T][hd] | kq [T][T] | o [T][hd] | k [hd][T] | v [T][hd] | M, S [T] */
    const size_t T = UL_ATTN_TILE, hd = (size_t)head_dim;
    return (4 * T * hd + T * T + 2 * T + 15) & ~(size_t)15;
}

/* ---------- scalar kernels (the reference) ---------- */

static void qk_scalar(const float *q, int nq, int hd, const float *k, float scale, float *kq) {
    for (int r = 0; r < nq; r++)
        for (int j = 0; j < UL_ATTN_TILE; j++) {
            float s = 0;
            for (int i = 0; i < hd; i++)
                s += q[(size_t)r * hd + i] * k[(size_t)i * UL_ATTN_TILE + j];
            kq[(size_t)r * UL_ATTN_TILE + j] = s * scale;
        }
}

static void softmax_scalar(float *kq, int nq, float *o, int hd, float *M, float *S) {
    for (int r = 0; r < nq; r++) {
        float *row = kq + (size_t)r * UL_ATTN_TILE, tmax = -INFINITY;
        for (int j = 0; j < UL_ATTN_TILE; j++) tmax = row[j] > tmax ? row[j] : tmax;
        if (tmax == -INFINITY) {
            memset(row, 0, UL_ATTN_TILE * sizeof *row);
            continue;
        }
        if (tmax > M[r]) {
            const float ms = expf(M[r] - tmax);
            for (int d = 0; d < hd; d++) o[(size_t)r * hd + d] *= ms;
            S[r] *= ms;
            M[r] = tmax;
        }
        float sum = 0;
        for (int j = 0; j < UL_ATTN_TILE; j++) {
            row[j] = row[j] == -INFINITY ? 0.0f : expf(row[j] - M[r]);
            sum += row[j];
        }
        S[r] += sum;
    }
}

static void pv_scalar(const float *p, int nq, const float *v, int n, int hd, float *o) {
    for (int r = 0; r < nq; r++)
        for (int j = 0; j < n; j++) {
            const float pj = p[(size_t)r * UL_ATTN_TILE + j];
            for (int d = 0; d < hd; d++) o[(size_t)r * hd + d] += pj * v[(size_t)j * hd + d];
        }
}

static void cvt_scalar(float *dst, const void *src, int n, int f16) {
    for (int i = 0; i < n; i++)
        dst[i] = f16 ? ul_fp16_to_fp32(((const uint16_t *)src)[i]) : ((const float *)src)[i];
}

const ul_attn_tile_kern_t ul_attn_tile_scalar = {qk_scalar, softmax_scalar, pv_scalar, cvt_scalar};

/* ---------- the item ---------- */

typedef struct {
    const ul_fwd_t *f;
    const ul_attn_tile_kern_t *k;
    const int32_t *pages;
    int il, kvh, hd, ps, f16;
    float *kt, *vt; /* [hd][T], [T][hd] */
} tile_src_t;

/* Keys [k0, k0 + n) of the sequence into kt / vt columns / rows 0..n. */
static void load_tile(const tile_src_t *s, int32_t k0, int n) {
    const size_t es = (size_t)s->f->kv.esize;
    for (int32_t k = k0; k < k0 + n;) {
        const int32_t page = s->pages[k / s->ps], slot = k % s->ps;
        const int cnt = s->ps - slot < k0 + n - k ? s->ps - slot : k0 + n - k;
        const uint8_t *K = ul_kv_head(&s->f->kv, page, s->il, 0, s->kvh),
                      *V = ul_kv_head(&s->f->kv, page, s->il, 1, s->kvh);
        for (int i = 0; i < s->hd; i++) /* K is [hd][ps] in a page */
            s->k->cvt(s->kt + (size_t)i * UL_ATTN_TILE + (k - k0),
                      K + ((size_t)i * s->ps + slot) * es, cnt, s->f16);
        s->k->cvt(s->vt + (size_t)(k - k0) * s->hd, V + (size_t)slot * s->hd * es, cnt * s->hd,
                  s->f16);
        k += cnt;
    }
}

/* Scores a row may not see become -inf: keys past the row's position, before its sliding
 * window (lo), and the tile's columns beyond its n keys. Returns 0 when nothing was
 * masked. */
static int mask_tile(float *kq, int nq, int32_t k0, int n, int32_t pos0, int32_t swa) {
    if (k0 + UL_ATTN_TILE - 1 <= pos0 && n == UL_ATTN_TILE &&
        (!swa || k0 >= pos0 + nq - 1 - swa + 1))
        return 0;
    for (int r = 0; r < nq; r++) {
        const int32_t pos = pos0 + r, lo = swa && pos >= swa ? pos - swa + 1 : 0;
        float *row = kq + (size_t)r * UL_ATTN_TILE;
        for (int j = 0; j < UL_ATTN_TILE; j++)
            if (j >= n || k0 + j > pos || k0 + j < lo) row[j] = -INFINITY;
    }
    return 1;
}

void ul_fwd_attn_tile(const ul_fwd_t *f, int il, int32_t t0, int32_t nq, int32_t hq, float *tmp) {
    const ul_step_seq_t *seq = &f->step->seqs[f->tok_seq[t0]];
    const int32_t hd = f->hp.head_dim, pos0 = f->tok_pos[t0], T = UL_ATTN_TILE;
    const int32_t swa = f->m->layers[il].swa ? f->hp.n_swa : 0;
    const ul_cpu_ops_t *ops = f->ops;
    while (!ops->attn_tile_hd(hd)) ops = ops->fallback;
    const ul_attn_tile_kern_t *k = ops->attn_tile;
    float *q = tmp, *kq = q + (size_t)T * hd, *o = kq + (size_t)T * T, *kt = o + (size_t)T * hd,
          *vt = kt + (size_t)T * hd, *M = vt + (size_t)T * hd, *S = M + T;
    /* gemma3/phi3 scale Q instead of the scores, as llama.cpp */
    const float qs = f->hp.q_scale, scale = qs > 0 ? 1.0f : 1.0f / sqrtf((float)hd);
    for (int32_t r = 0; r < nq; r++) {
        const float *src = f->q + (size_t)(t0 + r) * f->q_dim + (size_t)hq * hd;
        for (int32_t i = 0; i < hd; i++) q[(size_t)r * hd + i] = qs > 0 ? src[i] * qs : src[i];
        M[r] = -INFINITY;
        S[r] = 0;
    }
    memset(o, 0, (size_t)nq * hd * sizeof *o);
    const tile_src_t src = {
        f,  k, seq->pages, il, hq / f->n_gqa, hd, f->kv.page_size, f->kv.type == UL_TYPE_F16,
        kt, vt};
    const int32_t last = pos0 + nq - 1, first = swa && pos0 >= swa ? pos0 - swa + 1 : 0;
    for (int32_t k0 = first - first % T; k0 <= last; k0 += T) {
        const int n = last + 1 - k0 < T ? last + 1 - k0 : T;
        load_tile(&src, k0, n);
        k->qk(q, nq, hd, kt, scale, kq);
        mask_tile(kq, nq, k0, n, pos0, swa);
        k->softmax(kq, nq, o, hd, M, S);
        k->pv(kq, nq, vt, n, hd, o);
    }
    for (int32_t r = 0; r < nq; r++) {
        float *out = f->att + (size_t)(t0 + r) * f->q_dim + (size_t)hq * hd;
        const float inv = S[r] == 0 ? 0 : 1.0f / S[r];
        for (int32_t i = 0; i < hd; i++) out[i] = o[(size_t)r * hd + i] * inv;
    }
}
