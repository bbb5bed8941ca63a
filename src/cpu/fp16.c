/* Scalar half <-> float conversions, bit-exact with the hardware (F16C, round to nearest
 * even, NaN payloads kept quiet) so weights and activations round the same way whichever
 * kernel path runs. BF16 follows ggml: round to nearest even, NaN forced quiet, no
 * flushing of denormals. */
#include <string.h>

#include "cpu/kernels_impl.h"

float ul_fp16_to_fp32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0x1f) /* inf, or nan made quiet as F16C does */
        return ul_f32_from_bits(sign | 0x7f800000 | (man ? 0x400000 : 0) | (man << 13));
    if (exp == 0) {
        if (man == 0) return ul_f32_from_bits(sign);
        /* denormal: exact in f32, value man * 2^-24 */
        float v = (float)man * 0x1p-24f;
        return sign ? -v : v;
    }
    return ul_f32_from_bits(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t ul_fp32_to_fp16(float f) {
    uint32_t u = ul_f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t a = u & 0x7fffffff;
    if (a > 0x7f800000) return sign | 0x7e00 | (uint16_t)((a >> 13) & 0x3ff); /* quiet nan */
    if (a >= 0x477ff000) return sign | 0x7c00; /* rounds to >= 65520: inf */
    if (a < 0x38800000) {
        /* result is a half denormal (or zero): scale so that the integer part is the
         * mantissa, then round to nearest even on the discarded bits */
        if (a < 0x33000000) return sign; /* below half of the smallest denormal */
        uint32_t e = a >> 23, m = (a & 0x7fffff) | 0x800000;
        int shift = (int)(126 - e) + 0; /* m * 2^(e-150) / 2^-24 = m >> (126 - e) */
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return sign | (uint16_t)q;
    }
    /* normal: rebias exponent, round 13 bits to nearest even (carry may bump exponent) */
    uint32_t r = a - 0x38000000;
    r += 0xfff + ((r >> 13) & 1);
    return sign | (uint16_t)(r >> 13);
}

float ul_bf16_to_fp32(uint16_t h) { return ul_f32_from_bits((uint32_t)h << 16); }

uint16_t ul_fp32_to_bf16(float f) {
    uint32_t u = ul_f32_bits(f);
    if ((u & 0x7fffffff) > 0x7f800000) return (uint16_t)((u >> 16) | 64);
    return (uint16_t)((u + (0x7fff + ((u >> 16) & 1))) >> 16);
}
