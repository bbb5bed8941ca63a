/* The CUDA kernels' arithmetic (src/gpu/twin.h) on the host against the CPU backend: the
 * dequantisation of every weight type the GPU reads, the dot product of the decode
 * matvec, RoPE in both modes, SwiGLU, the online softmax of paged attention, and greedy
 * sampling's argmax and logprob against ul_sample. Built and run with CUDA off, so a wrong
 * formula in a kernel is caught on a machine without a GPU. Each check prints its largest
 * difference. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>

#include "../cpu/kern_testutil.h"
#include "cpu/forward.h"
#include "engine/sampling.h"
#include "gpu/twin.h"

static const int types[] = {UL_TYPE_F32,  UL_TYPE_F16,    UL_TYPE_BF16,  UL_TYPE_Q8_0, UL_TYPE_Q4_0,
                            UL_TYPE_Q4_K, UL_TYPE_Q6_K,   UL_TYPE_Q4_1,  UL_TYPE_Q5_0, UL_TYPE_Q5_1,
                            UL_TYPE_Q5_K, UL_TYPE_IQ4_NL, UL_TYPE_IQ4_XS};

Test(twin, type_ids_and_sizes_match_gguf) {
    cr_assert_eq(UL_TW_F16, UL_TYPE_F16);
    cr_assert_eq(UL_TW_BF16, UL_TYPE_BF16);
    cr_assert_eq(UL_TW_Q4_0, UL_TYPE_Q4_0);
    cr_assert_eq(UL_TW_Q8_0, UL_TYPE_Q8_0);
    cr_assert_eq(UL_TW_Q4_K, UL_TYPE_Q4_K);
    cr_assert_eq(UL_TW_Q6_K, UL_TYPE_Q6_K);
    cr_assert_eq(UL_TW_Q4_1, UL_TYPE_Q4_1);
    cr_assert_eq(UL_TW_Q5_0, UL_TYPE_Q5_0);
    cr_assert_eq(UL_TW_Q5_1, UL_TYPE_Q5_1);
    cr_assert_eq(UL_TW_Q5_K, UL_TYPE_Q5_K);
    cr_assert_eq(UL_TW_IQ4_NL, UL_TYPE_IQ4_NL);
    cr_assert_eq(UL_TW_IQ4_XS, UL_TYPE_IQ4_XS);
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        cr_assert_eq((size_t)ul_tw_row_bytes(types[i], 512), ul_type_row_bytes(types[i], 512),
                     "row bytes of type %d", types[i]);
}

/* Bit-exact: the GPU's embedding rows and GEMM tiles are the CPU's dequantised weights. */
Test(twin, dequant_rows_equal_the_cpu_backend) {
    const int64_t n = 1024;
    float *ref = malloc(n * sizeof *ref);
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        int type = types[ti];
        uint8_t *w = tk_weights(type, 4, n, 7 + (uint64_t)ti);
        size_t rb = ul_type_row_bytes(type, n);
        int n_diff = 0;
        for (int r = 0; r < 4; r++) {
            ul_cpu_dequant_row(type, w + rb * r, ref, n);
            for (int64_t k = 0; k < n; k++) {
                float g = ul_tw_dq(type, w + rb * r, k);
                if (memcmp(&g, &ref[k], 4)) n_diff++;
            }
        }
        printf("dequant %-5s: %d of %d elements differ from ul_cpu_dequant_row\n",
               ul_type_name(type), n_diff, (int)(4 * n));
        cr_assert_eq(n_diff, 0, "type %s", ul_type_name(type));
        free(w);
    }
    free(ref);
}

/* The matvec kernel's per-lane sum of twin-dequantised weights times f32 activations,
 * against the CPU backend's product (which quantises the activations for the integer
 * types): the tolerance is per type, relative to the row's sum of |w x|. */
