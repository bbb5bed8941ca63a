/* AArch64's packed (row-interleaved) layouts: Q8_0 and Q4_0 at the dotprod ISA
 * (kernels_neon_dotprod_pack.c: SDOT by lane over quads of 4 rows) and at i8mm
 * (kernels_neon_i8mm_pack.c: SMMLA over row pairs, a layout of its own). Every other
 * (type, ISA), and plain NEON, keeps the GGUF row layout and the row kernels of
 * kernels_neon*.c. */
#include "cpu/kernels_neon.h"
#include "cpu/pack.h"

const ul_pack_kern_t *ul_cpu_pack_kern_arm(int type, ul_isa_t isa) {
    const int i8mm = isa == UL_ISA_I8MM;
    if (isa != UL_ISA_DOTPROD && !i8mm) return NULL;
    switch (type) {
    case UL_TYPE_Q4_0:
        return i8mm ? &ul_pack_q4_0_i8mm : &ul_pack_q4_0_dotprod;
    case UL_TYPE_Q8_0:
        return i8mm ? &ul_pack_q8_0_i8mm : &ul_pack_q8_0_dotprod;
    default:
        return NULL;
    }
}
