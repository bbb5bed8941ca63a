/* The mixture-of-experts FFN of `qwen3moe` (llama.cpp's build_moe_ffn with softmax gating and
 * renormalised weights): router logits -> softmax -> the n_expert_used largest -> weights
 * divided by their sum -> each chosen expert's SwiGLU FFN -> the weighted outputs summed in
 * the router's order (largest first), as ggml adds its expert views.
 *
 * A batched step does not run the experts token by token: the (token, slot) pairs are
 * grouped by expert (each token's activation row converted once, then gathered in grouped
 * order) and each expert that any token chose multiplies its whole group at once, so its
 * weights stream from memory once per step whatever the batch; experts nobody chose are not
 * read at all. All experts of one product share one parallel phase with the threads taking
 * 64-row chunks across all of them: gate and up fused, each chunk of an expert's gate rows
 * computed with the same up rows and SwiGLU applied to them at once (ul_cpu_matmul_id_glu:
 * two barriers, three when a batch's rows are gathered), then down (two). An expert's
 * weights are one contiguous run in the packed copy (its gate|up, then its down), experts in
 * index order. A row's results are those of a token-by-token run (the same tile kernels over
 * the same converted activation row).
 *
 * All threads of the step job run ul_fwd_moe together; thread 0 routes (softmax and top-k
 * of every token, small next to the products), element-wise phases split tokens or
 * elements. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/forward.h"
#include "cpu/matmul_id.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

struct ul_moe_s {
    int32_t n_expert, n_used, n_ff;
    ul_cpu_mat_t *router; /* [n_layer] */
    ul_cpu_mat_t *gu;     /* [n_layer][n_expert] gate|up of one expert */
    ul_cpu_mat_t *down;   /* [n_layer][n_expert] */
    ul_cpu_mat_t *up;     /* [n_layer][n_expert] up alone when gate and up differ in type
                           * (then gu is the gate alone), else NULL */
    ul_mm_group_t *grp;   /* [3][n_expert] the step's groups of gate|up, down, up */
    uint8_t *packed;      /* the packed copies of the mats above, one allocation */
    void *mem;            /* the scratch below, one allocation */
    float *probs;         /* [max_tokens][n_expert] router logits, then probabilities */
    int32_t *sel;         /* [max_tokens][n_used] chosen experts, most probable first */
    float *w;             /* [max_tokens][n_used] their renormalised weights */
    int32_t *count;       /* [n_expert] rows of the step routed to each expert */
    int32_t *start;       /* [n_expert] first gathered row of each expert */
    int32_t *row_of;      /* [max_tokens * n_used] grouped row of (token, slot) */
    int32_t *tok_of;      /* [max_tokens * n_used] token of a grouped row */
    float *yd;            /* [max_tokens * n_used][n_embd] expert outputs */
    float *hg, *hu;       /* [max_tokens * n_used][n_ff] gate, up products */
    void *mm_scratch;     /* the expert products' activation formats */
};

/* Expert e of a stack of matrices [ne0, ne1, n] as a 2-d tensor (a view into the mapping). */
static ul_gguf_tensor_t expert_view(const ul_gguf_tensor_t *t, int32_t e) {
    ul_gguf_tensor_t v = *t;
    const size_t bytes = ul_type_row_bytes((int)t->type, t->ne[0]) * (size_t)t->ne[1];
    v.n_dims = 2;
    v.ne[2] = 1;
    v.nbytes = bytes;
    v.data = (const uint8_t *)t->data + bytes * (size_t)e;
    v.offset = t->offset + bytes * (size_t)e;
    return v;
}

/* Mat i: per layer the router, then per expert gate|up (or gate), down, and up (an empty
 * slot unless gate and up differ in type). Returns its parts' count (0: no mat). */
