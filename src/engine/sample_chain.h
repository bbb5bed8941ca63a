/* The sampling chain, one copy for every path that samples: the CPU backend's ul_sample
 * (engine/sampling.c) and the CUDA sampling kernel with its host twin (gpu/twin.h,
 * gpu/sample.cu), so the same logits, parameters and RNG state draw the same token on
 * both. Plain C11 and CUDA C++ alike: __host__ __device__ under nvcc, static inline in C;
 * sequential per row (the device runs a row on one thread).
 *
 * Order (llama.cpp's): logit bias -> penalties -> greedy argmax, or top-k (quickselect) ->
 * top-p (sorted prefix) -> min-p -> temperature -> one uniform draw; then the logprobs of
 * the raw logits. The vocabulary-sized reductions (the largest logit, sums of exponentials)
 * are passed in where a caller has faster ones (the CPU's AVX-512 pass, whose exponentials
 * round differently in the last bits); ul_sc_vmax and ul_sc_sumexp are the portable ones.
 *
 * The RNG is xoshiro128++ over the four 32-bit words of a uint64_t[2] state, seeded with
 * splitmix64 (base/mix.h) so that nearby seeds give unrelated streams. */
#ifndef UL_ENGINE_SAMPLE_CHAIN_H
#define UL_ENGINE_SAMPLE_CHAIN_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "base/mix.h"

#define UL_SC UL_HOST_DEVICE

typedef struct {
    int32_t id;
    float logit; /* after the draw's temperature step: an unnormalised probability */
} ul_sc_cand_t;

/* The truncation and temperature of one draw. */
typedef struct {
    float temperature, top_p, min_p;
    int32_t top_k;
} ul_sc_params_t;

#ifdef __CUDA_ARCH__ /* the device's expf and logf are not glibc's; through double they round like \
                        it */
UL_SC float ul_sc_expf(float x) { return (float)exp((double)x); }
UL_SC float ul_sc_logf(float x) { return (float)log((double)x); }
#else
UL_SC float ul_sc_expf(float x) { return expf(x); }
UL_SC float ul_sc_logf(float x) { return logf(x); }
#endif

/* ---- the RNG ---- */

UL_SC void ul_sc_rng_seed(uint64_t seed, uint64_t rng[2]) {
    rng[0] = ul_splitmix64(&seed);
    rng[1] = ul_splitmix64(&seed);
    if (!rng[0] && !rng[1]) rng[0] = 1; /* xoshiro's all-zero state is a fixed point */
}

UL_SC uint32_t ul_sc_rotl32(uint32_t x, int k) { return (x << k) | (x >> (32 - k)); }

/* Uniform in [0, 1): 24 random bits of xoshiro128++, advancing the state; a never-seeded
 * (all-zero) state is seeded from 0 first, not a stuck stream. */
UL_SC float ul_sc_uniform(uint64_t rng[2]) {
    if (!rng[0] && !rng[1]) ul_sc_rng_seed(0, rng);
    uint32_t s[4] = {(uint32_t)rng[0], (uint32_t)(rng[0] >> 32), (uint32_t)rng[1],
                     (uint32_t)(rng[1] >> 32)};
    uint32_t r = ul_sc_rotl32(s[0] + s[3], 7) + s[0];
    uint32_t t = s[1] << 9;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = ul_sc_rotl32(s[3], 11);
    rng[0] = (uint64_t)s[0] | (uint64_t)s[1] << 32;
    rng[1] = (uint64_t)s[2] | (uint64_t)s[3] << 32;
    return (float)(r >> 8) * (1.0f / 16777216.0f);
}

/* ---- portable reductions ---- */

UL_SC float ul_sc_vmax(const float *x, int32_t n) {
    float r = x[0];
    for (int32_t i = 1; i < n; i++) r = x[i] > r ? x[i] : r;
    return r;
}
/* The lowest id holding mx, the largest value (llama.cpp's greedy tie rule); 0 if none. */
UL_SC int32_t ul_sc_first_of(const float *x, int32_t n, float mx) {
    for (int32_t i = 0; i < n; i++)
        if (x[i] == mx) return i;
    return 0; /* all NaN */
}
UL_SC double ul_sc_sumexp(const float *x, int32_t n, float mx) {
    double r = 0;
    for (int32_t i = 0; i < n; i++) r += ul_sc_expf(x[i] - mx);
    return r;
}
/* w[i] = e^((x[i] - mx) * k), returns their sum; w NULL: the sum only. */
UL_SC double ul_sc_weights(const float *x, float *w, int32_t n, float mx, float k) {
    double r = 0;
    for (int32_t i = 0; i < n; i++) {
        float e = ul_sc_expf((x[i] - mx) * k);
        if (w) w[i] = e;
        r += e;
    }
    return r;
}

