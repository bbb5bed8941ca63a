/* Causal attention through page tables, with the numerics of llama.cpp's CPU
 * flash-attention (the path its golden runs take with an f16 KV cache): the query is
 * rounded to f16, each score is an f16 x f16 dot product, softmax is online key by key
 * (running max M and sum S), and the V accumulator is kept in f16 — rescaled when M rises,
 * then acc = f16(acc + v * e^(s - M)) — and divided by S at the end. Matching these
 * roundings is what keeps the logits within the golden tolerances (measured: with an f32
 * accumulator instead, mini-q4_k_m's largest logit difference to llama.cpp grows from
 * 0.020 to 0.069); with an f32 cache everything stays f32.
 *
 * K is stored transposed inside a page ([head_dim][page_size], see kv.h), so the scores
 * of up to 16 keys of a page are one vector per query head: per dimension, one load of 16
 * keys is shared by the n_gqa heads' FMAs, and no horizontal sum is needed. The key-by-key
 * part (max, exponentials, the f16 accumulator) then runs per head with the accumulator in
 * registers.
 *
 * One work item is a (token, KV head) pair: the n_gqa query heads sharing that KV head
 * walk the keys together. No buffer of n_ctx scores is needed. */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#include <math.h>
#include <string.h>

#include "cpu/attn.h"
#include "cpu/forward.h"

#define CH UL_ATTN_CH

size_t ul_fwd_attn_tmp_floats(int32_t n_gqa, int32_t head_dim, int32_t page_size) {
    /* acc [G][hd] | qf [G][hd] | vf [CH][hd] | kf [hd][CH] | sc [G][CH] | M, S [G] (the
     * scalar path's widened k and v rows go in vf) */
    (void)page_size;
    size_t n = (size_t)n_gqa * (size_t)head_dim * 2 + (size_t)CH * head_dim * 2 +
               (size_t)n_gqa * CH + (size_t)n_gqa * 2;
    return (n + 15) & ~(size_t)15; /* keeps every thread's slice 64-byte aligned */
}

typedef ul_attn_t attn_t;

/* ---------- scalar path (any CPU, any shape) ---------- */

static float round16(float x) { return ul_fp16_to_fp32(ul_fp32_to_fp16(x)); }

/* Keys [0, n) of one page; K transposed [hd][ps], V [ps][hd]. */
void ul_attn_page_scalar(attn_t *a, const void *K, const void *V, int n, int f16) {
    const int hd = a->hd, ps = a->ps;
    for (int j = 0; j < n; j++) {
        float *k = a->vf, *v = a->vf + hd; /* widened rows */
        for (int i = 0; i < hd; i++) {
            k[i] = f16 ? ul_fp16_to_fp32(((const uint16_t *)K)[(size_t)i * ps + j])
                       : ((const float *)K)[(size_t)i * ps + j];
            v[i] = f16 ? ul_fp16_to_fp32(((const uint16_t *)V)[(size_t)j * hd + i])
                       : ((const float *)V)[(size_t)j * hd + i];
        }
        for (int g = 0; g < a->G; g++) {
            float *acc = a->acc + (size_t)g * hd;
            const float *qg = a->qf + (size_t)g * hd;
            double d = 0;
            for (int i = 0; i < hd; i++) d += (double)(k[i] * qg[i]);
            float s = (float)d * a->scale, ms = 1, vs = 1;
            if (s > a->M[g]) {
                ms = expf(a->M[g] - s);
                a->M[g] = s;
                for (int i = 0; i < hd; i++) acc[i] = f16 ? round16(acc[i] * ms) : acc[i] * ms;
            } else {
                vs = expf(s - a->M[g]);
            }
            for (int i = 0; i < hd; i++) {
                float r = fmaf(v[i], vs, acc[i]);
                acc[i] = f16 ? round16(r) : r;
            }
            a->S[g] = a->S[g] * ms + vs;
        }
    }
}

