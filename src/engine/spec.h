/* Speculative decoding on the backend's side (backend.h, "Speculative decoding"):
 * verifying an entry's proposals from the logits of its last rows (spec_verify.c), and the
 * speculative backend that drafts proposals on a draft model before the target's step
 * (spec_backend.c, ul_spec_backend_create in backend.h). */
#ifndef UL_ENGINE_SPEC_H
#define UL_ENGINE_SPEC_H

#include <stdint.h>

#include "uvllm/backend.h"

/* Samples after each of the entry's last spec->n_draft + 1 rows in turn, rows[j * n_vocab]
 * being the logits after the token before proposal j (rows[0]: after t0), as ul_sample
 * would one token at a time, while the sample is the next proposal (drafts[j]): greedy
 * accepts a proposal when it is the choice; with sampling, with probability
 * min(1, p(d) / q(d)), else the token is drawn from the residual max(0, p - q) (q: the
 * row of spec->draft_q, or certain). Fills spec->out and n_accepted, the entry's out_token,
 * logprobs and rng (advanced), and the filter (each produced token accepted in order).
 * Penalties read ss->history up to n_history + j at row j (the proposals follow the history:
 * backend.h). scratch: ul_sample_scratch_size(n_vocab) bytes of this thread's. */
void ul_spec_verify(ul_step_seq_t *ss, const int32_t *drafts, const float *rows, int32_t n_vocab,
                    void *scratch);

/* One row of speculative sampling (exposed for the statistical tests): with proposal d (< 0:
 * none, a plain draw) from q (NULL: certain), returns d with probability min(1, p(d)/q(d)),
 * else a draw from max(0, p - q) normalised, where p is the chain's distribution for seq and
 * logits (ul_sample_probs). Does not touch the filter. */
int32_t ul_spec_sample_row(ul_step_seq_t *seq, const float *logits, int32_t n_vocab, int32_t d,
                           const float *q, void *scratch);

#endif
