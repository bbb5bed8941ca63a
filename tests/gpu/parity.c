/* Kernel-by-kernel parity of the CUDA kernels (src/gpu/gpu.h) against the CPU backend:
 * each kernel runs on the device on random inputs and is compared with the CPU's piece
 * (ul_cpu_dequant_row, ul_cpu_matmul, ul_fwd_rope_neox, ul_sample) or, where the CPU's is
 * a static function, with a host reference in double, under a tolerance per type; the
 * largest difference is printed for each; the chained-entry gather, pure index copies, is
 * compared with its twin.h twin exactly. Without a CUDA device it prints why and exits
 * 77 (ctest: skipped). */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../unit/cpu/kern_testutil.h"
#include "cpu/forward.h"
#include "engine/sampling.h"
#include "gpu/gpu.h"
#include "gpu/support.h"
#include "gpu/twin.h"

static int g_fail;
static cudaStream_t g_s;

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)
#define LK(call)                                                                                   \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_) {                                                                                 \
            fprintf(stderr, "%s:%d: %s returned %d\n", __FILE__, __LINE__, #call, rc_);            \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static void *dup_to_dev(const void *h, size_t n) {
    void *d;
    CK(cudaMalloc(&d, n ? n : 1));
    CK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
    return d;
}

static void to_host(void *h, const void *d, size_t n) {
    CK(cudaStreamSynchronize(g_s));
    CK(cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost));
}

static void report(const char *what, double worst, double tol) {
    int ok = worst <= tol;
    printf("%-4s %-28s largest difference %.3g (tolerance %g)\n", ok ? "ok" : "FAIL", what, worst,
           tol);
    g_fail += !ok;
}

static const int types[] = {UL_TYPE_F32,  UL_TYPE_F16,    UL_TYPE_BF16,  UL_TYPE_Q8_0, UL_TYPE_Q4_0,
                            UL_TYPE_Q4_K, UL_TYPE_Q6_K,   UL_TYPE_Q4_1,  UL_TYPE_Q5_0, UL_TYPE_Q5_1,
                            UL_TYPE_Q5_K, UL_TYPE_IQ4_NL, UL_TYPE_IQ4_XS};

static void dequant_and_matvec(void) {
    enum { ROWS = 64, COLS = 1024, TOK = 4 };
    ul_pool_t *pool;
    LK(ul_pool_create(1, &pool));
    float x[TOK * COLS], ref[TOK * ROWS], got[TOK * ROWS];
    float *row = malloc(sizeof(float) * COLS), *dq = malloc(sizeof(float) * ROWS * COLS);
    uint64_t s = 1;
    for (int i = 0; i < TOK * COLS; i++) x[i] = tk_unif(&s);
    float *dx = dup_to_dev(x, sizeof x), *dy, *dd;
    CK(cudaMalloc((void **)&dy, sizeof got));
    CK(cudaMalloc((void **)&dd, sizeof(float) * ROWS * COLS));
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        int type = types[ti];
        char name[64];
        uint8_t *w = tk_weights(type, ROWS, COLS, 11 + ti);
        size_t rb = ul_type_row_bytes(type, COLS);
        void *dw = dup_to_dev(w, rb * ROWS);
        LK(ul_gpu_dequant_rows(type, dw, COLS, NULL, 0, ROWS, dd, g_s));
        to_host(dq, dd, sizeof(float) * ROWS * COLS);
        double worst = 0;
        for (int r = 0; r < ROWS; r++) {
            ul_cpu_dequant_row(type, w + rb * r, row, COLS);
            for (int k = 0; k < COLS; k++) {
                double d = fabs((double)dq[r * COLS + k] - row[k]) / (fabs(row[k]) + 1e-30);
                if (d > worst) worst = d;
            }
        }
        /* K-quants: d * sc * q - dmin * m may be fused (FMA) on the device */
        snprintf(name, sizeof name, "dequant %s (relative)", ul_type_name(type));
        report(name, worst, type == UL_TYPE_Q4_K || type == UL_TYPE_Q6_K ? 1e-6 : 0);

        ul_gguf_tensor_t t = {.type = type, .n_dims = 2, .ne = {COLS, ROWS}, .data = w};
        void *scratch = malloc(ul_cpu_matmul_scratch(type, COLS, TOK));
        ul_cpu_matmul(pool, &t, x, TOK, ref, scratch, 0, 1);
        LK(ul_gpu_matvec(type, dw, ROWS, COLS, dx, TOK, dy, g_s));
        to_host(got, dy, sizeof got);
        worst = 0;
        for (int i = 0; i < TOK * ROWS; i++) {
            double mag = 0;
            for (int k = 0; k < COLS; k++)
                mag += fabs(dq[(i % ROWS) * COLS + k] * x[(i / ROWS) * COLS + k]);
            double d = fabs((double)got[i] - ref[i]) / (mag + 1e-30);
            if (d > worst) worst = d;
        }
        snprintf(name, sizeof name, "matvec %s (/ sum|w x|)", ul_type_name(type));
        report(name, worst, type == UL_TYPE_F32 ? 1e-5 : type == UL_TYPE_F16 ? 1e-3 : 5e-3);
        free(scratch);
        cudaFree(dw);
        free(w);
    }
    cudaFree(dx);
    cudaFree(dy);
    cudaFree(dd);
    free(row);
    free(dq);
    ul_pool_free(pool);
}

