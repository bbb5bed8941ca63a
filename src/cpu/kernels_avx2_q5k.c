/* Q5_K x Q8K on AVX2 (+FMA, F16C): the Q4_K tile of kernels_avx2.c (tile_q45_K,
 * kernels_avx2_impl.h) with the fifth bits. Also used by the AVX-512 path for one to three
 * tokens, as Q4_K's is. */
#include <immintrin.h>

#include "cpu/kernels_avx2_impl.h"

MM_DRIVER_FN(void ul_cpu_mm_q5_K_avx2, tile_q45_K, 1, 4, 1)
