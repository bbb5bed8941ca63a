/* splitmix64 (Steele, Lea and Flood, 2014): the one 64-bit mixing function of the project.
 * ul_mix64 is its finaliser, a bijection of 64-bit words that spreads every input bit over
 * the output (hashing positions, ids, counters); ul_splitmix64 steps a stream, for seeding
 * larger generators (the samplers' xoshiro128++, the synthetic weights' xoshiro256).
 * Plain C11 and CUDA C++ alike (the GPU's sampling kernels include it through
 * engine/sample_chain.h): __host__ __device__ under nvcc, static inline in C. */
#ifndef UL_BASE_MIX_H
#define UL_BASE_MIX_H

#include <stdint.h>

#ifdef __CUDACC__
#define UL_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define UL_HOST_DEVICE static inline
#endif

#define UL_GOLDEN64 0x9e3779b97f4a7c15ull /* 2^64 / the golden ratio, splitmix's increment */

UL_HOST_DEVICE uint64_t ul_mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The next output of the stream whose state is *x (advanced). */
UL_HOST_DEVICE uint64_t ul_splitmix64(uint64_t *x) { return ul_mix64(*x += UL_GOLDEN64); }

#endif