static void norm_rope_act(void) {
    enum { T = 5, N = 256, H = 4, HD = 64 };
    static float x[T * N], w[N], y[T * N], g[T * N], u[T * N];
    uint64_t s = 2;
    for (int i = 0; i < T * N; i++)
        x[i] = 3.0f * tk_unif(&s), g[i] = 8.0f * tk_unif(&s), u[i] = tk_unif(&s);
    for (int i = 0; i < N; i++) w[i] = tk_unif(&s);
    float *dx = dup_to_dev(x, sizeof x), *dw = dup_to_dev(w, sizeof w), *dy;
    CK(cudaMalloc((void **)&dy, sizeof y));
    LK(ul_gpu_rmsnorm(dx, dw, T, N, 1e-5f, dy, g_s));
    to_host(y, dy, sizeof y);
    double worst = 0;
    for (int t = 0; t < T; t++) {
        double ss = 0;
        for (int i = 0; i < N; i++) ss += (double)x[t * N + i] * x[t * N + i];
        double sc = 1.0 / sqrt(ss / N + 1e-5);
        for (int i = 0; i < N; i++) {
            double d = fabs(y[t * N + i] - x[t * N + i] * sc * w[i]);
            if (d > worst) worst = d;
        }
    }
    report("rmsnorm", worst, 1e-5);

    int32_t pos[T] = {0, 1, 17, 500, 4095};
    int32_t *dpos = dup_to_dev(pos, sizeof pos);
    for (int neox = 0; neox < 2; neox++) {
        float r[T * N];
        memcpy(r, x, sizeof r);
        CK(cudaMemcpy(dy, x, sizeof x, cudaMemcpyHostToDevice));
        LK(ul_gpu_rope(dy, dpos, T, H, HD, N, HD, neox, 10000.0f, 1.0f, NULL, g_s));
        to_host(y, dy, sizeof y);
        worst = 0;
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++) {
                float cs[HD], *xh = r + t * N + h * HD;
                for (int p = 0; p < HD / 2; p++) {
                    float th = ul_tw_rope_theta(pos[t], p, HD, 10000.0f, 1.0f, NULL);
                    cs[2 * p] = cosf(th), cs[2 * p + 1] = sinf(th);
                }
                if (neox) {
                    ul_fwd_rope_neox(xh, cs, HD);
                } else {
                    for (int p = 0; p < HD / 2; p++)
                        ul_tw_rope_pair(&xh[2 * p], &xh[2 * p + 1], cs[2 * p], cs[2 * p + 1]);
                }
                for (int i = 0; i < HD; i++) {
                    double d = fabs(y[t * N + h * HD + i] - xh[i]);
                    if (d > worst) worst = d;
                }
            }
        report(neox ? "rope neox" : "rope norm", worst, 1e-4);
    }

    float *dg = dup_to_dev(g, sizeof g), *du = dup_to_dev(u, sizeof u);
    LK(ul_gpu_swiglu(dg, du, T * N, g_s));
    to_host(y, dg, sizeof y);
    worst = 0;
    for (int i = 0; i < T * N; i++) {
        double ref = g[i] / (1.0 + exp(-(double)g[i])) * u[i];
        double d = fabs(y[i] - ref) / (fabs(ref) + 1e-6);
        if (d > worst) worst = d;
    }
    report("swiglu (relative)", worst, 1e-5);
    cudaFree(dx), cudaFree(dw), cudaFree(dy), cudaFree(dpos), cudaFree(dg), cudaFree(du);
}

