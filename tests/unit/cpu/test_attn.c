/* Attention paths (attn.h) against a float64 reference on random queries and a random
 * paged KV cache: the per-token path (scalar, AVX2) and the tiled path (scalar, AVX2), for
 * head dims with and without a whole number of vectors, GQA, page sizes that tiles cross,
 * sequences that start mid-context (a continued prompt) and a sliding window. The
 * reference is softmax attention in double over the same operands (the query and the
 * cache as the path sees them), so a wrong key, mask, scale or head mapping fails; the
 * per-token path's f16 accumulator is the only looseness allowed for it. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/attn.h"
#include "cpu/forward.h"
#include "../tsan_skip.h"
#include "kern_testutil.h"

typedef struct {
    ul_fwd_t f;
    ul_model_t m;
    ul_layer_t layer;
    ul_step_t st;
    ul_step_seq_t seq;
    int32_t pages[64];
    float *tmp;
} rig_t;

/* One sequence of n tokens at positions pos0.. in a cache of random keys for positions
 * [0, pos0 + n), pages in a scrambled order; the step's queries random. */
static void rig_init(rig_t *r, int hd, int n_head, int n_kv, int ps, int pos0, int n, int swa,
                     int kv_type, uint64_t seed) {
    memset(r, 0, sizeof *r);
    ul_fwd_t *f = &r->f;
    f->m = &r->m;
    r->m.layers = &r->layer;
    r->layer.swa = swa > 0;
    f->hp.head_dim = hd;
    f->hp.n_head = n_head;
    f->hp.n_head_kv = n_kv;
    f->hp.n_swa = swa;
    f->n_gqa = n_head / n_kv;
    f->q_dim = n_head * hd;
    const int n_pages = (pos0 + n + ps - 1) / ps;
    cr_assert(n_pages <= 64);
    cr_assert_eq(ul_kv_init(&f->kv, kv_type, 1, n_kv, hd, ps,
                            (int64_t)ul_kv_page_bytes(kv_type, 1, n_kv, hd, ps) * n_pages, n_pages),
                 0);
    for (int i = 0; i < n_pages; i++) r->pages[i] = (i * 7 + 3) % n_pages;
    uint64_t s = seed;
    for (int p = 0; p < pos0 + n; p++)
        for (int h = 0; h < n_kv; h++)
            for (int kvi = 0; kvi < 2; kvi++) {
                uint8_t *base = ul_kv_head(&f->kv, r->pages[p / ps], 0, kvi, h);
                for (int i = 0; i < hd; i++) {
                    /* K transposed [hd][ps], V [ps][hd] */
                    const size_t o = kvi ? (size_t)(p % ps) * hd + i : (size_t)i * ps + p % ps;
                    const float v = tk_unif(&s) * 2;
                    if (kv_type == UL_TYPE_F16)
                        ((uint16_t *)base)[o] = ul_fp32_to_fp16(v);
                    else
                        ((float *)base)[o] = v;
                }
            }
    f->q = malloc(sizeof(float) * (size_t)n * f->q_dim);
    f->att = malloc(sizeof(float) * (size_t)n * f->q_dim);
    for (size_t i = 0; i < (size_t)n * f->q_dim; i++) f->q[i] = tk_unif(&s) * 2;
    f->tok_seq = calloc((size_t)n, sizeof(int32_t));
    f->tok_pos = malloc(sizeof(int32_t) * (size_t)n);
    for (int t = 0; t < n; t++) f->tok_pos[t] = pos0 + t;
    r->seq = (ul_step_seq_t){.n_tokens = n, .pos0 = pos0, .pages = r->pages, .n_pages = n_pages};
    r->st = (ul_step_t){.n_tokens = n, .n_seqs = 1, .seqs = &r->seq};
    f->step = &r->st;
    size_t a = ul_fwd_attn_tmp_floats(f->n_gqa, hd, ps), b = ul_fwd_attn_tile_floats(hd);
    r->tmp = tk_alloc64(sizeof(float) * (a > b ? a : b));
}

static void rig_free(rig_t *r) {
    ul_kv_free(&r->f.kv);
    free(r->f.q), free(r->f.att), free(r->f.tok_seq), free(r->f.tok_pos), free(r->tmp);
}

static float cache_at(const rig_t *r, int kvi, int h, int p, int i) {
    const ul_fwd_t *f = &r->f;
    const int ps = f->kv.page_size, hd = f->hp.head_dim;
    const uint8_t *base = ul_kv_head(&f->kv, r->pages[p / ps], 0, kvi, h);
    const size_t o = kvi ? (size_t)(p % ps) * hd + i : (size_t)i * ps + p % ps;
    return f->kv.type == UL_TYPE_F16 ? ul_fp16_to_fp32(((const uint16_t *)base)[o])
                                     : ((const float *)base)[o];
}

