/* The distribution the sampling chain draws from, written out over the whole vocabulary:
 * what speculative sampling (spec_verify.c) needs of the target (p) and of a draft model
 * (q). It mirrors ul_sample (sampling.c) step by step, bias and penalties, truncation and
 * temperature (sample_chain.h), and a filter: ul_sample draws from the unmasked chain and,
 * when the filter refuses that id, draws again from the chain over the allowed ids only, so
 * its distribution is the first draw's allowed part plus the refused mass spread like the
 * second draw. Portable C: a few passes over the vocabulary per verified row, far less than
 * the row's logits cost to compute. */
#include <math.h>
#include <string.h>

#include "engine/sample_chain.h"
#include "engine/sampling.h"

typedef ul_sc_cand_t cand_t;

/* scratch (sampling.c): counts int32[n] | cand_t[n] | logits float[n] | mask uint32[n/32+1] |
 * dist float[n] | dist float[n] */
static cand_t *cands(void *scratch, int32_t n) { return (cand_t *)((int32_t *)scratch + n); }
static float *adj_logits(void *scratch, int32_t n) { return (float *)(cands(scratch, n) + n); }
static uint32_t *mask_bits(void *scratch, int32_t n) {
    return (uint32_t *)(adj_logits(scratch, n) + n);
}
static float *dist1(void *scratch, int32_t n) {
    return (float *)(mask_bits(scratch, n) + (size_t)n / 32 + 1);
}

float *ul_sample_scratch_dist(void *scratch, int32_t n_vocab) {
    return dist1(scratch, n_vocab) + n_vocab;
}

/* The chain's truncation over l as ul_sc_draw_truncated makes it: returns how many of c's
 * candidates are kept. */
static int32_t truncate(const ul_sc_params_t *p, const float *l, int32_t n, cand_t *c, float mx) {
    return ul_sc_truncate(p, l, n, c, mx, ul_sc_needs_z_all(p, n) ? ul_sc_sumexp(l, n, mx) : 0);
}

/* out = the chain's distribution over (adjusted, maybe masked) logits l, temperature > 0. */
static void chain_probs(const ul_sampling_t *sp, const float *l, int32_t n, cand_t *c, float *out) {
    const ul_sc_params_t p = {sp->temperature, sp->top_p, sp->min_p, sp->top_k};
    const float mx = ul_sc_vmax(l, n);
    double sum;
    if (!ul_sc_truncates(&p, n)) {
        sum = ul_sc_weights(l, out, n, mx, 1.0f / sp->temperature);
    } else {
        int32_t m = truncate(&p, l, n, c, mx);
        memset(out, 0, (size_t)n * sizeof *out);
        sum = 0;
        for (int32_t i = 0; i < m; i++) {
            float e = ul_sc_expf((c[i].logit - mx) / p.temperature);
            out[c[i].id] = e;
            sum += e;
        }
    }
    const float k = sum > 0 ? (float)(1.0 / sum) : 0.0f;
    for (int32_t i = 0; i < n; i++) out[i] *= k;
}

/* The filter's refused ids as mask bits (set = allowed). */
static void filter_mask(ul_token_filter_t *f, uint32_t *bits, int32_t n) {
    if (f->fill_mask) {
        f->fill_mask(f, bits);
        return;
    }
    memset(bits, 0, ((size_t)n + 31) / 32 * sizeof *bits);
    for (int32_t i = 0; i < n; i++)
        if (f->allows(f, i)) bits[i >> 5] |= 1u << (i & 31);
}

static int allowed(const uint32_t *bits, int32_t id) { return bits[id >> 5] >> (id & 31) & 1; }

void ul_sample_probs(const ul_step_seq_t *seq, const float *logits, int32_t n_vocab, void *scratch,
                     float *probs) {
    const ul_sampling_t *sp = &seq->sampling;
    const float *l = ul_sample_adjusted(seq, logits, n_vocab, scratch);
    cand_t *c = cands(scratch, n_vocab);
    chain_probs(sp, l, n_vocab, c, probs);
    if (!sp->filter) return;
    uint32_t *bits = mask_bits(scratch, n_vocab);
    filter_mask(sp->filter, bits, n_vocab);
    double refused = 0;
    for (int32_t i = 0; i < n_vocab; i++)
        if (!allowed(bits, i)) {
            refused += probs[i];
            probs[i] = 0.0f;
        }
    if (!(refused > 0)) return;
    /* the second draw: the chain over the allowed ids only */
    float *ml = adj_logits(scratch, n_vocab), *second = dist1(scratch, n_vocab);
    if (l != ml) memcpy(ml, l, (size_t)n_vocab * sizeof *ml);
    for (int32_t i = 0; i < n_vocab; i++)
        if (!allowed(bits, i)) ml[i] = -INFINITY;
    chain_probs(sp, ml, n_vocab, c, second);
    for (int32_t i = 0; i < n_vocab; i++) probs[i] += (float)refused * second[i];
}

int32_t ul_sample_draw(uint64_t rng[2], const float *w, int32_t n, double sum) {
    double u = (double)ul_sampling_rng_uniform(rng) * sum, acc = 0;
    int32_t last = 0;
    for (int32_t i = 0; i < n; i++) {
        if (!(w[i] > 0)) continue;
        acc += w[i];
        last = i;
        if (u < acc) return i;
    }
    return last; /* rounding at the top end */
}

int32_t ul_sample_with_probs(ul_step_seq_t *seq, const float *logits, int32_t n_vocab,
                             void *scratch) {
    float *q = seq->out_probs;
    ul_sample_probs(seq, logits, n_vocab, scratch, q);
    double sum = 0;
    for (int32_t i = 0; i < n_vocab; i++) sum += q[i];
    int32_t tok = ul_sample_draw(seq->rng, q, n_vocab, sum);
    if (seq->sampling.filter) seq->sampling.filter->accept(seq->sampling.filter, tok);
    seq->out_token = tok;
    ul_sample_logprobs(seq, logits, n_vocab, tok);
    return tok;
}