/* ---------- AVX-512 (x86 builds only: target attributes, not per-file flags) ---------- */
#if defined(__x86_64__) || defined(__i386__)

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,f16c,fma")))

AVX512 static inline __m512 round16_ps(__m512 x) {
    return _mm512_cvtph_ps(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
}

/* Scores of keys [c0, c0 + m) for every head into a->sc[g][0..m) (scaled), each lane
 * bit-identical to ggml_vec_dot_f16 on that key (what llama.cpp's flash-attention uses):
 * over the first hd & ~63 dimensions, 4 accumulators of 16 products (FMA across blocks
 * of 64), combined as (a0 + a2) + (a1 + a3) and then summed in _mm512_reduce_add_ps's
 * order (lanes l + 8, l + 4, l + 2, l + 1); the remaining dimensions are added in double,
 * one product at a time. Here the lanes are keys, so the same tree is built across
 * vectors. */
AVX512 static void scores(attn_t *a, const void *K, int c0, int m, int f16) {
    const int hd = a->hd, ps = a->ps, np = hd & ~63;
    const __mmask16 km = (__mmask16)((1u << m) - 1);
    float *kf = a->kf; /* [hd][16] the chunk's keys, widened once for every head */
    for (int i = 0; i < hd; i++)
        _mm512_store_ps(kf + 16 * i,
                        f16 ? _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(km, (const uint16_t *)K +
                                                                               (size_t)i * ps + c0))
                            : _mm512_maskz_loadu_ps(km, (const float *)K + (size_t)i * ps + c0));
    for (int g = 0; g < a->G; g++) {
        const float *q = a->qf + (size_t)g * hd;
        __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
        if (np) {
            __m512 v[16];
            _Pragma("GCC unroll 16") for (int l = 0; l < 16; l++) {
                __m512 acc[4];
                _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
                    const int i = 16 * j + l;
                    acc[j] = _mm512_mul_ps(_mm512_load_ps(kf + 16 * i), _mm512_set1_ps(q[i]));
                    for (int b = 64; b < np; b += 64)
                        acc[j] = _mm512_fmadd_ps(_mm512_load_ps(kf + 16 * (b + i)),
                                                 _mm512_set1_ps(q[b + i]), acc[j]);
                }
                v[l] = _mm512_add_ps(_mm512_add_ps(acc[0], acc[2]), _mm512_add_ps(acc[1], acc[3]));
            }
            _Pragma("GCC unroll 4") for (int w = 8; w >= 1; w /= 2)
                _Pragma("GCC unroll 8") for (int l = 0; l < w; l++) v[l] =
                    _mm512_add_ps(v[l], v[l + w]);
            lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v[0]));
            hi = _mm512_cvtps_pd(
                _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v[0]), 1)));
        }
        for (int i = np; i < hd; i++) {
            __m512 p = _mm512_mul_ps(_mm512_load_ps(kf + 16 * i), _mm512_set1_ps(q[i]));
            lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(p)));
            hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm256_castpd_ps(
                                       _mm512_extractf64x4_pd(_mm512_castps_pd(p), 1))));
        }
        __m512 s =
            _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo)), _mm512_cvtpd_ps(hi), 1);
        _mm512_storeu_ps(a->sc + (size_t)g * CH, _mm512_mul_ps(s, _mm512_set1_ps(a->scale)));
    }
}

/* Keys [0, m) of the chunk for heads [g0, g0 + GN): NC vectors of accumulator per head in
 * registers (hd = 16 * NC). The heads are independent, so interleaving them keeps GN x NC
 * chains of FMA + f16 round trips in flight instead of one head's chain of m keys. */
