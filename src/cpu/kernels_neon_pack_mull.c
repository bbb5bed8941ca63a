/* Plain NEON (no SDOT: Armv8.0 cores such as Cortex-A72, Graviton 1) packed Q8_0 and Q4_0
 * weights over the dotprod kernels' quad layout (kernels_neon_quads.h: the layout, the tile
 * and why the results are the row kernels' bits). A chunk vector holds 4 bytes of each of 4
 * rows; the token's 4 matching activations are broadcast to every lane, so SMULL / SMULL2
 * (vmull_s8, vmull_high_s8) give 8 int16 products of rows 0-1 and 2-3, and SADALP
 * (vpadalq_s16) adds them pairwise into int32: per quad two accumulators of 2 lanes per
 * row, folded into one lane per row by one ADDP a block. The same bytes as dotprod's, so
 * one layout, one packer and one tile serve both ISAs; only this integer step differs.
 *
 * int16 never overflows: Q8_0 adds each product (|w x| <= 128 * 128) straight into int32;
 * Q4_0 first sums two products of unsigned nibbles (0..15) by int8 activations, at most
 * 2 * 15 * 128 = 3840 in magnitude, with SMLAL. */
#include "cpu/kernels_neon_quads.h"

/* activations 4j..4j+3 of x (a constant j after inlining) in every 32-bit lane */
AI int8x16_t bcast(int8x16_t x, const int j) {
    const int32x4_t v = vreinterpretq_s32_s8(x);
    switch (j) {
    case 0:
        return vreinterpretq_s8_s32(vdupq_laneq_s32(v, 0));
    case 1:
        return vreinterpretq_s8_s32(vdupq_laneq_s32(v, 1));
    case 2:
        return vreinterpretq_s8_s32(vdupq_laneq_s32(v, 2));
    default:
        return vreinterpretq_s8_s32(vdupq_laneq_s32(v, 3));
    }
}

AI int32x4_t quad_sums(const int Q8, const uint8_t *v, int8x16_t x0, int8x16_t x1) {
    int32x4_t lo = vdupq_n_s32(0), hi = vdupq_n_s32(0); /* rows 0-1, rows 2-3 */
    if (Q8) {
        for (int j = 0; j < 8; j++) {
            const int8x16_t w = vld1q_s8((const int8_t *)v + 64 * j);
            const int8x16_t xb = bcast(j < 4 ? x0 : x1, j & 3);
            lo = vpadalq_s16(lo, vmull_s8(vget_low_s8(w), vget_low_s8(xb)));
            hi = vpadalq_s16(hi, vmull_high_s8(w, xb));
        }
    } else {
        for (int j = 0; j < 4; j++) {
            const uint8x16_t u = vld1q_u8(v + 64 * j);
            const int8x16_t wl = vreinterpretq_s8_u8(vandq_u8(u, vdupq_n_u8(15)));
            const int8x16_t wh = vreinterpretq_s8_u8(vshrq_n_u8(u, 4));
            const int8x16_t xl = bcast(x0, j), xh = bcast(x1, j);
            int16x8_t pl = vmull_s8(vget_low_s8(wl), vget_low_s8(xl));
            int16x8_t ph = vmull_high_s8(wl, xl);
            pl = vmlal_s8(pl, vget_low_s8(wh), vget_low_s8(xh));
            ph = vmlal_high_s8(ph, wh, xh);
            lo = vpadalq_s16(lo, pl);
            hi = vpadalq_s16(hi, ph);
        }
    }
    return vpaddq_s32(lo, hi);
}

UL_PACK_Q4_0_Q8_0_TABLES(neon);
