/* Streaming probe for issue 4's Q4_0 decode (not part of `make test`): does the packed
 * Q4_0 decode kernel read weights as fast as a pure read of the same bytes? 2 threads,
 * a 512 MiB packed Q4_0 matrix (2048 columns) on transparent huge pages, one token.
 * Modes per line: "pure-read" (each thread sums its half, one sequential stream),
 * "static" (each thread runs the kernel over its half, 4 groups per call), and
 * "ticket" (chunks of CH rows handed out by one shared counter). Prints GB/s of weights.
 *
 * Build by hand after building ul_cpu in build/:
 *   cc -O2 -march=native -Iinclude -Isrc bench/stream_q4_0.c build/libul_cpu.a \
 *      build/libul_engine.a build/libul_model.a build/libul_base.a \
 *      $(pkg-config --libs libuv libpcre2-8 libcjson) -lpthread -lm -o /tmp/stream_q4_0
 * Usage: stream_q4_0 [lines=6] */
#include <immintrin.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include "cpu/kernels_impl.h"
#include "cpu/pack.h"
#define NCOL 2048
static uint8_t *W;
static size_t gb;
static int NG;
static uint8_t xq[8192];
static float *Y;
static atomic_int ticket;
static int CH;
static int mode;
static pthread_barrier_t bar;
static void *run(void *a) {
    int ith = (int)(long)a;
    pthread_barrier_wait(&bar);
    if (mode == 0) {
        int g0 = NG / 2 * ith, g1 = ith ? NG : NG / 2;
        for (int g = g0; g < g1; g += CH)
            ul_pack_q4_0_avx512.mm(NCOL, W + (size_t)g * gb, (g1 - g < CH ? g1 - g : CH), xq, 0, 1,
                                   Y + 16 * g, 0);
    } else if (mode == 1) {
        for (;;) {
            int g = atomic_fetch_add(&ticket, 1) * CH;
            if (g >= NG) break;
            ul_pack_q4_0_avx512.mm(NCOL, W + (size_t)g * gb, (NG - g < CH ? NG - g : CH), xq, 0, 1,
                                   Y + 16 * g, 0);
        }
    } else {
        size_t n = (size_t)NG * gb / 2;
        const char *p = (const char *)W + n * ith;
        __m512 acc[4] = {0};
        for (size_t i = 0; i < n; i += 256)
            for (int j = 0; j < 4; j++)
                acc[j] = _mm512_add_ps(acc[j], _mm512_load_ps((const float *)(p + i + 64 * j)));
        Y[ith] = acc[0][0] + acc[1][1] + acc[2][2] + acc[3][3];
    }
    return 0;
}
static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}
int main(int c, char **v) {
    gb = ul_pack_q4_0_avx512.group_bytes(NCOL);
    size_t bytes = (size_t)512 << 20;
    NG = (int)(bytes / gb) & ~63;
    W = aligned_alloc(2 << 20, (bytes + (2 << 20)) & ~(size_t)((2 << 20) - 1));
    madvise(W, bytes, MADV_HUGEPAGE);
    for (size_t i = 0; i < (size_t)NG * gb; i++) W[i] = (uint8_t)(i * 7);
    Y = calloc((size_t)NG * 16, 4);
    float x[NCOL];
    for (int i = 0; i < NCOL; i++) x[i] = (i % 17) * 0.1f;
    ul_cpu_quant_x(XF_Q8A, x, xq, NCOL);
    pthread_barrier_init(&bar, 0, 3);
    const char *names[] = {"static", "ticket", "pure-read"};
    for (int rep = 0; rep < (c > 1 ? atoi(v[1]) : 6); rep++) {
        int cfg[][2] = {{2, 4}, {0, 4}, {1, 4}, {1, 8}, {1, 16}, {1, 64}};
        for (int k = 0; k < 6; k++) {
            mode = cfg[k][0];
            CH = cfg[k][1];
            atomic_store(&ticket, 0);
            pthread_t th[2];
            for (long t = 0; t < 2; t++) pthread_create(&th[t], 0, run, (void *)t);
            double t0 = now();
            pthread_barrier_wait(&bar);
            for (int t = 0; t < 2; t++) pthread_join(th[t], 0);
            printf("%s ch%d %.1f  ", names[mode], CH * 16, (double)NG * gb / (now() - t0) / 1e9);
        }
        printf("\n");
    }
}
