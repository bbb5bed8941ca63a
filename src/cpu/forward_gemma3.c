/* gemma3's element-wise pieces of the forward pass (the rest is forward.c's layer, which
 * takes the post-attention / post-FFN norms, the sliding-window RoPE cache and the
 * embedding scale from the hyper-parameters, and forward_attn.c, which honours the window):
 *
 *  - GeGLU as ggml's CPU backend computes it (ggml_vec_geglu_f32 with GGML_GELU_FP16): the
 *    gate is rounded to f16 and looked up in a 65536-entry table of
 *    f16(0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2)))), then multiplied by up in f32;
 *    gates <= -10 give 0 and gates >= 10 pass unchanged. The table entry is computed with
 *    the one fused multiply-add GCC contracts in ggml's build (-march=native, GNU C), so the
 *    table is bit-identical to ggml_table_gelu_f16.
 *  - final logit softcapping: scale by 1/cap, tanh, scale by cap (three ggml ops). */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#include <math.h>
#include <pthread.h>

#include "cpu/forward.h"

/* f16 bits of gelu(f16 x), indexed by the bits of x; 2 spare entries let the AVX-512
 * path gather 32 bits at any index */
static uint16_t g_gelu[(1 << 16) + 2];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static float gelu_ref(float x) {
    const float a = 0.044715f, s2pi = 0.79788456080286535587989211986876f;
    return 0.5f * x * (1.0f + tanhf(s2pi * x * fmaf(a * x, x, 1.0f)));
}

static void build_table(void) {
    for (uint32_t i = 0; i < (1u << 16); i++)
        g_gelu[i] = ul_fp32_to_fp16(gelu_ref(ul_fp16_to_fp32((uint16_t)i)));
}

void ul_fwd_gemma3_init(void) { pthread_once(&g_once, build_table); }

static void geglu_scalar(float *g, const float *u, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const float x = g[i];
        if (x <= -10.0f)
            g[i] = 0.0f;
        else if (x >= 10.0f)
            g[i] = x * u[i];
        else
            g[i] = ul_fp16_to_fp32(g_gelu[ul_fp32_to_fp16(x)]) * u[i];
    }
}

#if defined(__x86_64__) || defined(__i386__)
/* The same 16 at a time: the hardware f16 conversions (round to nearest even, as
 * ul_fp32_to_fp16) around a gather of the table entries (the low half of each 32 bits
 * read). */
__attribute__((target("avx512f,f16c"))) static void geglu_avx512(float *g, const float *u,
                                                                 size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 x = _mm512_loadu_ps(g + i), uv = _mm512_loadu_ps(u + i);
        const __m512i idx = _mm512_cvtepu16_epi32(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
        const __m512i t = _mm512_i32gather_epi32(idx, (const void *)g_gelu, 2);
        __m512 y = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(t)), uv);
        y = _mm512_mask_mul_ps(y, _mm512_cmp_ps_mask(x, _mm512_set1_ps(10.0f), _CMP_GE_OQ), x, uv);
        y = _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, _mm512_set1_ps(-10.0f), _CMP_LE_OQ),
                               _mm512_setzero_ps());
        _mm512_storeu_ps(g + i, y);
    }
    geglu_scalar(g + i, u + i, n - i);
}
#else
static void geglu_avx512(float *g, const float *u, size_t n) { geglu_scalar(g, u, n); }
#endif

void ul_fwd_geglu(float *g, const float *u, size_t n, int avx512) {
    if (avx512)
        geglu_avx512(g, u, n);
    else
        geglu_scalar(g, u, n);
}

static void gelu_scalar(float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (x[i] <= -10.0f)
            x[i] = 0.0f;
        else if (x[i] < 10.0f)
            x[i] = ul_fp16_to_fp32(g_gelu[ul_fp32_to_fp16(x[i])]);
}

#if defined(__x86_64__) || defined(__i386__)
/* 8 at a time as geglu_avx512 (the same table entries, the same conversions): the scalar
 * loop's two software f16 conversions were 13% of a bge-small-shaped bert step (perf). */
__attribute__((target("avx2,f16c"))) static void gelu_avx2(float *x, size_t n) {
    size_t i = 0;
    const __m256 hi = _mm256_set1_ps(10.0f), lo = _mm256_set1_ps(-10.0f);
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        const __m256i idx = _mm256_cvtepu16_epi32(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
        const __m256i t = _mm256_i32gather_epi32((const int *)(const void *)g_gelu, idx, 2);
        /* the low half of each 32 bits read: pack the 8 into 8 halves */
        const __m256i t16 = _mm256_and_si256(t, _mm256_set1_epi32(0xffff));
        const __m128i h =
            _mm_packus_epi32(_mm256_castsi256_si128(t16), _mm256_extracti128_si256(t16, 1));
        __m256 y = _mm256_cvtph_ps(h);
        y = _mm256_blendv_ps(y, v, _mm256_cmp_ps(v, hi, _CMP_NLT_UQ)); /* >= 10, NaN: x */
        y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(v, lo, _CMP_LE_OQ));
        _mm256_storeu_ps(x + i, y);
    }
    gelu_scalar(x + i, n - i);
}

/* 16 at a time (geglu_avx512's gather and truncating pack): half the AVX2 path's time per
 * element (1.5M inputs, one thread, EPYC Zen 5: 0.45 against 0.87 ns), where that path was
 * 6.5% of a bge-small step (perf) */
__attribute__((target("avx512f,f16c"))) static void gelu_avx512(float *x, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 v = _mm512_loadu_ps(x + i);
        const __m512i idx = _mm512_cvtepu16_epi32(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
        const __m512i t = _mm512_i32gather_epi32(idx, (const void *)g_gelu, 2);
        __m512 y = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(t));
        y = _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(v, _mm512_set1_ps(10.0f), _CMP_NLT_UQ), v);
        y = _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(v, _mm512_set1_ps(-10.0f), _CMP_LE_OQ),
                               _mm512_setzero_ps());
        _mm512_storeu_ps(x + i, y);
    }
    gelu_scalar(x + i, n - i);
}
#else
static void gelu_avx2(float *x, size_t n) { gelu_scalar(x, n); }
static void gelu_avx512(float *x, size_t n) { gelu_scalar(x, n); }
#endif

void ul_fwd_gelu(float *x, size_t n, int level) {
    if (level >= 2)
        gelu_avx512(x, n);
    else if (level == 1)
        gelu_avx2(x, n);
    else
        gelu_scalar(x, n);
}

void ul_fwd_softcap(float *x, size_t n, float cap) {
    const float inv = 1.0f / cap;
    for (size_t i = 0; i < n; i++) x[i] = tanhf(x[i] * inv) * cap;
}
