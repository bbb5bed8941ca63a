/* The pool runs a job on every thread exactly once, its barrier holds under repeated
 * back-to-back use, and it keeps working after parking. */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <unistd.h>

#include "cpu/kernels.h"
#include "uvllm/err.h"

typedef struct {
    atomic_int hits[16];
    atomic_int counter;
    int rounds;
    atomic_int failures;
    ul_pool_t *p;
} ctx_t;

static void mark(void *c, int ith, int nth) {
    ctx_t *x = c;
    atomic_fetch_add(&x->hits[ith], 1);
    (void)nth;
}

Test(pool, job_runs_once_on_every_thread) {
    for (int n = 1; n <= 4; n++) {
        ul_pool_t *p;
        cr_assert_eq(ul_pool_create(n, &p), 0);
        cr_expect_eq(ul_pool_n_threads(p), n);
        ctx_t c = {0};
        for (int rep = 0; rep < 50; rep++) ul_pool_run(p, mark, &c);
        for (int i = 0; i < 16; i++) cr_expect_eq(atomic_load(&c.hits[i]), i < n ? 50 : 0);
        ul_pool_free(p);
    }
    ul_pool_t *p;
    cr_expect_eq(ul_pool_create(0, &p), UL_EINVAL);
}

/* Each round every thread adds 1, meets the barrier, and must then see all nth adds
 * (a second barrier keeps the next round's adds out of this round's check). */
static void rounds(void *c, int ith, int nth) {
    ctx_t *x = c;
    for (int r = 0; r < x->rounds; r++) {
        atomic_fetch_add(&x->counter, 1);
        ul_pool_barrier(x->p);
        if (atomic_load(&x->counter) != nth * (r + 1)) atomic_fetch_add(&x->failures, 1);
        ul_pool_barrier(x->p);
    }
    (void)ith;
}

Test(pool, barrier_holds_under_repeated_use) {
    for (int n = 2; n <= 3; n++) {
        ul_pool_t *p;
        cr_assert_eq(ul_pool_create(n, &p), 0);
        for (int job = 0; job < 10; job++) {
            ctx_t c = {.rounds = 200, .p = p};
            ul_pool_run(p, rounds, &c);
            cr_expect_eq(atomic_load(&c.failures), 0, "n=%d job=%d", n, job);
            cr_expect_eq(atomic_load(&c.counter), n * 200);
        }
        ul_pool_free(p);
    }
}

Test(pool, works_after_parking) {
    ul_pool_t *p;
    cr_assert_eq(ul_pool_create(3, &p), 0);
    ctx_t c = {0};
    ul_pool_run(p, mark, &c);
    ul_pool_sleep(p);
    usleep(50 * 1000); /* long enough for workers to reach the condition variable */
    ul_pool_run(p, mark, &c);
    usleep(50 * 1000);
    ul_pool_run(p, mark, &c);
    for (int i = 0; i < 3; i++) cr_expect_eq(atomic_load(&c.hits[i]), 3);
    ul_pool_free(p);
}