/* The largest |path - reference| over every output of the step, the reference computed
 * with the query rounded to f16 when round_q (the per-token path's roundings). */
static double check(rig_t *r, int round_q) {
    ul_fwd_t *f = &r->f;
    const int hd = f->hp.head_dim, n = r->seq.n_tokens;
    double worst = 0;
    double *sc = malloc(sizeof(double) * (size_t)(r->seq.pos0 + n));
    for (int t = 0; t < n; t++)
        for (int hq = 0; hq < f->hp.n_head; hq++) {
            const int h = hq / f->n_gqa, pos = f->tok_pos[t];
            const int lo = f->hp.n_swa && pos >= f->hp.n_swa ? pos - f->hp.n_swa + 1 : 0;
            const float *q = f->q + (size_t)t * f->q_dim + (size_t)hq * hd;
            double mx = -INFINITY, sum = 0;
            for (int p = lo; p <= pos; p++) {
                double d = 0;
                for (int i = 0; i < hd; i++) {
                    const float qi = round_q ? ul_fp16_to_fp32(ul_fp32_to_fp16(q[i])) : q[i];
                    d += (double)qi * cache_at(r, 0, h, p, i);
                }
                sc[p] = d / sqrt((double)hd);
                mx = fmax(mx, sc[p]);
            }
            for (int p = lo; p <= pos; p++) sum += exp(sc[p] - mx);
            for (int i = 0; i < hd; i++) {
                double o = 0;
                for (int p = lo; p <= pos; p++)
                    o += exp(sc[p] - mx) / sum * cache_at(r, 1, h, p, i);
                const double got = f->att[(size_t)t * f->q_dim + (size_t)hq * hd + i];
                worst = fmax(worst, fabs(got - o));
            }
        }
    free(sc);
    return worst;
}

static void run_per_token(rig_t *r) {
    for (int t = 0; t < r->seq.n_tokens; t++)
        for (int h = 0; h < r->f.hp.n_head_kv; h++) ul_fwd_attn_item(&r->f, 0, t, h, r->tmp);
}

static void run_tiled(rig_t *r) {
    for (int t0 = 0; t0 < r->seq.n_tokens; t0 += UL_ATTN_TILE) {
        const int nq = r->seq.n_tokens - t0 < UL_ATTN_TILE ? r->seq.n_tokens - t0 : UL_ATTN_TILE;
        for (int hq = 0; hq < r->f.hp.n_head; hq++) ul_fwd_attn_tile(&r->f, 0, t0, nq, hq, r->tmp);
    }
}

typedef struct {
    int hd, n_head, n_kv, ps, pos0, n, swa;
} shape_t;

static const shape_t k_shapes[] = {
    {64, 8, 2, 16, 0, 70, 0},    /* GQA 4, a tile and a partial one */
    {64, 4, 4, 16, 37, 64, 0},   /* continued prompt: keys before the chunk, unaligned tiles */
    {128, 2, 1, 7, 5, 66, 0},    /* odd page size: tiles and chunks cross pages */
    {80, 2, 2, 16, 0, 65, 0},    /* 10 vectors of 8 (not 16) */
    {36, 2, 1, 16, 3, 64, 0},    /* not a multiple of 8: scalar kernels on every ISA */
    {64, 4, 2, 16, 20, 100, 37}, /* sliding window of 37 */
    {32, 2, 2, 16, 0, 9, 0},     /* short: chunks of 16 keys, partial */
};

static void each_shape(int tiled, ul_isa_t isa, int kv_type, double tol) {
    for (size_t i = 0; i < sizeof k_shapes / sizeof k_shapes[0]; i++) {
        const shape_t *s = &k_shapes[i];
        rig_t r;
        rig_init(&r, s->hd, s->n_head, s->n_kv, s->ps, s->pos0, s->n, s->swa, kv_type, 17 + i);
        r.f.isa = isa;
        r.f.ops = ul_cpu_ops(isa);
        if (tiled)
            run_tiled(&r);
        else
            run_per_token(&r);
        const double e = check(&r, !tiled && kv_type == UL_TYPE_F16);
        cr_expect_leq(e, tol, "%s %s kv %s hd=%d heads %d/%d ps=%d pos0=%d n=%d swa=%d: %g",
                      tiled ? "tiled" : "per-token", ul_cpu_isa_name(isa),
                      kv_type == UL_TYPE_F16 ? "f16" : "f32", s->hd, s->n_head, s->n_kv, s->ps,
                      s->pos0, s->n, s->swa, e);
        rig_free(&r);
    }
}

/* f32 all the way: only summation order and the exponential's last bits differ. */
Test(attn, tiled_matches_f64_reference) {
    UL_SKIP_UNDER_TSAN();
    each_shape(1, UL_ISA_SCALAR, UL_TYPE_F16, 2e-5);
    each_shape(1, UL_ISA_SCALAR, UL_TYPE_F32, 2e-5);
}

