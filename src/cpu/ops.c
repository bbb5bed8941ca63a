/* The forward pass's per-ISA pieces besides the matrix products (forward.h, ul_cpu_ops_t):
 * the scalar reference versions, and the table of each ISA. The forward pass picks its
 * table once (ul_fwd_create) and never compares ISAs itself, so a new ISA is one more
 * table here. Each SIMD entry gives the scalar entry's results, bit for bit unless its
 * test says otherwise (RMSNorm: one ulp; attention: per attn.h). */
#include <math.h>
#include <string.h>

#include "cpu/attn.h"
#include "cpu/forward.h"
#if defined(__aarch64__)
#include "cpu/kernels_neon_attn.h"
#endif

/* ---------- scalar ---------- */

static void rmsnorm_scalar(float *dst, const float *x, const float *w, int n, float eps) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (double)(x[i] * x[i]);
    const float scale = 1.0f / sqrtf((float)(ss / n) + eps);
    for (int i = 0; i < n; i++) dst[i] = (x[i] * scale) * w[i];
}

/* RoPE in NORM mode: adjacent pairs, cs as forward.c's rope cache */
static void rope_norm_scalar(float *x, const float *cs, int n_rot) {
    for (int i = 0; i < n_rot; i += 2) {
        float x0 = x[i], x1 = x[i + 1], c = cs[i], s = cs[i + 1];
        x[i] = x0 * c - x1 * s;
        x[i + 1] = x0 * s + x1 * c;
    }
}

static void swiglu_scalar(float *g, const float *u, size_t n) {
    for (size_t i = 0; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

static void geglu_scalar(float *g, const float *u, size_t n) { ul_fwd_geglu(g, u, n, 0); }

static void to_f16_scalar(uint16_t *dst, size_t stride, const float *src, int n) {
    for (int i = 0; i < n; i++) dst[(size_t)i * stride] = ul_fp32_to_fp16(src[i]);
}

static void round_f16_scalar(float *dst, const float *src, int n) {
    for (int i = 0; i < n; i++) dst[i] = ul_fp16_to_fp32(ul_fp32_to_fp16(src[i]));
}

static int any_hd(int hd) { return hd > 0; }

static void expf8_scalar(const float *x, float *y, int n) {
    for (int i = 0; i < n; i++) y[i] = expf(x[i]);
}

/* ggml_argsort_top_k's order: the largest not yet taken, ties to the lower index */
static int topk_scalar(float *p, int n, int k, int32_t *sel, float *val) {
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int i = 0; i < n; i++) {
            int taken = 0;
            for (int q = 0; q < j && !taken; q++) taken = sel[q] == i;
            if (!taken && (best < 0 || p[i] > p[best])) best = i;
        }
        sel[j] = best;
        val[j] = p[best];
    }
    return 0;
}

static const ul_cpu_ops_t k_scalar = {
    .rmsnorm = rmsnorm_scalar,
    .rope_norm = rope_norm_scalar,
    .rope_neox = ul_fwd_rope_neox,
    .swiglu = swiglu_scalar,
    .geglu = geglu_scalar,
    .to_f16 = to_f16_scalar,
    .round_f16 = round_f16_scalar,
    .attn_page = ul_attn_page_scalar,
    .attn_page_hd = any_hd,
    .attn_tile = &ul_attn_tile_scalar,
    .attn_tile_hd = any_hd,
    .expf8 = expf8_scalar,
    .topk = topk_scalar,
};

/* ---------- x86: AVX2 (+FMA, F16C), AVX-512 ---------- */

#if defined(__x86_64__) || defined(__i386__)
static int hd8(int hd) { return hd > 0 && hd % 8 == 0; }

static const ul_cpu_ops_t k_avx2 = {
    .rmsnorm = ul_rmsnorm_avx2,
    .rope_norm = ul_rope_norm_avx2,
    .rope_neox = ul_rope_neox_avx2,
    .swiglu = ul_swiglu_avx2,
    .geglu = geglu_scalar,
    .to_f16 = ul_attn_store_f16_avx2,
    .round_f16 = ul_attn_round_f16_avx2,
    .attn_page = ul_attn_page_avx2,
    .attn_page_hd = hd8,
    .attn_tile = &ul_attn_tile_avx2,
    .attn_tile_hd = hd8,
    .expf8 = ul_expf8_avx2,
    .topk = ul_topk_avx2,
    .fallback = &k_scalar,
};

static void geglu_avx512(float *g, const float *u, size_t n) { ul_fwd_geglu(g, u, n, 1); }

static int hd_avx512(int hd) {
    return hd == 16 || hd == 32 || hd == 64 || hd == 96 || hd == 128 || hd == 256;
}

/* AVX-512 has its own SwiGLU, GeGLU and per-token attention; the rest is AVX2's (every
 * AVX-512 CPU here has AVX2, FMA and F16C: isa.c requires them). */
static const ul_cpu_ops_t k_avx512 = {
    .rmsnorm = ul_rmsnorm_avx2,
    .rope_norm = ul_rope_norm_avx2,
    .rope_neox = ul_rope_neox_avx2,
    .swiglu = ul_swiglu_avx512,
    .geglu = geglu_avx512,
    .to_f16 = ul_attn_store_f16_avx2,
    .round_f16 = ul_attn_round_f16_avx2,
    .attn_page = ul_attn_page_avx512,
    .attn_page_hd = hd_avx512,
    .attn_tile = &ul_attn_tile_avx2,
    .attn_tile_hd = hd8,
    .expf8 = ul_expf8_avx2,
    .topk = ul_topk_avx2,
    .fallback = &k_avx2,
};
#endif

#if defined(__aarch64__)
static int hd4(int hd) { return hd > 0 && hd % 4 == 0; }

/* AArch64: one table for NEON, dotprod and i8mm (the extensions only change the matrix
 * products). */
static const ul_cpu_ops_t k_neon = {
    .rmsnorm = ul_rmsnorm_neon,
    .rope_norm = ul_rope_norm_neon,
    .rope_neox = ul_rope_neox_neon,
    .swiglu = ul_swiglu_neon,
    .geglu = ul_geglu_neon,
    .to_f16 = ul_to_f16_neon,
    .round_f16 = ul_round_f16_neon,
    .attn_page = ul_attn_page_neon,
    .attn_page_hd = hd4,
    .attn_tile = &ul_attn_tile_neon,
    .attn_tile_hd = hd4,
    .expf8 = ul_expf8_neon,
    .topk = ul_topk_neon,
    .fallback = &k_scalar,
};
#endif

const ul_cpu_ops_t *ul_cpu_ops(ul_isa_t isa) {
#if defined(__x86_64__) || defined(__i386__)
    if (isa == UL_ISA_AVX512) return &k_avx512;
    if (isa == UL_ISA_AVX2) return &k_avx2;
#elif defined(__aarch64__)
    if (isa == UL_ISA_NEON || isa == UL_ISA_DOTPROD || isa == UL_ISA_I8MM) return &k_neon;
#endif
    (void)isa;
    return &k_scalar;
}