/* ---- penalties: llama.cpp's repetition penalty, OpenAI's frequency and presence ---- */

UL_SC float ul_sc_penalize(float v, int32_t count, float rep, float freq, float pres) {
    if (rep != 1.0f && rep > 0.0f) v = v <= 0 ? v * rep : v / rep;
    return v - ((float)count * freq + pres);
}

/* Penalises l for the tokens of the window h[0..w): each distinct token once, its count in
 * the window driving the frequency term. counts [n_vocab] is zero and left zero. */
UL_SC void ul_sc_penalties(float *l, int32_t n_vocab, const int32_t *h, int32_t w, int32_t *counts,
                           float rep, float freq, float pres) {
    for (int32_t i = 0; i < w; i++)
        if (h[i] >= 0 && h[i] < n_vocab) counts[h[i]]++;
    for (int32_t i = 0; i < w; i++) {
        int32_t t = h[i];
        if (t < 0 || t >= n_vocab || counts[t] == 0) continue;
        l[t] = ul_sc_penalize(l[t], counts[t], rep, freq, pres);
        counts[t] = 0;
    }
}

/* ---- truncation ---- */

/* Larger logit first, then lower id: a total order, so every sort agrees. */
UL_SC int ul_sc_cand_before(ul_sc_cand_t a, ul_sc_cand_t b) {
    if (a.logit != b.logit) return a.logit > b.logit;
    return a.id < b.id;
}
UL_SC void ul_sc_sift(ul_sc_cand_t *c, int32_t i, int32_t n) {
    for (;;) { /* a heap whose root is the last in sorted order */
        int32_t m = i, l = 2 * i + 1, r = l + 1;
        if (l < n && ul_sc_cand_before(c[m], c[l])) m = l;
        if (r < n && ul_sc_cand_before(c[m], c[r])) m = r;
        if (m == i) return;
        ul_sc_cand_t t = c[i];
        c[i] = c[m];
        c[m] = t;
        i = m;
    }
}
UL_SC void ul_sc_sort(ul_sc_cand_t *c, int32_t n) { /* heapsort: no recursion, no qsort */
    for (int32_t i = n / 2 - 1; i >= 0; i--) ul_sc_sift(c, i, n);
    for (int32_t e = n - 1; e > 0; e--) {
        ul_sc_cand_t t = c[0];
        c[0] = c[e];
        c[e] = t;
        ul_sc_sift(c, 0, e);
    }
}

/* Moves the k largest candidates to the front (unordered), quickselect: the draw walks the
 * candidates in the order it leaves them. */
