/* What the CUDA backend can run, decided on the host before any device call: the
 * architectures whose forward pass backend_gpu.c enqueues and the weight types twin.h
 * dequantises. Plain C (no CUDA header), so a machine without a GPU tests the refusal. */
#ifndef UL_GPU_SUPPORT_H
#define UL_GPU_SUPPORT_H

#include <stddef.h>

#include "gpu/twin.h"
#include "model/model.h"
#include "uvllm/backend.h"

/* 0 when the CUDA backend runs m; otherwise UL_ENOTSUP (or UL_EINVAL for a model without
 * weights) and one line in err naming what is missing: the architecture ("architecture
 * gemma3 is not supported by the cuda backend (llama, qwen2, qwen3 are)"), or the tensor
 * and its type. Touches no device. */
int ul_gpu_check_model(const ul_model_t *m, char *err, size_t errlen);

/* Device sampling (sample.cu, twin.h's ul_tw_sample_row): seq's sampling laid out for the
 * device as ul_sample reads it. Its penalty window (the last repeat_last_n tokens, none
 * when no penalty is active) is appended to hist at *n_hist and its logit bias to
 * bias_ids/bias_vals at *n_bias, both advanced. A chained entry's (chain > 0, backend.h
 * "Pipelining") history is read as ending with its input token, not known yet: the window's
 * last entry (hist[out->hist_off + out->n_hist - 1]) is then -1, for gpu/chain.h's gather
 * to fill. UL_E2BIG, nothing appended, when either
 * would pass its capacity (the caller samples that row on the host instead). */
int ul_gpu_sample_pack(const ul_step_seq_t *seq, int32_t row, ul_tw_sample_t *out, int32_t *hist,
                       int32_t hist_cap, int32_t *n_hist, int32_t *bias_ids, float *bias_vals,
                       int32_t bias_cap, int32_t *n_bias);
/* The sampled token, its logprob, the top candidates and the advanced RNG into seq. */
void ul_gpu_sample_unpack(const ul_tw_sample_t *s, ul_step_seq_t *seq);

#endif
