/* Q5_K x Q8K on AVX-512 (BW, VNNI): the Q4_K tile of kernels_avx512.c with the fifth bit
 * of every element (qh, bit j of byte l for sub-block j) ORed into the nibbles as 16;
 * vpmaddubsw then vpdpwssd with the sub-block scales, the mins through the activation
 * sums per 16. For one to three tokens the AVX2 kernel is faster (as for Q4_K: its
 * per-super-block setup is cheaper) and is used instead. */
#include <immintrin.h>
#include <string.h>

#include "cpu/kernels_avx512_impl.h"
#include "cpu/kernels_impl.h"
#include "cpu/kernels_tile.h"

MM_DRIVER_FN(static void mm_q5_K, tile_kq, 2, 4, KQ_Q5_K)

void ul_cpu_mm_q5_K_avx512(int64_t n_cols, const uint8_t *w, size_t ws, int nr, const uint8_t *x,
                           size_t xs, int nt, float *y, int64_t ys) {
    (nt < 4 ? ul_cpu_mm_q5_K_avx2 : mm_q5_K)(n_cols, w, ws, nr, x, xs, nt, y, ys);
}
