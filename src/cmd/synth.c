/* `uvllm synth` writes a random-weight llama, qwen2, qwen3, qwen3moe, gemma3 or phi3 model at a
 * real shape (TinyLlama-1.1B, a GPT-2-small-sized one, the shipped "mini", Gemma-3-1B,
 * Phi-3-mini, Qwen2.5-1.5B, Qwen3-30B-A3B's layer) or a tiny test one, with the vocabulary of a
 * given GGUF, so speed can be measured at sizes where it means something without shipping
 * weights. `uvllm quantize` converts a model's matrices to one type (norms f32) or to a
 * recipe's per-tensor mix (model/quant_mix.h). Both stream tensor data through the GGUF writer
 * row by row: multi-GB outputs never sit in memory. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mix.h"
#include "cmd/cmd.h"
#include "cpu/kernels.h"
#include "model/gguf.h"
#include "model/gguf_util.h"
#include "model/gguf_write.h"
#include "model/quant_mix.h"
#include "uvllm/err.h"

typedef struct {
    const char *name;
    int n_embd, n_layer, n_head, n_head_kv, n_ff, n_ctx;
    /* gemma3 / phi3 shapes (0: unused) */
    int head_dim;   /* attention.key_length; 0: n_embd / n_head */
    int n_rot;      /* rope.dimension_count; 0: head_dim */
    int n_swa;      /* attention.sliding_window (gemma3; phi3 writes it, llama.cpp ignores it) */
    int n_ctx_orig; /* phi3: rope.scaling.original_context_length, LongRoPE factors if > 0 */
    float softcap;  /* gemma3: final_logit_softcapping if > 0 */
    /* qwen3moe: experts, used per token, their FFN width (0: a dense model) */
    int n_expert, n_expert_used, n_ff_exp;
} shape_t;

static const shape_t g_shapes[] = {
    {"tinyllama", 2048, 22, 32, 4, 5632, 2048, 0, 0, 0, 0, 0, 0, 0, 0},
    {"small", 768, 12, 12, 12, 2048, 2048, 0, 0, 0, 0, 0, 0, 0, 0},
    {"mini", 256, 2, 4, 2, 768, 2048, 0, 0, 0, 0, 0, 0, 0, 0},
    {"qwen2.5-1.5b", 1536, 28, 12, 2, 8960, 4096, 0, 0, 0, 0, 0, 0, 0, 0},
    /* tests: head_dim * n_head != n_embd, 5 sliding layers (window 8) and 1 global, softcap */
    {"gemma3-tiny", 64, 6, 4, 2, 128, 2048, 32, 0, 8, 0, 4.0f, 0, 0, 0},
    {"gemma3-1b", 1152, 26, 4, 1, 6912, 32768, 256, 0, 512, 0, 0, 0, 0, 0},
    /* tests: fused qkv with GQA, partial rotary (24 of 32), LongRoPE long factors in use
     * (context 4096 > 2048), a sliding window that must be ignored */
    {"phi3-tiny", 128, 2, 4, 2, 256, 4096, 0, 24, 8, 2048, 0, 0, 0, 0},
    {"phi3-mini", 3072, 32, 32, 32, 8192, 4096, 0, 0, 2047, 0, 0, 0, 0, 0},
    /* Qwen3-30B-A3B (48 layers; --layers N cuts it) and a tiny one for tests (qwen3moe) */
    {"30b-a3b", 2048, 48, 32, 4, 6144, 4096, 128, 0, 0, 0, 0, 128, 8, 768},
    {"moe-tiny", 64, 2, 4, 2, 192, 2048, 16, 0, 0, 0, 0, 16, 4, 64},
};

static int shape_hd(const shape_t *s) { return s->head_dim ? s->head_dim : s->n_embd / s->n_head; }
static int shape_rot(const shape_t *s) { return s->n_rot ? s->n_rot : shape_hd(s); }

/* general.file_type values llama.cpp uses for "mostly <type>". */
static int file_type_of(int type) {
    switch (type) {
    case UL_TYPE_F32:
        return 0;
    case UL_TYPE_F16:
        return 1;
    case UL_TYPE_Q4_0:
        return 2;
    case UL_TYPE_Q4_1:
        return 3;
    case UL_TYPE_Q8_0:
        return 7;
    case UL_TYPE_Q5_0:
        return 8;
    case UL_TYPE_Q5_1:
        return 9;
    case UL_TYPE_BF16:
        return 32;
    default:
        return -1;
    }
}

static int parse_type(const char *s) {
    static const int types[] = {UL_TYPE_F32,  UL_TYPE_F16,  UL_TYPE_BF16, UL_TYPE_Q8_0,
                                UL_TYPE_Q4_0, UL_TYPE_Q4_1, UL_TYPE_Q5_0, UL_TYPE_Q5_1};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (!strcmp(s, ul_type_name(types[i]))) return types[i];
    return -1;
}

