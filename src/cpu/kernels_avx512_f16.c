/* AVX-512 packed F16 weights (pack.h): not written yet, so F16 keeps the row layout. */
#include "cpu/pack.h"

const ul_pack_kern_t ul_pack_f16_avx512 = {0};