static int moe_parts(const ul_fwd_t *f, size_t i, ul_gguf_tensor_t parts[2], ul_cpu_mat_t **mat) {
    ul_moe_t *moe = f->moe;
    const size_t per = 1 + 3 * (size_t)moe->n_expert, il = i / per, j = i % per;
    const ul_layer_t *L = &f->m->layers[il];
    if (j == 0) {
        *mat = &moe->router[il];
        parts[0] = *L->ffn_gate_inp;
        return 1;
    }
    const int32_t e = (int32_t)((j - 1) / 3);
    const size_t k = il * (size_t)moe->n_expert + (size_t)e;
    switch ((j - 1) % 3) {
    case 0:
        *mat = &moe->gu[k];
        parts[0] = expert_view(L->ffn_gate_exps, e);
        parts[1] = expert_view(L->ffn_up_exps, e);
        return moe->up ? 1 : 2;
    case 1:
        *mat = &moe->down[k];
        parts[0] = expert_view(L->ffn_down_exps, e);
        return 1;
    default:
        *mat = moe->up ? &moe->up[k] : NULL;
        parts[0] = expert_view(L->ffn_up_exps, e);
        return moe->up ? 1 : 0;
    }
}

/* The bytes mat i takes in moe->packed: its packed layout, or, for a type without one, a
 * plain copy of its parts' rows. */
static size_t mat_bytes(const ul_gguf_tensor_t *const *pp, int np, int copy) {
    size_t b = ul_cpu_mat_packed_bytes(pp, np, 1);
    if (b) return (b + 63) & ~(size_t)63;
    for (int k = 0; copy && k < np; k++) b += (pp[k]->nbytes + 63) & ~(size_t)63;
    return b;
}

/* Like forward.c's init_mats: one allocation (2 MiB pages) for every packed copy. An expert
 * whose type has no packed layout is copied there as it is, rows in place: a decode token
 * reads 8 of 128 experts per layer, so read from the file mapping the experts' pages are
 * first touched (a page fault per 4 KiB to 64 KiB) during the decode steps of the first
 * hundreds of tokens, and every 4 KiB of an expert's stream is a TLB miss; in the copy the
 * faults are paid at load and a 2 MiB page covers two experts' gate|up. The file pages of a
 * copied or packed matrix leave resident memory. UVLLM_MOE_COPY=0 reads unpacked experts
 * from the mapping (A/B runs). */
static int init_mats(ul_fwd_t *f) {
    ul_moe_t *moe = f->moe;
    const size_t n = (size_t)f->hp.n_layer * (1 + 3 * (size_t)moe->n_expert);
    const char *env = getenv("UVLLM_MOE_COPY");
    int copy = !(env && !strcmp(env, "0"));
    ul_gguf_tensor_t parts[2];
    const ul_gguf_tensor_t *pp[2] = {&parts[0], &parts[1]};
    ul_cpu_mat_t *m;
    size_t total;
    for (;;) {
        total = 0;
        for (size_t i = 0; i < n; i++) {
            int np = moe_parts(f, i, parts, &m);
            /* the router (f32, read by every token) stays in the mapping unless packed */
            total += np ? mat_bytes(pp, np, copy && i % (1 + 3 * (size_t)moe->n_expert)) : 0;
        }
        if (!total || (moe->packed = ul_cpu_alloc_weights(total))) break;
        if (!copy) return UL_ENOMEM;
        /* the copy is for speed only: without the memory, read unpacked experts in place */
        UL_LOG_WARN("cpu: no memory for a %.1f MiB copy of the experts; reading them from the "
                    "file mapping",
                    total / 1048576.0);
        copy = 0;
    }
    uint8_t *dst = moe->packed;
    for (size_t i = 0; i < n; i++) {
        int np = moe_parts(f, i, parts, &m);
        if (!np) continue;
        const size_t bytes = mat_bytes(pp, np, copy && i % (1 + 3 * (size_t)moe->n_expert));
        const int packed = ul_cpu_mat_packed_bytes(pp, np, 1) > 0;
        ul_gguf_tensor_t file[2] = {parts[0], parts[1]};
        if (!packed && bytes) {
            uint8_t *at = dst;
            for (int k = 0; k < np; k++) {
                memcpy(at, parts[k].data, parts[k].nbytes);
                parts[k].data = at;
                at += (parts[k].nbytes + 63) & ~(size_t)63;
            }
        }
        int rc = ul_cpu_mat_init_in(m, pp, np, 1, dst);
        if (rc) return rc;
        dst += bytes;
        if (bytes)
            for (int k = 0; k < np; k++) ul_gguf_release(&f->m->gguf, file[k].data, file[k].nbytes);
    }
    if (total) UL_LOG_INFO("cpu: %.1f MiB of expert weights packed or copied", total / 1048576.0);
    return 0;
}