/* Two sequences over shuffled pages: one prefill chunk of 37 tokens and one decode token
 * at position 70, K/V stored through the page tables, attention against a double
 * reference over the same f16-rounded K/V. */
static void attention(void) {
    enum { L = 2, HKV = 2, NH = 4, HD = 64, PS = 16, NP = 16, T = 38 };
    ul_gpu_kv_t kv = {NULL, NP, L, HKV, PS, HD};
    size_t kv_elems = (size_t)NP * L * 2 * HKV * PS * HD;
    CK(cudaMalloc((void **)&kv.kv, kv_elems * 2));
    int32_t pages[] = {5, 2, 9, /* seq 0 */ 1, 7, 3, 12, 0,
                       /* seq 1 */};
    int32_t page_off[] = {0, 3};
    int32_t pos[T], seq[T];
    for (int t = 0; t < 37; t++) pos[t] = t, seq[t] = 0;
    pos[37] = 70, seq[37] = 1;
    /* seq 1's earlier positions 0..69: write them first as a prefill step of their own */
    static float k[71 * HKV * HD], v[71 * HKV * HD], q[T * NH * HD], out[T * NH * HD];
    static float k1[71 * HKV * HD], v1[71 * HKV * HD];
    uint64_t s = 3;
    for (size_t i = 0; i < sizeof k / 4; i++) k[i] = tk_unif(&s), v[i] = tk_unif(&s);
    for (size_t i = 0; i < sizeof k1 / 4; i++) k1[i] = tk_unif(&s), v1[i] = tk_unif(&s);
    for (size_t i = 0; i < sizeof q / 4; i++) q[i] = tk_unif(&s);
    int32_t pos1[71], seq1[71];
    for (int t = 0; t < 71; t++) pos1[t] = t, seq1[t] = 1;
    int32_t *dpages = dup_to_dev(pages, sizeof pages),
            *doff = dup_to_dev(page_off, sizeof page_off);
    int32_t *dpos1 = dup_to_dev(pos1, sizeof pos1), *dseq1 = dup_to_dev(seq1, sizeof seq1);
    float *dk1 = dup_to_dev(k1, sizeof k1), *dv1 = dup_to_dev(v1, sizeof v1);
    LK(ul_gpu_kv_store(&kv, 1, dk1, dv1, 70, dpos1, dseq1, dpages, doff, g_s));
    /* this step: seq 0's 37 tokens from k/v rows 0..36, seq 1's token 70 from k1/v1 row 70 */
    memcpy(k + 37 * HKV * HD, k1 + 70 * HKV * HD, HKV * HD * 4);
    memcpy(v + 37 * HKV * HD, v1 + 70 * HKV * HD, HKV * HD * 4);
    int32_t *dpos = dup_to_dev(pos, sizeof pos), *dseq = dup_to_dev(seq, sizeof seq);
    float *dk = dup_to_dev(k, sizeof k), *dv = dup_to_dev(v, sizeof v),
          *dq = dup_to_dev(q, sizeof q), *dout;
    CK(cudaMalloc((void **)&dout, sizeof out));
    const float scale = 0.125f;
    LK(ul_gpu_kv_store(&kv, 1, dk, dv, T, dpos, dseq, dpages, doff, g_s));
    LK(ul_gpu_attn(&kv, 1, dq, T, NH, dpos, dseq, dpages, doff, scale, dout, g_s));
    to_host(out, dout, sizeof out);
    double worst = 0;
    for (int t = 0; t < T; t++)
        for (int h = 0; h < NH; h++) {
            const int kvh = h / (NH / HKV);
            double sc[71], mx = -INFINITY, z = 0;
            for (int p = 0; p <= pos[t]; p++) {
                const float *kr = (seq[t] ? k1 + p * HKV * HD : k + p * HKV * HD) + kvh * HD;
                double d = 0;
                for (int i = 0; i < HD; i++)
                    d += (double)q[(t * NH + h) * HD + i] * ul_fp16_to_fp32(ul_fp32_to_fp16(kr[i]));
                sc[p] = d * scale;
                mx = sc[p] > mx ? sc[p] : mx;
            }
            for (int p = 0; p <= pos[t]; p++) z += exp(sc[p] - mx);
            for (int i = 0; i < HD; i++) {
                double o = 0;
                for (int p = 0; p <= pos[t]; p++) {
                    const float *vr = (seq[t] ? v1 + p * HKV * HD : v + p * HKV * HD) + kvh * HD;
                    o += exp(sc[p] - mx) / z * ul_fp16_to_fp32(ul_fp32_to_fp16(vr[i]));
                }
                double d = fabs(out[(t * NH + h) * HD + i] - o);
                if (d > worst) worst = d;
            }
        }
    report("paged attention (f16 KV)", worst, 1e-4);
    cudaFree(kv.kv), cudaFree(dpages), cudaFree(doff), cudaFree(dpos1), cudaFree(dseq1);
    cudaFree(dk1), cudaFree(dv1), cudaFree(dpos), cudaFree(dseq), cudaFree(dk), cudaFree(dv);
    cudaFree(dq), cudaFree(dout);
}

