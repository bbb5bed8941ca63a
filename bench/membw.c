/* Memory read bandwidth for bench/engine.sh and bench/decode_bw.sh: T threads (default 2)
 * each sum their half of a 1 GiB buffer of floats (read-only, STREAM-like), best of 5 passes,
 * on transparent huge pages where allowed (as uvllm's packed weights are). Decode of a dense
 * model reads every weight once per token, so model bytes x tokens/s over this number is how
 * close decode gets to the machine's bound. Prints "GB/s" (1e9 bytes) on stdout.
 * Build: cc -O3 -march=native -pthread -o membw membw.c */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

typedef struct {
    const float *p;
    size_t n;
    double sum;
} part_t;

static void *sum_part(void *arg) {
    part_t *t = arg;
    /* Eight independent accumulators so the loop is limited by loads, not by
     * the latency of one dependent add chain; the compiler vectorizes it. */
    float acc[8] = {0};
    size_t i = 0;
    for (; i + 8 <= t->n; i += 8)
        for (int k = 0; k < 8; k++) acc[k] += t->p[i + k];
    double s = 0;
    for (int k = 0; k < 8; k++) s += acc[k];
    for (; i < t->n; i++) s += t->p[i];
    t->sum = s;
    return NULL;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    int nthreads = argc > 1 ? atoi(argv[1]) : 2;
    size_t bytes = (size_t)(argc > 2 ? atof(argv[2]) : 1024) << 20; /* MiB */
    if (nthreads < 1 || nthreads > 256 || bytes < (1u << 20)) {
        fprintf(stderr, "usage: membw [THREADS] [MIB]\n");
        return 2;
    }
    size_t n = bytes / sizeof(float);
    /* on 2 MiB pages where the kernel allows, as uvllm's packed weights are */
    float *buf = aligned_alloc((size_t)2 << 20,
                               (n * sizeof(float) + ((2u << 20) - 1)) & ~(size_t)((2u << 20) - 1));
    if (!buf) return 1;
    (void)madvise(buf, n * sizeof(float), MADV_HUGEPAGE);
    for (size_t i = 0; i < n; i++) buf[i] = (float)(i & 1023) * 1e-3f; /* touch every page */
    pthread_t th[256];
    part_t parts[256];
    double best = 0, check = 0;
    for (int rep = 0; rep < 5; rep++) {
        size_t chunk = n / (size_t)nthreads;
        double t0 = now_s();
        for (int t = 0; t < nthreads; t++) {
            parts[t].p = buf + (size_t)t * chunk;
            parts[t].n = t == nthreads - 1 ? n - (size_t)t * chunk : chunk;
            pthread_create(&th[t], NULL, sum_part, &parts[t]);
        }
        check = 0;
        for (int t = 0; t < nthreads; t++) {
            pthread_join(th[t], NULL);
            check += parts[t].sum;
        }
        double gbs = (double)(n * sizeof(float)) / (now_s() - t0) / 1e9;
        if (gbs > best) best = gbs;
    }
    fprintf(stderr, "membw: %d threads, %zu MiB, checksum %.6g\n", nthreads, bytes >> 20, check);
    printf("%.2f\n", best);
    free(buf);
    return 0;
}
