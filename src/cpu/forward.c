/* The `llama` forward pass over one batched step (see forward.h). Numerics follow
 * llama.cpp's CPU path: RMSNorm with a double sum of squares, RoPE in NORM mode (adjacent
 * pairs, theta advanced by repeated multiplication as ggml's rope cache does), attention
 * as llama.cpp's CPU flash-attention (forward_attn.c), SwiGLU with silu(x) = x/(1+e^-x).
 *
 * Parallel layout inside one pool job: element-wise phases split the tokens over the
 * threads; every linear layer is one ul_cpu_matmul over all tokens of the step (the
 * kernel splits rows and has its own barriers); attention hands out (token, KV head)
 * items from an atomic counter, most expensive (latest) tokens first. qwen2 / qwen3 add
 * their pieces (biases, q/k norms, NEOX RoPE) from forward_arch.c. */
#include "cpu/forward.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu/attn.h"
#include "cpu/pool.h"
#include "engine/sampling.h"
#include "engine/spec.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

#define MAX_LOGIT_ROWS 64

static uint64_t ul_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---------- creation ---------- */

static int check_weight(const ul_gguf_tensor_t *w, const char *what) {
    if (!w) return 0;
    if (!ul_cpu_type_supported((int)w->type)) {
        UL_LOG_ERROR("cpu: %s: weight type %s has no CPU kernel", what, ul_type_name((int)w->type));
        return UL_ENOTSUP;
    }
    return 0;
}

static int check_model(const ul_model_t *m) {
    const ul_hparams_t *hp = &m->hp;
    if (hp->encoder) return ul_fwd_bert_check(m);
    if (strcmp(hp->arch, "llama") && strcmp(hp->arch, "qwen2") && strcmp(hp->arch, "qwen3") &&
        strcmp(hp->arch, "qwen3moe") && strcmp(hp->arch, "gemma3") && strcmp(hp->arch, "phi3")) {
        UL_LOG_ERROR("cpu: architecture '%s' is not supported", hp->arch);
        return UL_ENOTSUP;
    }
    if (!m->layers || !m->tok_embd || !m->output || !m->output_norm) return UL_EINVAL;
    if (hp->n_head_kv <= 0 || hp->n_head % hp->n_head_kv || hp->n_rot > hp->head_dim ||
        hp->n_rot % 2)
        return UL_ENOTSUP;
    int rc = check_weight(m->output, "output");
    if (m->output_norm->type != UL_TYPE_F32) return UL_ENOTSUP;
    for (int il = 0; !rc && il < hp->n_layer; il++) {
        const ul_layer_t *L = &m->layers[il];
        if (L->attn_norm->type != UL_TYPE_F32 || L->ffn_norm->type != UL_TYPE_F32)
            return UL_ENOTSUP;
        const ul_gguf_tensor_t *ws[] = {L->wq,       L->wk,     L->wv,      L->wo,
                                        L->ffn_gate, L->ffn_up, L->ffn_down};
        for (size_t i = 0; !rc && i < sizeof ws / sizeof ws[0]; i++)
            rc = check_weight(ws[i], "layer");
    }
    if (!rc && !ul_type_block_elems((int)m->tok_embd->type)) rc = UL_ENOTSUP;
    return rc;
}

static size_t max_mm_scratch(const ul_model_t *m, int n_tok) {
    size_t mx = m->output ? ul_cpu_matmul_scratch((int)m->output->type, m->output->ne[0], n_tok)
                          : 0; /* bert: no output matrix */
    for (int il = 0; il < m->hp.n_layer; il++) {
        const ul_layer_t *L = &m->layers[il];
        const ul_gguf_tensor_t *ws[] = {L->wq,       L->wk,     L->wv,      L->wo,
                                        L->ffn_gate, L->ffn_up, L->ffn_down};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) {
            if (!ws[i]) continue; /* MoE layers: no dense FFN; bert: no gate */
            size_t s = ul_cpu_matmul_scratch((int)ws[i]->type, ws[i]->ne[0], n_tok);
            mx = s > mx ? s : mx;
        }
    }
    return mx;
}

/* Carves the scratch from one allocation: each piece 64-byte aligned. */
static void *carve(uint8_t **p, size_t bytes) {
    void *r = *p;
    *p += (bytes + 63) & ~(size_t)63;
    return r;
}

