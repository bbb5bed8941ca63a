/* Sampling on the host for every backend with logits there: the chain of
 * engine/sample_chain.h (one copy, shared with the GPU's sampling kernel), in llama.cpp's
 * default order: logit bias -> penalties -> top-k -> top-p -> min-p -> temperature -> seeded
 * draw. Greedy skips everything after the penalties. The logprobs reported are the model's
 * own (raw logits), as OpenAI-style clients expect, whatever the sampling parameters did to
 * the draw. What is the CPU's own here: the AVX-512 vocabulary-sized reductions. */
#include "engine/sampling.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sample_chain.h"

typedef ul_sc_cand_t cand_t;

/* scratch = counts int32[n_vocab] (kept zero between calls) | cand_t[n_vocab] |
 * penalised logits float[n_vocab] | a filter's mask uint32[n_vocab / 32 + 1] | two
 * distributions float[n_vocab] (sample_dist.c: speculative sampling) */
size_t ul_sample_scratch_size(int32_t n_vocab) {
    return (size_t)n_vocab * (sizeof(int32_t) + sizeof(cand_t) + 3 * sizeof(float)) +
           ((size_t)n_vocab / 32 + 1) * sizeof(uint32_t);
}

void ul_sampling_rng_seed(uint64_t seed, uint64_t rng[2]) { ul_sc_rng_seed(seed, rng); }

float ul_sampling_rng_uniform(uint64_t rng[2]) { return ul_sc_uniform(rng); }

/* ---- vocabulary-sized reductions, AVX-512 when the CPU has it: a sampled token must
 * cost far less than the forward pass of a small model ---- */

#define AVX512 __attribute__((target("avx512f")))

/* Set once at start-up by the backend from the CPU features it detected (ul_sampling_init),
 * read by every sampling thread. Atomic (relaxed: a plain load on x86) so a second backend
 * created while another samples is no data race; never detected lazily here, where two
 * compute threads would race to initialise it. */
static atomic_int g_avx512;

void ul_sampling_init(int avx512f) {
    atomic_store_explicit(&g_avx512, !!avx512f, memory_order_relaxed);
}

static int has_avx512(void) { return atomic_load_explicit(&g_avx512, memory_order_relaxed); }

#if defined(__x86_64__) || defined(__i386__)
AVX512 static float max_avx512(const float *x, int32_t n) {
    __m512 m = _mm512_set1_ps(-INFINITY);
    int32_t i = 0;
    for (; i + 16 <= n; i += 16) m = _mm512_max_ps(m, _mm512_loadu_ps(x + i));
    float r = _mm512_reduce_max_ps(m);
    for (; i < n; i++) r = x[i] > r ? x[i] : r;
    return r;
}

/* e^x for x <= 0 (arguments are logit - max): Cody-Waite reduction, degree-6 polynomial,
 * 2^n applied with scalef; relative error ~2e-7, underflows to 0 like expf. */
AVX512 static inline __m512 exp_avx512(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

AVX512 static double sumexp_avx512(const float *x, int32_t n, float mx) {
    __m512 s = _mm512_setzero_ps(), m = _mm512_set1_ps(mx);
    int32_t i = 0;
    for (; i + 16 <= n; i += 16)
        s = _mm512_add_ps(s, exp_avx512(_mm512_sub_ps(_mm512_loadu_ps(x + i), m)));
    double r = _mm512_reduce_add_ps(s);
    for (; i < n; i++) r += expf(x[i] - mx);
    return r;
}

/* out[i] = e^((x[i] - mx) * k); returns the sum */
AVX512 static double expbuf_avx512(const float *x, float *out, int32_t n, float mx, float k) {
    __m512 s = _mm512_setzero_ps(), m = _mm512_set1_ps(mx), kk = _mm512_set1_ps(k);
    int32_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 e = exp_avx512(_mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i), m), kk));
        _mm512_storeu_ps(out + i, e);
        s = _mm512_add_ps(s, e);
    }
    double r = _mm512_reduce_add_ps(s);
    for (; i < n; i++) r += out[i] = expf((x[i] - mx) * k);
    return r;
}
#else /* no AVX-512 outside x86 (the flag stays 0): the portable reductions */
#define max_avx512 ul_sc_vmax
#define sumexp_avx512 ul_sc_sumexp
#define expbuf_avx512 ul_sc_weights
#endif