static void *carve(uint8_t **p, size_t bytes) {
    void *r = *p;
    *p += (bytes + 63) & ~(size_t)63;
    return r;
}

static size_t mm_scratch_bytes(const ul_fwd_t *f, int n_rows) {
    size_t mx = 0;
    for (int il = 0; il < f->hp.n_layer; il++) {
        const ul_layer_t *L = &f->m->layers[il];
        const ul_gguf_tensor_t *ws[] = {L->ffn_gate_exps, L->ffn_up_exps, L->ffn_down_exps};
        for (int i = 0; i < 3; i++) { /* gate and up gather the step's token rows */
            size_t s = ul_cpu_matmul_id_scratch((int)ws[i]->type, ws[i]->ne[0], n_rows,
                                                i < 2 ? f->max_tokens : 0);
            mx = s > mx ? s : mx;
        }
        size_t s = ul_cpu_matmul_scratch((int)L->ffn_gate_inp->type, L->ffn_gate_inp->ne[0],
                                         f->max_tokens);
        mx = s > mx ? s : mx;
    }
    return mx;
}

static int alloc_scratch(ul_fwd_t *f) {
    ul_moe_t *moe = f->moe;
    const size_t B = (size_t)f->max_tokens, R = B * (size_t)moe->n_used, F = sizeof(float);
    const size_t sizes[] = {B * (size_t)moe->n_expert * F,
                            R * 4,
                            R * F,
                            (size_t)moe->n_expert * 4,
                            (size_t)moe->n_expert * 4,
                            R * 4,
                            R * 4,
                            R * (size_t)f->hp.n_embd * F,
                            3 * (size_t)moe->n_expert * sizeof(ul_mm_group_t),
                            R * (size_t)moe->n_ff * F,
                            R * (size_t)moe->n_ff * F,
                            mm_scratch_bytes(f, (int)R)};
    size_t total = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        total += (sizes[i] + 63) & ~(size_t)63;
    if (!(moe->mem = aligned_alloc(64, total))) return UL_ENOMEM;
    uint8_t *p = moe->mem;
    int i = 0;
    moe->probs = carve(&p, sizes[i++]);
    moe->sel = carve(&p, sizes[i++]);
    moe->w = carve(&p, sizes[i++]);
    moe->count = carve(&p, sizes[i++]);
    moe->start = carve(&p, sizes[i++]);
    moe->row_of = carve(&p, sizes[i++]);
    moe->tok_of = carve(&p, sizes[i++]);
    moe->yd = carve(&p, sizes[i++]);
    moe->grp = carve(&p, sizes[i++]);
    moe->hg = carve(&p, sizes[i++]);
    moe->hu = carve(&p, sizes[i++]);
    moe->mm_scratch = carve(&p, sizes[i++]);
    return 0;
}

int ul_fwd_moe_init(ul_fwd_t *f) {
    const ul_hparams_t *hp = &f->hp;
    if (!hp->n_expert) return 0;
    if (hp->n_expert_used < 1 || hp->n_expert_used > hp->n_expert || hp->n_ff_exp < 1 ||
        (int64_t)f->max_tokens * hp->n_expert_used > INT32_MAX / 2)
        return UL_EINVAL;
    for (int il = 0; il < hp->n_layer; il++) {
        const ul_layer_t *L = &f->m->layers[il];
        const ul_gguf_tensor_t *ws[] = {L->ffn_gate_inp, L->ffn_gate_exps, L->ffn_up_exps,
                                        L->ffn_down_exps};
        for (int i = 0; i < 4; i++) {
            if (!ws[i]) return UL_EINVAL;
            if (!ul_cpu_type_supported((int)ws[i]->type)) {
                UL_LOG_ERROR("cpu: expert weight type %s has no CPU kernel",
                             ul_type_name((int)ws[i]->type));
                return UL_ENOTSUP;
            }
        }
    }
    ul_moe_t *moe = calloc(1, sizeof *moe);
    if (!moe) return UL_ENOMEM;
    f->moe = moe;
    moe->n_expert = hp->n_expert;
    moe->n_used = hp->n_expert_used;
    moe->n_ff = hp->n_ff_exp;
    const size_t nl = (size_t)hp->n_layer, ne = nl * (size_t)hp->n_expert;
    moe->router = calloc(nl, sizeof *moe->router);
    moe->gu = calloc(ne, sizeof *moe->gu);
    moe->down = calloc(ne, sizeof *moe->down);
    if (!moe->router || !moe->gu || !moe->down) return UL_ENOMEM;
    for (int il = 0; il < hp->n_layer; il++) {
        const ul_layer_t *L = &f->m->layers[il];
        if (L->ffn_gate_exps->type != L->ffn_up_exps->type && !moe->up &&
            !(moe->up = calloc(ne, sizeof *moe->up)))
            return UL_ENOMEM;
    }
    int rc = init_mats(f);
    return rc ? rc : alloc_scratch(f);
}