static int alloc_scratch(ul_fwd_t *f) {
    const ul_hparams_t *hp = &f->hp;
    const size_t B = (size_t)f->max_tokens, E = (size_t)hp->n_embd, F = sizeof(float);
    size_t mm = max_mm_scratch(f->m, f->max_tokens);
    f->attn_tmp_floats = ul_fwd_attn_tmp_floats(f->n_gqa, hp->head_dim, f->kv.page_size);
    if (f->max_tokens >= UL_ATTN_TILE) {
        const size_t tf = ul_fwd_attn_tile_floats(hp->head_dim);
        f->attn_tmp_floats = tf > f->attn_tmp_floats ? tf : f->attn_tmp_floats;
    }
    if (hp->encoder) { /* forward_bert.c: a head's keys transposed and a block's scores */
        const size_t n = (size_t)ul_fwd_bert_attn_tmp_floats(hp->head_dim, f->max_tokens, f->n_ctx);
        f->attn_tmp_floats = n > f->attn_tmp_floats ? n : f->attn_tmp_floats;
    }
    /* per-token items for every token, plus at most two tiles per 64 tokens per query head */
    const size_t n_items = B * (size_t)hp->n_head_kv + (B / 32 + 1) * (size_t)hp->n_head;
    f->smp_bytes = (ul_sample_scratch_size(hp->n_vocab) + 63) & ~(size_t)63;
    size_t sizes[] = {B * E * F,
                      B * E * F,
                      B * E * F,
                      B * (size_t)f->q_dim * F,
                      B * (size_t)f->kv_dim * F,
                      B * (size_t)f->kv_dim * F,
                      B * (size_t)f->q_dim * F,
                      B * (size_t)hp->n_ff * F,
                      B * (size_t)hp->n_ff * F,
                      B * (size_t)hp->n_rot * F,
                      hp->n_swa > 0 ? B * (size_t)hp->n_rot * F : 0,
                      (size_t)f->logit_rows * (size_t)hp->n_vocab * F,
                      mm,
                      (size_t)f->nth * f->attn_tmp_floats * F,
                      (size_t)f->nth * f->smp_bytes,
                      B * 4,
                      B * 4,
                      B * 4,
                      B * 4,
                      (size_t)hp->n_layer * sizeof(atomic_int),
                      n_items * sizeof(ul_attn_item_t)};
    size_t total = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        total += (sizes[i] + 63) & ~(size_t)63;
    f->mem = aligned_alloc(64, total);
    if (!f->mem) return UL_ENOMEM;
    memset(f->mem, 0, total); /* the sampling scratch must start zeroed; touch pages once */
    uint8_t *p = f->mem;
    int i = 0;
    f->x = carve(&p, sizes[i++]);
    f->xb = carve(&p, sizes[i++]);
    f->xo = carve(&p, sizes[i++]);
    f->q = carve(&p, sizes[i++]);
    f->k = carve(&p, sizes[i++]);
    f->v = carve(&p, sizes[i++]);
    f->att = carve(&p, sizes[i++]);
    f->hb = carve(&p, sizes[i++]);
    f->hb2 = carve(&p, sizes[i++]);
    f->rope = carve(&p, sizes[i++]);
    f->rope_swa = hp->n_swa > 0 ? carve(&p, sizes[i++]) : (i++, NULL);
    f->logits = carve(&p, sizes[i++]);
    f->mm_scratch = carve(&p, sizes[i++]);
    f->attn_tmp = carve(&p, sizes[i++]);
    f->smp_scratch = carve(&p, sizes[i++]);
    f->tok_pos = carve(&p, sizes[i++]);
    f->tok_seq = carve(&p, sizes[i++]);
    f->out_rows = carve(&p, sizes[i++]);
    f->out_seq = carve(&p, sizes[i++]);
    f->attn_next = carve(&p, sizes[i++]);
    f->attn_items = carve(&p, sizes[i++]);
    return 0;
}

enum { MAT_QKV, MAT_O, MAT_GU, MAT_DOWN, MATS_PER_LAYER };

/* A packed mat has its own copy: the file pages of its parts can leave resident memory
 * (not the token embeddings, which the embedding lookup keeps reading when the output is
 * tied to them). */
static void release_packed(const ul_fwd_t *f, const ul_cpu_mat_t *m) {
    if (!m->pk) return;
    const size_t ws = ul_type_row_bytes(m->type, m->n_cols);
    for (int i = 0; i < m->n_parts; i++)
        if (m->data[i] != (const uint8_t *)f->m->tok_embd->data)
            ul_gguf_release(&f->m->gguf, m->data[i], ws * (size_t)m->part_rows[i]);
}

