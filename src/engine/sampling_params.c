/* Defaults of the sampling parameters (OpenAI's, with llama.cpp's penalty window). */
#include "uvllm/backend.h"

void ul_sampling_default(ul_sampling_t *s) {
    *s = (ul_sampling_t){.temperature = 1.0f,
                         .top_k = 0,
                         .top_p = 1.0f,
                         .min_p = 0.0f,
                         .repeat_penalty = 1.0f,
                         .repeat_last_n = 64,
                         .frequency_penalty = 0.0f,
                         .presence_penalty = 0.0f,
                         .seed = 0,
                         .n_logprobs = 0,
                         .logit_bias = NULL,
                         .n_logit_bias = 0};
}
