// Paged attention over the scheduler's page tables, f16 KV. kv_store writes a step's K/V
// rows into their page slots; attn runs one warp per (token, query head): lanes split the
// head's dims, walk the token's positions 0..pos in order with twin.h's online softmax,
// so a decode token and a prefill chunk's tokens (causal by position) take the same path.
// Lane j holds dims j, j + 32, ... (coalesced reads of a K/V row), any head_dim <= 256.
#include <cuda_fp16.h>

#include "gpu/launch.cuh"

#define ATTN_MAX_DIM 256 // head_dim / 32 values per lane

static __device__ __forceinline__ int64_t kv_off(const ul_gpu_kv_t kv, int32_t page, int il,
                                                 int kind, int h, int slot) {
    return ul_tw_kv_off(page, il, kind, h, slot, kv.n_layer, kv.n_head_kv, kv.page_size,
                        kv.head_dim);
}

static __global__ void kv_store(ul_gpu_kv_t kv, int il, const float *k, const float *v,
                                const int32_t *pos, const int32_t *tok_seq, const int32_t *pages,
                                const int32_t *page_off) {
    const int t = blockIdx.x, dim = kv.n_head_kv * kv.head_dim;
    const int32_t p = pos[t], page = pages[page_off[tok_seq[t]] + p / kv.page_size];
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        const int h = i / kv.head_dim, d = i % kv.head_dim;
        const int64_t o = kv_off(kv, page, il, 0, h, p % kv.page_size) + d;
        kv.kv[o] = __half_as_ushort(__float2half_rn(k[(int64_t)t * dim + i]));
        kv.kv[o + (int64_t)kv.page_size * kv.head_dim * kv.n_head_kv] =
            __half_as_ushort(__float2half_rn(v[(int64_t)t * dim + i]));
    }
}

static __global__ void attn(ul_gpu_kv_t kv, int il, const float *q, int n_tok, int n_head,
                            const int32_t *pos, const int32_t *tok_seq, const int32_t *pages,
                            const int32_t *page_off, float scale, float *out) {
    const int warp = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    const int t = warp / n_head, h = warp % n_head;
    if (t >= n_tok) return; // whole warps: t is the warp's
    const int hd = kv.head_dim, per = (hd + 31) / 32, kvh = h / (n_head / kv.n_head_kv);
    const float *qh = q + ((int64_t)t * n_head + h) * hd;
    float qv[ATTN_MAX_DIM / 32], acc[ATTN_MAX_DIM / 32];
    for (int j = 0; j < per; j++) { // lane's dims: lane, lane + 32, ...
        const int d = lane + 32 * j;
        qv[j] = d < hd ? qh[d] : 0.0f;
        acc[j] = 0.0f;
    }
    const int32_t *pt = pages + page_off[tok_seq[t]];
    float m = -INFINITY, l = 0.0f;
    for (int32_t p = 0; p <= pos[t]; p++) {
        const int32_t page = pt[p / kv.page_size], slot = p % kv.page_size;
        const uint16_t *kr = kv.kv + kv_off(kv, page, il, 0, kvh, slot);
        const uint16_t *vr = kv.kv + kv_off(kv, page, il, 1, kvh, slot);
        float s = 0.0f;
        for (int j = 0; j < per; j++)
            if (lane + 32 * j < hd) s += qv[j] * ul_tw_f16(kr[lane + 32 * j]);
        s = warp_sum(s) * scale;
        float w;
        const float corr = ul_tw_softmax_step(&m, &l, s, &w);
        for (int j = 0; j < per; j++)
            if (lane + 32 * j < hd) acc[j] = acc[j] * corr + w * ul_tw_f16(vr[lane + 32 * j]);
    }
    float *o = out + ((int64_t)t * n_head + h) * hd;
    for (int j = 0; j < per; j++)
        if (lane + 32 * j < hd) o[lane + 32 * j] = acc[j] / l;
}

static int kv_ok(const ul_gpu_kv_t *kv) {
    return kv && kv->kv && kv->head_dim > 0 && kv->head_dim <= ATTN_MAX_DIM && kv->page_size > 0 &&
           kv->n_head_kv > 0 && kv->n_layer > 0;
}

extern "C" int ul_gpu_kv_store(const ul_gpu_kv_t *kv, int32_t il, const float *k, const float *v,
                               int32_t n_tok, const int32_t *pos, const int32_t *tok_seq,
                               const int32_t *pages, const int32_t *page_off, void *stream) {
    if (!stream || !kv_ok(kv) || il < 0 || il >= kv->n_layer || n_tok < 0) return UL_EINVAL;
    if (n_tok == 0) return 0;
    kv_store<<<(unsigned)n_tok, 256, 0, as_stream(stream)>>>(*kv, il, k, v, pos, tok_seq, pages,
                                                             page_off);
    return launched("kv_store");
}

extern "C" int ul_gpu_attn(const ul_gpu_kv_t *kv, int32_t il, const float *q, int32_t n_tok,
                           int32_t n_head, const int32_t *pos, const int32_t *tok_seq,
                           const int32_t *pages, const int32_t *page_off, float scale, float *out,
                           void *stream) {
    if (!stream || !kv_ok(kv) || il < 0 || il >= kv->n_layer || n_tok < 0 || n_tok > 65535 ||
        n_head <= 0 || n_head % kv->n_head_kv)
        return UL_EINVAL;
    if (n_tok == 0) return 0;
    const int warps = 4;
    const unsigned grid = (unsigned)(((int64_t)n_tok * n_head + warps - 1) / warps);
    attn<<<grid, warps * 32, 0, as_stream(stream)>>>(*kv, il, q, n_tok, n_head, pos, tok_seq, pages,
                                                     page_off, scale, out);
    return launched("attn");
}