/* ---- random numbers: xoshiro256** and Box-Muller, seeded for reproducible files ---- */

typedef struct {
    uint64_t s[4];
} rng_t;

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(rng_t *r) {
    uint64_t *s = r->s, out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0], s[3] ^= s[1], s[1] ^= s[2], s[0] ^= s[3], s[2] ^= t, s[3] = rotl(s[3], 45);
    return out;
}

static void rng_seed(rng_t *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = ul_splitmix64(&seed);
}

static void fill_normal(rng_t *r, float *x, int64_t n, float std) {
    for (int64_t i = 0; i < n; i += 2) {
        double u1 = ((rng_next(r) >> 11) + 1.0) * 0x1.0p-53, u2 = (rng_next(r) >> 11) * 0x1.0p-53;
        double m = sqrt(-2.0 * log(u1)) * std;
        x[i] = (float)(m * cos(2 * M_PI * u2));
        if (i + 1 < n) x[i + 1] = (float)(m * sin(2 * M_PI * u2));
    }
}

/* ---- synth ---- */

static void synth_usage(FILE *f) {
    fprintf(f, "usage: uvllm synth --shape SHAPE --vocab VOCAB.gguf OUT.gguf\n"
               "                   [--arch llama|qwen2|qwen3|qwen3moe|gemma3|phi3] [--layers N]\n"
               "                   [--experts E --experts-used K --expert-ff F]\n"
               "                   [--type f32|f16|bf16|q8_0|q4_0|q4_1|q5_0|q5_1|q4_k_m|q5_k_m|\n"
               "                           q6_k|iq4_nl|iq4_xs] [--seed N]\n"
               "SHAPE: tinyllama|small|mini|qwen2.5-1.5b (any arch), gemma3-tiny|gemma3-1b\n"
               "(gemma3), phi3-tiny|phi3-mini (phi3), moe-tiny (the qwen3moe default)|30b-a3b\n"
               "(qwen3moe).\n"
               "Random weights (normal, std 1/sqrt(fan_in)), norms 1, vocabulary copied from\n"
               "VOCAB.gguf (any GGUF with tokenizer.* keys). qwen2 adds q/k/v biases (normal,\n"
               "std 0.1), qwen3 per-head q/k norms (1); both use rope.freq_base 1e6. gemma3\n"
               "and phi3 norms are 1 + normal(0, 0.1); gemma3 has tied output, q/k and post\n"
               "norms; phi3 fused attn_qkv and gate|up, LongRoPE factors on phi3-tiny.\n"
               "qwen3moe is qwen3 with a router (f32) and E experts of width F, K used per\n"
               "token, instead of the dense FFN.\n"
               "A recipe (q4_k_m, ...) mixes types per tensor as llama-quantize does for it,\n"
               "written directly (no f16 file in between).\n");
}

typedef struct {
    const char *name;
    int64_t ne0, ne1; /* ne1 == 0: a 1-d norm (or bias) */
    int bias;         /* 1-d: 0 ones, 1 normal(0, 0.1), 2 1 + normal(0, 0.1) (gemma3/phi3
                       * norms), 3 / 4 phi3's long / short RoPE factors */
    int64_t ne2;      /* > 0: a stack of ne2 matrices (qwen3moe's experts) */
    int f32;          /* a matrix kept f32 whatever --type says (the MoE router, as llama.cpp) */
} wdesc_t;

enum { ARCH_LLAMA, ARCH_QWEN2, ARCH_QWEN3, ARCH_GEMMA3, ARCH_PHI3, ARCH_QWEN3MOE };
static const char *const g_archs[] = {"llama", "qwen2", "qwen3", "gemma3", "phi3", "qwen3moe"};
#define MAX_PER_LAYER 18

/* Appends layer l's tensors of w (those with a name) to d[n..] as "blk.L.NAME". */
static int add_layer(wdesc_t *d, int n, char (*names)[48], int l, const wdesc_t *w, size_t nw) {
    for (size_t k = 0; k < nw; k++) {
        if (!w[k].name) continue;
        snprintf(names[n], 48, "blk.%d.%s", l, w[k].name);
        d[n] = w[k];
        d[n].name = names[n];
        n++;
    }
    return n;
}

/* The tensor list in llama.cpp's order (llama; qwen2's biases and qwen3's q/k norms
 * follow the layer's llama tensors). Returns the count written to d. */
/* gemma3 (llama.cpp's tensor order, tied output) and phi3 (fused qkv and gate|up, the
 * LongRoPE factors first). */
