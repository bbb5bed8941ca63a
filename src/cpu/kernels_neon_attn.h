/* The AArch64 NEON attention kernels (kernels_neon_attn.c) for ops.c's AArch64 table. */
#ifndef UL_CPU_KERNELS_NEON_ATTN_H
#define UL_CPU_KERNELS_NEON_ATTN_H

#include "cpu/attn.h"

/* The tiled path's kernels (attn.h): the products as 4-row x 16-column register tiles, the
 * softmax's exponentials those of glibc's expf (ul_expf8_neon), so each probability has the
 * scalar kernel's bits and only summation order differs. */
extern const ul_attn_tile_kern_t ul_attn_tile_neon;

/* The per-token path (attn.h's ul_attn_page_*): the scalar path's roundings key by key, the
 * dimensions 4 at a time; only the score's summation order differs. hd a multiple of 4. */
void ul_attn_page_neon(ul_attn_t *a, const void *K, const void *V, int n, int f16);

#endif