Test(attn, tiled_avx2_matches_f64_reference) {
    UL_SKIP_UNDER_TSAN();
    UL_TEST_REQUIRE_ISA(UL_ISA_AVX2);
    each_shape(1, UL_ISA_AVX2, UL_TYPE_F16, 2e-5);
    each_shape(1, UL_ISA_AVX2, UL_TYPE_F32, 2e-5);
}

/* AArch64: the tiled path through the NEON table (kernels_neon_attn.c; hd 36 included, a
 * multiple of 4) under tests/arm64/run.sh; skipped elsewhere. */
Test(attn, tiled_neon_matches_f64_reference) {
    UL_SKIP_UNDER_TSAN();
    UL_TEST_REQUIRE_ISA(UL_ISA_NEON);
    each_shape(1, UL_ISA_NEON, UL_TYPE_F16, 2e-5);
    each_shape(1, UL_ISA_NEON, UL_TYPE_F32, 2e-5);
}

/* The f16 cache keeps an f16 accumulator (llama.cpp's one-row path): outputs of magnitude
 * ~1 move by a few f16 ulps over ~100 keys; an f32 cache stays f32. */
Test(attn, per_token_matches_f64_reference) {
    UL_SKIP_UNDER_TSAN();
    each_shape(0, UL_ISA_SCALAR, UL_TYPE_F16, 1e-2);
    each_shape(0, UL_ISA_SCALAR, UL_TYPE_F32, 2e-5);
}

Test(attn, per_token_avx2_matches_f64_reference) {
    UL_SKIP_UNDER_TSAN();
    UL_TEST_REQUIRE_ISA(UL_ISA_AVX2);
    each_shape(0, UL_ISA_AVX2, UL_TYPE_F16, 1e-2);
    each_shape(0, UL_ISA_AVX2, UL_TYPE_F32, 2e-5);
}

/* The per-token path on isa against the scalar one, shape by shape, on the same inputs: the
 * largest difference at most tol. */
static void per_token_tracks_scalar(ul_isa_t isa, double tol) {
    for (size_t i = 0; i < sizeof k_shapes / sizeof k_shapes[0]; i++) {
        const shape_t *s = &k_shapes[i];
        rig_t a, b;
        rig_init(&a, s->hd, s->n_head, s->n_kv, s->ps, s->pos0, s->n, s->swa, UL_TYPE_F16, 5 + i);
        rig_init(&b, s->hd, s->n_head, s->n_kv, s->ps, s->pos0, s->n, s->swa, UL_TYPE_F16, 5 + i);
        a.f.isa = UL_ISA_SCALAR;
        b.f.isa = isa;
        a.f.ops = ul_cpu_ops(UL_ISA_SCALAR);
        b.f.ops = ul_cpu_ops(isa);
        run_per_token(&a);
        run_per_token(&b);
        double worst = 0;
        size_t n_diff = 0, total = (size_t)s->n * a.f.q_dim;
        for (size_t k = 0; k < total; k++) {
            const double d = fabs((double)a.f.att[k] - b.f.att[k]);
            worst = fmax(worst, d);
            n_diff += d != 0;
        }
        cr_expect_leq(worst, tol, "hd=%d: scalar vs %s %g", s->hd, ul_cpu_isa_name(isa), worst);
        cr_log_info("hd=%d: %zu of %zu outputs differ, largest %g", s->hd, n_diff, total, worst);
        rig_free(&a);
        rig_free(&b);
    }
}

/* AVX2's per-token path keeps the scalar path's roundings (the same f16 accumulator steps
 * and glibc's expf); only score summation order differs, so the two stay much closer to
 * each other than either is to the reference. */
Test(attn, per_token_avx2_tracks_scalar) {
    UL_TEST_REQUIRE_ISA(UL_ISA_AVX2);
    per_token_tracks_scalar(UL_ISA_AVX2, 4e-3);
}

/* AArch64: the per-token path through the NEON table (kernels_neon_attn.c) keeps the scalar
 * path's roundings key by key; only the score's summation order differs. Under
 * tests/arm64/run.sh; skipped elsewhere. */
Test(attn, per_token_neon_matches_f64_reference) {
    UL_SKIP_UNDER_TSAN();
    UL_TEST_REQUIRE_ISA(UL_ISA_NEON);
    each_shape(0, UL_ISA_NEON, UL_TYPE_F16, 1e-2);
    each_shape(0, UL_ISA_NEON, UL_TYPE_F32, 2e-5);
}

Test(attn, per_token_neon_tracks_scalar) {
    UL_TEST_REQUIRE_ISA(UL_ISA_NEON);
    per_token_tracks_scalar(UL_ISA_NEON, 4e-3);
}