static double expbuf(const float *x, float *out, int32_t n, float mx, float k) {
    return has_avx512() ? expbuf_avx512(x, out, n, mx, k) : ul_sc_weights(x, out, n, mx, k);
}

static float vmax(const float *x, int32_t n) {
    return has_avx512() ? max_avx512(x, n) : ul_sc_vmax(x, n);
}

static double sumexp(const float *x, int32_t n, float mx) {
    return has_avx512() ? sumexp_avx512(x, n, mx) : ul_sc_sumexp(x, n, mx);
}

/* Lowest id holding the largest value (llama.cpp's greedy tie rule). */
static int32_t argmax_f(const float *x, int32_t n) { return ul_sc_first_of(x, n, vmax(x, n)); }

/* llama.cpp's penalties sampler: each distinct token of the window is penalised once,
 * with its count in the window driving the frequency term. counts[] returns to zero. */
static int penalties_active(const ul_step_seq_t *seq) {
    const ul_sampling_t *sp = &seq->sampling;
    if (sp->repeat_last_n == 0 || !seq->history || seq->n_history <= 0) return 0;
    return sp->repeat_penalty != 1.0f || sp->frequency_penalty != 0.0f ||
           sp->presence_penalty != 0.0f;
}

static void apply_penalties(const ul_step_seq_t *seq, float *l, int32_t n_vocab, int32_t *counts) {
    const ul_sampling_t *sp = &seq->sampling;
    int32_t w = sp->repeat_last_n < 0
                    ? seq->n_history
                    : (sp->repeat_last_n < seq->n_history ? sp->repeat_last_n : seq->n_history);
    ul_sc_penalties(l, n_vocab, seq->history + (seq->n_history - w), w, counts, sp->repeat_penalty,
                    sp->frequency_penalty, sp->presence_penalty);
}

/* The stochastic part of the chain over the penalised logits l; returns the drawn id. */
static int32_t draw(ul_step_seq_t *seq, const float *l, int32_t n_vocab, cand_t *c, float *buf) {
    const ul_sampling_t *sp = &seq->sampling;
    const ul_sc_params_t p = {sp->temperature, sp->top_p, sp->min_p, sp->top_k};
    const float mx = vmax(l, n_vocab);
    if (!ul_sc_truncates(&p, n_vocab)) { /* whole vocabulary: vectorised weights */
        double sum = expbuf(l, buf, n_vocab, mx, 1.0f / sp->temperature);
        return ul_sc_draw_all(seq->rng, l, buf, n_vocab, mx, sp->temperature, sum);
    }
    double z_all = ul_sc_needs_z_all(&p, n_vocab) ? sumexp(l, n_vocab, mx) : 0;
    return ul_sc_draw_truncated(&p, seq->rng, l, n_vocab, c, mx, z_all);
}

/* Log-softmax of the raw logits at tok, and the n most likely raw candidates. */
void ul_sample_logprobs(ul_step_seq_t *seq, const float *logits, int32_t n_vocab, int32_t tok) {
    float mx = vmax(logits, n_vocab);
    float lse = mx + (float)log(sumexp(logits, n_vocab, mx));
    seq->out_logprob = logits[tok] - lse;
    seq->out_n_top = ul_sc_top_logprobs(logits, n_vocab, lse, seq->sampling.n_logprobs,
                                        UL_MAX_LOGPROBS, seq->out_top_ids, seq->out_top_logprobs);
}

/* OpenAI's logit_bias: added to the logits that choose, first in the chain (llama.cpp's
 * order), so penalties and truncation see the biased values. */