UL_SC void ul_sc_select_top(ul_sc_cand_t *c, int32_t n, int32_t k) {
    int32_t lo = 0, hi = n - 1;
    while (lo < hi) {
        float pivot = c[lo + (hi - lo) / 2].logit;
        int32_t i = lo, j = hi;
        while (i <= j) {
            while (c[i].logit > pivot) i++;
            while (c[j].logit < pivot) j--;
            if (i <= j) {
                ul_sc_cand_t t = c[i];
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

/* Top-p over n candidates whose softmax sum (relative to mx) is z: the smallest prefix of
 * the sorted candidates reaching top_p, without sorting the whole vocabulary (it sorts the
 * best k, and widens k only when they fall short). Returns the new n. */
UL_SC int32_t ul_sc_top_p_cut(ul_sc_cand_t *c, int32_t n, float top_p, float mx, double z) {
    for (int32_t k = n > 256 ? 256 : n;; k = k * 4 < n ? k * 4 : n) {
        if (k < n) ul_sc_select_top(c, n, k);
        ul_sc_sort(c, k);
        double cum = 0;
        for (int32_t i = 0; i < k; i++) {
            cum += exp((double)(c[i].logit - mx)) / z;
            if (cum >= top_p) return i + 1;
        }
        if (k == n) return n;
    }
}

UL_SC int ul_sc_has_top_k(const ul_sc_params_t *p, int32_t n_vocab) {
    return p->top_k > 0 && p->top_k < n_vocab;
}
UL_SC int ul_sc_has_top_p(const ul_sc_params_t *p) { return p->top_p < 1.0f && p->top_p > 0.0f; }
UL_SC int ul_sc_has_min_p(const ul_sc_params_t *p) { return p->min_p > 0.0f && p->min_p <= 1.0f; }
/* Whether the draw truncates the vocabulary (else it draws from all of it). */
UL_SC int ul_sc_truncates(const ul_sc_params_t *p, int32_t n_vocab) {
    return ul_sc_has_top_k(p, n_vocab) || ul_sc_has_top_p(p) || ul_sc_has_min_p(p);
}
/* Whether ul_sc_draw_truncated needs z_all, the softmax sum of the whole vocabulary. */
UL_SC int ul_sc_needs_z_all(const ul_sc_params_t *p, int32_t n_vocab) {
    return ul_sc_has_top_p(p) && !ul_sc_has_top_k(p, n_vocab);
}

/* ---- the draw ---- */

/* From the whole vocabulary: weights w[i] = e^((l[i] - mx) / T) summing to sum (w NULL: they
 * are computed again as they are walked). */
UL_SC int32_t ul_sc_draw_all(uint64_t rng[2], const float *l, const float *w, int32_t n_vocab,
                             float mx, float temperature, double sum) {
    const float k = 1.0f / temperature;
    double u = (double)ul_sc_uniform(rng) * sum, acc = 0;
    for (int32_t i = 0; i < n_vocab; i++) {
        acc += w ? w[i] : ul_sc_expf((l[i] - mx) * k);
        if (u < acc) return i;
    }
    return ul_sc_first_of(l, n_vocab, mx);
}

/* The truncation: top-k, top-p, min-p of l into candidates c [n_vocab]; returns how many
 * are kept. mx: the largest of l; z_all: the softmax sum of all of l relative to mx, read
 * only when ul_sc_needs_z_all. (sample_dist.c writes the distribution of what it keeps.) */
UL_SC int32_t ul_sc_truncate(const ul_sc_params_t *p, const float *l, int32_t n_vocab,
                             ul_sc_cand_t *c, float mx, double z_all) {
    int32_t n = n_vocab;
    for (int32_t i = 0; i < n; i++) {
        c[i].id = i;
        c[i].logit = l[i];
    }
    if (ul_sc_has_top_k(p, n_vocab)) {
        ul_sc_select_top(c, n, p->top_k);
        n = p->top_k;
    }
    if (ul_sc_has_top_p(p) && n > 1) {
        double z = 0;
        if (n == n_vocab)
            z = z_all;
        else
            for (int32_t i = 0; i < n; i++) z += exp((double)(c[i].logit - mx));
        n = ul_sc_top_p_cut(c, n, p->top_p, mx, z);
    }
    if (ul_sc_has_min_p(p)) { /* p_i >= min_p * p_max  <=>  logit_i >= max + log(min_p) */
        float thr = mx + ul_sc_logf(p->min_p);
        int32_t m = 0;
        for (int32_t i = 0; i < n; i++)
            if (c[i].logit >= thr) c[m++] = c[i];
        n = m;
    }
    return n;
}

/* With truncation (ul_sc_truncates): ul_sc_truncate, then temperature and the draw. */
UL_SC int32_t ul_sc_draw_truncated(const ul_sc_params_t *p, uint64_t rng[2], const float *l,
                                   int32_t n_vocab, ul_sc_cand_t *c, float mx, double z_all) {
    int32_t n = ul_sc_truncate(p, l, n_vocab, c, mx, z_all);
    double sum = 0;
    for (int32_t i = 0; i < n; i++) {
        float e = ul_sc_expf((c[i].logit - mx) / p->temperature);
        c[i].logit = e;
        sum += e;
    }
    double u = (double)ul_sc_uniform(rng) * sum, acc = 0;
    for (int32_t i = 0; i < n; i++) {
        acc += c[i].logit;
        if (u < acc) return c[i].id;
    }
    return c[n - 1].id;
}

/* The k most likely raw candidates (k clamped to 0..max_k and n_vocab), most likely first,
 * ties to the lower id, as logprobs given lse, the log-sum-exp of the logits. Returns how
 * many were written. */
UL_SC int32_t ul_sc_top_logprobs(const float *logits, int32_t n_vocab, float lse, int32_t k,
                                 int32_t max_k, int32_t *ids, float *lp) {
    if (k < 0) k = 0;
    if (k > max_k) k = max_k;
    if (k > n_vocab) k = n_vocab;
    int32_t n = 0;
    for (int32_t i = 0; i < n_vocab && k > 0; i++) { /* insertion into a sorted top-k */
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
    return n;
}

#endif
