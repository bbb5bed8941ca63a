/* Kernel micro-benchmark (not part of `make test`): one 2048 x 5632 weight matrix per type
 * (TinyLlama's FFN shape), timed through ul_cpu_matmul on a pool, for each ISA path this
 * CPU has. Decode = 1 token (reports weight GB/s and matmuls/s); prefill = a batch of
 * tokens (reports tokens/s through this one matrix).
 *
 * Build by hand after building ul_cpu in build-DIR:
 *   cc -O2 -march=native -Iinclude -Isrc bench/kernels.c build-DIR/libul_cpu.a \
 *      build-DIR/libul_engine.a build-DIR/libul_model.a build-DIR/libul_base.a \
 *      $(pkg-config --libs libuv libpcre2-8 libcjson) -lpthread -lm -o /tmp/bench_kernels
 * Usage: bench_kernels [threads=2] [prefill_tokens=128] [types=all|q4_0,q8_0,...] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu/kernels_impl.h"

/* The machine is shared: with other jobs running, wall time mostly measures the
 * scheduler. Process CPU time / threads is what the kernels cost (the pool's spin-waits
 * count too, but the work is balanced); wall time is printed alongside. */
static int g_nth = 1;
static double now(void) {
    struct timespec ts;
    clock_gettime(getenv("BENCH_WALL") ? CLOCK_MONOTONIC : CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (ts.tv_sec + ts.tv_nsec * 1e-9) / (getenv("BENCH_WALL") ? 1 : g_nth);
}

typedef struct {
    ul_gguf_tensor_t *w;
    const float *x;
    int n_tok;
    float *y;
    void *scratch;
    ul_pool_t *p;
    int reps;
} job_t;

static void job(void *ctx, int ith, int nth) {
    job_t *j = ctx;
    for (int i = 0; i < j->reps; i++)
        ul_cpu_matmul(j->p, j->w, j->x, j->n_tok, j->y, j->scratch, ith, nth);
}

/* best of 3 runs, each at least ~0.3 s, seconds per matmul */
static double time_mm(job_t *j) {
    double best = 1e30;
    j->reps = 1;
    ul_pool_run(j->p, job, j); /* warm up, page in */
    double t0 = now();
    ul_pool_run(j->p, job, j);
    double one = now() - t0;
    j->reps = one > 0.3 ? 1 : (int)(0.3 / (one + 1e-9)) + 1;
    for (int k = 0; k < 3; k++) {
        t0 = now();
        ul_pool_run(j->p, job, j);
        double t = (now() - t0) / j->reps;
        best = t < best ? t : best;
    }
    return best;
}

int main(int argc, char **argv) {
    int nth = argc > 1 ? atoi(argv[1]) : 2;
    int n_pre = argc > 2 ? atoi(argv[2]) : 128;
    const char *sel = argc > 3 ? argv[3] : "all";
    const int64_t n_cols = 2048, n_rows = 5632;
    static const int types[] = {UL_TYPE_F32,   UL_TYPE_F16,  UL_TYPE_BF16, UL_TYPE_Q8_0,
                                UL_TYPE_Q4_0,  UL_TYPE_Q4_1, UL_TYPE_Q5_0, UL_TYPE_Q5_1,
                                UL_TYPE_Q4_K,  UL_TYPE_Q5_K, UL_TYPE_Q6_K, UL_TYPE_IQ4_NL,
                                UL_TYPE_IQ4_XS};
    g_nth = nth;
    printf("timing: %s\n", getenv("BENCH_WALL") ? "wall clock" : "process CPU time / threads");
    ul_pool_t *p;
    if (ul_pool_create(nth, &p) != 0) return 1;
    float *x = malloc(sizeof(float) * (size_t)(n_cols * n_pre));
    float *y = malloc(sizeof(float) * (size_t)(n_rows * n_pre));
    float *row = malloc(sizeof(float) * (size_t)n_cols);
    uint64_t s = 1;
    for (int64_t i = 0; i < n_cols * n_pre; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((s >> 40) * 0x1p-24 - 0.5);
    }
    printf("matrix %ldx%ld, %d threads, prefill batch %d\n", (long)n_rows, (long)n_cols, nth,
           n_pre);
    printf("%-6s %-7s %10s %10s %12s %14s\n", "type", "isa", "MB", "decode ms", "decode GB/s",
           "prefill tok/s");
    ul_isa_t best = ul_cpu_isa();
    for (size_t ti = 0; ti < sizeof(types) / sizeof(types[0]); ti++) {
        int type = types[ti];
        if (strcmp(sel, "all") && !strstr(sel, ul_type_name(type))) continue;
        size_t rb = ul_type_row_bytes(type, n_cols);
        uint8_t *w = aligned_alloc(64, (rb * n_rows + 63) / 64 * 64);
        for (int64_t r = 0; r < n_rows; r++) {
            for (int64_t k = 0; k < n_cols; k++) {
                s = s * 6364136223846793005ull + 1442695040888963407ull;
                row[k] = (float)((s >> 40) * 0x1p-24 - 0.5) * 0.05f;
            }
            if (type == UL_TYPE_Q4_K || type == UL_TYPE_Q6_K) {
                for (size_t b = 0; b < rb; b++) w[r * rb + b] = (uint8_t)(r * 31 + b * 7);
                for (int64_t b = 0; b < n_cols / 256; b++) { /* sane scales */
                    uint16_t d = ul_fp32_to_fp16(0.001f);
                    if (type == UL_TYPE_Q4_K)
                        memcpy(w + r * rb + b * 144, &d, 2);
                    else
                        memcpy(w + r * rb + b * 210 + 208, &d, 2);
                }
            } else {
                ul_cpu_quant_row(type, row, w + r * rb, n_cols);
            }
        }
        ul_gguf_tensor_t t = {
            .n_dims = 2, .ne = {n_cols, n_rows, 1, 1}, .type = (uint32_t)type, .data = w};
        void *scratch = malloc(ul_cpu_matmul_scratch(type, n_cols, n_pre) + 64);
        for (int isa = UL_ISA_SCALAR; isa <= (int)best; isa++) {
            ul_cpu_set_isa((ul_isa_t)isa);
            job_t j = {&t, x, 1, y, scratch, p, 1};
            double td = time_mm(&j);
            j.n_tok = isa == UL_ISA_SCALAR && n_pre > 16 ? 16 : n_pre; /* scalar is slow */
            double tp = time_mm(&j);
            printf("%-6s %-7s %10.1f %10.3f %12.2f %14.1f\n", ul_type_name(type),
                   ul_cpu_isa_name((ul_isa_t)isa), rb * n_rows / 1e6, td * 1e3,
                   rb * n_rows / td / 1e9, j.n_tok / tp);
            fflush(stdout);
        }
        free(scratch);
        free(w);
    }
    ul_pool_free(p);
    return 0;
}
