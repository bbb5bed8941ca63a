// Shared by the kernel files: the launcher epilogue. A launcher checks shapes, launches on
// its explicit stream and ends with launched(), which turns cudaGetLastError() into 0 or
// UL_EIO; the failed kernel and CUDA's message stay readable through ul_gpu_launch_error()
// on the launching thread (the C side logs them: no logging from here).
#ifndef UL_GPU_LAUNCH_CUH
#define UL_GPU_LAUNCH_CUH

#include <cuda_runtime.h>

#include "gpu/gpu.h"
#include "gpu/twin.h"
#include "uvllm/err.h"

struct ul_gpu_launch_err {
    const char *kernel;
    cudaError_t err;
};
inline thread_local ul_gpu_launch_err ul_gpu_tls_launch_err = {nullptr, cudaSuccess};

static inline int launched(const char *what) {
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return 0;
    ul_gpu_tls_launch_err.kernel = what;
    ul_gpu_tls_launch_err.err = e;
    return UL_EIO;
}

static inline cudaStream_t as_stream(void *s) { return (cudaStream_t)s; }

// Warp-wide sum (all lanes get it).
static __device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

#endif