Test(twin, matvec_dot_matches_cpu_matmul) {
    const int64_t n = 512;
    const int rows = 32;
    ul_pool_t *pool;
    cr_assert_eq(ul_pool_create(1, &pool), 0);
    float *x = malloc(n * sizeof *x), *y = malloc(rows * sizeof *y);
    uint64_t s = 99;
    for (int64_t k = 0; k < n; k++) x[k] = tk_unif(&s);
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        int type = types[ti];
        uint8_t *w = tk_weights(type, rows, n, 31 + (uint64_t)ti);
        ul_gguf_tensor_t t = {.type = type, .n_dims = 2, .ne = {n, rows}, .data = w};
        void *scratch = malloc(ul_cpu_matmul_scratch(type, n, 1));
        ul_cpu_matmul(pool, &t, x, 1, y, scratch, 0, 1);
        size_t rb = ul_type_row_bytes(type, n);
        double worst = 0;
        for (int r = 0; r < rows; r++) {
            float lane[32] = {0};
            double mag = 0;
            for (int64_t k = 0; k < n; k++) { /* the kernel's lane order, then the warp sum */
                float wk = ul_tw_dq(type, w + rb * r, k);
                lane[k % 32] += wk * x[k];
                mag += fabs((double)wk * x[k]);
            }
            for (int o = 16; o > 0; o >>= 1)
                for (int l = 0; l < o; l++) lane[l] += lane[l + o];
            double rel = fabs((double)lane[0] - y[r]) / (mag + 1e-30);
            if (rel > worst) worst = rel;
        }
        /* the CPU rounds activations to 8 bits for the quantised types, bf16 for BF16 and
         * f16 for F16 (as llama.cpp does); the GPU keeps them f32 */
        double tol = type == UL_TYPE_F32 ? 1e-5 : type == UL_TYPE_F16 ? 1e-3 : 5e-3;
        printf("matvec %-5s: largest |gpu - cpu| / sum|w x| = %.3g (tolerance %g)\n",
               ul_type_name(type), worst, tol);
        cr_assert_leq(worst, tol, "type %s", ul_type_name(type));
        free(scratch);
        free(w);
    }
    free(x);
    free(y);
    ul_pool_free(pool);
}

/* The angle: the CPU cache's repeated multiplication (bit-exact with ggml), checked here
 * against the closed form; then NEOX pairing against the CPU's ul_fwd_rope_neox. */
Test(twin, rope_angles_and_neox_pairs_match_the_cpu) {
    const int n_rot = 64;
    const float base = 10000.0f;
    double worst = 0;
    for (int32_t pos = 0; pos < 4096; pos += 97)
        for (int p = 0; p < n_rot / 2; p++) {
            double exact = pos * pow(base, -2.0 * p / n_rot);
            double d = fabs(ul_tw_rope_theta(pos, p, n_rot, base, 1.0f, NULL) - exact);
            if (d / (exact + 1) > worst) worst = d / (exact + 1);
        }
    printf("rope theta: largest relative difference to the closed form %.3g\n", worst);
    cr_assert_leq(worst, 1e-5);
    float cs[64], x[64], y[64];
    uint64_t s = 5;
    for (int i = 0; i < n_rot; i++) x[i] = y[i] = tk_unif(&s);
    for (int p = 0; p < n_rot / 2; p++) {
        float th = ul_tw_rope_theta(1234, p, n_rot, base, 0.5f, NULL);
        cs[2 * p] = cosf(th);
        cs[2 * p + 1] = sinf(th);
        ul_tw_rope_pair(&y[p], &y[p + n_rot / 2], cs[2 * p], cs[2 * p + 1]);
    }
    ul_fwd_rope_neox(x, cs, n_rot);
    cr_assert_arr_eq(x, y, sizeof x, "NEOX pairs (p, p + n_rot/2) differ from the CPU");
}

