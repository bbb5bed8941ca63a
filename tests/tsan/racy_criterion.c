/* The same deliberate race inside a criterion test, run by criterion's forking runner the
 * way the unit tests are: a race found in a unit test must fail its binary (with
 * halt_on_error=1 the sanitizer ends the test process, and criterion reports it crashed).
 * tests/tsan/expect_race.sh requires that failure and the report. */
#include <criterion/criterion.h>
#include <pthread.h>

static int racy_in_test;

static void *bump(void *arg) {
    (void)arg;
    for (int i = 0; i < 100000; i++) racy_in_test++;
    return NULL;
}

Test(tsan_selftest, two_threads_race) {
    pthread_t a, b;
    pthread_create(&a, NULL, bump, NULL);
    pthread_create(&b, NULL, bump, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    cr_assert_gt(racy_in_test, 0);
}
