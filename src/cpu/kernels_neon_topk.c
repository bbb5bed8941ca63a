/* The MoE router's top-k on AArch64 NEON (the ops table's topk, ul_topk_avx2's contract):
 * each pick is one pass of FMAX over the row, a lane reduction, and one pass of compares
 * for the first index holding that value, instead of the scalar scan per pick that also
 * rescans the picks already made. FMAX propagates NaN, so a row with a NaN (or nothing
 * above -inf left) is refused and the caller runs the scalar rule. Ties go to the lower
 * index as in the scalar code: the first lane equal to the maximum (+0 and -0 compare
 * equal there as in its `>`). */
#include <arm_neon.h>
#include <math.h>

#include "cpu/kernels_impl.h"

/* Index of the first largest p[i] (i < n, n a multiple of 8), or -1 when the largest does
 * not compare above -inf (a NaN in the row, or only -inf). */
static int argmax8(const float *p, int n) {
    float32x4_t m0 = vld1q_f32(p), m1 = vld1q_f32(p + 4);
    for (int i = 8; i < n; i += 8) {
        m0 = vmaxq_f32(m0, vld1q_f32(p + i));
        m1 = vmaxq_f32(m1, vld1q_f32(p + i + 4));
    }
    const float best = vmaxvq_f32(vmaxq_f32(m0, m1));
    if (!(best > -INFINITY)) return -1;
    const float32x4_t b = vdupq_n_f32(best);
    for (int i = 0; i < n; i += 4) {
        const uint32x4_t eq = vceqq_f32(vld1q_f32(p + i), b);
        if (vmaxvq_u32(eq))
            for (int l = 0; l < 4; l++)
                if (p[i + l] == best) return i + l;
    }
    return -1;
}

int ul_topk_neon(float *p, int n, int k, int32_t *sel, float *val) {
    return ul_topk_picks(p, n, k, sel, val, argmax8);
}