/* The parts of mat i (layer i / MATS_PER_LAYER, or the output after the last layer). */
static int mat_parts(const ul_fwd_t *f, size_t i, const ul_gguf_tensor_t *parts[UL_MAT_PARTS]) {
    if (i == (size_t)f->hp.n_layer * MATS_PER_LAYER) {
        parts[0] = f->m->output;
        return f->m->output ? 1 : 0; /* bert: none */
    }
    const ul_layer_t *L = &f->m->layers[i / MATS_PER_LAYER];
    switch (i % MATS_PER_LAYER) {
    case MAT_QKV:
        parts[0] = L->wq, parts[1] = L->wk, parts[2] = L->wv;
        /* stacking needs one type per stack (mixed-type files keep separate products) */
        return L->wq->type == L->wk->type && L->wk->type == L->wv->type ? 3 : 1;
    case MAT_O:
        parts[0] = L->wo;
        return 1;
    case MAT_GU:
        if (!L->ffn_gate) { /* MoE layer: forward_moe.c has the FFN; bert: up alone */
            parts[0] = L->ffn_up;
            return L->ffn_up ? 1 : 0;
        }
        parts[0] = L->ffn_gate, parts[1] = L->ffn_up;
        return L->ffn_gate->type == L->ffn_up->type ? 2 : 1;
    default:
        parts[0] = L->ffn_down;
        return L->ffn_down ? 1 : 0;
    }
}

/* Stacks the products that share an input (one activation quantisation, one even row
 * split) and packs what the ISA has a packed layout for, all packed copies in one
 * allocation (ul_cpu_alloc_weights: huge pages, at most one partly used). */
static int init_mats(ul_fwd_t *f) {
    const size_t n = (size_t)f->hp.n_layer * MATS_PER_LAYER + 1;
    f->mats = calloc(n, sizeof *f->mats);
    if (!f->mats) return UL_ENOMEM;
    const ul_gguf_tensor_t *parts[UL_MAT_PARTS];
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        int np = mat_parts(f, i, parts);
        if (!np) continue;
        total += (ul_cpu_mat_packed_bytes(parts, np, 1) + 63) & ~(size_t)63;
    }
    if (total && !(f->packed = ul_cpu_alloc_weights(total))) return UL_ENOMEM;
    uint8_t *dst = f->packed;
    for (size_t i = 0; i < n; i++) {
        int np = mat_parts(f, i, parts);
        if (!np) continue;
        int rc = ul_cpu_mat_init_in(&f->mats[i], parts, np, 1, dst);
        if (rc) return rc;
        dst += (f->mats[i].packed_bytes + 63) & ~(size_t)63;
        release_packed(f, &f->mats[i]);
    }
    if (total)
        UL_LOG_INFO("cpu: %.1f MiB of weights packed for %s", total / 1048576.0,
                    ul_cpu_isa_name(f->isa));
    return 0;
}

int ul_fwd_create(const ul_model_t *m, const ul_cpu_config_t *cfg, ul_fwd_t **out) {
    return ul_fwd_create_on(m, cfg, NULL, out);
}

int ul_fwd_create_on(const ul_model_t *m, const ul_cpu_config_t *cfg, ul_pool_t *pool,
                     ul_fwd_t **out) {
    *out = NULL;
    int rc = check_model(m);
    if (rc) return rc;
    ul_cpu_config_t c = *cfg;
    if (c.kv_type != UL_TYPE_F16 && c.kv_type != UL_TYPE_F32) return UL_EINVAL;
    if (c.page_size == 0) c.page_size = 16;
    if (c.max_batch_tokens == 0) c.max_batch_tokens = 512;
    if (c.n_ctx == 0) c.n_ctx = m->hp.n_ctx_train;
    /* an encoder has a position embedding for each of n_ctx_train positions, no more */
    if (m->hp.encoder && c.n_ctx > m->hp.n_ctx_train) c.n_ctx = m->hp.n_ctx_train;
    if (c.n_threads == 0) c.n_threads = ul_pool_default_threads(NULL, 0);
    if (c.page_size < 1 || c.page_size > 4096 || c.max_batch_tokens < 1 ||
        c.max_batch_tokens > (1 << 20) || c.n_ctx < 1 || c.n_threads < 0 || c.kv_bytes < 0)
        return UL_EINVAL;
    ul_fwd_t *f = calloc(1, sizeof *f);
    if (!f) return UL_ENOMEM;
    f->m = m;
    f->hp = m->hp;
    f->n_ctx = c.n_ctx;
    f->max_tokens = c.max_batch_tokens;
    f->q_dim = f->hp.n_head * f->hp.head_dim;
    f->kv_dim = f->hp.n_head_kv * f->hp.head_dim;
    f->n_gqa = f->hp.n_head / f->hp.n_head_kv;
    f->logit_rows = c.max_batch_tokens < MAX_LOGIT_ROWS ? c.max_batch_tokens : MAX_LOGIT_ROWS;
    f->isa = ul_cpu_isa();
    f->ops = ul_cpu_ops(f->isa);
    const char *tiled = getenv("UVLLM_ATTN_TILED"), *prof = getenv("UVLLM_PROFILE");
    f->attn_tiled = !c.batch_invariant && !(tiled && !strcmp(tiled, "0"));
    f->prof = prof && !strcmp(prof, "1");
    /* before the pool's threads exist: they only read the sampler's choice */
    ul_sampling_init(ul_cpu_has_avx512f());
    if (f->hp.ffn_gelu || f->hp.encoder) ul_fwd_gemma3_init(); /* the GELU table */
    f->rope_ff = ul_fwd_rope_factors(m, c.n_ctx);
    int32_t seq_pages = (c.n_ctx + c.page_size - 1) / c.page_size;
    int64_t budget = c.kv_bytes;
    if (budget == 0) {
        /* 4 full-context sequences, capped at 2 GiB (long-context models would ask for tens
         * of GiB) but never below one full-context sequence */
        const int64_t page = (int64_t)ul_kv_page_bytes(c.kv_type, f->hp.n_layer, f->hp.n_head_kv,
                                                       f->hp.head_dim, c.page_size);
        const int64_t one = (int64_t)seq_pages * page, cap = (int64_t)2 << 30;
        budget = 4 * one < cap ? 4 * one : (one > cap ? one : cap);
    }
    rc = ul_kv_init(&f->kv, c.kv_type, f->hp.n_layer, f->hp.n_head_kv, f->hp.head_dim, c.page_size,
                    budget, 1);
    if (!rc) rc = init_mats(f);
    if (!rc) rc = ul_fwd_moe_init(f);
    f->own_pool = !pool;
    f->pool = pool;
    if (!rc && !pool) rc = ul_pool_create(c.n_threads, &f->pool);
    if (!rc) {
        f->nth = ul_pool_n_threads(f->pool);
        rc = alloc_scratch(f);
    }
    if (rc) {
        ul_fwd_free(f);
        return rc;
    }
    *out = f;
    return 0;
}

