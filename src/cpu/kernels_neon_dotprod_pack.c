/* AArch64 dotprod packed Q8_0 and Q4_0 weights over the quad layout (kernels_neon_quads.h:
 * the layout, the tile and why the results are the row kernels' bits): in every vector,
 * 32-bit lane r belongs to row r of a quad, so one SDOT by lane (vdotq_laneq_s32) adds 4
 * products of each of the quad's 4 rows for one token. Compiled with +dotprod (cpu.cmake's
 * kernels_neon_dotprod*.c), reached only through ul_cpu_pack_kern_arm at the dotprod ISA
 * (i8mm has its own layout, kernels_neon_i8mm_pack.c; plain NEON reads the same one with
 * widening multiplies, kernels_neon_pack_mull.c). */
#include "cpu/kernels_neon_quads.h"

/* lane L of x: the SDOT by lane needs a constant lane */
#define DOTL(acc, w, x, L) vdotq_laneq_s32(acc, w, x, L)

/* 4 chunks j0..j0+3 of one quad against the 16 activations xv (lane j - j0) */
AI int32x4_t dot4(int32x4_t acc, const uint8_t *v, int stride, const int8x16_t xv, int q4hi) {
    int8x16_t w[4];
    for (int j = 0; j < 4; j++) {
        const uint8x16_t u = vld1q_u8(v + (size_t)stride * j);
        w[j] = vreinterpretq_s8_u8(q4hi < 0 ? u
                                   : q4hi   ? vshrq_n_u8(u, 4)
                                            : vandq_u8(u, vdupq_n_u8(15)));
    }
    acc = DOTL(acc, w[0], xv, 0);
    acc = DOTL(acc, w[1], xv, 1);
    acc = DOTL(acc, w[2], xv, 2);
    acc = DOTL(acc, w[3], xv, 3);
    return acc;
}

AI int32x4_t quad_sums(const int Q8, const uint8_t *v, int8x16_t x0, int8x16_t x1) {
    int32x4_t s = vdupq_n_s32(0);
    if (Q8) return dot4(dot4(s, v, 64, x0, -1), v + 256, 64, x1, -1);
    return dot4(dot4(s, v, 64, x0, 0), v, 64, x1, 1);
}

UL_PACK_Q4_0_Q8_0_TABLES(dotprod);
