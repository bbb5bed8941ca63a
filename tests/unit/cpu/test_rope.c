/* Llama 3.x rope scaling (rope_freqs.weight: RoPE frequency i divided by factor i), which
 * has no golden: on mini-f16, factors that are all 2 must give bit for bit the logits of
 * linear scaling by 2 (freq_scale 0.5; both halve every angle exactly), and factors that
 * vary per frequency (as Llama 3.1's: 1 for the fast ones, 8 for the slow ones) must move
 * the logits without touching position 0 (angle 0 whatever the factor). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cpu/forward.h"
#include "model/model.h"

#include "../shared_model.h"

static ul_model_t *load_mini(void) {
    ul_model_t *m = shared_model("mini-f16");
    cr_assert_null(m->rope_freqs);
    return m;
}

#define N 9
static const int32_t k_toks[N] = {1, 450, 4996, 17354, 1701, 432, 17204, 975, 278};

/* Logits of every token of k_toks, one step. */
static float *logits(const ul_model_t *m) {
    ul_cpu_config_t cfg = {.n_threads = 2,
                           .kv_type = UL_TYPE_F16,
                           .page_size = 16,
                           .max_batch_tokens = N,
                           .n_ctx = 64};
    ul_fwd_t *f;
    cr_assert_eq(ul_fwd_create(m, &cfg, &f), 0);
    const int32_t V = m->hp.n_vocab;
    float *out = malloc((size_t)N * V * sizeof *out);
    int32_t page = 0;
    ul_step_seq_t s = {.n_tokens = N, .pages = &page, .n_pages = 1};
    ul_step_t st = {.n_tokens = N, .tokens = (int32_t *)k_toks, .n_seqs = 1, .seqs = &s};
    cr_assert_eq(ul_fwd_step(f, &st, out), 0);
    ul_fwd_free(f);
    return out;
}

static double maxdiff(const float *a, const float *b, size_t n) {
    double d = 0;
    for (size_t i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - b[i]));
    return d;
}

Test(rope, freq_factors_of_two_equal_linear_scaling_by_two) {
    ul_model_t *m = load_mini();
    const size_t V = (size_t)m->hp.n_vocab;
    float *plain = logits(m);
    m->hp.rope_freq_scale = 0.5f;
    float *linear = logits(m);
    m->hp.rope_freq_scale = 1.0f;
    float ff[256];
    cr_assert_leq(m->hp.n_rot / 2, 256);
    for (int i = 0; i < m->hp.n_rot / 2; i++) ff[i] = 2.0f;
    ul_gguf_tensor_t t = {.n_dims = 1, .ne = {m->hp.n_rot / 2, 1, 1, 1}, .data = ff};
    m->rope_freqs = &t;
    float *factors = logits(m);
    cr_expect_eq(maxdiff(linear, factors, N * V), 0.0, "factors 2 differ from linear scaling 2");
    cr_expect_gt(maxdiff(plain, factors, N * V), 1e-3, "factors 2 change nothing");

    /* Llama 3.1's shape: fast frequencies kept, slow ones divided by 8 */
    for (int i = 0; i < m->hp.n_rot / 2; i++) ff[i] = i < m->hp.n_rot / 4 ? 1.0f : 8.0f;
    float *mixed = logits(m);
    cr_expect_eq(maxdiff(plain, mixed, V), 0.0, "position 0 has angle 0 whatever the factor");
    cr_expect_gt(maxdiff(plain + V, mixed + V, (N - 1) * V), 1e-3, "mixed factors change nothing");
    cr_expect_gt(maxdiff(linear + V, mixed + V, (N - 1) * V), 1e-3);
    m->rope_freqs = NULL;
    free(plain), free(linear), free(factors), free(mixed);
    ul_model_free(m);
}
