/* Which (type, ISA) pairs have a packed layout (pack.h); a table whose mm is NULL means
 * none yet, and the type keeps the row layout. */
#include "cpu/pack.h"

#include <string.h>

#include "model/gguf.h"

/* Compiled without ISA flags: the AVX2 and AVX-512 F16 layouts are the same bytes, and
 * packing must run on any CPU that reaches it. */
void ul_pack_f16_rows(const uint8_t *rows, size_t rs, int64_t n_cols, uint8_t *dst) {
    uint16_t *d = (uint16_t *)dst;
    for (int r = 0; r < UL_PACK_ROWS; r++) {
        const uint8_t *row = rows + (size_t)r * rs;
        for (int64_t k = 0; k < n_cols; k++) memcpy(d + k * 16 + r, row + 2 * k, 2);
    }
    if (n_cols & 1) memset(d + n_cols * 16, 0, 32);
}

#if defined(__x86_64__) || defined(__i386__)
/* AVX2's packed layouts; NULL keeps the row layout. */
static const ul_pack_kern_t *avx2_kern(int type) {
    switch (type) {
    case UL_TYPE_Q4_0:
        return &ul_pack_q4_0_avx2;
    case UL_TYPE_Q8_0:
        return &ul_pack_q8_0_avx2;
    case UL_TYPE_F16:
        return &ul_pack_f16_avx2;
    case UL_TYPE_Q4_K:
        return &ul_pack_q4_K_avx2;
    case UL_TYPE_Q5_K:
        return &ul_pack_q5_K_avx2;
    case UL_TYPE_Q6_K:
        return &ul_pack_q6_K_avx2;
    case UL_TYPE_IQ4_XS:
        return &ul_pack_iq4_xs_avx2;
    case UL_TYPE_IQ4_NL:
        return &ul_pack_iq4_nl_avx2;
    default:
        return NULL;
    }
}

static const ul_pack_kern_t *x86_kern(int type, ul_isa_t isa) {
    const ul_pack_kern_t *k = NULL;
    if (isa == UL_ISA_AVX2) return avx2_kern(type);
    if (isa != UL_ISA_AVX512) return NULL;
    switch (type) {
    case UL_TYPE_Q4_0:
        k = &ul_pack_q4_0_avx512;
        break;
    case UL_TYPE_Q8_0:
        k = &ul_pack_q8_0_avx512;
        break;
    case UL_TYPE_F16:
        k = &ul_pack_f16_avx512;
        break;
    case UL_TYPE_Q4_K:
        k = &ul_pack_q4_K_avx512;
        break;
    case UL_TYPE_Q5_K:
        k = &ul_pack_q5_K_avx512;
        break;
    case UL_TYPE_Q6_K:
        k = &ul_pack_q6_K_avx512;
        break;
    default:
        break;
    }
    return k && k->mm ? k : NULL;
}
#endif

const ul_pack_kern_t *ul_cpu_pack_kern(int type, ul_isa_t isa) {
#if defined(__x86_64__) || defined(__i386__)
    return x86_kern(type, isa);
#elif defined(__aarch64__)
    return ul_cpu_pack_kern_arm(type, isa);
#else
    (void)type;
    (void)isa;
    return NULL;
#endif
}
