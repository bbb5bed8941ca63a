/* AArch64's packed (row-interleaved) layouts of Q8_0 and Q4_0: quads of 4 rows
 * (kernels_neon_quads.h) read by SDOT by lane at the dotprod ISA
 * (kernels_neon_dotprod_pack.c) and by widening multiplies on plain NEON
 * (kernels_neon_pack_mull.c); row pairs for SMMLA at i8mm (kernels_neon_i8mm_pack.c).
 * Every other type keeps the GGUF row layout and the row kernels of kernels_neon*.c. */
#include "cpu/kernels_neon.h"
#include "cpu/pack.h"

const ul_pack_kern_t *ul_cpu_pack_kern_arm(int type, ul_isa_t isa) {
    int q8;
    switch (type) {
    case UL_TYPE_Q4_0:
        q8 = 0;
        break;
    case UL_TYPE_Q8_0:
        q8 = 1;
        break;
    default:
        return NULL;
    }
    switch (isa) {
    case UL_ISA_NEON:
        return q8 ? &ul_pack_q8_0_neon : &ul_pack_q4_0_neon;
    case UL_ISA_DOTPROD:
        return q8 ? &ul_pack_q8_0_dotprod : &ul_pack_q4_0_dotprod;
    case UL_ISA_I8MM:
        return q8 ? &ul_pack_q8_0_i8mm : &ul_pack_q4_0_i8mm;
    default:
        return NULL;
    }
}