static int synth_tensors_gp(const shape_t *s, int arch, int64_t n_vocab, wdesc_t *d,
                            char (*names)[48]) {
    const int64_t e = s->n_embd, hd = shape_hd(s), q = (int64_t)s->n_head * hd,
                  kv = (int64_t)s->n_head_kv * hd, ff = s->n_ff;
    const int g = arch == ARCH_GEMMA3;
    int n = 0;
    if (!g && s->n_ctx_orig) {
        d[n++] = (wdesc_t){"rope_factors_long.weight", shape_rot(s) / 2, 0, 3, 0, 0};
        d[n++] = (wdesc_t){"rope_factors_short.weight", shape_rot(s) / 2, 0, 4, 0, 0};
    }
    d[n++] = (wdesc_t){"token_embd.weight", e, n_vocab, 0, 0, 0};
    for (int l = 0; l < s->n_layer; l++) {
        const wdesc_t w[] = {
            {"attn_norm.weight", e, 0, 2, 0, 0},
            {g ? "attn_q.weight" : "attn_qkv.weight", e, g ? q : q + 2 * kv, 0, 0, 0},
            {g ? "attn_k.weight" : NULL, e, kv, 0, 0, 0},
            {g ? "attn_v.weight" : NULL, e, kv, 0, 0, 0},
            {"attn_output.weight", q, e, 0, 0, 0},
            {g ? "attn_q_norm.weight" : NULL, hd, 0, 2, 0, 0},
            {g ? "attn_k_norm.weight" : NULL, hd, 0, 2, 0, 0},
            {g ? "post_attention_norm.weight" : NULL, e, 0, 2, 0, 0},
            {"ffn_norm.weight", e, 0, 2, 0, 0},
            {g ? "ffn_gate.weight" : NULL, e, ff, 0, 0, 0},
            {"ffn_up.weight", e, g ? ff : 2 * ff, 0, 0, 0},
            {"ffn_down.weight", ff, e, 0, 0, 0},
            {g ? "post_ffw_norm.weight" : NULL, e, 0, 2, 0, 0}};
        n = add_layer(d, n, names, l, w, sizeof w / sizeof w[0]);
    }
    d[n++] = (wdesc_t){"output_norm.weight", e, 0, 2, 0, 0};
    if (!g) d[n++] = (wdesc_t){"output.weight", e, n_vocab, 0, 0, 0};
    return n;
}

static int synth_tensors(const shape_t *s, int arch, int64_t n_vocab, wdesc_t *d,
                         char (*names)[48]) {
    if (arch == ARCH_GEMMA3 || arch == ARCH_PHI3)
        return synth_tensors_gp(s, arch, n_vocab, d, names);
    int64_t e = s->n_embd, hd = shape_hd(s), kv = (int64_t)s->n_head_kv * hd;
    int64_t q = (int64_t)s->n_head * hd, ne = s->n_expert, fe = s->n_ff_exp;
    const int moe = arch == ARCH_QWEN3MOE, qk_norm = arch == ARCH_QWEN3 || moe;
    int n = 0;
    d[n++] = (wdesc_t){"token_embd.weight", e, n_vocab, 0, 0, 0};
    for (int l = 0; l < s->n_layer; l++) {
        const wdesc_t w[] = {{"attn_norm.weight", e, 0, 0, 0, 0},
                             {"attn_q.weight", e, q, 0, 0, 0},
                             {"attn_k.weight", e, kv, 0, 0, 0},
                             {"attn_v.weight", e, kv, 0, 0, 0},
                             {"attn_output.weight", q, e, 0, 0, 0},
                             {"ffn_norm.weight", e, 0, 0, 0, 0},
                             {moe ? NULL : "ffn_gate.weight", e, s->n_ff, 0, 0, 0},
                             {moe ? NULL : "ffn_up.weight", e, s->n_ff, 0, 0, 0},
                             {moe ? NULL : "ffn_down.weight", s->n_ff, e, 0, 0, 0},
                             {arch == ARCH_QWEN2 ? "attn_q.bias" : NULL, q, 0, 1, 0, 0},
                             {arch == ARCH_QWEN2 ? "attn_k.bias" : NULL, kv, 0, 1, 0, 0},
                             {arch == ARCH_QWEN2 ? "attn_v.bias" : NULL, kv, 0, 1, 0, 0},
                             {qk_norm ? "attn_q_norm.weight" : NULL, hd, 0, 0, 0, 0},
                             {qk_norm ? "attn_k_norm.weight" : NULL, hd, 0, 0, 0, 0},
                             {moe ? "ffn_gate_inp.weight" : NULL, e, ne, 0, 0, 1},
                             {moe ? "ffn_gate_exps.weight" : NULL, e, fe, 0, ne, 0},
                             {moe ? "ffn_up_exps.weight" : NULL, e, fe, 0, ne, 0},
                             {moe ? "ffn_down_exps.weight" : NULL, fe, e, 0, ne, 0}};
        n = add_layer(d, n, names, l, w, sizeof w / sizeof w[0]);
    }
    d[n++] = (wdesc_t){"output_norm.weight", e, 0, 0, 0, 0};
    d[n++] = (wdesc_t){"output.weight", e, n_vocab, 0, 0, 0};
    return n;
}

