/* AVX2 + FMA + F16C kernels. */
#include "cpu/kernels_impl.h"

const ul_cpu_kern_t ul_cpu_kern_avx2 = {.mm = {0}};
