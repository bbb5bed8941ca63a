/* Which (type, ISA) pairs have a packed layout (pack.h); a table whose mm is NULL means
 * none yet, and the type keeps the row layout. */
#include "cpu/pack.h"

#include "model/gguf.h"

const ul_pack_kern_t *ul_cpu_pack_kern(int type, ul_isa_t isa) {
    const ul_pack_kern_t *k = NULL;
    if (isa < UL_ISA_AVX512) return NULL;
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