static int synth_meta(ul_gguf_writer_t *w, const shape_t *s, int arch, const ul_gguf_t *voc,
                      int64_t n_vocab, int type) {
    const char *a = g_archs[arch];
    char name[64], key[96];
    /* without the arch prefix: llama.cpp's vocabulary loader treats a general.name holding
     * "phi3" as Phi-3's and fails on a vocabulary without its special tokens */
    const char *dash = strchr(s->name, '-');
    snprintf(name, sizeof name, "synthetic-%s", dash ? dash + 1 : s->name);
    int rc = 0;
#define KEY(suffix) (snprintf(key, sizeof key, "%s.%s", a, suffix), key)
    rc = rc ? rc : ul_gguf_w_str(w, "general.architecture", a, strlen(a));
    rc = rc ? rc : ul_gguf_w_str(w, "general.name", name, strlen(name));
    /* type < 0: a recipe's general.file_type, -ftype - 1 */
    rc = rc ? rc
            : ul_gguf_w_u32(w, "general.file_type",
                            (uint32_t)(type < 0 ? -type - 1 : file_type_of(type)));
    rc = rc ? rc : ul_gguf_w_u32(w, "general.quantization_version", 2);
    rc = rc ? rc : ul_gguf_w_u32(w, KEY("context_length"), (uint32_t)s->n_ctx);
    rc = rc ? rc : ul_gguf_w_u32(w, KEY("embedding_length"), (uint32_t)s->n_embd);
    rc = rc ? rc : ul_gguf_w_u32(w, KEY("block_count"), (uint32_t)s->n_layer);
    rc = rc ? rc : ul_gguf_w_u32(w, KEY("feed_forward_length"), (uint32_t)s->n_ff);
    rc = rc ? rc : ul_gguf_w_u32(w, KEY("rope.dimension_count"), (uint32_t)shape_rot(s));
    rc = rc ? rc : ul_gguf_w_u32(w, KEY("attention.head_count"), (uint32_t)s->n_head);
    rc = rc ? rc : ul_gguf_w_u32(w, KEY("attention.head_count_kv"), (uint32_t)s->n_head_kv);
    rc = rc ? rc
            : ul_gguf_w_f32(w, KEY("attention.layer_norm_rms_epsilon"),
                            arch == ARCH_LLAMA ? 1e-5f : 1e-6f);
    rc = rc ? rc : ul_gguf_w_f32(w, KEY("rope.freq_base"), arch == ARCH_LLAMA ? 10000.0f : 1e6f);
    rc = rc ? rc : ul_gguf_w_u32(w, KEY("vocab_size"), (uint32_t)n_vocab);
    if (arch == ARCH_QWEN3 || arch == ARCH_GEMMA3 || arch == ARCH_QWEN3MOE) {
        rc = rc ? rc : ul_gguf_w_u32(w, KEY("attention.key_length"), (uint32_t)shape_hd(s));
        rc = rc ? rc : ul_gguf_w_u32(w, KEY("attention.value_length"), (uint32_t)shape_hd(s));
    }
    if (arch == ARCH_QWEN3MOE) {
        rc = rc ? rc : ul_gguf_w_u32(w, KEY("expert_count"), (uint32_t)s->n_expert);
        rc = rc ? rc : ul_gguf_w_u32(w, KEY("expert_used_count"), (uint32_t)s->n_expert_used);
        rc = rc ? rc : ul_gguf_w_u32(w, KEY("expert_feed_forward_length"), (uint32_t)s->n_ff_exp);
    }
    if ((arch == ARCH_GEMMA3 || arch == ARCH_PHI3) && s->n_swa)
        rc = rc ? rc : ul_gguf_w_u32(w, KEY("attention.sliding_window"), (uint32_t)s->n_swa);
    if (arch == ARCH_GEMMA3 && s->softcap > 0)
        rc = rc ? rc : ul_gguf_w_f32(w, KEY("final_logit_softcapping"), s->softcap);
    if (arch == ARCH_PHI3 && s->n_ctx_orig) {
        /* the converter's LongRoPE attn_factor: sqrt(1 + ln(scale) / ln(orig)) */
        double scale = (double)s->n_ctx / s->n_ctx_orig;
        rc = rc ? rc
                : ul_gguf_w_u32(w, KEY("rope.scaling.original_context_length"),
                                (uint32_t)s->n_ctx_orig);
        rc = rc ? rc
                : ul_gguf_w_f32(w, KEY("rope.scaling.attn_factor"),
                                (float)sqrt(1 + log(scale) / log(s->n_ctx_orig)));
    }
#undef KEY
    for (uint64_t i = 0; !rc && i < voc->n_kv; i++) {
        const ul_gguf_kv_t *kv = &voc->kv[i];
        if (kv->key.len > 10 && !memcmp(kv->key.ptr, "tokenizer.", 10))
            rc = ul_gguf_w_copy_kv(w, kv);
    }
    return rc;
}