void ul_fwd_free(ul_fwd_t *f) {
    if (!f) return;
    if (f->prof && f->prof_step_ns)
        UL_LOG_INFO("cpu: attention %.3f s of %.3f s step time (%.1f%%, %s kernels)",
                    f->prof_attn_ns * 1e-9, f->prof_step_ns * 1e-9,
                    100.0 * (double)f->prof_attn_ns / (double)f->prof_step_ns,
                    ul_cpu_isa_name(f->isa));
    if (f->pool && f->own_pool) ul_pool_free(f->pool);
    ul_fwd_moe_free(f);
    ul_kv_free(&f->kv);
    if (f->mats)
        for (size_t i = 0; i <= (size_t)f->hp.n_layer * MATS_PER_LAYER; i++)
            ul_cpu_mat_free(&f->mats[i]);
    free(f->mats);
    free(f->packed);
    free(f->mem);
    free(f);
}

/* ---------- validation and planning (calling thread, before any compute) ---------- */

static int item_cmp(const void *a, const void *b) {
    const ul_attn_item_t *x = a, *y = b;
    if (x->cost != y->cost) return x->cost > y->cost ? -1 : 1;
    if (x->t0 != y->t0) return x->t0 < y->t0 ? -1 : 1;
    return x->head - y->head;
}

/* The step's attention items: the tiled path's (sequences with at least UL_ATTN_TILE
 * tokens here), costliest first, then one per (token, KV head) for the rest, latest tokens
 * first (they read the most keys). */
static void plan_attention(ul_fwd_t *f, const ul_step_t *st) {
    int32_t n = 0;
    const int32_t T = st->n_tokens, Hkv = f->hp.n_head_kv, H = f->hp.n_head;
    for (int32_t si = 0; f->attn_tiled && si < st->n_seqs; si++) {
        const ul_step_seq_t *s = &st->seqs[si];
        if (s->n_tokens < UL_ATTN_TILE) continue;
        for (int32_t r = 0; r < s->n_tokens; r += UL_ATTN_TILE) {
            const int32_t nq = s->n_tokens - r < UL_ATTN_TILE ? s->n_tokens - r : UL_ATTN_TILE;
            for (int32_t h = 0; h < H; h++)
                f->attn_items[n++] = (ul_attn_item_t){.t0 = s->tok_offset + r,
                                                      .cost = nq * (s->pos0 + r + nq),
                                                      .nq = (int16_t)nq,
                                                      .head = (int16_t)h};
        }
    }
    qsort(f->attn_items, (size_t)n, sizeof *f->attn_items, item_cmp);
    for (int32_t t = T - 1; t >= 0; t--) {
        if (f->attn_tiled && st->seqs[f->tok_seq[t]].n_tokens >= UL_ATTN_TILE) continue;
        for (int32_t h = 0; h < Hkv; h++)
            f->attn_items[n++] = (ul_attn_item_t){.t0 = t, .head = (int16_t)h};
    }
    f->n_attn_items = n;
}

