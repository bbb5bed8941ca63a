/* Row-interleaved ("packed") weight layouts. GGUF stores a matrix row after row, which
 * makes a decode step read many short, separate row streams and spend its time unpacking
 * one block of one row per instruction. At load time the CPU backend may copy a weight
 * into groups of UL_PACK_ROWS rows where lane r of every vector belongs to row r: a
 * group is then one sequential stream, a token's activation is broadcast once for all
 * 16 rows, and the 16 results are stored as one vector (no horizontal sums).
 *
 * A type has a packed layout only where an ISA provides one; the layout is private to
 * that type's pack/mm pair (only they read it). Activations come in the type's usual
 * ul_cpu_xfmt format, so quantised activations are identical either way. */
#ifndef UL_CPU_PACK_H
#define UL_CPU_PACK_H

#include <stddef.h>
#include <stdint.h>

#include "cpu/kernels.h"

#define UL_PACK_ROWS 16

typedef struct {
    /* bytes of one packed group of 16 rows of n_cols (a multiple of 64; of 256 for K-quants) */
    size_t (*group_bytes)(int64_t n_cols);
    /* packs 16 rows in GGUF layout (row r at rows + r * row_stride) into dst */
    void (*pack)(const uint8_t *rows, size_t row_stride, int64_t n_cols, uint8_t *dst);
    /* y[t * ys + 16 * g + r] = dot(row 16 g + r, activation row t) for g < n_groups,
     * t < nt; wp: the first group; x: nt activation rows of xs bytes in the type's
     * ul_cpu_xfmt format. Blocks tokens and K as it likes. */
    void (*mm)(int64_t n_cols, const uint8_t *wp, int n_groups, const uint8_t *x, size_t xs, int nt,
               float *y, int64_t ys);
} ul_pack_kern_t;

/* The tail every packed Q4_0 / Q8_0 kernel file shares (kernels_avx2_pack.c,
 * kernels_avx512_pack.c, kernels_neon_pack_mull.c, kernels_neon_{dotprod,i8mm}_pack.c):
 * from the file's static gb_q4_0 / gb_q8_0, pack_rows(q8, ...) and mm_any(Q8, ...) (always inlined,
 * so Q8 is a constant in each instance), the two entries and the tables ul_pack_q4_0_##isa and
 * ul_pack_q8_0_##isa. A macro: the instances must be the file's own statics. */
#define UL_PACK_Q4_0_Q8_0_TABLES(isa)                                                              \
    static void pack_q4_0(const uint8_t *rows, size_t rs, int64_t n_cols, uint8_t *dst) {          \
        pack_rows(0, rows, rs, n_cols, dst);                                                       \
    }                                                                                              \
    static void pack_q8_0(const uint8_t *rows, size_t rs, int64_t n_cols, uint8_t *dst) {          \
        pack_rows(1, rows, rs, n_cols, dst);                                                       \
    }                                                                                              \
    static void mm_q4_0(int64_t n_cols, const uint8_t *wp, int n_groups, const uint8_t *x,         \
                        size_t xs, int nt, float *y, int64_t ys) {                                 \
        mm_any(0, n_cols, wp, n_groups, x, xs, nt, y, ys);                                         \
    }                                                                                              \
    static void mm_q8_0(int64_t n_cols, const uint8_t *wp, int n_groups, const uint8_t *x,         \
                        size_t xs, int nt, float *y, int64_t ys) {                                 \
        mm_any(1, n_cols, wp, n_groups, x, xs, nt, y, ys);                                         \
    }                                                                                              \
    const ul_pack_kern_t ul_pack_q4_0_##isa = {gb_q4_0, pack_q4_0, mm_q4_0};                       \
    const ul_pack_kern_t ul_pack_q8_0_##isa = {gb_q8_0, pack_q8_0, mm_q8_0}

/* One token over n_groups packed 16-row groups of gs elements each (the F16 packed layouts):
 * DEC(NG, n_cols, group, gs, x, y) with a compile-time NG, four groups at a time, then the
 * three, two or one left; group g's 16 outputs at y + 16 g. */