/* Ends the streamed file (when the writer was made) and frees the writer: the first error
 * of rc and the end is the result. */
static int finish_writer(ul_gguf_writer_t *w, int rc) {
    if (w) {
        int rc2 = ul_gguf_w_end(w);
        rc = rc ? rc : rc2;
    }
    ul_gguf_writer_free(w);
    return rc;
}

/* Generates and streams one tensor row by row. */
static int synth_data(ul_gguf_writer_t *w, const wdesc_t *d, int type, rng_t *r, float *row,
                      void *qrow) {
    if (!d->ne1) {
        if (d->bias == 1 || d->bias == 2)
            fill_normal(r, row, d->ne0, 0.1f);
        else
            for (int64_t i = 0; i < d->ne0; i++) row[i] = 0.0f;
        for (int64_t i = 0; i < d->ne0; i++) /* the RoPE factors grow with the frequency index */
            row[i] += d->bias == 1   ? 0.0f
                      : d->bias == 3 ? 1.0f + 0.5f * (float)i
                      : d->bias == 4 ? 1.0f + 0.05f * (float)i
                                     : 1.0f;
        return ul_gguf_w_data(w, row, (size_t)d->ne0 * sizeof(float));
    }
    float std = 1.0f / sqrtf((float)d->ne0);
    for (int64_t j = 0; j < d->ne1 * (d->ne2 ? d->ne2 : 1); j++) {
        fill_normal(r, row, d->ne0, std);
        size_t nb = ul_cpu_quant_row(d->f32 ? UL_TYPE_F32 : type, row, qrow, d->ne0);
        int rc = nb ? ul_gguf_w_data(w, qrow, nb) : UL_EINVAL;
        if (rc) return rc;
    }
    return 0;
}

/* The type of each tensor: the --type for matrices and f32 for vectors, or a recipe's mix
 * (what it leaves alone is written as a plain f16 synth writes it). */
static int synth_types(const shape_t *s, const ul_qmix_recipe_t *mix, int type, const wdesc_t *d,
                       int n, int *types) {
    for (int i = 0; i < n; i++)
        types[i] = d[i].ne1 && !d[i].f32 ? (mix ? UL_TYPE_F16 : type) : UL_TYPE_F32;
    if (!mix) return 0;
    ul_qmix_tensor_t *t = calloc((size_t)n, sizeof *t);
    int *mt = calloc((size_t)n, sizeof *mt);
    int rc = t && mt ? 0 : UL_ENOMEM;
    for (int i = 0; !rc && i < n; i++)
        t[i] = (ul_qmix_tensor_t){d[i].name, d[i].ne2 ? 3 : d[i].ne1 ? 2 : 1, d[i].ne0};
    const ul_qmix_model_t m = {s->n_layer, s->n_expert, s->n_head, s->n_head_kv};
    if (!rc) rc = ul_qmix_types(mix, &m, t, n, mt);
    for (int i = 0; !rc && i < n; i++)
        if (mt[i] >= 0 && !d[i].f32) types[i] = mt[i];
    free(t);
    free(mt);
    return rc;
}

static int synth_write(const shape_t *s, int arch, const ul_gguf_t *voc, int64_t n_vocab, int type,
                       const ul_qmix_recipe_t *mix, uint64_t seed, const char *out) {
    int max_t = 6 + MAX_PER_LAYER * s->n_layer;
    wdesc_t *d = calloc((size_t)max_t, sizeof *d);
    char(*names)[48] = calloc((size_t)max_t, sizeof *names);
    int64_t max_row = s->n_embd > s->n_ff ? s->n_embd : s->n_ff;
    if ((int64_t)s->n_head * shape_hd(s) > max_row) max_row = (int64_t)s->n_head * shape_hd(s);
    if (s->n_ff_exp > max_row) max_row = s->n_ff_exp;
    float *row = malloc((size_t)max_row * sizeof *row);
    void *qrow = malloc((size_t)max_row * sizeof(float));
    ul_gguf_writer_t *w = NULL;
    int rc = d && names && row && qrow ? ul_gguf_writer_new(&w, 0) : UL_ENOMEM;
    int n = rc ? 0 : synth_tensors(s, arch, n_vocab, d, names);
    int *types = calloc((size_t)max_t, sizeof *types);
    if (!rc && !types) rc = UL_ENOMEM;
    if (!rc) rc = synth_types(s, mix, type, d, n, types);
    if (!rc) rc = synth_meta(w, s, arch, voc, n_vocab, mix ? -mix->ftype - 1 : type);
    for (int i = 0; !rc && i < n; i++)
        rc = ul_gguf_w_tensor(w, d[i].name, (uint32_t)types[i],
                              d[i].ne2   ? 3
                              : d[i].ne1 ? 2
                                         : 1,
                              (int64_t[]){d[i].ne0, d[i].ne1, d[i].ne2}, NULL);
    if (!rc) rc = ul_gguf_w_begin(w, out);
    rng_t r;
    rng_seed(&r, seed);
    for (int i = 0; !rc && i < n; i++) rc = synth_data(w, &d[i], types[i], &r, row, qrow);
    free(types);
    rc = finish_writer(w, rc);
    free(d);
    free(names);
    free(row);
    free(qrow);
    return rc;
}

