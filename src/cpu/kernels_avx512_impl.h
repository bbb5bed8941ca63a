/* Private to the AVX-512 kernel files (built with the AVX-512 flags, cpu.cmake): the small
 * always-inline helpers and index tables several of them use. */
#ifndef UL_CPU_KERNELS_AVX512_IMPL_H
#define UL_CPU_KERNELS_AVX512_IMPL_H

#include <immintrin.h>
#include <string.h>

#include "cpu/kernels_impl.h"
#include "cpu/kernels_tile.h"

AI __m512i join256(__m256i a, __m256i b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
}
AI __m512 halves_to_ps(uint16_t a, uint16_t b) { /* [a x8, b x8] */
    return _mm512_cvtph_ps(_mm256_set_m128i(_mm_set1_epi16((short)b), _mm_set1_epi16((short)a)));
}

/* ---- Q4_K / Q5_K super-blocks ---- */

/* v repeated, for the index tables */
#define UL_R8(v) v, v, v, v, v, v, v, v
#define UL_R16(v) UL_R8(v), UL_R8(v)

/* word i of the chunk-c scale vector is the scale of the element pair 2i of that chunk */
static const uint16_t k_q4k_idx[4][32] = {
    {UL_R16(0), UL_R16(1)}, {UL_R16(2), UL_R16(3)}, {UL_R16(4), UL_R16(5)}, {UL_R16(6), UL_R16(7)}};
static const uint16_t k_dup_idx[16] = {0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7};

/* scales (8 bytes) then mins (8 bytes) from the packed 12 (llama.cpp's utmp shuffle) */
AI void q4k_unpack_scales(const uint8_t *s12, uint8_t out[16]) {
    uint32_t u[4];
    memcpy(u, s12, 12);
    const uint32_t km1 = 0x3f3f3f3f, km2 = 0x0f0f0f0f, km3 = 0x03030303;
    u[3] = ((u[2] >> 4) & km2) | (((u[1] >> 6) & km3) << 4);
    const uint32_t aux = u[1] & km1;
    u[1] = (u[2] & km2) | (((u[0] >> 6) & km3) << 4);
    u[2] = aux;
    u[0] &= km1;
    memcpy(out, u, 16);
}

#endif
