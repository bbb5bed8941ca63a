/* Chained entries resolved on the device (uvllm/backend.h "Pipelining"): when step N + 1
 * reaches the CUDA backend while step N is still in flight, each chained entry's input
 * token (and, for a row the device sampler draws, its RNG state) is gathered on the compute
 * stream from what step N left on the device (chain.cu, twin.h's ul_tw_chain_apply), after
 * N's sampling and before N + 1's embedding gather, and into the end of the entry's penalty
 * window when it has one (its history ends before that token). That works only for rows
 * step N sampled on the device; a chain to a row sampled on the host (a filter, rows past
 * the device sampler's or its buffers: logits copied back) makes the backend defer the step
 * (engine/worker.h UL_WORKER_DEFER): the worker hands it over again once N completed,
 * resolved on the host. This is the decision, as data, so the host tests it. Plain C. */
#ifndef UL_GPU_CHAIN_H
#define UL_GPU_CHAIN_H

#include <stdint.h>

#include "gpu/twin.h"
#include "uvllm/backend.h"

/* How a step sampled one of its entries (ul_ch_place_t.kind). */
enum {
    UL_CH_NONE = 0, /* it samples nothing */
    UL_CH_ARGMAX,   /* the parallel argmax: idx is its output row (the ids[] index); the RNG
                     * state is left as it came in */
    UL_CH_DEV,      /* the device sampler: idx is its row (token and advanced RNG state) */
    UL_CH_HOST      /* on the host after the step (idx: its row of copied-back logits) */
};

typedef struct {
    int32_t kind, idx;
    int32_t hist; /* DEV rows of chained entries: where the input token goes in the step's
                   * penalty windows (ul_gpu_sample_pack leaves -1 there), else -1 */
} ul_ch_place_t;

/* ul_ch_plan's answer when a chained entry cannot be resolved on the device. */
#define UL_CH_DEFER 1

/* The gather pairs of a step: seqs [n_seqs] and cur [n_seqs] (how this step samples each
 * entry) against prev [n_prev] (how the step before it sampled each of its entries). For
 * each entry with chain > 0, in seqs order, one pair into pairs (room for n_seqs):
 *   - previous row ARGMAX: the token from its ids[] (the RNG state it left is the one it
 *     came in with, known on the host: ul_ch_host_rng);
 *   - previous row DEV: the token from its sampled row, and when this step's row is DEV too
 *     the RNG state into that row;
 *   - the token also into the row's penalty window at cur's hist, if any.
 * Returns 0 (*n_pairs pairs; 0 when nothing chains), UL_CH_DEFER when some entry chains to
 * a HOST row, or to a DEV row while its own row is ARGMAX or HOST (the advanced RNG state
 * would be needed on the host), or when its own row is sampled on the host with a filter or
 * penalties (they read the history, which ends with the token: the worker's to extend), or
 * UL_EINVAL: chain past n_prev, an entry of other than one token, a chain to an entry that
 * sampled nothing. */
int ul_ch_plan(const ul_step_seq_t *seqs, int32_t n_seqs, const ul_ch_place_t *cur,
               const ul_ch_place_t *prev, int32_t n_prev, ul_tw_chain_t *pairs, int32_t *n_pairs);

/* For the pairs from the previous step's argmax rows: the RNG state that step's entry came
 * in with (prev_seqs, still in flight: the backend's to read) into this step's entry, and
 * into its device-sampled row (rows, indexed by cur's idx) when it has one. */
void ul_ch_host_rng(const ul_tw_chain_t *pairs, int32_t n_pairs, ul_step_seq_t *seqs,
                    const ul_step_seq_t *prev_seqs, const ul_ch_place_t *cur, ul_tw_sample_t *rows);

#endif