/* Option a of ov_opt with value v into ov; 0 if a is none of them. Values in [0, 1e6]. */
static int synth_override(const char *a, const char *v, const char *const *ov_opt, long *ov) {
    for (int i = 0; i < 3; i++) {
        if (strcmp(a, ov_opt[i])) continue;
        char *end;
        long x = strtol(v, &end, 10);
        ov[i] = *v && !*end && x >= 0 && x <= 1000000 ? x : 0;
        return 1;
    }
    return 0;
}

int ul_cmd_synth(int argc, char **argv) {
    const char *shape = NULL, *vocab = NULL, *out = NULL, *tname = "f16", *aname = "llama";
    uint64_t seed = 42;
    long layers = 0;
    /* qwen3moe's overrides of the shape: --experts, --experts-used, --expert-ff */
    static const char *const ov_opt[] = {"--experts", "--experts-used", "--expert-ff"};
    long ov[3] = {-1, -1, -1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return synth_usage(stdout), 0;
        if (i + 1 < argc && !strcmp(a, "--shape"))
            shape = argv[++i];
        else if (i + 1 < argc && !strcmp(a, "--vocab"))
            vocab = argv[++i];
        else if (i + 1 < argc && !strcmp(a, "--type"))
            tname = argv[++i];
        else if (i + 1 < argc && !strcmp(a, "--arch"))
            aname = argv[++i];
        else if (i + 1 < argc && !strcmp(a, "--seed"))
            seed = strtoull(argv[++i], NULL, 0);
        else if (i + 1 < argc && !strcmp(a, "--layers"))
            layers = strtol(argv[++i], NULL, 10);
        else if (i + 1 < argc && synth_override(a, argv[i + 1], ov_opt, ov))
            i++;
        else if (a[0] != '-' && !out)
            out = a;
        else
            return synth_usage(stderr), 2;
    }
    shape_t sh = {0};
    const shape_t *s = NULL;
    const ul_qmix_recipe_t *mix = ul_qmix_find(tname);
    int type = mix ? mix->base : parse_type(tname), arch = -1;
    for (int i = 0; i < (int)(sizeof g_archs / sizeof g_archs[0]); i++)
        if (!strcmp(aname, g_archs[i])) arch = i;
    if (!shape && arch == ARCH_QWEN3MOE) shape = "moe-tiny";
    for (size_t i = 0; shape && i < sizeof g_shapes / sizeof g_shapes[0]; i++)
        if (!strcmp(shape, g_shapes[i].name)) s = &g_shapes[i];
    if (!s || !vocab || !out || type < 0 || arch < 0 || layers < 0 || layers > 1024)
        return synth_usage(stderr), 2;
    /* a gemma3-/phi3- shape is for that architecture only; the others for any */
    if ((!strncmp(s->name, "gemma3", 6) && arch != ARCH_GEMMA3) ||
        (!strncmp(s->name, "phi3", 4) && arch != ARCH_PHI3)) {
        fprintf(stderr, "uvllm: shape %s needs --arch %.*s\n", s->name,
                (int)(strchr(s->name, '-') - s->name), s->name);
        return 2;
    }
    sh = *s;
    if (layers) sh.n_layer = (int)layers;
    int *fld[3] = {&sh.n_expert, &sh.n_expert_used, &sh.n_ff_exp};
    for (int i = 0; i < 3; i++)
        if (ov[i] >= 0) *fld[i] = (int)ov[i];
    if ((arch == ARCH_QWEN3MOE) != (sh.n_expert > 0 && sh.n_expert_used > 0 &&
                                    sh.n_expert_used <= sh.n_expert && sh.n_ff_exp > 0)) {
        fprintf(stderr, "uvllm: synth: %s needs %s (1 <= experts-used <= experts, expert-ff > 0)\n",
                g_archs[arch], arch == ARCH_QWEN3MOE ? "experts" : "no experts");
        return 2;
    }
    s = &sh;
    ul_gguf_t voc;
    if (ul_gguf_open(&voc, vocab)) {
        fprintf(stderr, "uvllm: %s: %s\n", vocab, voc.err);
        return 1;
    }
    const ul_gguf_kv_t *toks = ul_gguf_find(&voc, "tokenizer.ggml.tokens");
    if (!toks || toks->type != UL_GGUF_ARRAY || toks->arr_type != UL_GGUF_STRING || !toks->n) {
        fprintf(stderr, "uvllm: %s: no tokenizer.ggml.tokens array\n", vocab);
        ul_gguf_free(&voc);
        return 1;
    }
    int rc = synth_write(s, arch, &voc, (int64_t)toks->n, type, mix, seed, out);
    ul_gguf_free(&voc);
    if (rc) {
        fprintf(stderr, "uvllm: %s: write failed: %s\n", out, ul_strerror(rc));
        return 1;
    }
    return 0;
}

