/* Verifying proposals (engine/spec.h): the entry's last rows are sampled one after the other
 * as if the sequence had decoded them one at a time, and a proposal stands while it is what
 * that sampling gives. Greedy rows go through ul_sample itself, so a verified greedy token is
 * bit for bit the token of plain decoding from the same logits; sampled rows follow
 * speculative sampling (Leviathan et al., Chen et al.), which keeps the distribution. */
#include "engine/spec.h"

#include <string.h>

#include "engine/sampling.h"

int32_t ul_spec_sample_row(ul_step_seq_t *seq, const float *logits, int32_t n_vocab, int32_t d,
                           const float *q, void *scratch) {
    float *p = ul_sample_scratch_dist(scratch, n_vocab);
    ul_sample_probs(seq, logits, n_vocab, scratch, p);
    if (d >= 0 && d < n_vocab) {
        const float qd = q ? q[d] : 1.0f;
        /* accept with probability min(1, p(d) / q(d)) */
        if (qd > 0 && ul_sampling_rng_uniform(seq->rng) * qd < p[d]) return d;
        double sum = 0;
        for (int32_t i = 0; i < n_vocab; i++) {
            float r = p[i] - (q ? q[i] : (float)(i == d));
            p[i] = r > 0 ? r : 0.0f;
            sum += p[i];
        }
        if (sum > 0) return ul_sample_draw(seq->rng, p, n_vocab, sum);
        /* p <= q everywhere yet d refused: only by rounding; draw from p itself */
        ul_sample_probs(seq, logits, n_vocab, scratch, p);
    }
    double sum = 0;
    for (int32_t i = 0; i < n_vocab; i++) sum += p[i];
    return ul_sample_draw(seq->rng, p, n_vocab, sum);
}

static void copy_out(ul_step_out_t *o, const ul_step_seq_t *v) {
    o->token = v->out_token;
    o->logprob = v->out_logprob;
    o->n_top = v->out_n_top;
    if (v->out_n_top > 0) {
        memcpy(o->top_ids, v->out_top_ids, (size_t)v->out_n_top * sizeof *o->top_ids);
        memcpy(o->top_logprobs, v->out_top_logprobs,
               (size_t)v->out_n_top * sizeof *o->top_logprobs);
    }
}

/* One row: the token plain decoding would give (greedy), or speculative sampling's. */
static int32_t sample_row(ul_step_seq_t *v, const float *l, int32_t n_vocab, int32_t d,
                          const float *q, void *scratch) {
    if (!(v->sampling.temperature > 0.0f)) return ul_sample(v, l, n_vocab, scratch);
    int32_t tok = ul_spec_sample_row(v, l, n_vocab, d, q, scratch);
    if (v->sampling.filter) v->sampling.filter->accept(v->sampling.filter, tok);
    v->out_token = tok;
    ul_sample_logprobs(v, l, n_vocab, tok);
    return tok;
}

void ul_spec_verify(ul_step_seq_t *ss, const int32_t *drafts, const float *rows, int32_t n_vocab,
                    void *scratch) {
    ul_step_spec_t *sp = ss->spec;
    const int32_t k = sp->n_draft;
    /* a view whose history grows by the proposals accepted so far */
    ul_step_seq_t v = *ss;
    v.spec = NULL;
    v.out_probs = NULL;
    int32_t j = 0;
    for (;; j++) {
        const int32_t d = j < k ? drafts[j] : -1;
        const float *q = sp->draft_q && d >= 0 ? sp->draft_q + (size_t)j * n_vocab : NULL;
        if (ss->history) v.n_history = ss->n_history + j;
        int32_t tok = sample_row(&v, rows + (size_t)j * n_vocab, n_vocab, d, q, scratch);
        copy_out(&sp->out[j], &v);
        if (d < 0 || tok != d) break;
    }
    sp->n_accepted = j;
    ss->rng[0] = v.rng[0];
    ss->rng[1] = v.rng[1];
    ss->out_token = v.out_token;
    ss->out_logprob = v.out_logprob;
    ss->out_n_top = v.out_n_top;
    memcpy(ss->out_top_ids, v.out_top_ids, sizeof ss->out_top_ids);
    memcpy(ss->out_top_logprobs, v.out_top_logprobs, sizeof ss->out_top_logprobs);
}
