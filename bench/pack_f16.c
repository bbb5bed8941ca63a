/* Packed F16 micro-benchmark (not part of `make test`): TinyLlama's FFN shapes, 5632 rows
 * x 2048 columns (gate/up) and 2048 x 5632 (down), 1 token (decode) and 512 tokens
 * (prefill), on a 2-thread pool: the packed layout of kernels_avx512_f16.c (groups split
 * between the threads in halves; activations rounded through f16 by a pool run first,
 * timed too) against the row-layout ul_cpu_matmul on the same weights. "big" cycles
 * decode through 100 distinct copies of the 5632 x 2048 matrix (2.3 GB per layout) so
 * the weights come from DRAM, not L3.
 *
 * Build by hand after building ul_cpu in build-DIR:
 *   cc -O2 -march=native -Iinclude -Isrc bench/pack_f16.c build-DIR/libul_cpu.a \
 *      build-DIR/libul_engine.a build-DIR/libul_model.a build-DIR/libul_base.a \
 *      $(pkg-config --libs libuv libpcre2-8 libcjson) -lpthread -lm -o /tmp/bench_pack_f16
 * Usage: bench_pack_f16 [threads=2] [prefill_tokens=512] [copies=100]
 * Wall clock, best of 5 timed runs (the machine is shared: run it when it is quiet). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu/kernels_impl.h"
#include "cpu/pack.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct {
    int packed;
    const ul_pack_kern_t *pk;
    ul_gguf_tensor_t *w; /* copies of the row layout */
    uint8_t **wp;        /* copies of the packed layout */
    int n_copies, cur;
    int64_t n_rows, n_cols;
    const float *x;
    uint8_t *xq; /* packed path: f16-rounded activations */
    int nt;
    float *y;
    void *scratch;
    ul_pool_t *p;
} job_t;

static void quant_job(void *ctx, int ith, int nth) {
    job_t *j = ctx;
    const size_t xs = ul_cpu_xrow_bytes(XF_F16R, j->n_cols);
    for (int t = ith; t < j->nt; t += nth)
        ul_cpu_quant_x(XF_F16R, j->x + (size_t)t * j->n_cols, j->xq + xs * t, j->n_cols);
}

static void mm_job(void *ctx, int ith, int nth) {
    job_t *j = ctx;
    if (!j->packed) {
        ul_cpu_matmul(j->p, &j->w[j->cur], j->x, j->nt, j->y, j->scratch, ith, nth);
        return;
    }
    const int ng = (int)(j->n_rows / UL_PACK_ROWS);
    const int g0 = ng * ith / nth, g1 = ng * (ith + 1) / nth;
    const size_t gb = j->pk->group_bytes(j->n_cols);
    j->pk->mm(j->n_cols, j->wp[j->cur] + gb * g0, g1 - g0, j->xq,
              ul_cpu_xrow_bytes(XF_F16R, j->n_cols), j->nt, j->y + UL_PACK_ROWS * g0, j->n_rows);
}

/* seconds per matmul: best of 5 runs of `reps` matmuls, each on the next copy */
static double time_mm(job_t *j, int reps) {
    double best = 1e30;
    for (int run = 0; run < 6; run++) {
        double t0 = now();
        for (int i = 0; i < reps; i++) {
            j->cur = (j->cur + 1) % j->n_copies;
            if (j->packed) ul_pool_run(j->p, quant_job, j);
            ul_pool_run(j->p, mm_job, j);
        }
        double t = (now() - t0) / reps;
        if (run > 0 && t < best) best = t; /* run 0 warms up */
    }
    return best;
}

static void report(const char *what, const job_t *j, double t) {
    const double bytes = (double)j->n_rows * j->n_cols * 2,
                 flops = 2.0 * j->n_rows * j->n_cols * j->nt;
    printf("%-6s %5ldx%-5ld %-4s nt=%-4d %9.3f ms %8.2f GB/s %8.1f GFLOP/s\n", what,
           (long)j->n_rows, (long)j->n_cols, j->packed ? "pack" : "rows", j->nt, t * 1e3,
           bytes / t / 1e9, flops / t / 1e9);
    fflush(stdout);
}

static void fill_f16(uint16_t *w, size_t n, uint64_t *s) {
    for (size_t i = 0; i < n; i++) {
        *s = *s * 6364136223846793005ull + 1442695040888963407ull;
        w[i] = ul_fp32_to_fp16((float)((*s >> 40) * 0x1p-24 - 0.5) * 0.05f);
    }
}