static int prepare(ul_fwd_t *f, ul_step_t *st, int all) {
    const int32_t T = st->n_tokens;
    if (T < 1 || T > f->max_tokens || st->n_seqs < 1 || st->n_seqs > T || !st->tokens || !st->seqs)
        return UL_EINVAL;
    for (int32_t t = 0; t < T; t++) {
        if (st->tokens[t] < 0 || st->tokens[t] >= f->hp.n_vocab) return UL_EINVAL;
        f->tok_seq[t] = -1;
    }
    const int32_t ps = f->kv.page_size;
    for (int32_t si = 0; si < st->n_seqs; si++) {
        const ul_step_seq_t *s = &st->seqs[si];
        if (s->n_tokens < 1 || s->tok_offset < 0 || s->tok_offset > T - s->n_tokens ||
            s->pos0 < 0 || s->pos0 > f->n_ctx - s->n_tokens || !s->pages)
            return UL_EINVAL;
        int32_t need = (s->pos0 + s->n_tokens + ps - 1) / ps;
        if (s->n_pages < need) return UL_EINVAL;
        if (s->spec && (!s->sample || s->spec->propose || s->spec->n_draft < 0 ||
                        s->spec->n_draft >= s->n_tokens || s->spec->n_draft >= f->logit_rows ||
                        s->spec->n_draft > UL_MAX_DRAFT))
            return UL_EINVAL;
        if (s->out_embd &&
            (s->pos0 || s->sample || s->spec || s->chain ||
             (s->pooling != UL_POOL_MEAN && s->pooling != UL_POOL_CLS &&
              s->pooling != UL_POOL_LAST && (s->pooling != UL_POOL_RANK || !f->hp.encoder))))
            return UL_EINVAL; /* an embedding entry holds its whole sequence (backend.h); rank:
                               * the bert head only (a decoder's, qwen3's, is not built) */
        if (f->hp.encoder && !s->out_embd) return UL_EINVAL; /* an encoder only embeds */
        for (int32_t i = 0; i < need; i++)
            if (s->pages[i] < 0 || s->pages[i] >= f->kv.n_pages) return UL_EINVAL;
        for (int32_t i = 0; i < s->n_tokens; i++) {
            int32_t t = s->tok_offset + i;
            if (f->tok_seq[t] != -1) return UL_EINVAL; /* two sequences claim a token */
            f->tok_seq[t] = si;
            f->tok_pos[t] = s->pos0 + i;
        }
    }
    for (int32_t t = 0; t < T; t++)
        if (f->tok_seq[t] < 0) return UL_EINVAL;
    f->n_out = 0;
    if (all) {
        for (int32_t t = 0; t < T; t++) {
            f->out_rows[t] = t;
            f->out_seq[t] = -1;
        }
        f->n_out = T;
    }
    /* a sampling entry's last row, or with proposals its last n_draft + 1 rows: consecutive
     * out rows labelled with the entry (output() keeps them in one chunk) */
    for (int32_t si = 0; si < st->n_seqs; si++) {
        const ul_step_seq_t *s = &st->seqs[si];
        if (!s->sample) continue;
        const int32_t k = s->spec ? s->spec->n_draft : 0;
        for (int32_t row = s->tok_offset + s->n_tokens - 1 - k; row < s->tok_offset + s->n_tokens;
             row++) {
            if (all) {
                f->out_seq[row] = si;
            } else {
                f->out_rows[f->n_out] = row;
                f->out_seq[f->n_out++] = si;
            }
        }
    }
    f->n_embd_seqs = 0;
    for (int32_t si = 0; si < st->n_seqs; si++) f->n_embd_seqs += st->seqs[si].out_embd != NULL;
    plan_attention(f, st);
    for (int il = 0; il < f->hp.n_layer; il++) atomic_store(&f->attn_next[il], 0);
    return 0;
}

/* ---------- element-wise pieces ---------- */

static void rmsnorm(const ul_fwd_t *f, float *dst, const float *x, const float *w, int n,
                    float eps) {
    f->ops->rmsnorm(dst, x, w, n, eps);
}

/* ggml's rope cache for NORM mode without YaRN: theta = pos * freq_scale * base^(-2i/n_rot),
 * the power advanced by repeated multiplication exactly as ggml_rope_cache_init does; with
 * frequency factors ff (rope_freqs, [n_rot/2]) theta is divided by ff[i/2] first, as there;
 * cos and sin are multiplied by mscale (its attn_factor, 1 unless phi3 LongRoPE). */
void ul_fwd_rope_cache(float *cs, int32_t pos, int n_rot, float base, float freq_scale,
                       const float *ff, float mscale) {
    const float theta_scale = powf(base, -2.0f / (float)n_rot);
    float theta = (float)pos;
    for (int i = 0; i < n_rot; i += 2) {
        float th = (ff ? theta / ff[i / 2] : theta) * freq_scale;
        cs[i] = cosf(th) * mscale;
        cs[i + 1] = sinf(th) * mscale;
        theta *= theta_scale;
    }
}