Test(twin, swiglu_and_rms_scale) {
    double worst = 0;
    for (float g = -20.0f; g <= 20.0f; g += 0.37f) {
        double ref = g / (1.0 + exp(-(double)g)) * 1.5;
        double d = fabs(ul_tw_swiglu(g, 1.5f) - ref) / (fabs(ref) + 1e-6);
        if (d > worst) worst = d;
    }
    printf("swiglu: largest relative difference %.3g\n", worst);
    cr_assert_leq(worst, 1e-5);
    float x[300];
    double ss = 0;
    for (int i = 0; i < 300; i++) ss += (double)(x[i] = 0.01f * (float)(i - 150));
    ss = 0;
    for (int i = 0; i < 300; i++) ss += (double)x[i] * x[i];
    float sc = ul_tw_rms_scale((float)ss, 300, 1e-5f);
    cr_assert_float_eq(sc, 1.0 / sqrt(ss / 300 + 1e-5), 1e-5);
}

/* Paged attention's online softmax, one row at a time in position order, against the
 * two-pass softmax in double. */
Test(twin, online_softmax_equals_two_pass) {
    enum { N = 300, D = 8 };
    float sc[N], v[N][D];
    uint64_t s = 17;
    for (int i = 0; i < N; i++) {
        sc[i] = 8.0f * tk_unif(&s);
        for (int d = 0; d < D; d++) v[i][d] = tk_unif(&s);
    }
    float m = -INFINITY, l = 0, acc[D] = {0};
    for (int i = 0; i < N; i++) {
        float w, corr = ul_tw_softmax_step(&m, &l, sc[i], &w);
        for (int d = 0; d < D; d++) acc[d] = acc[d] * corr + w * v[i][d];
    }
    double mx = -INFINITY, z = 0, worst = 0;
    for (int i = 0; i < N; i++) mx = sc[i] > mx ? sc[i] : mx;
    for (int i = 0; i < N; i++) z += exp(sc[i] - mx);
    for (int d = 0; d < D; d++) {
        double o = 0;
        for (int i = 0; i < N; i++) o += exp(sc[i] - mx) / z * v[i][d];
        double diff = fabs(acc[d] / l - o);
        if (diff > worst) worst = diff;
    }
    printf("attention softmax: largest difference %.3g\n", worst);
    cr_assert_leq(worst, 1e-5);
}

/* The device argmax merges per-thread partials in a tree; any order must give ul_sample's
 * greedy token (ties to the lowest id) and its logprob. */
Test(twin, argmax_merge_matches_ul_sample_greedy) {
    enum { V = 5000 };
    float *l = malloc(V * sizeof *l);
    void *scratch = calloc(1, ul_sample_scratch_size(V));
    uint64_t s = 3;
    for (int round = 0; round < 20; round++) {
        for (int i = 0; i < V; i++) l[i] = 10.0f * tk_unif(&s);
        l[(round * 997) % V] = 12.0f;
        l[(round * 1999 + 7) % V] = 12.0f; /* a tie: the lower id wins */
        ul_step_seq_t seq = {0};
        ul_sampling_default(&seq.sampling);
        seq.sampling.temperature = 0;
        ul_sample(&seq, l, V, scratch);
        ul_tw_amax_t part[256];
        for (int t = 0; t < 256; t++) { /* a block's threads, strided like the kernel */
            part[t] = (ul_tw_amax_t){-INFINITY, -1, 0};
            for (int i = t; i < V; i += 256)
                part[t] = ul_tw_amax_merge(part[t], ul_tw_amax_one(l[i], i));
        }
        for (int w = 128; w > 0; w >>= 1)
            for (int t = 0; t < w; t++) part[t] = ul_tw_amax_merge(part[t], part[t + w]);
        cr_assert_eq(part[0].id, seq.out_token, "round %d", round);
        cr_assert_float_eq(-logf(part[0].sum), seq.out_logprob, 1e-4, "round %d", round);
    }
    free(l);
    free(scratch);
}
