/* The router's top-k on AVX2 (+FMA, F16C): the k largest of n probabilities, each found by
 * one pass of vmaxps over the row and one of compares for its first index, instead of a
 * scalar scan per pick that also rescans the picks already made. */
#include <immintrin.h>
#include <math.h>

#include "cpu/kernels_avx2_impl.h"

/* Index of the first largest p[i] (i < n, n a multiple of 8), or -1 when none compares
 * greater than -inf (NaN rows). */
static int argmax8(const float *p, int n) {
    const float best = max_row8(p, n);
    if (!(best > -INFINITY)) return -1;
    const __m256 b = _mm256_set1_ps(best);
    for (int i = 0; i < n; i += 8) {
        const int mask = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(p + i), b, _CMP_EQ_OQ));
        if (mask) return i + __builtin_ctz((unsigned)mask);
    }
    return -1;
}

int ul_topk_avx2(float *p, int n, int k, int32_t *sel, float *val) {
    return ul_topk_picks(p, n, k, sel, val, argmax8);
}
