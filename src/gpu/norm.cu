// RMSNorm, one block per row: sum of squares reduced in the block, then twin.h's scale.
#include "gpu/launch.cuh"

static __global__ void rmsnorm(const float *x, const float *w, int n, float eps, float *y) {
    __shared__ float part[32];
    const float *xr = x + (int64_t)blockIdx.x * n;
    float *yr = y + (int64_t)blockIdx.x * n;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) ss += xr[i] * xr[i];
    ss = warp_sum(ss);
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = ss;
    __syncthreads();
    if (threadIdx.x < 32) {
        float v = threadIdx.x < blockDim.x / 32 ? part[threadIdx.x] : 0.0f;
        v = warp_sum(v);
        if (threadIdx.x == 0) part[0] = v;
    }
    __syncthreads();
    const float scale = ul_tw_rms_scale(part[0], n, eps);
    for (int i = threadIdx.x; i < n; i += blockDim.x) yr[i] = (xr[i] * scale) * w[i];
}

extern "C" int ul_gpu_rmsnorm(const float *x, const float *w, int32_t n_rows, int32_t n, float eps,
                              float *y, void *stream) {
    if (!stream || n_rows < 0 || n <= 0) return UL_EINVAL;
    if (n_rows == 0) return 0;
    rmsnorm<<<(unsigned)n_rows, 256, 0, as_stream(stream)>>>(x, w, n, eps, y);
    return launched("rmsnorm");
}
