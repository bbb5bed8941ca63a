// Dequantising matrix-vector products for decode: one warp per weight row, lanes stride
// the row's elements (twin.h's ul_tw_dq), warp-reduced; each warp serves every token of
// the step so the row is read from memory once.
#include "gpu/launch.cuh"

#define MV_TOK 8 // tokens per pass: the accumulators a lane keeps in registers

static __global__ void matvec(int type, const uint8_t *w, int64_t row_bytes, int64_t n_rows,
                              int64_t n_cols, const float *x, int n_tok, float *y) {
    const int64_t r = blockIdx.x * (int64_t)(blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (r >= n_rows) return;
    const uint8_t *row = w + r * row_bytes;
    for (int t0 = 0; t0 < n_tok; t0 += MV_TOK) {
        float acc[MV_TOK];
        const int nt = n_tok - t0 < MV_TOK ? n_tok - t0 : MV_TOK;
        for (int j = 0; j < MV_TOK; j++) acc[j] = 0.0f;
        for (int64_t k = lane; k < n_cols; k += 32) {
            const float wk = ul_tw_dq(type, row, k);
            for (int j = 0; j < MV_TOK; j++)
                if (j < nt) acc[j] += wk * x[(int64_t)(t0 + j) * n_cols + k];
        }
        for (int j = 0; j < MV_TOK; j++) {
            const float s = warp_sum(acc[j]);
            if (lane == 0 && j < nt) y[(int64_t)(t0 + j) * n_rows + r] = s;
        }
    }
}

extern "C" int ul_gpu_matvec(int type, const void *w, int64_t n_rows, int64_t n_cols,
                             const float *x, int32_t n_tok, float *y, void *stream) {
    if (!stream || n_rows <= 0 || n_cols <= 0 || n_tok <= 0 || ul_tw_block_bytes(type) == 0 ||
        n_cols % ul_tw_block_elems(type))
        return UL_EINVAL;
    const int warps = 8;
    matvec<<<(unsigned)((n_rows + warps - 1) / warps), warps * 32, 0, as_stream(stream)>>>(
        type, (const uint8_t *)w, ul_tw_row_bytes(type, n_cols), n_rows, n_cols, x, n_tok, y);
    return launched("matvec");
}
