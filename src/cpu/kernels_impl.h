/* Private to the kernel files: the block layouts (ggml's, bit-exact, for weights; our own
 * for quantised activations), the per-ISA kernel table, and the scalar helpers the SIMD
 * files share. The forward pass only sees kernels.h. */
#ifndef UL_CPU_KERNELS_IMPL_H
#define UL_CPU_KERNELS_IMPL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cpu/kernels.h"
#include "uvllm/log.h"

/* A float's bit pattern and back (memcpy: no aliasing trouble, one move once optimised). */
static inline uint32_t ul_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float ul_f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* The loop of the SIMD top-k kernels (ul_topk_avx2's contract, kernels.h): k picks of argmax
 * (the index of the first largest of p[0..n), n a multiple of 8, or -1 when none compares
 * above -inf), each pick taken out of the row as -inf; a refused row is restored. Inlined
 * with the caller's static argmax. */
static inline int ul_topk_picks(float *p, int n, int k, int32_t *sel, float *val,
                                int (*argmax)(const float *p, int n)) {
    if (n % 8 || k > n) return -1;
    for (int j = 0; j < k; j++) {
        const int i = argmax(p, n);
        if (i < 0) { /* leave p as it was */
            while (j-- > 0) p[sel[j]] = val[j];
            return -1;
        }
        sel[j] = i;
        val[j] = p[i];
        p[i] = -INFINITY;
    }
    return 0;
}

#define QK 32   /* Q8_0 / Q4_0 block */
#define QKK 256 /* K-quant super-block */

/* ---- weight blocks (ggml layout, little-endian, packed) ---- */
typedef struct {
    uint16_t d;
    int8_t qs[QK];
} blk_q8_0; /* 34 B */
typedef struct {
    uint16_t d;
    uint8_t qs[QK / 2];
} blk_q4_0; /* 18 B */
typedef struct {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qs[QKK / 2];
} blk_q4_K; /* 144 B */
typedef struct {
    uint16_t d, m; /* w = d * q + m */
    uint8_t qs[QK / 2];
} blk_q4_1; /* 20 B */
typedef struct {
    uint16_t d;
    uint8_t qh[4]; /* u32 LE, bit j: the fifth bit of element j */
    uint8_t qs[QK / 2];
} blk_q5_0; /* 22 B: w = d * (q - 16) */
typedef struct {
    uint16_t d, m;
    uint8_t qh[4];
    uint8_t qs[QK / 2];
} blk_q5_1; /* 24 B: w = d * q + m */
typedef struct {
    uint16_t d, dmin;
    uint8_t scales[12];  /* as Q4_K */
    uint8_t qh[QKK / 8]; /* bit j of byte l: the fifth bit of element 32 j + l */
    uint8_t qs[QKK / 2]; /* low nibbles as Q4_K */
} blk_q5_K;              /* 176 B */
typedef struct {
    uint8_t ql[QKK / 2];
    uint8_t qh[QKK / 4];
    int8_t scales[QKK / 16];
    uint16_t d;
} blk_q6_K; /* 210 B */
/* IQ4_NL / IQ4_XS: 4-bit indices into the non-linear table ul_iq4nl_values (w = d * v[q]),
 * element j of a 32-block in the low nibble of qs[j], element j + 16 in the high one. */
typedef struct {
    uint16_t d;
    uint8_t qs[QK / 2];
} blk_iq4_nl; /* 18 B */
typedef struct {
    uint16_t d;
    uint16_t scales_h;          /* bits 2 ib, 2 ib + 1: the high 2 bits of sub-block ib's scale */
    uint8_t scales_l[QKK / 64]; /* nibble ib % 2 of byte ib / 2: its low 4 bits */
    uint8_t qs[QKK / 2];        /* eight 32-blocks as IQ4_NL's qs */
} blk_iq4_xs;                   /* 136 B: w = d * (scale_ib - 32) * v[q] */

/* glibc's expf table (expf_tab.c), shared by the vector expf kernels that reproduce it. */
extern const uint64_t ul_expf_tab[32];

/* ggml's kvalues_iq4nl: the 16 levels of IQ4_NL / IQ4_XS (signed, ascending). */
extern const int8_t ul_iq4nl_values[16];

/* ---- quantised activations (internal; never stored in a file) ----
 * Q8A: the Q8_0 scheme (d rounded through f16 exactly as llama.cpp stores it) plus the
 * block's integer sum, so the Q4_0 VNNI kernel can use unsigned nibbles and subtract
 * 8*sum once per block instead of re-centring every weight. */
typedef struct {
    float d;
    int32_t nsum; /* minus the sum of qs: the accumulator start the kernels want */
    int8_t qs[QK];
} blk_q8a; /* 40 B */
/* Q8A1: the Q8A quants and d, with llama.cpp's block_q8_1.s instead of the sum: the
 * block's integer sum times the UNROUNDED scale amax/127, rounded through f16 (kept as
 * f32). The Q4_1 / Q5_1 dot products add their min m as m * s, as llama.cpp's
 * vec_dot_q{4,5}_1_q8_1 do. */
typedef struct {
    float d;
    float s;
    int8_t qs[QK];
} blk_q8a1; /* 40 B */
/* Q8K: ggml's block_q8_K (f32 d, sums per 16 for the K-quant mins). */
typedef struct {
    float d;
    int8_t qs[QKK];
    int16_t bsums[QKK / 16];
} blk_q8K; /* 292 B */

/* Which activation format a weight type's dot product consumes. */
typedef enum { XF_F32, XF_F16R, XF_BF16, XF_Q8A, XF_Q8A1, XF_Q8K } ul_xfmt_t;
/* XF_F16R: f32 values rounded through f16 (llama.cpp multiplies f16 weights by f16
 * activations; keeping them as f32 saves a conversion per load). */

/* Tile kernel: y[t * y_stride + r] = dot(W row r, X row t) for r < n_rows, t < n_tok.
 * w: n_rows rows of w_stride bytes; x: n_tok activation rows of x_stride bytes in the
 * type's ul_xfmt_t. Each ISA blocks rows x tokens as it likes inside. */
typedef void ul_mm_kern(int64_t n_cols, const uint8_t *w, size_t w_stride, int n_rows,
                        const uint8_t *x, size_t x_stride, int n_tok, float *y, int64_t y_stride);
typedef ul_mm_kern *ul_mm_fn;

/* Converts n activations (a multiple of the format's block) into format f. */
typedef void (*ul_xq_fn)(const float *x, void *dst, int64_t n);

typedef struct {
    ul_mm_fn mm[UL_TYPE_COUNT];
    ul_xq_fn xq[XF_Q8K + 1]; /* optional: must produce the scalar version's exact bytes */
} ul_cpu_kern_t;

extern const ul_cpu_kern_t ul_cpu_kern_scalar;
extern const ul_cpu_kern_t ul_cpu_kern_avx2;
extern const ul_cpu_kern_t ul_cpu_kern_avx512;
/* AArch64 (kernels_neon*.c): NEON, + sdot, + smmla */
extern const ul_cpu_kern_t ul_cpu_kern_neon;
extern const ul_cpu_kern_t ul_cpu_kern_dotprod;
extern const ul_cpu_kern_t ul_cpu_kern_i8mm;
/* The table of isa (only the target architecture's are linked in; scalar otherwise). */
const ul_cpu_kern_t *ul_cpu_kern(ul_isa_t isa);
/* The ISA whose table fills isa's gaps: AVX-512 -> AVX2, i8mm -> dotprod -> NEON, and the
 * lowest of each family -> scalar (scalar -> scalar). */
ul_isa_t ul_cpu_isa_parent(ul_isa_t isa);
/* Kernel for (type, isa), falling back to the scalar one where an ISA lacks it. */
ul_mm_fn ul_cpu_mm_fn(int type, ul_isa_t isa);

/* The x86 kernels in files of their own, for the ISA tables of kernels_avx2.c and
 * kernels_avx512.c: Q4_1 / Q5_0 / Q5_1 (kernels_avx2_q4_1_q5.c, kernels_avx512_q4_1_q5.c),
 * Q5_K (kernels_avx2_q5k.c, kernels_avx512_q5k.c), IQ4_NL / IQ4_XS (kernels_avx2_iq4.c,
 * kernels_avx512_iq4.c). */
ul_mm_kern ul_cpu_mm_q4_1_avx2, ul_cpu_mm_q5_0_avx2, ul_cpu_mm_q5_1_avx2, ul_cpu_mm_q5_K_avx2;
ul_mm_kern ul_cpu_mm_iq4_nl_avx2, ul_cpu_mm_iq4_xs_avx2;
ul_mm_kern ul_cpu_mm_q4_1_avx512, ul_cpu_mm_q5_0_avx512, ul_cpu_mm_q5_1_avx512;
ul_mm_kern ul_cpu_mm_q5_K_avx512, ul_cpu_mm_iq4_nl_avx512, ul_cpu_mm_iq4_xs_avx512;

ul_xfmt_t ul_cpu_xfmt(int type);
size_t ul_cpu_xrow_bytes(ul_xfmt_t f, int64_t n);
/* Converts one activation row into format f (n a multiple of the format's block) with the
 * active ISA's converter; the _isa variant picks one (tests compare them). */
void ul_cpu_quant_x(ul_xfmt_t f, const float *x, void *dst, int64_t n);
void ul_cpu_quant_x_isa(ul_xfmt_t f, ul_isa_t isa, const float *x, void *dst, int64_t n);

/* Reference quantisers with llama.cpp's semantics when no importance matrix is given
 * (quant_k.c: quantize_row_q{4,5,6}_K_ref; quant_iq4.c: quantize_iq4_nl / _xs). nb blocks
 * of the type from nb * block elements of x. */
void ul_cpu_quant_q4_K(const float *x, blk_q4_K *y, int64_t nb);
void ul_cpu_quant_q5_K(const float *x, blk_q5_K *y, int64_t nb);
void ul_cpu_quant_q6_K(const float *x, blk_q6_K *y, int64_t nb);
void ul_cpu_quant_iq4_nl(const float *x, blk_iq4_nl *y, int64_t nb);
void ul_cpu_quant_iq4_xs(const float *x, blk_iq4_xs *y, int64_t nb);
void ul_cpu_dequant_iq4_nl(const blk_iq4_nl *b, float *y, int64_t nb);
void ul_cpu_dequant_iq4_xs(const blk_iq4_xs *b, float *y, int64_t nb);

/* Sub-block ib's (0..7) signed scale of an IQ4_XS block (the stored 6 bits minus 32). */
static inline int ul_iq4xs_scale(const blk_iq4_xs *b, int ib) {
    return (((b->scales_l[ib / 2] >> 4 * (ib % 2)) & 0xF) | (((b->scales_h >> 2 * ib) & 3) << 4)) -
           32;
}

/* The 32 fifth bits of a Q5_0 / Q5_1 block. */
static inline uint32_t ul_q5_qh(const uint8_t qh[4]) {
    return (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
}

/* The kinds of the Q4_1 / Q5_0 / Q5_1 tiles (kernels_avx2_q4_1_q5.c,
 * kernels_avx512_q4_1_q5.c) and their block sizes */
enum { K_Q4_1, K_Q5_0, K_Q5_1 };
static inline size_t lin_blk_bytes(int kind) {
    return kind == K_Q4_1 ? sizeof(blk_q4_1) : kind == K_Q5_0 ? sizeof(blk_q5_0) : sizeof(blk_q5_1);
}

/* Q4_K 6-bit scales/mins of sub-block j (ggml get_scale_min_k4). */
/* The Q8K scale of a super-block x[0..QKK) whose largest magnitude amax the caller's SIMD max
 * found: *iscale = -127 / the first element of that magnitude (the one quant.c's scalar loop
 * keeps). 0 when the block quantises to all zeros (amax 0, or a denormal max whose iscale
 * overflows), else 1. */
static inline int ul_q8k_iscale(const float *x, float amax, float *iscale) {
    if (amax == 0) return 0;
    float max = 0;
    for (int j = 0; j < QKK; j++)
        if (x[j] == amax || x[j] == -amax) {
            max = x[j];
            break;
        }
    *iscale = -127.f / max;
    return !isinf(*iscale);
}

static inline void ul_q4k_scale_min(int j, const uint8_t *q, uint8_t *d, uint8_t *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4);
    }
}

#endif
