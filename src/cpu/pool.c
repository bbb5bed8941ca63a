/* The compute thread pool. n threads including the caller; a job (fn, ctx) runs on all of
 * them. Between jobs of one step workers spin on a generation counter (a futex wake costs
 * more than a whole small matmul), and after a spin budget or ul_pool_sleep they park on
 * a condition variable so an idle server burns no CPU. ul_pool_barrier is a counting
 * barrier whose phase counter makes it reusable back to back (sense reversal).
 *
 * Waits inside a job (the barrier, the caller waiting for the workers) spin briefly, then
 * yield, then sleep on a futex: with more runnable threads than cores (a container's CPU
 * limit, a shared machine) the thread being waited for may be off-CPU, and a waiter that
 * keeps spinning or yielding takes the core it needs. Sleeping frees the core, but the
 * waiter still waits for the other thread's next time slice, so under such contention a
 * job with barriers runs slower on n threads than on one (measured: 5x to 100x on this
 * shared 2-core machine). The pool therefore adapts how many threads a job uses: when
 * the time threads spend in those slow waits passes a quarter of the job's thread time,
 * the next jobs use one thread less; every PROBE_NS (doubling while probes fail) it tries
 * one more. A job's fn always gets the thread count of that job (nth <= ul_pool_n_threads).
 * The default thread count (ul_pool_default_threads) follows the CPUs the process may
 * use: its affinity mask and its cgroup's CPU quota. */
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#endif

#include "base/small_file.h"
#include "cpu/kernels.h"
#include "cpu/pool.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#else
#define CPU_RELAX() ((void)0)
#endif

/* In-job waits: SPIN_PAUSE pause instructions (the common case: the others are a few
 * microseconds behind), then SPIN_YIELD yields, then a futex sleep until woken. */
#define SPIN_PAUSE 2048
#define SPIN_YIELD 16

/* Adapting the threads per job: see the file comment. */
#define SLOW_HIGH 0.25              /* slow-wait share of thread time that drops a thread */
#define PROBE_NS 1000000000ull      /* first probe for one more thread after a drop */
#define PROBE_MAX_NS 16000000000ull /* probes back off up to this */
#define NTH_BITS 11                 /* the job's thread count lives in gen's low bits */
#define NTH_MASK ((1u << NTH_BITS) - 1)

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#ifdef __linux__
static void futex_wait(void *addr, unsigned val) {
    syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}
static void futex_wake(void *addr) {
    syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}
#else
static void futex_wait(void *addr, unsigned val) { sched_yield(); }
static void futex_wake(void *addr) {}
#endif

/* Waits until *w != old. *sleepers counts waiters in the futex phase: the thread that
 * changes *w (seq_cst) then reads *sleepers (seq_cst) and wakes when it is non-zero, so
 * either it sees this waiter or this waiter sees the new value (the kernel re-checks *w
 * before sleeping). */
static void wait_change(atomic_uint *w, unsigned old, atomic_int *sleepers,
                        atomic_uint_fast64_t *slow_ns) {
    for (int i = 0; i < SPIN_PAUSE; i++) {
        if (atomic_load_explicit(w, memory_order_acquire) != old) return;
        CPU_RELAX();
    }
    uint64_t t0 = now_ns(); /* a slow wait from here on: it counts against the job */
    for (int i = 0; i < SPIN_YIELD && atomic_load_explicit(w, memory_order_acquire) == old; i++)
        sched_yield();
    if (atomic_load(w) == old) {
        atomic_fetch_add(sleepers, 1);
        while (atomic_load(w) == old) futex_wait(w, old);
        atomic_fetch_sub(sleepers, 1);
    }
    atomic_fetch_add_explicit(slow_ns, now_ns() - t0, memory_order_relaxed);
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
    _Alignas(64) atomic_uint gen;    /* per job: counter << NTH_BITS | the job's threads */
    _Alignas(64) atomic_uint n_done; /* workers done with the job; futex word */
    atomic_int done_sleepers;        /* the caller sleeps on n_done */
    _Alignas(64) atomic_int bar_count;
    atomic_uint bar_phase; /* futex word */
    atomic_int bar_sleepers;
    int bar_n;                    /* threads in the current job (set before it is published) */
    atomic_uint_fast64_t slow_ns; /* time threads spent in slow waits in this job */
    int n_active;                 /* threads the next job uses (caller only) */
    double slow_avg;              /* moving average of the slow-wait share */
    uint64_t t_change, probe_ns;  /* last change of n_active; current probe interval */
    ticket_t *tickets;            /* ul_pool_ticket, one per thread */
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
        /* not in this job: the caller does not wait for us, so touch nothing of it */
        int nth = (int)(seen & NTH_MASK);
        if (w->ith >= nth) continue;
        p->fn(p->ctx, w->ith, nth);
        if (atomic_fetch_add(&p->n_done, 1) + 1 == (unsigned)nth - 1 &&
            atomic_load(&p->done_sleepers))
            futex_wake(&p->n_done);
    }
    return NULL;
}

