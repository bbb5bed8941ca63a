// Chained entries (gpu/chain.h): one thread per pair copies the previous step's sampled
// token into this step's token ids (and penalty window), and its RNG state into this step's
// sampled row (twin.h's ul_tw_chain_apply). A handful of pairs per step: one small block.
#include "gpu/launch.cuh"

static __global__ void chain_gather(const ul_tw_chain_t *pairs, int n, int32_t *tokens,
                                    const int32_t *ids, const ul_tw_sample_t *prev,
                                    ul_tw_sample_t *rows, int32_t *hist, int32_t *out) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) ul_tw_chain_apply(&pairs[i], tokens, ids, prev, rows, hist, &out[i]);
}

extern "C" int ul_gpu_chain(const ul_tw_chain_t *pairs, int32_t n, int32_t *tokens,
                            const int32_t *ids, const ul_tw_sample_t *prev, ul_tw_sample_t *rows,
                            int32_t *hist, int32_t *out, void *stream) {
    if (!stream || n < 0) return UL_EINVAL;
    if (n == 0) return 0;
    chain_gather<<<(unsigned)((n + 127) / 128), 128, 0, as_stream(stream)>>>(pairs, n, tokens, ids,
                                                                             prev, rows, hist, out);
    return launched("chain_gather");
}
