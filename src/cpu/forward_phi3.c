/* phi3's part of the forward pass. Its fused tensors (attn_qkv, the 2*n_ff ffn_up) arrive as
 * views from the loader (model_arch.c) and run as forward.c's stacked products; Q scaling
 * before attention is hp.q_scale (forward_attn.c), NEOX RoPE hp.rope_neox. What remains is
 * LongRoPE: which frequency factors a context length uses. */
#include "cpu/forward.h"

/* llama.cpp's llama_model::get_rope_factors: a rope_freqs tensor wins; otherwise the long
 * factors when the per-sequence context exceeds the original training context
 * (rope.scaling.original_context_length), else the short ones. llama.cpp's context is
 * n_ctx / n_seq_max, here the longest sequence the engine accepts. */
const float *ul_fwd_rope_factors(const ul_model_t *m, int32_t n_ctx) {
    if (m->rope_freqs) return m->rope_freqs->data;
    const ul_gguf_tensor_t *t = n_ctx > m->hp.n_ctx_orig ? m->rope_long : m->rope_short;
    return t ? t->data : NULL;
}