/* ---- quantize ---- */

static void quantize_usage(FILE *f) {
    fprintf(f,
            "usage: uvllm quantize IN.gguf OUT.gguf TYPE\n"
            "  TYPE f32|f16|bf16|q8_0|q4_0|q4_1|q5_0|q5_1: every matrix (2-d tensor) becomes\n"
            "       the type; 1-d tensors (norms) become f32; matrices whose rows are not\n"
            "       whole blocks of the type become f16.\n"
            "  TYPE %s: a recipe, the types mixed per tensor as\n"
            "       llama-quantize mixes them (no importance matrix); what it leaves alone\n"
            "       (norms, biases, router weights) is copied as it is.\n",
            ul_qmix_names());
}

static int out_type(const ul_gguf_tensor_t *t, int want) {
    if (t->n_dims < 2) return UL_TYPE_F32;
    return ul_type_row_bytes(want, t->ne[0]) ? want : UL_TYPE_F16;
}

static int quantize_data(ul_gguf_writer_t *w, const ul_gguf_tensor_t *t, int type, float *row,
                         void *qrow) {
    if (type == (int)t->type) return ul_gguf_w_data(w, t->data, t->nbytes);
    size_t in_row = ul_type_row_bytes((int)t->type, t->ne[0]);
    int64_t rows = (int64_t)(t->nbytes / in_row);
    for (int64_t j = 0; j < rows; j++) {
        ul_cpu_dequant_row((int)t->type, (const uint8_t *)t->data + (size_t)j * in_row, row,
                           t->ne[0]);
        size_t nb = ul_cpu_quant_row(type, row, qrow, t->ne[0]);
        int rc = nb ? ul_gguf_w_data(w, qrow, nb) : UL_EINVAL;
        if (rc) return rc;
    }
    return 0;
}

/* <arch>.KEY as u32, or dflt */
static int arch_u32(const ul_gguf_t *g, const char *key, int dflt) {
    ul_str_t a;
    char k[128];
    uint32_t v;
    if (ul_gguf_get_str(g, "general.architecture", &a)) return dflt;
    snprintf(k, sizeof k, "%.*s.%s", (int)(a.len < 64 ? a.len : 64), a.ptr, key);
    return ul_gguf_get_u32(g, k, &v) ? dflt : (int)v;
}

/* The output type of every tensor: the plain type's rule, or the recipe's mix with what it
 * leaves alone kept in its input type. */
static int quantize_types(const ul_gguf_t *g, const ul_qmix_recipe_t *mix, int type, int *types) {
    for (uint64_t i = 0; i < g->n_tensors; i++)
        types[i] = mix ? (int)g->tensors[i].type : out_type(&g->tensors[i], type);
    if (!mix) return 0;
    const int n = (int)g->n_tensors;
    ul_qmix_tensor_t *t = calloc((size_t)n + 1, sizeof *t);
    char(*names)[256] = calloc((size_t)n + 1, sizeof *names);
    int *mt = calloc((size_t)n + 1, sizeof *mt);
    int rc = t && names && mt ? 0 : UL_ENOMEM;
    for (int i = 0; !rc && i < n; i++) {
        const ul_gguf_tensor_t *gt = &g->tensors[i];
        snprintf(names[i], sizeof names[i], "%.*s", (int)(gt->name.len < 255 ? gt->name.len : 255),
                 gt->name.ptr);
        t[i] = (ul_qmix_tensor_t){names[i], (int)gt->n_dims, gt->ne[0]};
    }
    const int n_head = arch_u32(g, "attention.head_count", 1);
    const ul_qmix_model_t m = {arch_u32(g, "block_count", 0), arch_u32(g, "expert_count", 0),
                               n_head, arch_u32(g, "attention.head_count_kv", n_head)};
    if (!rc) rc = ul_qmix_types(mix, &m, t, n, mt);
    for (int i = 0; !rc && i < n; i++)
        if (mt[i] >= 0) types[i] = mt[i];
    free(t);
    free(names);
    free(mt);
    return rc;
}

