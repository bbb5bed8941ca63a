// Dequantisation of weight rows to f32: embedding gather and the tiles cuBLAS multiplies.
// One thread per element through twin.h's ul_tw_dq, the formula the host tests check.
#include "gpu/launch.cuh"

static __global__ void dequant_rows(int type, const uint8_t *w, int64_t row_bytes, int64_t n_cols,
                                    const int32_t *rows, int64_t r0, float *dst) {
    const int64_t i = blockIdx.y;
    const int64_t r = rows ? rows[i] : r0 + i;
    const uint8_t *row = w + r * row_bytes;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n_cols;
         k += (int64_t)gridDim.x * blockDim.x)
        dst[i * n_cols + k] = ul_tw_dq(type, row, k);
}

extern "C" int ul_gpu_dequant_rows(int type, const void *w, int64_t n_cols, const int32_t *rows,
                                   int64_t r0, int32_t n_rows, float *dst, void *stream) {
    if (!stream || n_rows < 0 || n_rows > 65535 || n_cols <= 0 || ul_tw_block_bytes(type) == 0 ||
        n_cols % ul_tw_block_elems(type))
        return UL_EINVAL;
    if (n_rows == 0) return 0;
    int64_t blocks = (n_cols + 255) / 256;
    dim3 grid((unsigned)(blocks < 64 ? blocks : 64), (unsigned)n_rows);
    dequant_rows<<<grid, 256, 0, as_stream(stream)>>>(
        type, (const uint8_t *)w, ul_tw_row_bytes(type, n_cols), n_cols, rows, r0, dst);
    return launched("dequant_rows");
}
