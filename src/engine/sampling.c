/* Sampling chain, in llama.cpp's default order: logit bias -> penalties -> top-k -> top-p ->
 * min-p -> temperature -> seeded draw. Greedy skips everything after the penalties. The logprobs
 * reported are the model's own (raw logits), as OpenAI-style clients expect, whatever the
 * sampling parameters did to the draw. */
#include "engine/sampling.h"

#include <immintrin.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int32_t id;
    float logit;
} cand_t;

/* scratch = counts int32[n_vocab] (kept zero between calls) | cand_t[n_vocab] |
 * penalised logits float[n_vocab] | a filter's mask uint32[n_vocab / 32 + 1] */
size_t ul_sample_scratch_size(int32_t n_vocab) {
    return (size_t)n_vocab * (sizeof(int32_t) + sizeof(cand_t) + sizeof(float)) +
           ((size_t)n_vocab / 32 + 1) * sizeof(uint32_t);
}

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void ul_sampling_rng_seed(uint64_t seed, uint64_t rng[2]) {
    rng[0] = splitmix64(&seed);
    rng[1] = splitmix64(&seed);
    if (!rng[0] && !rng[1]) rng[0] = 1; /* xoshiro's all-zero state is a fixed point */
}

static inline uint32_t rotl32(uint32_t x, int k) { return (x << k) | (x >> (32 - k)); }

/* xoshiro128++ over the four 32-bit words packed in rng[2]. */
static uint32_t xoshiro_next(uint64_t rng[2]) {
    uint32_t s[4] = {(uint32_t)rng[0], (uint32_t)(rng[0] >> 32), (uint32_t)rng[1],
                     (uint32_t)(rng[1] >> 32)};
    uint32_t r = rotl32(s[0] + s[3], 7) + s[0];
    uint32_t t = s[1] << 9;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl32(s[3], 11);
    rng[0] = (uint64_t)s[0] | (uint64_t)s[1] << 32;
    rng[1] = (uint64_t)s[2] | (uint64_t)s[3] << 32;
    return r;
}

float ul_sampling_rng_uniform(uint64_t rng[2]) {
    if (!rng[0] && !rng[1]) ul_sampling_rng_seed(0, rng); /* never seeded: not a stuck stream */
    return (float)(xoshiro_next(rng) >> 8) * (1.0f / 16777216.0f);
}

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

static double expbuf(const float *x, float *out, int32_t n, float mx, float k) {
    if (has_avx512()) return expbuf_avx512(x, out, n, mx, k);
    double r = 0;
    for (int32_t i = 0; i < n; i++) r += out[i] = expf((x[i] - mx) * k);
    return r;
}

static float vmax(const float *x, int32_t n) {
    if (has_avx512()) return max_avx512(x, n);
    float r = x[0];
    for (int32_t i = 1; i < n; i++) r = x[i] > r ? x[i] : r;
    return r;
}

static double sumexp(const float *x, int32_t n, float mx) {
    if (has_avx512()) return sumexp_avx512(x, n, mx);
    double r = 0;
    for (int32_t i = 0; i < n; i++) r += expf(x[i] - mx);
    return r;
}

/* Lowest id holding the largest value (llama.cpp's greedy tie rule). */
static int32_t argmax_f(const float *x, int32_t n) {
    float m = vmax(x, n);
    for (int32_t i = 0; i < n; i++)
        if (x[i] == m) return i;
    return 0; /* all NaN */
}

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
    const int32_t *h = seq->history + (seq->n_history - w);
    for (int32_t i = 0; i < w; i++)
        if (h[i] >= 0 && h[i] < n_vocab) counts[h[i]]++;
    for (int32_t i = 0; i < w; i++) {
        int32_t t = h[i];
        if (t < 0 || t >= n_vocab || counts[t] == 0) continue;
        float v = l[t];
        if (sp->repeat_penalty != 1.0f && sp->repeat_penalty > 0.0f)
            v = v <= 0 ? v * sp->repeat_penalty : v / sp->repeat_penalty;
        v -= (float)counts[t] * sp->frequency_penalty + sp->presence_penalty;
        l[t] = v;
        counts[t] = 0;
    }
}