int ul_pool_create(int n_threads, ul_pool_t **out) {
    if (n_threads < 1 || n_threads > 1024) return UL_EINVAL;
    ul_pool_t *p = calloc(1, sizeof(*p));
    if (!p) return UL_ENOMEM;
    p->n = p->n_active = p->bar_n = n_threads;
    p->probe_ns = PROBE_NS;
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

static void publish(ul_pool_t *p, int nth) {
    unsigned g = atomic_load_explicit(&p->gen, memory_order_relaxed) >> NTH_BITS;
    atomic_store(&p->gen, (g + 1) << NTH_BITS | (unsigned)nth); /* seq_cst: vs n_parked */
    if (atomic_load(&p->n_parked) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
}

/* After a job on nth threads that took job_ns: fewer threads when slow waits (threads
 * waiting for one that is off-CPU) ate over SLOW_HIGH of the job's thread time; one more
 * every probe_ns, the interval doubling each time a probe is dropped again at once. */
static void adapt(ul_pool_t *p, int nth, uint64_t job_ns) {
    uint64_t now = now_ns();
    if (nth > 1) {
        uint64_t slow = atomic_exchange_explicit(&p->slow_ns, 0, memory_order_relaxed);
        double share = job_ns ? (double)slow / ((double)job_ns * nth) : 0;
        p->slow_avg = 0.7 * p->slow_avg + 0.3 * share;
        if (p->slow_avg > SLOW_HIGH) {
            int failed_probe = now - p->t_change < PROBE_NS;
            p->probe_ns = failed_probe && p->probe_ns < PROBE_MAX_NS ? p->probe_ns * 2 : PROBE_NS;
            p->n_active = nth - 1;
            p->slow_avg = 0;
            p->t_change = now;
            UL_LOG_DEBUG("pool: threads wait for descheduled threads (%.0f%% of their time): "
                         "%d threads per job, trying %d again in %.0f s",
                         share * 100, nth - 1, nth, (double)p->probe_ns / 1e9);
            return;
        }
    }
    if (p->n_active < p->n && now - p->t_change >= p->probe_ns) {
        p->n_active++;
        p->slow_avg = 0;
        p->t_change = now;
    }
}

void ul_pool_run(ul_pool_t *p, ul_pool_fn fn, void *ctx) {
    int nth = p->n_active;
    uint64_t t0 = p->n > 1 ? now_ns() : 0;
    p->bar_n = nth;
    if (nth == 1) {
        fn(ctx, 0, 1);
        if (p->n > 1) adapt(p, 1, now_ns() - t0);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    atomic_store_explicit(&p->n_done, 0, memory_order_relaxed);
    atomic_store_explicit(&p->park_now, 0, memory_order_relaxed);
    atomic_store_explicit(&p->slow_ns, 0, memory_order_relaxed);
    publish(p, nth);
    fn(ctx, 0, nth);
    unsigned done;
    while ((done = atomic_load_explicit(&p->n_done, memory_order_acquire)) != (unsigned)nth - 1)
        wait_change(&p->n_done, done, &p->done_sleepers, &p->slow_ns);
    adapt(p, nth, now_ns() - t0);
}

int ul_pool_n_threads(const ul_pool_t *p) { return p ? p->n : 1; }

void ul_pool_sleep(ul_pool_t *p) {
    if (p) atomic_store(&p->park_now, 1);
}

void ul_pool_barrier(ul_pool_t *p) {
    if (!p || p->bar_n <= 1) return;
    unsigned phase = atomic_load_explicit(&p->bar_phase, memory_order_acquire);
    if (atomic_fetch_add_explicit(&p->bar_count, 1, memory_order_acq_rel) == p->bar_n - 1) {
        atomic_store_explicit(&p->bar_count, 0, memory_order_relaxed);
        atomic_store(&p->bar_phase, phase + 1); /* seq_cst: pairs with bar_sleepers */
        if (atomic_load(&p->bar_sleepers)) futex_wake(&p->bar_phase);
        return;
    }
    wait_change(&p->bar_phase, phase, &p->bar_sleepers, &p->slow_ns);
}

atomic_int *ul_pool_ticket(ul_pool_t *p, int i) { return &p->tickets[i].v; }

void ul_pool_free(ul_pool_t *p) {
    if (!p) return;
    atomic_store(&p->stop, 1);
    publish(p, p->n);
    for (int i = 1; i < p->n; i++) pthread_join(p->w[i].tid, NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->w);
    free(p->tickets);
    free(p);
}

/* ---- default thread count ------------------------------------------------------------ */

double ul_pool_parse_cpu_max(const char *text) {
    char quota[32];
    long long period = 0;
    if (sscanf(text, "%31s %lld", quota, &period) != 2 || period <= 0) return 0;
    if (!strcmp(quota, "max")) return 0;
    char *end;
    long long q = strtoll(quota, &end, 10);
    return *end || q <= 0 ? 0 : (double)q / (double)period;
}

/* v1: quota and period files; -1 quota means none. */
static double v1_quota(const char *dir) {
    char path[4200], buf[64];
    snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", dir);
    if (ul_small_file_read(path, buf, sizeof buf) <= 0) return 0;
    long long q = strtoll(buf, NULL, 10);
    snprintf(path, sizeof path, "%s/cpu.cfs_period_us", dir);
    if (ul_small_file_read(path, buf, sizeof buf) <= 0) return 0;
    long long per = strtoll(buf, NULL, 10);
    return q > 0 && per > 0 ? (double)q / (double)per : 0;
}

static double v2_quota(const char *dir) {
    char path[4200], buf[64];
    snprintf(path, sizeof path, "%s/cpu.max", dir);
    return ul_small_file_read(path, buf, sizeof buf) > 0 ? ul_pool_parse_cpu_max(buf) : 0;
}

/* The smallest quota from mount/cgpath up to the mount's root (a container sees its own
 * cgroup at the root of the mount; a host process sees its path below it). */
static double walk_quota(const char *mount, const char *cgpath, int v2) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s%s", mount, cgpath);
    size_t root = strlen(mount);
    double best = 0;
    for (;;) {
        size_t n = strlen(dir);
        while (n > root && dir[n - 1] == '/') dir[--n] = '\0';
        double q = v2 ? v2_quota(dir) : v1_quota(dir);
        if (q > 0 && (best == 0 || q < best)) best = q;
        char *slash = strrchr(dir, '/');
        if (n <= root || !slash || (size_t)(slash - dir) < root) break;
        *slash = '\0';
    }
    return best;
}

/* The process's cgroup CPU quota in CPUs, 0 when unlimited or unknown. */
static double cgroup_quota(void) {
    char text[8192];
    if (ul_small_file_read("/proc/self/cgroup", text, sizeof text) <= 0) return 0;
    double best = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c2 = '\0';
        const char *ctrl = c1 + 1, *path = c2 + 1;
        double q = 0;
        if (!strncmp(line, "0:", 2) && !*ctrl) {
            q = walk_quota("/sys/fs/cgroup", path, 1);
            if (q == 0) q = walk_quota("/sys/fs/cgroup/unified", path, 1);
        } else if (!strcmp(ctrl, "cpu") || !strcmp(ctrl, "cpu,cpuacct") ||
                   !strcmp(ctrl, "cpuacct,cpu")) {
            q = walk_quota("/sys/fs/cgroup/cpu", path, 0);
            if (q == 0) q = walk_quota("/sys/fs/cgroup/cpu,cpuacct", path, 0);
        }
        if (q > 0 && (best == 0 || q < best)) best = q;
    }
    return best;
}

int ul_pool_default_threads(char *why, size_t cap) {
    int n = 0;
#ifdef __linux__
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
#endif
    const char *src = "in the affinity mask";
    if (n <= 0) {
        long nc = sysconf(_SC_NPROCESSORS_ONLN);
        n = nc > 0 && nc < 1024 ? (int)nc : 1;
        src = "online";
    }
    int cpus = n;
    double q = cgroup_quota();
    if (q > 0 && (int)q < n) n = (int)q > 0 ? (int)q : 1;
    if (why && cap) {
        if (q > 0)
            snprintf(why, cap, "%d CPUs %s, cgroup CPU quota %.2f", cpus, src, q);
        else
            snprintf(why, cap, "%d CPUs %s, no cgroup CPU quota", cpus, src);
    }
    return n;
}
