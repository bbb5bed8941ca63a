/* Register-tile plumbing shared by the SIMD kernel files: a tile function
 * tile_NAME(NR, NT, ...) is written once with compile-time row/token counts and the
 * driver calls the right instance for each corner of the (rows x tokens) grid. */
#ifndef UL_CPU_KERNELS_TILE_H
#define UL_CPU_KERNELS_TILE_H

#define AI static inline __attribute__((always_inline))

/* Every SIMD kernel file is built with F16C: a block's f16 scale is one instruction instead
 * of a call into fp16.c per block (bit-exact: fp16.c matches F16C). The call cost the AVX2
 * K-quant decode kernels 17-20% of their time: a 2-layer Qwen3-30B-A3B-shaped q4_k_m decodes
 * at 53.1-54.9 t/s instead of 44.4-46.1 (3 alternating runs, 2 threads). */
#ifdef __F16C__
#include <immintrin.h>
#define ul_fp16_to_fp32(h) _cvtsh_ss(h)
#endif

/* Calls F(RN, TN, args) with compile-time RN <= 4, TN <= 4 so the tile is unrolled into
 * registers. */
#define DISPATCH(F, RN, TN, ...)                                                                   \
    switch (((RN)-1) * 4 + (TN)-1) {                                                               \
    case 0:                                                                                        \
        F(1, 1, __VA_ARGS__);                                                                      \
        break;                                                                                     \
    case 1:                                                                                        \
        F(1, 2, __VA_ARGS__);                                                                      \
        break;                                                                                     \
    case 2:                                                                                        \
        F(1, 3, __VA_ARGS__);                                                                      \
        break;                                                                                     \
    case 3:                                                                                        \
        F(1, 4, __VA_ARGS__);                                                                      \
        break;                                                                                     \
    case 4:                                                                                        \
        F(2, 1, __VA_ARGS__);                                                                      \
        break;                                                                                     \
    case 5:                                                                                        \
        F(2, 2, __VA_ARGS__);                                                                      \
        break;                                                                                     \
    case 6:                                                                                        \
        F(2, 3, __VA_ARGS__);                                                                      \
        break;                                                                                     \
    case 7:                                                                                        \
        F(2, 4, __VA_ARGS__);                                                                      \
        break;                                                                                     \
    case 8:                                                                                        \
        F(3, 1, __VA_ARGS__);                                                                      \
        break;                                                                                     \
    case 9:                                                                                        \
        F(3, 2, __VA_ARGS__);                                                                      \
        break;                                                                                     \
    case 10:                                                                                       \
        F(3, 3, __VA_ARGS__);                                                                      \
        break;                                                                                     \
    case 11:                                                                                       \
        F(3, 4, __VA_ARGS__);                                                                      \
        break;                                                                                     \
    case 12:                                                                                       \
        F(4, 1, __VA_ARGS__);                                                                      \
        break;                                                                                     \
    case 13:                                                                                       \
        F(4, 2, __VA_ARGS__);                                                                      \
        break;                                                                                     \
    case 14:                                                                                       \
        F(4, 3, __VA_ARGS__);                                                                      \
        break;                                                                                     \
    default:                                                                                       \
        F(4, 4, __VA_ARGS__);                                                                      \
        break;                                                                                     \
    }

/* Calls F(NT, args) with a compile-time token count NT: nt for 1 to 5, 6 for any other nt
 * (the packed drivers' tiles of up to 6 tokens). */
#define DISPATCH_NT_CASE(F, NT, ...)                                                               \
    case NT:                                                                                       \
        F(NT, __VA_ARGS__);                                                                        \
        break;
#define DISPATCH_NT6(F, nt, ...)                                                                   \
    switch (nt) {                                                                                  \
        DISPATCH_NT_CASE(F, 1, __VA_ARGS__)                                                        \
        DISPATCH_NT_CASE(F, 2, __VA_ARGS__)                                                        \
        DISPATCH_NT_CASE(F, 3, __VA_ARGS__)                                                        \
        DISPATCH_NT_CASE(F, 4, __VA_ARGS__)                                                        \
        DISPATCH_NT_CASE(F, 5, __VA_ARGS__)                                                        \
    default:                                                                                       \
        F(6, __VA_ARGS__);                                                                         \
        break;                                                                                     \
    }

/* The tile driver: tokens in chunks of TCHUNK (their activations stay in L2), within a
 * chunk rows in groups of RMAX (the group stays in L1) while the token groups of TMAX
 * stream past it. MM_DRIVER_FN names the function (with its linkage: `static void mm_x`,
 * or an entry point of kernels_impl.h) and its tile, and passes any further arguments (a
 * tile's compile-time kind) after the tile's own: tile(NR, NT, n_cols, ..., ys, kind). */
#define TCHUNK 32
#define MM_DRIVER_FN(decl, tile, RMAX, TMAX, ...)                                                  \
    decl(int64_t n_cols, const uint8_t *w, size_t ws, int nr, const uint8_t *x, size_t xs, int nt, \
         float *y, int64_t ys) {                                                                   \
        for (int t0 = 0; t0 < nt; t0 += TCHUNK) {                                                  \
            int t1 = nt - t0 < TCHUNK ? nt : t0 + TCHUNK;                                          \
            for (int r = 0; r < nr; r += RMAX) {                                                   \
                int rn = nr - r < RMAX ? nr - r : RMAX;                                            \
                for (int t = t0; t < t1; t += TMAX) {                                              \
                    int tn = t1 - t < TMAX ? t1 - t : TMAX;                                        \
                    DISPATCH(tile, rn, tn, n_cols, w + (size_t)r * ws, ws, x + (size_t)t * xs, xs, \
                             y + (int64_t)t * ys + r, ys, ##__VA_ARGS__);                          \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }
#define MM_DRIVER(name, RMAX, TMAX) MM_DRIVER_FN(static void mm_##name, tile_##name, RMAX, TMAX)

#define FOR_RT                                                                                     \
    _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++)                                           \
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++)

#endif
