/* AArch64 NEON GeGLU (the ops table's geglu): ul_fwd_geglu's scalar results bit for bit, 8
 * gates at a time. The gates go to f16 by FCVTN (round to nearest even, as ul_fp32_to_fp16;
 * NaNs stay NaN), the f16 GELU of each is read from a table and widened (exact), then
 * multiplied by up; gates <= -10 give +0 and gates >= 10 give gate * up, as the scalar code.
 *
 * The table is the scalar path's own: entry h is ul_fwd_geglu of the f16 value h with up 1
 * (exact: a product by 1, and an f16 value survives f32 -> f16), built once, so the GELU
 * formula and its rounding have one home (forward_gemma3.c, ggml's table); the entries at
 * +-10 come from the gates just inside them (build_table). NEON has no
 * gather: the 8 lookups are scalar loads around the vector conversions, which replace the
 * scalar path's software f32 -> f16 rounding. */
#include <arm_neon.h>
#include <math.h>
#include <pthread.h>

#include "cpu/forward.h"
#include "cpu/kernels.h"

static uint16_t g_tab[1 << 16];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void build_table(void) {
    ul_fwd_gemma3_init();
    float g[256], one[256];
    for (int i = 0; i < 256; i++) one[i] = 1.0f;
    for (uint32_t base = 0; base < (1u << 16); base += 256) {
        for (int i = 0; i < 256; i++) g[i] = ul_fp16_to_fp32((uint16_t)(base + (uint32_t)i));
        ul_fwd_geglu(g, one, 256, 0);
        for (int i = 0; i < 256; i++) g_tab[base + (uint32_t)i] = ul_fp32_to_fp16(g[i]);
    }
    /* The scalar code answers the gates +-10 without its table, but the gates just inside
     * them round to the f16 values +-10 and read those entries: ask for them through the
     * float next to each towards 0. (No other entry beyond +-10 is ever read.) */
    for (int sgn = -1; sgn <= 1; sgn += 2) {
        float x = nextafterf(10.0f * (float)sgn, 0.0f);
        ul_fwd_geglu(&x, one, 1, 0);
        g_tab[ul_fp32_to_fp16(10.0f * (float)sgn)] = ul_fp32_to_fp16(x);
    }
}

/* 4 gates x and ups u given their looked-up GELU gl: the scalar code's three cases */
static inline float32x4_t finish(float32x4_t x, float32x4_t u, float32x4_t gl) {
    float32x4_t y = vmulq_f32(gl, u);
    y = vbslq_f32(vcgeq_f32(x, vdupq_n_f32(10.0f)), vmulq_f32(x, u), y);
    return vbslq_f32(vcleq_f32(x, vdupq_n_f32(-10.0f)), vdupq_n_f32(0.0f), y);
}

void ul_geglu_neon(float *g, const float *u, size_t n) {
    pthread_once(&g_once, build_table);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const float32x4_t x0 = vld1q_f32(g + i), x1 = vld1q_f32(g + i + 4);
        uint16_t h[8], t[8];
        vst1q_u16(h, vreinterpretq_u16_f16(vcvt_high_f16_f32(vcvt_f16_f32(x0), x1)));
        for (int k = 0; k < 8; k++) t[k] = g_tab[h[k]];
        const float16x8_t tf = vreinterpretq_f16_u16(vld1q_u16(t));
        vst1q_f32(g + i, finish(x0, vld1q_f32(u + i), vcvt_f32_f16(vget_low_f16(tf))));
        vst1q_f32(g + i + 4, finish(x1, vld1q_f32(u + i + 4), vcvt_high_f32_f16(tf)));
    }
    ul_fwd_geglu(g + i, u + i, n - i, 0);
}