static void argmax(void) {
    enum { R = 6, V = 32000 };
    static float l[R * V];
    int32_t ids[R];
    float lp[R];
    uint64_t s = 4;
    for (int i = 0; i < R * V; i++) l[i] = 12.0f * tk_unif(&s);
    l[V + 100] = l[V + 9000] = 20.0f; /* a tie in row 1: the lower id */
    float *dl = dup_to_dev(l, sizeof l), *dlp;
    int32_t *dids;
    CK(cudaMalloc((void **)&dids, sizeof ids));
    CK(cudaMalloc((void **)&dlp, sizeof lp));
    LK(ul_gpu_argmax(dl, R, V, dids, dlp, g_s));
    to_host(ids, dids, sizeof ids);
    to_host(lp, dlp, sizeof lp);
    void *scratch = calloc(1, ul_sample_scratch_size(V));
    double worst = 0;
    int wrong = 0;
    for (int r = 0; r < R; r++) {
        ul_step_seq_t seq = {0};
        ul_sampling_default(&seq.sampling);
        seq.sampling.temperature = 0;
        ul_sample(&seq, l + (size_t)r * V, V, scratch);
        wrong += seq.out_token != ids[r];
        double d = fabs(lp[r] - seq.out_logprob);
        if (d > worst) worst = d;
    }
    printf("%-4s argmax: %d of %d rows choose another token than ul_sample\n",
           wrong ? "FAIL" : "ok", wrong, R);
    g_fail += wrong != 0;
    report("argmax logprob", worst, 1e-4);
    free(scratch);
    cudaFree(dl), cudaFree(dids), cudaFree(dlp);
}

/* The full sampler on the device (ul_gpu_sample) against ul_sample's portable path: rows
 * with every parameter, the same RNG states; the device's exponentials go through double
 * (twin.h), so a token may differ only where a draw sits on a boundary's last bit. */
