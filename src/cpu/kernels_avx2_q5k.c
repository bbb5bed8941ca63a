/* Q5_K x Q8K on AVX2 (+FMA, F16C): the Q4_K tile of kernels_avx2.c (tile_q45_K,
 * kernels_avx2_impl.h) with the fifth bits. Also used by the AVX-512 path for one to three
 * tokens, as Q4_K's is. */
#include <immintrin.h>

#include "cpu/kernels_avx2_impl.h"

AI void tile_q5_K(const int NR, const int NT, int64_t n_cols, const uint8_t *w, size_t ws,
                  const uint8_t *x, size_t xs, float *y, int64_t ys) {
    tile_q45_K(1, NR, NT, n_cols, w, ws, x, xs, y, ys);
}
MM_DRIVER(q5_K, 1, 4)

void ul_cpu_mm_q5_K_avx2(int64_t n_cols, const uint8_t *w, size_t ws, int nr, const uint8_t *x,
                         size_t xs, int nt, float *y, int64_t ys) {
    mm_q5_K(n_cols, w, ws, nr, x, xs, nt, y, ys);
}
