/* The pool runs a job once on each of the job's threads (nth of them: all, unless it
 * found threads waiting for descheduled ones), its barrier holds under repeated
 * back-to-back use, it keeps working after parking, and it drops a thread when one keeps
 * the others waiting, then tries again. */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <unistd.h>

#include "cpu/kernels.h"
#include "uvllm/err.h"

typedef struct {
    atomic_int hits[16];
    int runs_nth[17]; /* jobs run on nth threads */
    atomic_int counter;
    int rounds, nth;
    atomic_int failures;
    ul_pool_t *p;
} ctx_t;

static void mark(void *c, int ith, int nth) {
    ctx_t *x = c;
    atomic_fetch_add(&x->hits[ith], 1);
    if (ith == 0) x->runs_nth[nth]++;
}

/* Thread i ran once in every job that had more than i threads. */
static void check_hits(const ctx_t *c, int n, int jobs) {
    int more = jobs;
    for (int i = 0; i < 16; i++) {
        cr_expect_eq(atomic_load(&c->hits[i]), i < n ? more : 0, "thread %d", i);
        more -= c->runs_nth[i + 1];
    }
}

Test(pool, job_runs_once_on_every_thread) {
    for (int n = 1; n <= 4; n++) {
        ul_pool_t *p;
        cr_assert_eq(ul_pool_create(n, &p), 0);
        cr_expect_eq(ul_pool_n_threads(p), n);
        ctx_t c = {0};
        for (int rep = 0; rep < 50; rep++) ul_pool_run(p, mark, &c);
        check_hits(&c, n, 50);
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
    if (ith == 0) x->nth = nth;
}

Test(pool, barrier_holds_under_repeated_use) {
    for (int n = 2; n <= 3; n++) {
        ul_pool_t *p;
        cr_assert_eq(ul_pool_create(n, &p), 0);
        for (int job = 0; job < 10; job++) {
            ctx_t c = {.rounds = 200, .p = p};
            ul_pool_run(p, rounds, &c);
            cr_expect_eq(atomic_load(&c.failures), 0, "n=%d job=%d", n, job);
            cr_expect(c.nth >= 1 && c.nth <= n);
            cr_expect_eq(atomic_load(&c.counter), c.nth * 200);
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
    check_hits(&c, 3, 3);
    ul_pool_free(p);
}

/* Thread 1 is "descheduled" for 5 ms in every job: thread 0 waits at the barrier, so the
 * pool runs the next jobs on one thread, and about a second later tries two again. */
static void straggler(void *c, int ith, int nth) {
    ctx_t *x = c;
    if (ith == 1) usleep(5000);
    ul_pool_barrier(x->p);
    if (ith == 0) x->runs_nth[nth]++;
}

Test(pool, drops_a_thread_that_keeps_the_others_waiting) {
    ul_pool_t *p;
    cr_assert_eq(ul_pool_create(2, &p), 0);
    ctx_t c = {.p = p};
    for (int i = 0; i < 10; i++) ul_pool_run(p, straggler, &c);
    cr_expect(c.runs_nth[1] >= 5, "%d of 10 jobs on one thread", c.runs_nth[1]);
    int two = c.runs_nth[2];
    cr_expect(two >= 1 && two <= 4, "%d jobs on two threads", two);
    usleep(1100 * 1000); /* the probe interval */
    for (int i = 0; i < 3; i++) ul_pool_run(p, straggler, &c);
    cr_expect(c.runs_nth[2] > two, "no probe with two threads after a second");
    ul_pool_free(p);
}
