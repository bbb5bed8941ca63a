/* Sampling chain, in llama.cpp's default order: penalties -> top-k -> top-p -> min-p ->
 * temperature -> seeded draw. Greedy skips everything after the penalties. The logprobs
 * reported are the model's own (raw logits), as OpenAI-style clients expect, whatever the
 * sampling parameters did to the draw. */
#include "engine/sampling.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int32_t id;
    float logit;
} cand_t;

/* scratch = counts int32[n_vocab] (kept zero between calls) | cand_t[n_vocab] */
size_t ul_sample_scratch_size(int32_t n_vocab) {
    return (size_t)n_vocab * (sizeof(int32_t) + sizeof(cand_t));
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
    return (float)(xoshiro_next(rng) >> 8) * (1.0f / 16777216.0f);
}

/* llama.cpp's penalties sampler: each distinct token of the window is penalised once,
 * with its count in the window driving the frequency term. counts[] returns to zero. */
static void apply_penalties(const ul_step_seq_t *seq, cand_t *c, int32_t n_vocab,
                            int32_t *counts) {
    const ul_sampling_t *sp = &seq->sampling;
    if (sp->repeat_last_n == 0 || !seq->history || seq->n_history <= 0) return;
    if (sp->repeat_penalty == 1.0f && sp->frequency_penalty == 0.0f &&
        sp->presence_penalty == 0.0f)
        return;
    int32_t w = sp->repeat_last_n < 0 ? seq->n_history
                                      : (sp->repeat_last_n < seq->n_history ? sp->repeat_last_n
                                                                            : seq->n_history);
    const int32_t *h = seq->history + (seq->n_history - w);
    for (int32_t i = 0; i < w; i++)
        if (h[i] >= 0 && h[i] < n_vocab) counts[h[i]]++;
    for (int32_t i = 0; i < w; i++) {
        int32_t t = h[i];
        if (t < 0 || t >= n_vocab || counts[t] == 0) continue;
        float l = c[t].logit;
        if (sp->repeat_penalty != 1.0f && sp->repeat_penalty > 0.0f)
            l = l <= 0 ? l * sp->repeat_penalty : l / sp->repeat_penalty;
        l -= (float)counts[t] * sp->frequency_penalty + sp->presence_penalty;
        c[t].logit = l;
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
        if (k - 1 <= j) hi = j;
        else if (k - 1 >= i) lo = i;
        else break;
    }
}

static int32_t argmax(const cand_t *c, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (c[i].logit > c[best].logit) best = i;
    return c[best].id;
}

/* The stochastic part of the chain over n candidates; returns the drawn id. */
static int32_t draw(ul_step_seq_t *seq, cand_t *c, int32_t n) {
    const ul_sampling_t *sp = &seq->sampling;
    if (sp->top_k > 0 && sp->top_k < n) {
        select_top(c, n, sp->top_k);
        n = sp->top_k;
    }
    if (sp->top_p < 1.0f && sp->top_p > 0.0f && n > 1) {
        qsort(c, (size_t)n, sizeof *c, cand_desc);
        double sum = 0;
        for (int32_t i = 0; i < n; i++) sum += exp((double)(c[i].logit - c[0].logit));
        double cum = 0;
        for (int32_t i = 0; i < n; i++) {
            cum += exp((double)(c[i].logit - c[0].logit)) / sum;
            if (cum >= sp->top_p) {
                n = i + 1;
                break;
            }
        }
    }
    float mx = c[0].logit;
    for (int32_t i = 1; i < n; i++) mx = c[i].logit > mx ? c[i].logit : mx;
    if (sp->min_p > 0.0f && sp->min_p <= 1.0f) {
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
    float mx = logits[0];
    for (int32_t i = 1; i < n_vocab; i++) mx = logits[i] > mx ? logits[i] : mx;
    double sum = 0;
    for (int32_t i = 0; i < n_vocab; i++) sum += expf(logits[i] - mx);
    float lse = mx + (float)log(sum);
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

int32_t ul_sample(ul_step_seq_t *seq, const float *logits, int32_t n_vocab, void *scratch) {
    int32_t *counts = scratch;
    cand_t *c = (cand_t *)(counts + n_vocab);
    for (int32_t i = 0; i < n_vocab; i++) c[i] = (cand_t){i, logits[i]};
    apply_penalties(seq, c, n_vocab, counts);
    int32_t tok;
    if (!(seq->sampling.temperature > 0.0f)) tok = argmax(c, n_vocab);
    else tok = draw(seq, c, n_vocab);
    seq->out_token = tok;
    fill_logprobs(seq, logits, n_vocab, tok);
    return tok;
}
