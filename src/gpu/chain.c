/* Planning the device gather of chained entries (chain.h). */
#include "gpu/chain.h"

#include "uvllm/err.h"

/* engine/worker.c's penalized: the entry's sampling reads its history. */
static int penalized(const ul_sampling_t *p) {
    return p->repeat_last_n != 0 && (p->repeat_penalty != 1.0f || p->frequency_penalty != 0.0f ||
                                     p->presence_penalty != 0.0f);
}

/* One chained entry's pair, or UL_CH_DEFER / UL_EINVAL. */
static int pair_of(const ul_step_seq_t *s, int32_t si, ul_ch_place_t c, const ul_ch_place_t *prev,
                   int32_t n_prev, ul_tw_chain_t *p) {
    if (s->chain > n_prev || s->n_tokens != 1) return UL_EINVAL;
    const int32_t pi = s->chain - 1;
    const ul_ch_place_t q = prev[pi];
    *p = (ul_tw_chain_t){.tok = s->tok_offset,
                         .ids = -1,
                         .smp = -1,
                         .rng = -1,
                         .hist = c.kind == UL_CH_DEV ? c.hist : -1,
                         .seq = si,
                         .prev = pi};
    if (c.kind == UL_CH_HOST && (s->sampling.filter || penalized(&s->sampling)))
        return q.kind == UL_CH_NONE ? UL_EINVAL : UL_CH_DEFER;
    switch (q.kind) {
    case UL_CH_ARGMAX:
        p->ids = q.idx;
        return 0;
    case UL_CH_DEV:
        if (c.kind == UL_CH_ARGMAX || c.kind == UL_CH_HOST) return UL_CH_DEFER;
        p->smp = q.idx;
        if (c.kind == UL_CH_DEV) p->rng = c.idx;
        return 0;
    case UL_CH_HOST:
        return UL_CH_DEFER;
    default:
        return UL_EINVAL; /* the entry it chains to samples nothing */
    }
}

int ul_ch_plan(const ul_step_seq_t *seqs, int32_t n_seqs, const ul_ch_place_t *cur,
               const ul_ch_place_t *prev, int32_t n_prev, ul_tw_chain_t *pairs, int32_t *n_pairs) {
    int32_t n = 0;
    int defer = 0;
    *n_pairs = 0;
    for (int32_t si = 0; si < n_seqs; si++) {
        if (seqs[si].chain <= 0) continue;
        int rc = pair_of(&seqs[si], si, cur[si], prev, n_prev, &pairs[n]);
        if (rc < 0) return rc; /* an invalid step fails even where another entry defers */
        if (rc == UL_CH_DEFER)
            defer = 1;
        else
            n++;
    }
    if (defer) return UL_CH_DEFER;
    *n_pairs = n;
    return 0;
}

void ul_ch_host_rng(const ul_tw_chain_t *pairs, int32_t n_pairs, ul_step_seq_t *seqs,
                    const ul_step_seq_t *prev_seqs, const ul_ch_place_t *cur,
                    ul_tw_sample_t *rows) {
    for (int32_t i = 0; i < n_pairs; i++) {
        const ul_tw_chain_t *p = &pairs[i];
        if (p->ids < 0) continue;
        ul_step_seq_t *s = &seqs[p->seq];
        s->rng[0] = prev_seqs[p->prev].rng[0];
        s->rng[1] = prev_seqs[p->prev].rng[1];
        if (cur[p->seq].kind == UL_CH_DEV) {
            rows[cur[p->seq].idx].rng[0] = s->rng[0];
            rows[cur[p->seq].idx].rng[1] = s->rng[1];
        }
    }
}