static int quantize_write(const ul_gguf_t *g, const ul_qmix_recipe_t *mix, int type,
                          const char *out, int *n_fallback) {
    static const int readable[] = {UL_TYPE_F32,   UL_TYPE_F16,  UL_TYPE_BF16, UL_TYPE_Q8_0,
                                   UL_TYPE_Q4_0,  UL_TYPE_Q4_1, UL_TYPE_Q5_0, UL_TYPE_Q5_1,
                                   UL_TYPE_Q4_K,  UL_TYPE_Q5_K, UL_TYPE_Q6_K, UL_TYPE_IQ4_NL,
                                   UL_TYPE_IQ4_XS};
    int *types = calloc(g->n_tensors + 1, sizeof *types);
    if (!types) return UL_ENOMEM;
    int rc = quantize_types(g, mix, type, types);
    int64_t max_row = 1;
    for (uint64_t i = 0; !rc && i < g->n_tensors; i++) {
        int ok = types[i] == (int)g->tensors[i].type; /* copied as it is */
        for (size_t k = 0; k < sizeof readable / sizeof readable[0]; k++)
            ok |= (int)g->tensors[i].type == readable[k];
        if (!ok) rc = UL_ENOTSUP;
        if (g->tensors[i].ne[0] > max_row) max_row = g->tensors[i].ne[0];
    }
    const int ftype = mix ? mix->ftype : file_type_of(type);
    float *row = malloc((size_t)max_row * sizeof *row);
    void *qrow = malloc((size_t)max_row * sizeof(float));
    ul_gguf_writer_t *w = NULL;
    if (!rc)
        rc = row && qrow ? ul_gguf_writer_new(&w, g->alignment == 32 ? 0 : (uint32_t)g->alignment)
                         : UL_ENOMEM;
    for (uint64_t i = 0; !rc && i < g->n_kv; i++) {
        const ul_gguf_kv_t *kv = &g->kv[i];
        if (ul_str_eq(kv->key, "general.alignment")) continue; /* the writer records it */
        if (ul_str_eq(kv->key, "general.file_type"))
            rc = ul_gguf_w_u32(w, "general.file_type", (uint32_t)ftype);
        else
            rc = ul_gguf_w_copy_kv(w, kv);
    }
    if (!rc && !ul_gguf_find(g, "general.file_type"))
        rc = ul_gguf_w_u32(w, "general.file_type", (uint32_t)ftype);
    *n_fallback = 0;
    for (uint64_t i = 0; !rc && i < g->n_tensors; i++) {
        const ul_gguf_tensor_t *t = &g->tensors[i];
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(t->name.len < 255 ? t->name.len : 255),
                 t->name.ptr);
        *n_fallback += !mix && t->n_dims >= 2 && types[i] != type;
        rc = ul_gguf_w_tensor(w, name, (uint32_t)types[i], t->n_dims, t->ne, NULL);
    }
    if (!rc) rc = ul_gguf_w_begin(w, out);
    for (uint64_t i = 0; !rc && i < g->n_tensors; i++)
        rc = quantize_data(w, &g->tensors[i], types[i], row, qrow);
    rc = finish_writer(w, rc);
    free(types);
    free(row);
    free(qrow);
    return rc;
}

int ul_cmd_quantize(int argc, char **argv) {
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")))
        return quantize_usage(stdout), 0;
    if (argc != 4) return quantize_usage(stderr), 2;
    const ul_qmix_recipe_t *mix = ul_qmix_find(argv[3]);
    int type = mix ? mix->base : parse_type(argv[3]);
    if (type < 0) return quantize_usage(stderr), 2;
    ul_gguf_t g;
    if (ul_gguf_open(&g, argv[1])) {
        fprintf(stderr, "uvllm: %s: %s\n", argv[1], g.err);
        return 1;
    }
    int n_fallback = 0;
    int rc = quantize_write(&g, mix, type, argv[2], &n_fallback);
    ul_gguf_free(&g);
    if (rc) {
        fprintf(stderr, "uvllm: %s: %s\n", argv[2],
                rc == UL_ENOTSUP ? "input has a tensor type that cannot be converted"
                                 : ul_strerror(rc));
        return 1;
    }
    if (n_fallback)
        fprintf(stderr, "uvllm: %d matrices with rows not a multiple of the %s block stay f16\n",
                n_fallback, ul_type_name(type));
    return 0;
}
