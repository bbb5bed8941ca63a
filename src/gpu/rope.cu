// RoPE, one thread per rotated pair: angle from twin.h (the CPU cache's arithmetic), NORM
// pairs (2p, 2p+1), NEOX pairs (p, p + n_rot/2).
#include "gpu/launch.cuh"

static __global__ void rope(float *x, const int32_t *pos, int n_head, int head_dim, int row_floats,
                            int n_rot, int neox, float base, float freq_scale, const float *ff) {
    const int t = blockIdx.x, half = n_rot / 2;
    for (int i = threadIdx.x; i < n_head * half; i += blockDim.x) {
        const int h = i / half, p = i % half;
        float *xh = x + (int64_t)t * row_floats + (int64_t)h * head_dim;
        const float th = ul_tw_rope_theta(pos[t], p, n_rot, base, freq_scale, ff);
        float *a = neox ? xh + p : xh + 2 * p, *b = neox ? xh + p + half : xh + 2 * p + 1;
        ul_tw_rope_pair(a, b, cosf(th), sinf(th));
    }
}

extern "C" int ul_gpu_rope(float *x, const int32_t *pos, int32_t n_tok, int32_t n_head,
                           int32_t head_dim, int32_t row_floats, int32_t n_rot, int neox,
                           float base, float freq_scale, const float *ff, void *stream) {
    if (!stream || n_tok < 0 || n_head <= 0 || n_rot <= 0 || n_rot % 2 || n_rot > head_dim ||
        row_floats < n_head * head_dim)
        return UL_EINVAL;
    if (n_tok == 0) return 0;
    rope<<<(unsigned)n_tok, 128, 0, as_stream(stream)>>>(x, pos, n_head, head_dim, row_floats,
                                                         n_rot, neox, base, freq_scale, ff);
    return launched("rope");
}
