/* Token sampling shared by every backend that produces logits on the host: penalties
 * (llama.cpp's repetition penalty, OpenAI's frequency/presence), top-k, top-p, min-p,
 * temperature, a seeded draw, and the logprobs reported with each token.
 *
 * Runs on backend threads (never on the loop): several threads may sample different
 * sequences at once, each with its own scratch. Nothing is allocated per token. */
#ifndef UL_ENGINE_SAMPLING_H
#define UL_ENGINE_SAMPLING_H

#include <stddef.h>
#include <stdint.h>

#include "uvllm/backend.h"

/* Chooses the code path of the vocabulary-sized reductions: AVX-512 when avx512f is non-zero
 * (the caller has checked the CPU has it), portable C otherwise and until it is called.
 * Called at start-up by the backend that samples, from the CPU features it detected once;
 * the engine does no feature detection of its own. Any thread. */
void ul_sampling_init(int avx512f);

/* Bytes of scratch one sampling thread needs for a vocabulary of n_vocab tokens. The
 * scratch must be zero-filled once when allocated (calloc); ul_sample leaves it so. */
size_t ul_sample_scratch_size(int32_t n_vocab);

/* Samples the token that follows seq's last token from its logits [n_vocab] under
 * seq->sampling: logit bias added, seq->history penalised, drawing from seq->rng (advanced
 * in place). Writes out_token, out_logprob (log-softmax of the raw logits, i.e. the model's
 * own distribution, before bias and penalties: a token forced by +100 may report a low
 * logprob) and the seq->sampling.n_logprobs most likely raw candidates.
 * Greedy (temperature <= 0): the largest biased and penalised logit, ties to the lowest id.
 * With seq->sampling.filter: when the chosen id is not allowed, every refused id is masked
 * (through the filter's fill_mask when it has one)
 * and the same chain chooses again (one more draw); the result is passed to accept.
 * Returns the token id. */
int32_t ul_sample(ul_step_seq_t *seq, const float *logits, int32_t n_vocab, void *scratch);

/* Speculative sampling's pieces (sample_dist.c): the distribution ul_sample draws from.
 *
 * ul_sample_probs: for temperature > 0, probs[n_vocab] = the probability that ul_sample
 * returns each id for seq and logits (bias, penalties over seq->history, the filter's
 * current state: a refused choice is drawn again from the masked chain, so the result is
 * the unmasked chain's allowed part plus the refused mass times the masked chain). Leaves
 * the filter and the RNG as they are. probs may not alias scratch.
 * ul_sample_with_probs: ul_sample for temperature > 0 that draws from that distribution
 * and also writes it to seq->out_probs (a draft model's q).
 * ul_sample_draw: an id drawn with weights w[0..n) summing to sum (> 0), advancing rng.
 * ul_sample_logprobs: seq's out_logprob and top candidates for tok from the raw logits.
 * ul_sample_adjusted: the logits with seq's bias and penalties (in scratch, or logits
 * itself when there are none). */
void ul_sample_probs(const ul_step_seq_t *seq, const float *logits, int32_t n_vocab, void *scratch,
                     float *probs);
int32_t ul_sample_with_probs(ul_step_seq_t *seq, const float *logits, int32_t n_vocab,
                             void *scratch);
int32_t ul_sample_draw(uint64_t rng[2], const float *w, int32_t n, double sum);
void ul_sample_logprobs(ul_step_seq_t *seq, const float *logits, int32_t n_vocab, int32_t tok);
const float *ul_sample_adjusted(const ul_step_seq_t *seq, const float *logits, int32_t n_vocab,
                                void *scratch);
/* The second of the scratch's two distributions (float[n_vocab]), free for callers of
 * ul_sample_probs (the first is its own). */
float *ul_sample_scratch_dist(void *scratch, int32_t n_vocab);

/* Seeds a 128-bit xoshiro128++ state from a 64-bit seed with splitmix64, so nearby seeds
 * give unrelated streams. */
void ul_sampling_rng_seed(uint64_t seed, uint64_t rng[2]);
/* Uniform float in [0, 1) from the state (24 random bits), advancing it. */
float ul_sampling_rng_uniform(uint64_t rng[2]);

#endif