AVX512 static inline __attribute__((always_inline)) void update(const int NC, const int GN,
                                                                attn_t *a, int g0, int m, int f16) {
    const int hd = a->hd;
    __m512 acc[4][16];
    float ms[4][CH], vs[4][CH], S[4];
    _Pragma("GCC unroll 4") for (int h = 0; h < GN; h++) {
        const int g = g0 + h;
        _Pragma("GCC unroll 16") for (int c = 0; c < NC; c++) acc[h][c] =
            _mm512_loadu_ps(a->acc + (size_t)g * hd + 16 * c);
        /* the running max before each key decides which factor is e^(s - M) */
        const float *s = a->sc + (size_t)g * CH;
        float M = a->M[g], arg[CH], e[CH];
        for (int j = 0; j < m; j++) { /* e^(M - s) when s raises M, else e^(s - M) */
            arg[j] = s[j] > M ? M - s[j] : s[j] - M;
            M = s[j] > M ? s[j] : M;
        }
        ul_expf16_avx512(arg, e, m); /* glibc's expf, 16 at a time */
        M = a->M[g];
        for (int j = 0; j < m; j++) {
            const int up = s[j] > M;
            ms[h][j] = up ? e[j] : 1;
            vs[h][j] = up ? 1 : e[j];
            M = up ? s[j] : M;
        }
        a->M[g] = M;
        S[h] = a->S[g];
    }
    for (int j = 0; j < m; j++) {
        const float *v = a->vf + (size_t)j * hd;
        _Pragma("GCC unroll 4") for (int h = 0; h < GN; h++) {
            if (ms[h][j] != 1) {
                const __m512 msv = _mm512_set1_ps(ms[h][j]);
                _Pragma("GCC unroll 16") for (int c = 0; c < NC; c++) {
                    acc[h][c] = _mm512_mul_ps(acc[h][c], msv);
                    if (f16) acc[h][c] = round16_ps(acc[h][c]);
                }
            }
            const __m512 vsv = _mm512_set1_ps(vs[h][j]);
            _Pragma("GCC unroll 16") for (int c = 0; c < NC; c++) {
                acc[h][c] = _mm512_fmadd_ps(_mm512_loadu_ps(v + 16 * c), vsv, acc[h][c]);
                if (f16) acc[h][c] = round16_ps(acc[h][c]);
            }
            S[h] = fmaf(S[h], ms[h][j], vs[h][j]); /* fused, as ggml's build computes it */
        }
    }
    _Pragma("GCC unroll 4") for (int h = 0; h < GN; h++) {
        a->S[g0 + h] = S[h];
        _Pragma("GCC unroll 16") for (int c = 0; c < NC; c++)
            _mm512_storeu_ps(a->acc + (size_t)(g0 + h) * hd + 16 * c, acc[h][c]);
    }
}

#define UPDATE_NC(NC, GN) update(NC, GN, a, g, m, f16)
#define UPDATE_GN(NC)                                                                              \
    do {                                                                                           \
        if (a->G - g >= (NC <= 4 ? 4 : 2)) {                                                       \
            UPDATE_NC(NC, NC <= 4 ? 4 : 2);                                                        \
            g += NC <= 4 ? 4 : 2;                                                                  \
        } else if (a->G - g >= 2) {                                                                \
            UPDATE_NC(NC, 2);                                                                      \
            g += 2;                                                                                \
        } else {                                                                                   \
            UPDATE_NC(NC, 1);                                                                      \
            g += 1;                                                                                \
        }                                                                                          \
    } while (0)

/* Keys [0, n) of one page; hd 16, 32, 64, 96 (Phi-3-mini), 128 or 256 (gemma3: one head at a
 * time, its 16 accumulator vectors fill half the registers). */