static void apply_bias(const ul_sampling_t *sp, float *l, int32_t n_vocab) {
    for (int32_t i = 0; i < sp->n_logit_bias; i++) {
        int32_t id = sp->logit_bias[i].id;
        if (id >= 0 && id < n_vocab) l[id] += sp->logit_bias[i].bias;
    }
}

const float *ul_sample_adjusted(const ul_step_seq_t *seq, const float *logits, int32_t n_vocab,
                                void *scratch) {
    int32_t *counts = scratch;
    float *pl = (float *)((cand_t *)(counts + n_vocab) + n_vocab);
    const int bias = seq->sampling.n_logit_bias > 0 && seq->sampling.logit_bias;
    if (!bias && !penalties_active(seq)) return logits;
    memcpy(pl, logits, (size_t)n_vocab * sizeof *pl);
    if (bias) apply_bias(&seq->sampling, pl, n_vocab);
    if (penalties_active(seq)) apply_penalties(seq, pl, n_vocab, counts);
    return pl;
}

static int32_t choose(ul_step_seq_t *seq, const float *l, int32_t n_vocab, cand_t *c) {
    if (!(seq->sampling.temperature > 0.0f)) return argmax_f(l, n_vocab);
    return draw(seq, l, n_vocab, c, (float *)c);
}

/* Refused ids to -inf; 32 ids per mask word, whole words skipped when all allowed. */
static void mask_logits(float *l, const uint32_t *bits, int32_t n_vocab) {
    for (int32_t w = 0; w * 32 < n_vocab; w++) {
        uint32_t m = bits[w];
        if (m == UINT32_MAX && w * 32 + 32 <= n_vocab) continue;
        int32_t end = w * 32 + 32 < n_vocab ? w * 32 + 32 : n_vocab;
        for (int32_t i = w * 32; i < end; i++)
            if (!(m >> (i & 31) & 1)) l[i] = -INFINITY;
    }
}

int32_t ul_sample(ul_step_seq_t *seq, const float *logits, int32_t n_vocab, void *scratch) {
    if (seq->out_probs && seq->sampling.temperature > 0.0f)
        return ul_sample_with_probs(seq, logits, n_vocab, scratch);
    int32_t *counts = scratch;
    cand_t *c = (cand_t *)(counts + n_vocab);
    float *pl = (float *)(c + n_vocab);
    const float *l = ul_sample_adjusted(seq, logits, n_vocab, scratch);
    int32_t tok = choose(seq, l, n_vocab, c);
    ul_token_filter_t *f = seq->sampling.filter;
    if (f && !f->allows(f, tok)) {
        /* The unconstrained choice is not allowed (rare once a structure is under way):
         * mask everything the filter refuses and choose again from the same chain. */
        if (l != pl) memcpy(pl, l, (size_t)n_vocab * sizeof *pl);
        if (f->fill_mask) {
            uint32_t *bits = (uint32_t *)(pl + n_vocab);
            f->fill_mask(f, bits);
            mask_logits(pl, bits, n_vocab);
        } else {
            for (int32_t i = 0; i < n_vocab; i++)
                if (!f->allows(f, i)) pl[i] = -INFINITY;
        }
        tok = choose(seq, pl, n_vocab, c);
        if (!(pl[tok] > -INFINITY)) { /* only by rounding of vanishing weights: the best one */
            for (int32_t i = 0; i < n_vocab; i++)
                if (pl[i] > -INFINITY && (!(pl[tok] > -INFINITY) || pl[i] > pl[tok])) tok = i;
        }
    }
    if (f) f->accept(f, tok);
    seq->out_token = tok;
    ul_sample_logprobs(seq, logits, n_vocab, tok);
    if (seq->out_probs) { /* greedy: a certain choice */
        memset(seq->out_probs, 0, (size_t)n_vocab * sizeof *seq->out_probs);
        seq->out_probs[tok] = 1.0f;
    }
    return tok;
}