/* A V row (stride 1) or a K column (stride page_size, K is transposed in its page: kv.h)
 * into the cache, rounded to f16 with F16C where the ISA has it. */
static void store_kv(const ul_fwd_t *f, void *dst, size_t stride, const float *src, int n) {
    if (f->kv.type == UL_TYPE_F32)
        for (int i = 0; i < n; i++) ((float *)dst)[(size_t)i * stride] = src[i];
    else
        f->ops->to_f16(dst, stride, src, n);
}

/* RoPE on q and k of token t, K/V into the token's page slot. */
static void qk_rope_store(ul_fwd_t *f, int il, int32_t t) {
    const ul_hparams_t *hp = &f->hp;
    const int32_t hd = hp->head_dim, ps = f->kv.page_size;
    const float *cs = (f->m->layers[il].swa ? f->rope_swa : f->rope) + (size_t)t * hp->n_rot;
    float *q = f->q + (size_t)t * f->q_dim, *k = f->k + (size_t)t * f->kv_dim;
    const float *v = f->v + (size_t)t * f->kv_dim;
    void (*rope)(float *, const float *, int) =
        hp->rope_neox ? f->ops->rope_neox : f->ops->rope_norm;
    for (int h = 0; h < hp->n_head; h++) rope(q + (size_t)h * hd, cs, hp->n_rot);
    for (int h = 0; h < hp->n_head_kv; h++) rope(k + (size_t)h * hd, cs, hp->n_rot);
    const ul_step_seq_t *s = &f->step->seqs[f->tok_seq[t]];
    const int32_t pos = f->tok_pos[t], page = s->pages[pos / ps], slot = pos % ps;
    const size_t es = (size_t)f->kv.esize;
    for (int h = 0; h < hp->n_head_kv; h++) {
        store_kv(f, (uint8_t *)ul_kv_head(&f->kv, page, il, 0, h) + (size_t)slot * es, (size_t)ps,
                 k + (size_t)h * hd, hd);
        store_kv(f, (uint8_t *)ul_kv_head(&f->kv, page, il, 1, h) + (size_t)slot * hd * es, 1,
                 v + (size_t)h * hd, hd);
    }
}

static void add_rows(float *x, const float *y, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] += y[i];
}

/* ---------- the step job ---------- */

/* y0, y1, y2: the outputs of the mat's parts */
static void mm(ul_fwd_t *f, const ul_cpu_mat_t *w, const float *x, int n, float *y0, float *y1,
               float *y2, int ith, int nth) {
    float *const y[UL_MAT_PARTS] = {y0, y1, y2};
    ul_cpu_matmul_mat(f->pool, w, x, n, y, f->mm_scratch, ith, nth);
}

/* A stack that could not be made (mixed types) has one part; the rest run alone. */
static void mm_stack(ul_fwd_t *f, const ul_cpu_mat_t *w, const ul_gguf_tensor_t *const *parts,
                     const float *x, int n, float *y0, float *y1, float *y2, int ith, int nth) {
    float *ys[] = {y0, y1, y2};
    mm(f, w, x, n, y0, y1, y2, ith, nth);
    for (int i = w->n_parts; i < UL_MAT_PARTS && parts[i]; i++)
        ul_cpu_matmul(f->pool, parts[i], x, n, ys[i], f->mm_scratch, ith, nth);
}

static void attention(ul_fwd_t *f, int il, int ith) {
    float *tmp = f->attn_tmp + (size_t)ith * f->attn_tmp_floats;
    for (;;) {
        int i = atomic_fetch_add_explicit(&f->attn_next[il], 1, memory_order_relaxed);
        if (i >= f->n_attn_items) break;
        const ul_attn_item_t *it = &f->attn_items[i];
        if (it->nq)
            ul_fwd_attn_tile(f, il, it->t0, it->nq, it->head, tmp);
        else
            ul_fwd_attn_item(f, il, it->t0, it->head, tmp);
    }
}

