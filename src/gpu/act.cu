// Element-wise activations: SwiGLU (twin.h) and the residual add; and the launch error
// accessor of gpu.h.
#include <stdio.h>

#include "gpu/launch.cuh"

static __global__ void swiglu(float *g, const float *u, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        g[i] = ul_tw_swiglu(g[i], u[i]);
}

static __global__ void add(float *x, const float *y, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        x[i] += y[i];
}

// x[r][i] += b[i]: a bias row added to every token's row (qwen2's q/k/v biases).
static __global__ void add_rows(float *x, const float *b, int64_t n_rows, int n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n_rows * n;
         i += (int64_t)gridDim.x * blockDim.x)
        x[i] += b[i % n];
}

static unsigned grid_for(int64_t n) {
    int64_t b = (n + 255) / 256;
    return (unsigned)(b < 1024 ? b : 1024);
}

extern "C" int ul_gpu_swiglu(float *g, const float *u, int64_t n, void *stream) {
    if (!stream || n < 0) return UL_EINVAL;
    if (n == 0) return 0;
    swiglu<<<grid_for(n), 256, 0, as_stream(stream)>>>(g, u, n);
    return launched("swiglu");
}

extern "C" int ul_gpu_add(float *x, const float *y, int64_t n, void *stream) {
    if (!stream || n < 0) return UL_EINVAL;
    if (n == 0) return 0;
    add<<<grid_for(n), 256, 0, as_stream(stream)>>>(x, y, n);
    return launched("add");
}

extern "C" int ul_gpu_add_rows(float *x, const float *b, int32_t n_rows, int32_t n, void *stream) {
    if (!stream || n_rows < 0 || n <= 0) return UL_EINVAL;
    if (n_rows == 0) return 0;
    add_rows<<<grid_for((int64_t)n_rows * n), 256, 0, as_stream(stream)>>>(x, b, n_rows, n);
    return launched("add_rows");
}

extern "C" const char *ul_gpu_launch_error(char *buf, int len) {
    const ul_gpu_launch_err &e = ul_gpu_tls_launch_err;
    snprintf(buf, (size_t)len, "%s: %s", e.kernel ? e.kernel : "none", cudaGetErrorString(e.err));
    return buf;
}
