/* A deliberate data race, built with the same flags as the TSan build: two threads
 * increment a plain int with no synchronisation. `make test-tsan` requires ThreadSanitizer
 * to report it (tests/tsan/expect_race.sh), so a build or run setting that silently turned
 * TSan off would fail the target instead of passing it vacuously. */
#include <pthread.h>
#include <stdio.h>

static int racy_counter;

static void *bump(void *arg) {
    (void)arg;
    for (int i = 0; i < 100000; i++) racy_counter++;
    return NULL;
}

int main(void) {
    pthread_t a, b;
    pthread_create(&a, NULL, bump, NULL);
    pthread_create(&b, NULL, bump, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("racy_counter = %d\n", racy_counter);
    return 0;
}