static void layer(ul_fwd_t *f, int il, int32_t t0, int32_t t1, int ith, int nth) {
    const ul_hparams_t *hp = &f->hp;
    const ul_layer_t *L = &f->m->layers[il];
    const int32_t T = f->step->n_tokens, E = hp->n_embd;
    const float *an = L->attn_norm->data, *fn = L->ffn_norm->data;
    for (int32_t t = t0; t < t1; t++)
        rmsnorm(f, f->xb + (size_t)t * E, f->x + (size_t)t * E, an, E, hp->rms_eps);
    ul_pool_barrier(f->pool);
    const ul_cpu_mat_t *M = f->mats + (size_t)il * MATS_PER_LAYER;
    const ul_gguf_tensor_t *qkv[] = {L->wq, L->wk, L->wv}, *gu[] = {L->ffn_gate, L->ffn_up, NULL};
    mm_stack(f, &M[MAT_QKV], qkv, f->xb, T, f->q, f->k, f->v, ith, nth);
    for (int32_t t = t0; t < t1; t++) {
        if (L->bq || L->q_norm) ul_fwd_arch_qkv(f, L, t);
        qk_rope_store(f, il, t);
    }
    ul_pool_barrier(f->pool);
    const uint64_t ta = f->prof && ith == 0 ? ul_now_ns() : 0;
    attention(f, il, ith);
    ul_pool_barrier(f->pool);
    if (ta) f->prof_attn_ns += ul_now_ns() - ta;
    mm(f, &M[MAT_O], f->att, T, f->xo, NULL, NULL, ith, nth);
    for (int32_t t = t0; t < t1; t++) {
        if (L->attn_post_norm) /* gemma3 */
            rmsnorm(f, f->xo + (size_t)t * E, f->xo + (size_t)t * E, L->attn_post_norm->data, E,
                    hp->rms_eps);
        add_rows(f->x + (size_t)t * E, f->xo + (size_t)t * E, (size_t)E);
        rmsnorm(f, f->xb + (size_t)t * E, f->x + (size_t)t * E, fn, E, hp->rms_eps);
    }
    ul_pool_barrier(f->pool);
    if (L->ffn_gate_inp) {
        ul_fwd_moe(f, il, t0, t1, ith, nth);
        return;
    }
    mm_stack(f, &M[MAT_GU], gu, f->xb, T, f->hb, f->hb2, NULL, ith, nth);
    /* elements, not tokens, split over the threads (a barrier follows): one decode token
     * keeps every thread busy */
    const size_t n_el = (size_t)hp->n_ff * (size_t)T;
    const size_t i0 = n_el * (size_t)ith / (size_t)nth & ~(size_t)15,
                 i1 = ith == nth - 1 ? n_el : n_el * (size_t)(ith + 1) / (size_t)nth & ~(size_t)15;
    (hp->ffn_gelu ? f->ops->geglu : f->ops->swiglu)(f->hb + i0, f->hb2 + i0, i1 - i0);
    ul_pool_barrier(f->pool);
    mm(f, &M[MAT_DOWN], f->hb, T, f->xo, NULL, NULL, ith, nth);
    for (int32_t t = t0; t < t1; t++) {
        if (L->ffn_post_norm)
            rmsnorm(f, f->xo + (size_t)t * E, f->xo + (size_t)t * E, L->ffn_post_norm->data, E,
                    hp->rms_eps);
        add_rows(f->x + (size_t)t * E, f->xo + (size_t)t * E, (size_t)E);
    }
    /* no barrier: the next layer's norm reads only this thread's own rows */
}

void ul_fwd_pool_embd(ul_fwd_t *f, int ith, int nth) {
    const ul_hparams_t *hp = &f->hp;
    const int32_t E = hp->n_embd;
    const float *on = f->m->output_norm ? f->m->output_norm->data : NULL;
    for (int32_t si = ith; si < f->step->n_seqs; si += nth) {
        ul_step_seq_t *s = &f->step->seqs[si];
        if (!s->out_embd) continue;
        if (s->pooling == UL_POOL_RANK) {
            ul_fwd_bert_rank(f, s);
            continue;
        }
        int32_t r0 = s->tok_offset, r1 = s->tok_offset + s->n_tokens;
        if (s->pooling == UL_POOL_CLS) r1 = r0 + 1;
        if (s->pooling == UL_POOL_LAST) r0 = r1 - 1;
        memset(s->out_embd, 0, (size_t)E * sizeof *s->out_embd);
        for (int32_t t = r0; t < r1; t++) {
            float *y = f->x + (size_t)t * E; /* an encoder's rows as they are */
            if (on) rmsnorm(f, y = f->xb + (size_t)t * E, f->x + (size_t)t * E, on, E, hp->rms_eps);
            add_rows(s->out_embd, y, (size_t)E);
        }
        const float inv = 1.0f / (float)(r1 - r0);
        for (int32_t i = 0; i < E; i++) s->out_embd[i] *= inv;
    }
}