int main(int argc, char **argv) {
    const int nth = argc > 1 ? atoi(argv[1]) : 2;
    const int n_pre = argc > 2 ? atoi(argv[2]) : 512;
    const int n_big = argc > 3 ? atoi(argv[3]) : 100;
    const ul_pack_kern_t *pk = ul_cpu_pack_kern(UL_TYPE_F16, ul_cpu_isa());
    if (!pk) {
        fprintf(stderr, "no packed F16 layout on this CPU (%s)\n", ul_cpu_isa_name(ul_cpu_isa()));
        return 1;
    }
    ul_pool_t *p;
    if (ul_pool_create(nth, &p) != 0) return 1;
    printf("packed F16 vs row layout, %d threads, wall clock, best of 5\n", nth);
    static const int64_t shapes[2][2] = {{5632, 2048}, {2048, 5632}};
    uint64_t s = 1;
    float *x = malloc(sizeof(float) * 5632 * (size_t)n_pre);
    for (int64_t i = 0; i < 5632 * (int64_t)n_pre; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((s >> 40) * 0x1p-24 - 0.5);
    }
    float *y = malloc(sizeof(float) * 5632 * (size_t)n_pre);
    uint8_t *xq = malloc(ul_cpu_xrow_bytes(XF_F16R, 5632) * (size_t)n_pre);
    void *scratch = malloc(ul_cpu_matmul_scratch(UL_TYPE_F16, 5632, n_pre) + 64);
    for (int si = 0; si < 2; si++) {
        const int64_t nr = shapes[si][0], nc = shapes[si][1];
        const size_t bytes = (size_t)(nr * nc * 2), gb = pk->group_bytes(nc);
        uint16_t *w = aligned_alloc(64, bytes);
        fill_f16(w, (size_t)(nr * nc), &s);
        uint8_t *wp = aligned_alloc(64, gb * (size_t)(nr / 16));
        for (int64_t g = 0; g < nr / 16; g++)
            pk->pack((uint8_t *)w + (size_t)g * 16 * nc * 2, (size_t)nc * 2, nc, wp + gb * g);
        ul_gguf_tensor_t t = {.n_dims = 2, .ne = {nc, nr, 1, 1}, .type = UL_TYPE_F16, .data = w};
        for (int packed = 0; packed < 2; packed++) {
            job_t j = {packed, pk, &t, &wp, 1, 0, nr, nc, x, xq, 1, y, scratch, p};
            report("L3", &j, time_mm(&j, 50));
            j.nt = n_pre;
            report("", &j, time_mm(&j, 1));
        }
        free(w), free(wp);
    }
    /* decode from DRAM: one layout's copies at a time */
    const int64_t nr = 5632, nc = 2048;
    const size_t bytes = (size_t)(nr * nc * 2), gb = pk->group_bytes(nc);
    for (int packed = 0; packed < 2 && n_big > 0; packed++) {
        ul_gguf_tensor_t *t = calloc((size_t)n_big, sizeof *t);
        uint8_t **wp = calloc((size_t)n_big, sizeof *wp);
        uint16_t *src = aligned_alloc(64, bytes);
        fill_f16(src, (size_t)(nr * nc), &s);
        for (int c = 0; c < n_big; c++) {
            uint8_t *m = aligned_alloc(64, packed ? gb * (size_t)(nr / 16) : bytes);
            if (!m) return 1;
            if (packed)
                for (int64_t g = 0; g < nr / 16; g++)
                    pk->pack((uint8_t *)src + (size_t)g * 16 * nc * 2, (size_t)nc * 2, nc,
                             m + gb * g);
            else
                memcpy(m, src, bytes);
            wp[c] = m;
            t[c] = (ul_gguf_tensor_t){
                .n_dims = 2, .ne = {nc, nr, 1, 1}, .type = UL_TYPE_F16, .data = m};
        }
        job_t j = {packed, pk, t, wp, n_big, 0, nr, nc, x, xq, 1, y, scratch, p};
        report("DRAM", &j, time_mm(&j, n_big));
        for (int c = 0; c < n_big; c++) free(wp[c]);
        free(t), free(wp), free(src);
    }
    ul_pool_free(p);
    free(x), free(y), free(xq), free(scratch);
    return 0;
}
