// Greedy sampling on the device: one block per logits row reduces (max, lowest id, sum of
// exp) with twin.h's merge, the same tie rule as ul_sample; the log-softmax of the chosen
// token comes with it.
#include "gpu/launch.cuh"

static __device__ ul_tw_amax_t warp_amax(ul_tw_amax_t a) {
    for (int o = 16; o > 0; o >>= 1) {
        ul_tw_amax_t b;
        b.max = __shfl_xor_sync(0xffffffffu, a.max, o);
        b.id = __shfl_xor_sync(0xffffffffu, a.id, o);
        b.sum = __shfl_xor_sync(0xffffffffu, a.sum, o);
        a = ul_tw_amax_merge(a, b);
    }
    return a;
}

static __global__ void argmax(const float *logits, int n_vocab, int32_t *ids, float *logprob) {
    __shared__ ul_tw_amax_t part[32];
    const float *l = logits + (int64_t)blockIdx.x * n_vocab;
    ul_tw_amax_t a;
    a.max = -INFINITY;
    a.id = -1;
    a.sum = 0.0f;
    for (int i = threadIdx.x; i < n_vocab; i += blockDim.x)
        a = ul_tw_amax_merge(a, ul_tw_amax_one(l[i], i));
    a = warp_amax(a);
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = a;
    __syncthreads();
    if (threadIdx.x < 32) {
        ul_tw_amax_t b;
        b.max = -INFINITY;
        b.id = -1; // the identity of the merge
        b.sum = 0.0f;
        if (threadIdx.x < blockDim.x / 32) b = part[threadIdx.x];
        b = warp_amax(b);
        if (threadIdx.x == 0) {
            ids[blockIdx.x] = b.id;
            logprob[blockIdx.x] = -logf(b.sum); // l[id] - (max + log sum), l[id] == max
        }
    }
}

extern "C" int ul_gpu_argmax(const float *logits, int32_t n_rows, int32_t n_vocab, int32_t *ids,
                             float *logprob, void *stream) {
    if (!stream || n_rows < 0 || n_vocab <= 0) return UL_EINVAL;
    if (n_rows == 0) return 0;
    argmax<<<(unsigned)n_rows, 256, 0, as_stream(stream)>>>(logits, n_vocab, ids, logprob);
    return launched("argmax");
}

// Full sampling (every parameter of ul_sample): one block per sampled row; the block copies
// the row into its scratch, then thread 0 runs twin.h's chain, sequential as on the CPU so
// that the same state draws the same token. Correct first: the sequential walk over the
// vocabulary is not tuned (no GPU has measured it).
static __global__ void sample_rows(const float *logits, int n_vocab, ul_tw_sample_t *rows,
                                   const int32_t *hist, const int32_t *bias_ids,
                                   const float *bias_vals, float *pl, int32_t *counts,
                                   ul_tw_cand_t *cand) {
    ul_tw_sample_t *s = rows + blockIdx.x;
    const float *l = logits + (int64_t)s->row * n_vocab;
    float *p = pl + (int64_t)blockIdx.x * n_vocab;
    for (int i = threadIdx.x; i < n_vocab; i += blockDim.x) p[i] = l[i];
    __syncthreads();
    if (threadIdx.x == 0)
        ul_tw_sample_row(s, l, p, n_vocab, hist, bias_ids, bias_vals,
                         counts + (int64_t)blockIdx.x * n_vocab,
                         cand + (int64_t)blockIdx.x * n_vocab);
}

extern "C" int ul_gpu_sample(const float *logits, int32_t n_vocab, ul_tw_sample_t *rows,
                             int32_t n_rows, const int32_t *hist, const int32_t *bias_ids,
                             const float *bias_vals, float *pl, int32_t *counts,
                             ul_tw_cand_t *cand, void *stream) {
    if (!stream || n_rows < 0 || n_vocab <= 0) return UL_EINVAL;
    if (n_rows == 0) return 0;
    sample_rows<<<(unsigned)n_rows, 256, 0, as_stream(stream)>>>(
        logits, n_vocab, rows, hist, bias_ids, bias_vals, pl, counts, cand);
    return launched("sample_rows");
}