static void sample_full(void) {
    enum { R = 24, V = 32000, H = 64 };
    static float l[R * V];
    static int32_t hist_src[H];
    ul_logit_bias_t bias[4] = {{5, 3.0f}, {77, -100.0f}, {123, 1.5f}, {V + 1, 9.0f}};
    uint64_t s = 9;
    for (int i = 0; i < R * V; i++) l[i] = 10.0f * tk_unif(&s);
    for (int i = 0; i < H; i++) hist_src[i] = (int32_t)(tk_rng(&s) % 200);
    ul_sampling_init(0);
    ul_step_seq_t seqs[R];
    ul_tw_sample_t rows[R];
    static int32_t hist[R * H], bias_ids[R * 4];
    static float bias_vals[R * 4];
    int32_t nh = 0, nb = 0;
    for (int r = 0; r < R; r++) {
        ul_step_seq_t *q = &seqs[r];
        memset(q, 0, sizeof *q);
        ul_sampling_default(&q->sampling);
        ul_sampling_t *sp = &q->sampling;
        sp->temperature = r % 6 == 5 ? 0.0f : 0.3f + 0.1f * (float)r;
        sp->top_k = r % 3 == 0 ? 40 : 0;
        sp->top_p = r % 4 == 1 ? 0.9f : 1.0f;
        sp->min_p = r % 5 == 2 ? 0.05f : 0.0f;
        if (r % 2) {
            sp->repeat_penalty = 1.3f;
            sp->repeat_last_n = r % 4 == 3 ? -1 : 32;
            sp->frequency_penalty = 0.4f;
            sp->presence_penalty = 0.2f;
        }
        if (r % 7 == 0) sp->logit_bias = bias, sp->n_logit_bias = 4;
        sp->n_logprobs = r % 3 == 1 ? 5 : 0;
        q->history = hist_src;
        q->n_history = H;
        ul_sampling_rng_seed(1000 + (uint64_t)r, q->rng);
        LK(ul_gpu_sample_pack(q, r, &rows[r], hist, R * H, &nh, bias_ids, bias_vals, R * 4, &nb));
    }
    float *dl = dup_to_dev(l, sizeof l), *dpl, *dbv = dup_to_dev(bias_vals, sizeof bias_vals);
    ul_tw_sample_t *drows = dup_to_dev(rows, sizeof rows);
    int32_t *dh = dup_to_dev(hist, sizeof hist), *dbi = dup_to_dev(bias_ids, sizeof bias_ids),
            *dcounts;
    ul_tw_cand_t *dcand;
    CK(cudaMalloc((void **)&dpl, (size_t)R * V * sizeof(float)));
    CK(cudaMalloc((void **)&dcounts, (size_t)R * V * sizeof(int32_t)));
    CK(cudaMemset(dcounts, 0, (size_t)R * V * sizeof(int32_t)));
    CK(cudaMalloc((void **)&dcand, (size_t)R * V * sizeof(ul_tw_cand_t)));
    LK(ul_gpu_sample(dl, V, drows, R, dh, dbi, dbv, dpl, dcounts, dcand, g_s));
    to_host(rows, drows, sizeof rows);
    void *scratch = calloc(1, ul_sample_scratch_size(V));
    int wrong = 0, rng_wrong = 0;
    double worst = 0;
    for (int r = 0; r < R; r++) {
        ul_sample(&seqs[r], l + (size_t)r * V, V, scratch);
        wrong += seqs[r].out_token != rows[r].token;
        rng_wrong += seqs[r].rng[0] != rows[r].rng[0] || seqs[r].rng[1] != rows[r].rng[1];
        double d = fabs(seqs[r].out_logprob - rows[r].logprob);
        if (d > worst) worst = d;
    }
    printf("%-4s sample (every parameter): %d of %d rows choose another token than ul_sample, "
           "%d RNG states differ\n",
           wrong > 1 || rng_wrong ? "FAIL" : "ok", wrong, R, rng_wrong);
    g_fail += wrong > 1 || rng_wrong;
    report("sample logprob", worst, 1e-4);
    free(scratch);
    cudaFree(dl), cudaFree(dpl), cudaFree(dbv), cudaFree(drows), cudaFree(dh), cudaFree(dbi);
    cudaFree(dcounts), cudaFree(dcand);
}

/* The chained-entry gather (chain.cu) against its twin (ul_tw_chain_apply): random pairs,
 * from argmax ids and from sampled rows (with their RNG states), into distinct tokens,
 * window places and rows, on more pairs than one block holds. */