static int cand_desc(const void *a, const void *b) {
    const cand_t *x = a, *y = b;
    if (x->logit != y->logit) return x->logit < y->logit ? 1 : -1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Moves the k largest candidates to the front (unordered), quickselect. */
static void select_top(cand_t *c, int32_t n, int32_t k) {
    int32_t lo = 0, hi = n - 1;
    while (lo < hi) {
        float pivot = c[lo + (hi - lo) / 2].logit;
        int32_t i = lo, j = hi;
        while (i <= j) {
            while (c[i].logit > pivot) i++;
            while (c[j].logit < pivot) j--;
            if (i <= j) {
                cand_t t = c[i];
                c[i++] = c[j];
                c[j--] = t;
            }
        }
        if (k - 1 <= j)
            hi = j;
        else if (k - 1 >= i)
            lo = i;
        else
            break;
    }
}

/* Top-p over n candidates whose full softmax sum (relative to mx) is z: finds the smallest
 * prefix of the sorted candidates reaching top_p without sorting the whole vocabulary —
 * it sorts the best k, and widens k only when they do not reach top_p. Returns the new n. */
static int32_t top_p_cut(cand_t *c, int32_t n, float top_p, float mx, double z) {
    for (int32_t k = n > 256 ? 256 : n;; k = k * 4 < n ? k * 4 : n) {
        if (k < n) select_top(c, n, k);
        qsort(c, (size_t)k, sizeof *c, cand_desc);
        double cum = 0;
        for (int32_t i = 0; i < k; i++) {
            cum += exp((double)(c[i].logit - mx)) / z;
            if (cum >= top_p) return i + 1;
        }
        if (k == n) return n;
    }
}

/* The stochastic part of the chain over the penalised logits l; returns the drawn id. */
static int32_t draw(ul_step_seq_t *seq, const float *l, int32_t n_vocab, cand_t *c, float *buf) {
    const ul_sampling_t *sp = &seq->sampling;
    const float mx = vmax(l, n_vocab);
    const int top_k = sp->top_k > 0 && sp->top_k < n_vocab;
    const int top_p = sp->top_p < 1.0f && sp->top_p > 0.0f;
    const int min_p = sp->min_p > 0.0f && sp->min_p <= 1.0f;
    if (!top_k && !top_p && !min_p) { /* whole vocabulary: vectorised weights */
        double sum = expbuf(l, buf, n_vocab, mx, 1.0f / sp->temperature);
        double u = (double)ul_sampling_rng_uniform(seq->rng) * sum, acc = 0;
        for (int32_t i = 0; i < n_vocab; i++) {
            acc += buf[i];
            if (u < acc) return i;
        }
        return argmax_f(l, n_vocab);
    }
    int32_t n = n_vocab;
    for (int32_t i = 0; i < n; i++) c[i] = (cand_t){i, l[i]};
    if (top_k) {
        select_top(c, n, sp->top_k);
        n = sp->top_k;
    }
    if (top_p && n > 1) {
        double z = 0;
        if (n == n_vocab)
            z = sumexp(l, n_vocab, mx);
        else
            for (int32_t i = 0; i < n; i++) z += exp((double)(c[i].logit - mx));
        n = top_p_cut(c, n, sp->top_p, mx, z);
    }
    if (min_p) {
        /* p_i >= min_p * p_max  <=>  logit_i >= max + log(min_p) */
        float thr = mx + logf(sp->min_p);
        int32_t m = 0;
        for (int32_t i = 0; i < n; i++)
            if (c[i].logit >= thr) c[m++] = c[i];
        n = m;
    }
    double sum = 0;
    for (int32_t i = 0; i < n; i++) {
        float p = expf((c[i].logit - mx) / sp->temperature);
        c[i].logit = p; /* now an unnormalised probability */
        sum += p;
    }
    double u = (double)ul_sampling_rng_uniform(seq->rng) * sum, acc = 0;
    for (int32_t i = 0; i < n; i++) {
        acc += c[i].logit;
        if (u < acc) return c[i].id;
    }
    return c[n - 1].id;
}

/* Log-softmax of the raw logits at tok, and the n most likely raw candidates. */
static void fill_logprobs(ul_step_seq_t *seq, const float *logits, int32_t n_vocab, int32_t tok) {
    float mx = vmax(logits, n_vocab);
    float lse = mx + (float)log(sumexp(logits, n_vocab, mx));
    seq->out_logprob = logits[tok] - lse;
    int32_t k = seq->sampling.n_logprobs;
    if (k < 0) k = 0;
    if (k > UL_MAX_LOGPROBS) k = UL_MAX_LOGPROBS;
    if (k > n_vocab) k = n_vocab;
    int32_t n = 0;
    int32_t *ids = seq->out_top_ids;
    float *lp = seq->out_top_logprobs;
    /* insertion into a sorted top-k; ties keep the lower id first */
    for (int32_t i = 0; i < n_vocab && k > 0; i++) {
        float l = logits[i];
        if (n == k && l <= lp[n - 1]) continue;
        int32_t j = n < k ? n++ : k - 1;
        while (j > 0 && lp[j - 1] < l) {
            lp[j] = lp[j - 1];
            ids[j] = ids[j - 1];
            j--;
        }
        lp[j] = l;
        ids[j] = i;
    }
    for (int32_t i = 0; i < n; i++) lp[i] -= lse;
    seq->out_n_top = n;
}

/* OpenAI's logit_bias: added to the logits that choose, first in the chain (llama.cpp's
 * order), so penalties and truncation see the biased values. */
static void apply_bias(const ul_sampling_t *sp, float *l, int32_t n_vocab) {
    for (int32_t i = 0; i < sp->n_logit_bias; i++) {
        int32_t id = sp->logit_bias[i].id;
        if (id >= 0 && id < n_vocab) l[id] += sp->logit_bias[i].bias;
    }
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
    int32_t *counts = scratch;
    cand_t *c = (cand_t *)(counts + n_vocab);
    float *pl = (float *)(c + n_vocab);
    const float *l = logits;
    const int bias = seq->sampling.n_logit_bias > 0 && seq->sampling.logit_bias;
    if (bias || penalties_active(seq)) {
        memcpy(pl, logits, (size_t)n_vocab * sizeof *pl);
        if (bias) apply_bias(&seq->sampling, pl, n_vocab);
        if (penalties_active(seq)) apply_penalties(seq, pl, n_vocab, counts);
        l = pl;
    }
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
    fill_logprobs(seq, logits, n_vocab, tok);
    return tok;
}