void ul_fwd_moe_free(ul_fwd_t *f) {
    ul_moe_t *moe = f->moe;
    if (!moe) return;
    const size_t nl = (size_t)f->hp.n_layer, ne = nl * (size_t)moe->n_expert;
    for (size_t i = 0; moe->router && i < nl; i++) ul_cpu_mat_free(&moe->router[i]);
    for (size_t i = 0; moe->gu && i < ne; i++) ul_cpu_mat_free(&moe->gu[i]);
    for (size_t i = 0; moe->down && i < ne; i++) ul_cpu_mat_free(&moe->down[i]);
    for (size_t i = 0; moe->up && i < ne; i++) ul_cpu_mat_free(&moe->up[i]);
    free(moe->up);
    free(moe->router);
    free(moe->gu);
    free(moe->down);
    free(moe->packed);
    free(moe->mem);
    free(moe);
    f->moe = NULL;
}

/* ---------- routing ---------- */

/* ggml_soft_max_f32 on one row: exp(x - max) summed in double, scaled by (float)(1 / sum). */
static void softmax(const ul_cpu_ops_t *ops, float *x, int n) {
    float mx = -INFINITY;
    for (int i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    for (int i = 0; i < n; i += 8) {
        float d[8];
        const int m = n - i < 8 ? n - i : 8;
        for (int j = 0; j < m; j++) d[j] = x[i + j] - mx;
        ops->expf8(d, x + i, m);
    }
    double sum = 0;
    for (int i = 0; i < n; i++) sum += (double)x[i];
    const float scale = (float)(1.0 / sum);
    for (int i = 0; i < n; i++) x[i] *= scale;
}

/* The k most probable experts in descending order (ggml_argsort_top_k; ties to the lower
 * index), their weights divided by their sum as llama.cpp's norm_w does (sum in double,
 * clamped below at the smallest normal f16 so a zero sum cannot divide). p is
 * overwritten. */
static void route(const ul_cpu_ops_t *ops, float *p, int n, int k, int32_t *sel, float *w) {
    if (ops->topk(p, n, k, sel, w)) ul_cpu_ops(UL_ISA_SCALAR)->topk(p, n, k, sel, w);
    double sum = 0;
    for (int j = 0; j < k; j++) sum += (double)w[j];
    float s = (float)sum;
    s = s < 6.103515625e-5f ? 6.103515625e-5f : s;
    for (int j = 0; j < k; j++) w[j] /= s;
}

/* One thread, every token of the step: softmax, top-k and weights; then the (token, slot)
 * rows grouped by expert, contiguous, experts in index order and within an expert tokens in
 * step order; then the groups of the three products of layer il. */
static void route_group(const ul_cpu_ops_t *ops, ul_moe_t *moe, int il, int32_t T) {
    const int32_t K = moe->n_used, NE = moe->n_expert;
    for (int32_t t = 0; t < T; t++) {
        softmax(ops, moe->probs + (size_t)t * NE, NE);
        route(ops, moe->probs + (size_t)t * NE, NE, K, moe->sel + (size_t)t * K,
              moe->w + (size_t)t * K);
    }
    memset(moe->count, 0, (size_t)NE * sizeof *moe->count);
    for (int32_t i = 0; i < T * K; i++) moe->count[moe->sel[i]]++;
    int32_t at = 0;
    for (int32_t e = 0; e < NE; e++) {
        moe->start[e] = at;
        at += moe->count[e];
    }
    memset(moe->count, 0, (size_t)NE * sizeof *moe->count);
    for (int32_t t = 0; t < T; t++)
        for (int32_t k = 0; k < K; k++) {
            const int32_t e = moe->sel[t * K + k], r = moe->start[e] + moe->count[e]++;
            moe->row_of[t * K + k] = r;
            moe->tok_of[r] = t;
        }
    const size_t l0 = (size_t)il * (size_t)NE;
    for (int32_t e = 0; e < NE; e++) {
        const int32_t r0 = moe->start[e], n = moe->count[e];
        moe->grp[e] = (ul_mm_group_t){&moe->gu[l0 + e], r0, n};
        moe->grp[NE + e] = (ul_mm_group_t){&moe->down[l0 + e], r0, n};
        moe->grp[2 * NE + e] = (ul_mm_group_t){moe->up ? &moe->up[l0 + e] : NULL, r0, n};
    }
}

/* ---------- the FFN ---------- */

static void swiglu(const ul_fwd_t *f, float *g, const float *u, size_t n, int ith, int nth) {
    const size_t i0 = n * (size_t)ith / (size_t)nth & ~(size_t)15,
                 i1 = ith == nth - 1 ? n : n * (size_t)(ith + 1) / (size_t)nth & ~(size_t)15;
    f->ops->swiglu(g + i0, u + i0, i1 - i0);
}

void ul_fwd_moe(ul_fwd_t *f, int il, int32_t t0, int32_t t1, int ith, int nth) {
    ul_moe_t *moe = f->moe;
    const int32_t T = f->step->n_tokens, K = moe->n_used, NE = moe->n_expert, R = T * K;
    const int64_t E = f->hp.n_embd;
    float *probs[1] = {moe->probs};
    ul_cpu_matmul_mat(f->pool, &moe->router[il], f->xb, T, probs, moe->mm_scratch, ith, nth);
    /* routing on one thread: a softmax and a top-k per token, small next to the products
     * (and one barrier instead of two) */
    if (ith == 0) route_group(f->ops, moe, il, T);
    ul_pool_barrier(f->pool);
    ul_mm_group_t *gu = moe->grp, *down = gu + NE, *up = down + NE;
    float *F0 = moe->hg, *F1 = moe->hu;
    if (!moe->up) { /* gate|up of one expert: SwiGLU applied inside the product */
        ul_cpu_matmul_id_glu(f->pool, gu, NE, f->xb, moe->tok_of, T, R, F0, F1, f->ops->swiglu,
                             moe->mm_scratch, ith, nth);
    } else {
        ul_cpu_matmul_id(f->pool, gu, NE, f->xb, moe->tok_of, T, R, (float *[]){F0, NULL, NULL},
                         moe->mm_scratch, ith, nth);
        ul_cpu_matmul_id(f->pool, up, NE, f->xb, moe->tok_of, T, R, (float *[]){F1, NULL, NULL},
                         moe->mm_scratch, ith, nth);
        swiglu(f, moe->hg, moe->hu, (size_t)R * (size_t)moe->n_ff, ith, nth);
        ul_pool_barrier(f->pool);
    }
    ul_cpu_matmul_id(f->pool, down, NE, moe->hg, NULL, 0, R, (float *[]){moe->yd, NULL, NULL},
                     moe->mm_scratch, ith, nth);
    /* ggml: each expert's output times its weight, then the slots added left to right, then
     * the residual */
    for (int32_t t = t0; t < t1; t++) {
        float *x = f->x + (size_t)t * E, *acc = f->xo + (size_t)t * E;
        const float *w = moe->w + (size_t)t * K;
        const int32_t *rows = moe->row_of + (size_t)t * K;
        const float *y0 = moe->yd + (size_t)rows[0] * E;
        for (int64_t i = 0; i < E; i++) acc[i] = y0[i] * w[0];
        for (int32_t k = 1; k < K; k++) {
            const float *y = moe->yd + (size_t)rows[k] * E;
            for (int64_t i = 0; i < E; i++) acc[i] += y[i] * w[k];
        }
        for (int64_t i = 0; i < E; i++) x[i] += acc[i];
    }
}
