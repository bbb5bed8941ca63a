/* AVX-512 packed Q4_0 / Q8_0 weights (pack.h): not written yet. */
#include "cpu/pack.h"

const ul_pack_kern_t ul_pack_q4_0_avx512 = {0};
const ul_pack_kern_t ul_pack_q8_0_avx512 = {0};