#define UL_PACK_DEC_GROUPS4(DEC, n_cols, w, gs, n_groups, x, y)                                    \
    do {                                                                                           \
        int gi_ = 0;                                                                               \
        for (; gi_ + 4 <= (n_groups); gi_ += 4)                                                    \
            DEC(4, n_cols, (w) + (size_t)gi_ * (gs), gs, x, (y) + 16 * gi_);                       \
        const uint16_t *g_ = (w) + (size_t)gi_ * (gs);                                             \
        switch ((n_groups)-gi_) {                                                                  \
        case 3:                                                                                    \
            DEC(3, n_cols, g_, gs, x, (y) + 16 * gi_);                                             \
            break;                                                                                 \
        case 2:                                                                                    \
            DEC(2, n_cols, g_, gs, x, (y) + 16 * gi_);                                             \
            break;                                                                                 \
        case 1:                                                                                    \
            DEC(1, n_cols, g_, gs, x, (y) + 16 * gi_);                                             \
            break;                                                                                 \
        default:                                                                                   \
            break;                                                                                 \
        }                                                                                          \
    } while (0)

/* The packed kernels of (type, isa), or NULL when that pair keeps the row layout. */
const ul_pack_kern_t *ul_cpu_pack_kern(int type, ul_isa_t isa);

/* kernels_avx2_pack.c: Q4_0 and Q8_0 (Q8A activations); kernels_avx2_pack_f16.c: F16 */
extern const ul_pack_kern_t ul_pack_q4_0_avx2;
extern const ul_pack_kern_t ul_pack_q8_0_avx2;
extern const ul_pack_kern_t ul_pack_f16_avx2;
/* The F16 layout of both ISAs (kernels_avx512_f16.c describes it): for every column k, the
 * 16 rows' halves; an odd column count is padded with a zero column. */
void ul_pack_f16_rows(const uint8_t *rows, size_t rs, int64_t n_cols, uint8_t *dst);

extern const ul_pack_kern_t ul_pack_q4_0_avx512;
extern const ul_pack_kern_t ul_pack_q8_0_avx512;
extern const ul_pack_kern_t ul_pack_f16_avx512;
/* kernels_avx512_pack_k.c: Q4_K, Q5_K and Q6_K (Q8K activations) */
extern const ul_pack_kern_t ul_pack_q4_K_avx512;
extern const ul_pack_kern_t ul_pack_q5_K_avx512;
extern const ul_pack_kern_t ul_pack_q6_K_avx512;
/* AVX2, Q8K activations: kernels_avx2_pack_k.c (Q4_K, Q5_K), kernels_avx2_pack_q6k.c (Q6_K),
 * kernels_avx2_pack_iq4.c (IQ4_XS; IQ4_NL with Q8A activations) */
extern const ul_pack_kern_t ul_pack_q4_K_avx2;
extern const ul_pack_kern_t ul_pack_q5_K_avx2;
extern const ul_pack_kern_t ul_pack_q6_K_avx2;
extern const ul_pack_kern_t ul_pack_iq4_xs_avx2;
extern const ul_pack_kern_t ul_pack_iq4_nl_avx2;

/* AArch64's packed layouts (kernels_neon_pack.c), NULL where a (type, ISA) has none */
/* Q4_0 and Q8_0 (Q8A activations): kernels_neon_pack_mull.c (plain NEON) and
 * kernels_neon_dotprod_pack.c (SDOT, dotprod CPUs) over one layout (kernels_neon_quads.h),
 * kernels_neon_i8mm_pack.c (SMMLA, i8mm CPUs) over its own */
extern const ul_pack_kern_t ul_pack_q4_0_neon;
extern const ul_pack_kern_t ul_pack_q8_0_neon;
extern const ul_pack_kern_t ul_pack_q4_0_dotprod;
extern const ul_pack_kern_t ul_pack_q8_0_dotprod;
extern const ul_pack_kern_t ul_pack_q4_0_i8mm;
extern const ul_pack_kern_t ul_pack_q8_0_i8mm;
const ul_pack_kern_t *ul_cpu_pack_kern_arm(int type, ul_isa_t isa);

#endif