static void chain_gather(void) {
    enum { NP = 300, T = 512, R = 160 };
    static ul_tw_chain_t pairs[NP];
    static int32_t tokens[T], want_tok[T], ids[R], out[NP], want_out[NP], perm[T], hist[T],
        want_hist[T];
    static ul_tw_sample_t prev[R], rows[R], want_rows[R];
    uint64_t s = 6;
    for (int i = 0; i < T; i++) perm[i] = i, tokens[i] = hist[i] = -1;
    for (int i = T - 1; i > 0; i--) {
        int j = (int)(tk_rng(&s) % (uint64_t)(i + 1)), t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    memset(prev, 0, sizeof prev);
    memset(rows, 0, sizeof rows);
    for (int r = 0; r < R; r++) {
        ids[r] = (int32_t)(tk_rng(&s) % 32000);
        prev[r].token = (int32_t)(tk_rng(&s) % 32000);
        prev[r].rng[0] = tk_rng(&s), prev[r].rng[1] = tk_rng(&s);
        rows[r].rng[0] = rows[r].rng[1] = 0xbad;
    }
    int32_t next_row = 0;
    for (int i = 0; i < NP; i++) {
        ul_tw_chain_t *p = &pairs[i];
        *p = (ul_tw_chain_t){
            .tok = perm[i], .ids = -1, .smp = -1, .rng = -1, .hist = i % 3 ? -1 : perm[T - 1 - i]};
        if (tk_rng(&s) % 2) {
            p->ids = (int32_t)(tk_rng(&s) % R);
        } else {
            p->smp = (int32_t)(tk_rng(&s) % R);
            if (next_row < R && tk_rng(&s) % 2) p->rng = next_row++;
        }
    }
    memcpy(want_tok, tokens, sizeof tokens);
    memcpy(want_rows, rows, sizeof rows);
    memcpy(want_hist, hist, sizeof hist);
    for (int i = 0; i < NP; i++)
        ul_tw_chain_apply(&pairs[i], want_tok, ids, prev, want_rows, want_hist, &want_out[i]);
    ul_tw_chain_t *dpairs = dup_to_dev(pairs, sizeof pairs);
    int32_t *dtok = dup_to_dev(tokens, sizeof tokens), *dids = dup_to_dev(ids, sizeof ids), *dout,
            *dhist = dup_to_dev(hist, sizeof hist);
    ul_tw_sample_t *dprev = dup_to_dev(prev, sizeof prev), *drows = dup_to_dev(rows, sizeof rows);
    CK(cudaMalloc((void **)&dout, sizeof out));
    LK(ul_gpu_chain(dpairs, NP, dtok, dids, dprev, drows, dhist, dout, g_s));
    to_host(tokens, dtok, sizeof tokens);
    to_host(out, dout, sizeof out);
    to_host(rows, drows, sizeof rows);
    to_host(hist, dhist, sizeof hist);
    int wrong = memcmp(tokens, want_tok, sizeof tokens) != 0 ||
                memcmp(out, want_out, sizeof out) != 0 || memcmp(hist, want_hist, sizeof hist) != 0;
    for (int r = 0; r < R; r++)
        wrong += rows[r].rng[0] != want_rows[r].rng[0] || rows[r].rng[1] != want_rows[r].rng[1];
    printf("%-4s chain gather: %d pairs (%d RNG states), %s\n", wrong ? "FAIL" : "ok", NP, next_row,
           wrong ? "differs from its twin" : "as its twin");
    g_fail += wrong != 0;
    cudaFree(dpairs), cudaFree(dtok), cudaFree(dids), cudaFree(dout), cudaFree(dprev);
    cudaFree(drows), cudaFree(dhist);
}

int main(void) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        printf("SKIP: no CUDA device (%s)\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 77;
    }
    CK(cudaStreamCreateWithFlags(&g_s, cudaStreamNonBlocking));
    dequant_and_matvec();
    norm_rope_act();
    attention();
    argmax();
    sample_full();
    chain_gather();
    CK(cudaStreamDestroy(g_s));
    printf("%d passed, %d failed\n", g_fail ? 0 : 1, g_fail ? 1 : 0);
    return g_fail ? 1 : 0;
}
