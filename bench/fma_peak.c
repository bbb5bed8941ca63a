/* The FMA throughput one core reaches (issue 21's F16 prefill ceiling, bench/f16_ceiling.sh):
 * 12 independent chains of 256-bit vfmadd, the register-only loop a BLAS kernel tends to,
 * timed by the thread's CPU time so that a shared host's other sessions do not count.
 * Prints multiply-adds per second of one thread (8 per instruction).
 *   cc -O3 -mavx2 -mfma fma_peak.c -o fma_peak && ./fma_peak */
#include <immintrin.h>
#include <stdio.h>
#include <time.h>

#define CHAINS 12

static double thread_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(void) {
    __m256 a[CHAINS];
    for (int i = 0; i < CHAINS; i++) a[i] = _mm256_set1_ps((float)i * 1e-3f);
    const __m256 b = _mm256_set1_ps(0.9999f), c = _mm256_set1_ps(1e-4f);
    const long n = 200000000;
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        const double t0 = thread_s();
        for (long k = 0; k < n; k++) {
#pragma GCC unroll 12
            for (int i = 0; i < CHAINS; i++) a[i] = _mm256_fmadd_ps(a[i], b, c);
        }
        const double s = thread_s() - t0, r = (double)n * CHAINS * 8 / s / 1e9;
        if (r > best) best = r;
    }
    float sink = 0;
    for (int i = 0; i < CHAINS; i++) sink += a[i][0];
    printf("%.1f %g\n", best, (double)sink); /* GMAC/s, then a value that keeps the loop */
    return 0;
}
