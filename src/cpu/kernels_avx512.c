/* AVX-512 kernels. */
#include "cpu/kernels_impl.h"

const ul_cpu_kern_t ul_cpu_kern_avx512 = {.mm = {0}};
