/* AArch64's packed (row-interleaved) layouts: none yet, so every (type, ISA) keeps the
 * GGUF row layout and the row kernels of kernels_neon*.c. */
#include "cpu/kernels_neon.h"
#include "cpu/pack.h"

const ul_pack_kern_t *ul_cpu_pack_kern_arm(int type, ul_isa_t isa) {
    (void)type;
    (void)isa;
    return NULL;
}