/* Final norm of the output rows, logits in chunks, sampling spread over the threads. */
static void output(ul_fwd_t *f, int ith, int nth) {
    const ul_hparams_t *hp = &f->hp;
    const int32_t E = hp->n_embd, V = hp->n_vocab, n = f->n_out;
    const float *on = f->m->output_norm->data;
    for (int32_t i = n * ith / nth; i < n * (ith + 1) / nth; i++)
        rmsnorm(f, f->xb + (size_t)i * E, f->x + (size_t)f->out_rows[i] * E, on, E, hp->rms_eps);
    ul_pool_barrier(f->pool);
    const int32_t chunk = f->logits_all ? n : f->logit_rows;
    uint8_t *smp = f->smp_scratch + (size_t)ith * f->smp_bytes;
    for (int32_t c0 = 0, cn; c0 < n; c0 += cn) {
        cn = n - c0 < chunk ? n - c0 : chunk;
        /* an entry's rows stay in one chunk: cut before the first of them (they are fewer
         * than a chunk holds, prepare checked) */
        while (c0 + cn < n && f->out_seq[c0 + cn] >= 0 &&
               f->out_seq[c0 + cn - 1] == f->out_seq[c0 + cn])
            cn--;
        float *dst = f->logits_all ? f->logits_all + (size_t)c0 * V : f->logits;
        mm(f, &f->mats[(size_t)hp->n_layer * MATS_PER_LAYER], f->xb + (size_t)c0 * E, cn, dst, NULL,
           NULL, ith, nth);
        if (hp->final_softcap > 0) { /* gemma3 */
            for (int32_t i = ith; i < cn; i += nth)
                ul_fwd_softcap(dst + (size_t)i * V, (size_t)V, hp->final_softcap);
            ul_pool_barrier(f->pool);
        }
        int k = 0;
        for (int32_t i = 0; i < cn; i++) {
            int32_t si = f->out_seq[c0 + i];
            /* an entry samples at its last row (with proposals, from its rows up to it) */
            if (si < 0 || (i + 1 < cn && f->out_seq[c0 + i + 1] == si) || k++ % nth != ith)
                continue;
            ul_step_seq_t *ss = &f->step->seqs[si];
            const int32_t nd = ss->spec ? ss->spec->n_draft : 0;
            if (ss->spec)
                ul_spec_verify(ss, f->step->tokens + ss->tok_offset + ss->n_tokens - nd,
                               dst + (size_t)(i - nd) * V, V, smp);
            else
                ul_sample(ss, dst + (size_t)i * V, V, smp);
        }
        if (c0 + cn < n) ul_pool_barrier(f->pool); /* dst is overwritten by the next chunk */
    }
}

static void step_job(void *ctx, int ith, int nth) {
    ul_fwd_t *f = ctx;
    if (f->hp.encoder) {
        ul_fwd_bert_job(f, ith, nth);
        return;
    }
    const ul_hparams_t *hp = &f->hp;
    const int32_t T = f->step->n_tokens, E = hp->n_embd;
    const int32_t t0 = (int32_t)((int64_t)T * ith / nth),
                  t1 = (int32_t)((int64_t)T * (ith + 1) / nth);
    const ul_gguf_tensor_t *te = f->m->tok_embd;
    const size_t row_bytes = ul_type_row_bytes((int)te->type, E);
    for (int32_t t = t0; t < t1; t++) {
        float *x = f->x + (size_t)t * E;
        ul_cpu_dequant_row((int)te->type,
                           (const uint8_t *)te->data + (size_t)f->step->tokens[t] * row_bytes, x,
                           E);
        if (hp->embd_scale > 0) /* gemma3 */
            for (int32_t i = 0; i < E; i++) x[i] *= hp->embd_scale;
        ul_fwd_rope_cache(f->rope + (size_t)t * hp->n_rot, f->tok_pos[t], hp->n_rot,
                          hp->rope_freq_base, hp->rope_freq_scale, f->rope_ff,
                          hp->rope_attn_factor > 0 ? hp->rope_attn_factor : 1.0f);
        if (f->rope_swa) /* gemma3's sliding-window layers: their own base, frequency scale 1 */
            ul_fwd_rope_cache(f->rope_swa + (size_t)t * hp->n_rot, f->tok_pos[t], hp->n_rot,
                              hp->rope_freq_base_swa, 1.0f, NULL,
                              hp->rope_attn_factor > 0 ? hp->rope_attn_factor : 1.0f);
    }
    for (int il = 0; il < hp->n_layer; il++) layer(f, il, t0, t1, ith, nth);
    ul_pool_barrier(f->pool);
    if (f->n_embd_seqs > 0) {
        ul_fwd_pool_embd(f, ith, nth);
        ul_pool_barrier(f->pool);
    }
    if (f->n_out > 0) output(f, ith, nth);
}

int ul_fwd_step(ul_fwd_t *f, ul_step_t *step, float *logits_all) {
    int rc = prepare(f, step, logits_all != NULL);
    if (rc) return rc;
    f->step = step;
    f->logits_all = logits_all;
    const uint64_t t0 = f->prof ? ul_now_ns() : 0;
    ul_pool_run(f->pool, step_job, f);
    if (f->prof) f->prof_step_ns += ul_now_ns() - t0;
    f->step = NULL;
    f->logits_all = NULL;
    return 0;
}
