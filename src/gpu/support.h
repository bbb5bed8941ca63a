/* What the CUDA backend can run, decided on the host before any device call: the
 * architectures whose forward pass backend_gpu.c enqueues and the weight types twin.h
 * dequantises. Plain C (no CUDA header), so a machine without a GPU tests the refusal. */
#ifndef UL_GPU_SUPPORT_H
#define UL_GPU_SUPPORT_H

#include <stddef.h>

#include "model/model.h"

/* 0 when the CUDA backend runs m; otherwise UL_ENOTSUP (or UL_EINVAL for a model without
 * weights) and one line in err naming what is missing: the architecture ("architecture
 * gemma3 is not supported by the cuda backend (llama, qwen2, qwen3 are)"), or the tensor
 * and its type. Touches no device. */
int ul_gpu_check_model(const ul_model_t *m, char *err, size_t errlen);

#endif