AVX512 void ul_attn_page_avx512(attn_t *a, const void *K, const void *V, int n, int f16) {
    const int hd = a->hd, NC = hd / 16;
    for (int c0 = 0; c0 < n; c0 += CH) {
        const int m = n - c0 < CH ? n - c0 : CH;
        scores(a, K, c0, m, f16);
        for (int j = 0; j < m; j++) /* V rows widened once for every head */
            for (int c = 0; c < NC; c++) {
                const size_t o = (size_t)(c0 + j) * hd + 16 * (size_t)c;
                _mm512_storeu_ps(a->vf + (size_t)j * hd + 16 * c,
                                 f16 ? _mm512_cvtph_ps(_mm256_loadu_si256(
                                           (const __m256i *)((const uint16_t *)V + o)))
                                     : _mm512_loadu_ps((const float *)V + o));
            }
        for (int g = 0; g < a->G;) {
            switch (NC) {
            case 1:
                UPDATE_GN(1);
                break;
            case 2:
                UPDATE_GN(2);
                break;
            case 4:
                UPDATE_GN(4);
                break;
            case 6:
                UPDATE_GN(6);
                break;
            case 8:
                UPDATE_GN(8);
                break;
            default:
                UPDATE_NC(16, 1);
                g += 1;
                break;
            }
        }
    }
}
#endif

/* ---------- the item ---------- */

void ul_fwd_attn_item(const ul_fwd_t *f, int il, int32_t t, int32_t kvh, float *tmp) {
    const ul_step_seq_t *s = &f->step->seqs[f->tok_seq[t]];
    const int32_t pos = f->tok_pos[t], hd = f->hp.head_dim, ps = f->kv.page_size;
    /* gemma3/phi3 scale Q (f32) before the f16 rounding, then not the scores, as llama.cpp */
    const float qs = f->hp.q_scale;
    attn_t a = {
        .G = f->n_gqa, .hd = hd, .ps = ps, .scale = qs > 0 ? 1.0f : 1.0f / sqrtf((float)hd)};
    const size_t gh = (size_t)a.G * hd;
    a.acc = tmp;
    a.qf = a.acc + gh;
    a.vf = a.qf + gh;
    a.kf = a.vf + (size_t)CH * hd;
    a.sc = a.kf + (size_t)CH * hd;
    a.M = a.sc + (size_t)a.G * CH;
    a.S = a.M + a.G;
    const float *q = f->q + (size_t)t * f->q_dim + (size_t)kvh * gh;
    const int f16 = f->kv.type == UL_TYPE_F16;
    const ul_cpu_ops_t *o = f->ops;
    while (!o->attn_page_hd(hd)) o = o->fallback;
    for (size_t i = 0; i < gh; i++) a.qf[i] = qs > 0 ? q[i] * qs : q[i];
    if (f16) f->ops->round_f16(a.qf, a.qf, (int)gh);
    memset(a.acc, 0, gh * sizeof *a.acc);
    for (int g = 0; g < a.G; g++) {
        a.M[g] = -INFINITY;
        a.S[g] = 0;
    }
    /* a sliding-window layer sees positions (pos - n_swa, pos] (llama.cpp's is_masked_swa,
     * whose masked keys its flash attention skips); its first page is entered at slot j0 */
    const int32_t lo = f->m->layers[il].swa && pos >= f->hp.n_swa ? pos - f->hp.n_swa + 1 : 0;
    const size_t es = (size_t)f->kv.esize;
    for (int32_t p0 = lo - lo % ps; p0 <= pos; p0 += ps) {
        const int32_t n = pos + 1 - p0 < ps ? pos + 1 - p0 : ps, page = s->pages[p0 / ps];
        const int32_t j0 = p0 < lo ? lo - p0 : 0;
        /* K is [hd][ps] (key j at column j), V [ps][hd] */
        const uint8_t *K = (const uint8_t *)ul_kv_head(&f->kv, page, il, 0, kvh) + j0 * es,
                      *V = (const uint8_t *)ul_kv_head(&f->kv, page, il, 1, kvh) +
                           (size_t)j0 * hd * es;
        o->attn_page(&a, K, V, n - j0, f16);
    }
    float *out = f->att + (size_t)t * f->q_dim + (size_t)kvh * gh;
    for (int g = 0; g < a.G; g++) {
        const float inv = a.S[g] == 0 ? 0 : 1.0f / a.S[g];
        for (int i = 0; i < hd; i++) out[(size_t)g * hd + i] = a.acc[(size_t)g * hd + i] * inv;
    }
}
