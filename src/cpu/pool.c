/* The compute thread pool. n threads including the caller; a job (fn, ctx) runs on all of
 * them. Between jobs of one step workers spin on a generation counter (a futex wake costs
 * more than a whole small matmul), and after a spin budget or ul_pool_sleep they park on
 * a condition variable so an idle server burns no CPU. ul_pool_barrier is a counting
 * barrier whose phase counter makes it reusable back to back (sense reversal). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "cpu/kernels.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#else
#define CPU_RELAX() ((void)0)
#endif

/* Spin-wait step: pause, and after a while yield the core, because with more threads than
 * free cores (a shared machine) the thread we wait for may need our core to finish. */
static inline void relax(int *spins) {
    if (++*spins < 2048)
        CPU_RELAX();
    else
        sched_yield();
}

/* ~ a few ms of pause instructions: covers the loop-thread turnaround between steps */
#define SPIN_BUDGET (1 << 16)

typedef struct {
    ul_pool_t *p;
    int ith;
    pthread_t tid;
} worker_t;

typedef struct {
    _Alignas(64) atomic_int v;
} ticket_t;

struct ul_pool_s {
    int n;
    worker_t *w;
    ul_pool_fn fn;
    void *ctx;
    _Alignas(64) atomic_uint gen; /* bumped per job */
    _Alignas(64) atomic_int n_done;
    _Alignas(64) atomic_int bar_count;
    atomic_uint bar_phase;
    ticket_t *tickets; /* ul_pool_ticket, one per thread */
    _Alignas(64) atomic_int n_parked;
    atomic_int park_now; /* ul_pool_sleep: skip the spin */
    atomic_int stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

static unsigned wait_job(ul_pool_t *p, unsigned seen) {
    unsigned g;
    for (int i = 0; i < SPIN_BUDGET && !atomic_load_explicit(&p->park_now, memory_order_relaxed);
         i++) {
        g = atomic_load_explicit(&p->gen, memory_order_acquire);
        if (g != seen) return g;
        CPU_RELAX();
    }
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add(&p->n_parked, 1);
    while ((g = atomic_load(&p->gen)) == seen) pthread_cond_wait(&p->cv, &p->mu);
    atomic_fetch_sub(&p->n_parked, 1);
    pthread_mutex_unlock(&p->mu);
    return g;
}

static void *worker_main(void *arg) {
    worker_t *w = arg;
    ul_pool_t *p = w->p;
    unsigned seen = 0;
    for (;;) {
        seen = wait_job(p, seen);
        if (atomic_load(&p->stop)) break;
        p->fn(p->ctx, w->ith, p->n);
        atomic_fetch_add_explicit(&p->n_done, 1, memory_order_release);
    }
    return NULL;
}

int ul_pool_create(int n_threads, ul_pool_t **out) {
    if (n_threads < 1 || n_threads > 1024) return UL_EINVAL;
    ul_pool_t *p = calloc(1, sizeof(*p));
    if (!p) return UL_ENOMEM;
    p->n = n_threads;
    p->w = calloc((size_t)n_threads, sizeof(worker_t));
    p->tickets = aligned_alloc(64, (size_t)n_threads * sizeof(ticket_t));
    if (!p->w || !p->tickets) {
        free(p->w);
        free(p->tickets);
        free(p);
        return UL_ENOMEM;
    }
    for (int i = 0; i < n_threads; i++) atomic_init(&p->tickets[i].v, 0);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    for (int i = 1; i < n_threads; i++) {
        p->w[i] = (worker_t){.p = p, .ith = i};
        if (pthread_create(&p->w[i].tid, NULL, worker_main, &p->w[i]) != 0) {
            UL_LOG_ERROR("pool: cannot start thread %d of %d", i, n_threads);
            p->n = i; /* free joins the ones that started */
            ul_pool_free(p);
            return UL_ENOMEM;
        }
    }
    *out = p;
    return 0;
}

static void publish(ul_pool_t *p) {
    atomic_fetch_add(&p->gen, 1); /* seq_cst: pairs with n_parked in wait_job */
    if (atomic_load(&p->n_parked) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
}

void ul_pool_run(ul_pool_t *p, ul_pool_fn fn, void *ctx) {
    if (p->n == 1) {
        fn(ctx, 0, 1);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    atomic_store_explicit(&p->n_done, 0, memory_order_relaxed);
    atomic_store_explicit(&p->park_now, 0, memory_order_relaxed);
    publish(p);
    fn(ctx, 0, p->n);
    int spins = 0;
    while (atomic_load_explicit(&p->n_done, memory_order_acquire) != p->n - 1) relax(&spins);
}

int ul_pool_n_threads(const ul_pool_t *p) { return p ? p->n : 1; }

void ul_pool_sleep(ul_pool_t *p) {
    if (p) atomic_store(&p->park_now, 1);
}

void ul_pool_barrier(ul_pool_t *p) {
    if (!p || p->n == 1) return;
    unsigned phase = atomic_load_explicit(&p->bar_phase, memory_order_acquire);
    if (atomic_fetch_add_explicit(&p->bar_count, 1, memory_order_acq_rel) == p->n - 1) {
        atomic_store_explicit(&p->bar_count, 0, memory_order_relaxed);
        atomic_store_explicit(&p->bar_phase, phase + 1, memory_order_release);
        return;
    }
    int spins = 0;
    while (atomic_load_explicit(&p->bar_phase, memory_order_acquire) == phase) relax(&spins);
}

atomic_int *ul_pool_ticket(ul_pool_t *p, int i) { return &p->tickets[i].v; }

void ul_pool_free(ul_pool_t *p) {
    if (!p) return;
    atomic_store(&p->stop, 1);
    publish(p);
    for (int i = 1; i < p->n; i++) pthread_join(p->w[i].tid, NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->w);
    free(p->tickets);
    free(p);
}
