/* The backend worker's completion path with a simulated device: an asynchronous backend
 * whose step function only "launches" work on a fake device thread, which later calls
 * ul_worker_job_done from its own thread, as the CUDA runtime calls a cudaLaunchHostFunc
 * callback (which then only enqueues: on the bridge, or back to the worker for host work). Steps
 * finish in bursts (the device holds several, then releases them at once) and some fail on the
 * device mid-stream; every step must reach the loop exactly once, in order, with its own status,
 * and destroy must wait for the device. Run under ASan and TSan by make test-asan / make test-tsan.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "base/bridge.h"
#include "engine/worker.h"
#include "uvllm/err.h"

#define N_STEPS 64

/* The fake device: one stream of launched jobs, run in order by its own thread. */
typedef struct {
    ul_backend_t base;
    ul_worker_t worker;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    ul_worker_job_t jobs[N_STEPS]; /* one per step id, like a backend's per-step slot */
    int32_t out[N_STEPS];          /* "pinned" output buffer written by the device */
    int head, tail;                /* launched jobs [head, tail) in jobs[] order */
    ul_step_t *launched[N_STEPS];
    int burst; /* the device releases completions only in groups of this many */
    int hold;  /* while set, the device runs nothing: a hung kernel; dropped at stop */
    int fail_every;
    int stop;
    int finish_on_worker; /* 1 while every finish ran on the worker thread */
    pthread_t worker_tid; /* set by launch, which runs there */
} fake_t;

static void finish(void *ctx, ul_step_t *step) {
    fake_t *f = ctx;
    int id = (int)step->seqs[0].seq_id;
    if (!pthread_equal(pthread_self(), f->worker_tid)) f->finish_on_worker = 0;
    if (!step->status) step->seqs[0].out_token = f->out[id];
}

static void *device(void *arg) {
    fake_t *f = arg;
    pthread_mutex_lock(&f->mu);
    for (;;) {
        /* wait until a whole burst is queued (or stop drains what is left) */
        while (!f->stop && (f->hold || f->tail - f->head < f->burst))
            pthread_cond_wait(&f->cv, &f->mu);
        if (f->head == f->tail || (f->stop && f->hold)) {
            if (f->stop) break;
            continue;
        }
        /* exactly one burst (the rest at stop): had it taken every job launched by the time
         * it woke (more than a burst when it woke late, on a loaded or TSan host), the last
         * group would be smaller than a burst and wait forever */
        int from = f->head, to = f->stop ? f->tail : f->head + f->burst;
        f->head = to;
        pthread_mutex_unlock(&f->mu);
        struct timespec d = {0, 200000}; /* the "kernels" */
        nanosleep(&d, NULL);
        for (int i = from; i < to; i++) {
            ul_step_t *st = f->launched[i];
            int id = (int)st->seqs[0].seq_id;
            f->out[id] = 1000 + id;
            if (!f->jobs[id].finish) st->seqs[0].out_token = 1000 + id; /* "device-sampled" */
            if (f->fail_every && id % f->fail_every == f->fail_every - 1) st->status = UL_EIO;
            ul_worker_job_done(&f->jobs[id]); /* the host-func callback, from this thread */
        }
        pthread_mutex_lock(&f->mu);
    }
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

/* The backend's step function: "launch" and return at once. */
static int launch(void *ctx, ul_step_t *step) {
    fake_t *f = ctx;
    int id = (int)step->seqs[0].seq_id;
    f->worker_tid = pthread_self();
    step->status = 0;
    /* every third step is complete when the device is done; the others need host work */
    f->jobs[id] = (ul_worker_job_t){
        .w = &f->worker, .step = step, .finish = id % 3 ? finish : NULL, .ctx = f};
    pthread_mutex_lock(&f->mu);
    f->launched[f->tail++] = step;
    pthread_cond_signal(&f->cv);
    pthread_mutex_unlock(&f->mu);
    return UL_WORKER_PENDING;
}

static void fake_init_ops(fake_t *f, int burst, int fail_every, const ul_worker_ops_t *ops) {
    memset(f, 0, sizeof *f);
    f->burst = burst;
    f->fail_every = fail_every;
    f->finish_on_worker = 1;
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    cr_assert_eq(pthread_create(&f->thread, NULL, device, f), 0);
    cr_assert_eq(ul_worker_init(&f->worker, &f->base, ops, f), 0);
}

static void fake_init(fake_t *f, int burst, int fail_every) {
    static const ul_worker_ops_t ops = {.step = launch};
    fake_init_ops(f, burst, fail_every, &ops);
}

static void fake_free(fake_t *f) {
    ul_worker_free(&f->worker); /* waits for every launched step's callback */
    pthread_mutex_lock(&f->mu);
    f->stop = 1;
    pthread_cond_signal(&f->cv);
    pthread_mutex_unlock(&f->mu);
    pthread_join(f->thread, NULL);
    pthread_cond_destroy(&f->cv);
    pthread_mutex_destroy(&f->mu);
}

typedef struct {
    ul_bridge_t bridge;
    int n_done, n_failed, next_id, in_order;
    int n_wakeups_cb; /* bridge callbacks, one per step */
    int expect;
} loop_ctx_t;

static void on_step(ul_bridge_t *br, ul_queue_t *item) {
    loop_ctx_t *c = (loop_ctx_t *)br;
    ul_step_t *st = UL_QUEUE_DATA(item, ul_step_t, node);
    int id = (int)st->seqs[0].seq_id;
    if (id != c->next_id) c->in_order = 0;
    c->next_id = id + 1;
    if (st->status) {
        c->n_failed++;
        cr_assert_eq(st->status, UL_EIO);
    } else {
        cr_assert_eq(st->seqs[0].out_token, 1000 + id, "step %d got %d", id, st->seqs[0].out_token);
    }
    if (++c->n_done == c->expect) ul_bridge_close(br, NULL);
}

static void run_steps(int burst, int fail_every) {
    uv_loop_t loop;
    cr_assert_eq(uv_loop_init(&loop), 0);
    loop_ctx_t c = {.in_order = 1, .expect = N_STEPS};
    cr_assert_eq(ul_bridge_init(&loop, &c.bridge, on_step), 0);
    fake_t *f = calloc(1, sizeof *f);
    fake_init(f, burst, fail_every);
    f->base.bridge = &c.bridge;
    static ul_step_t steps[N_STEPS];
    static ul_step_seq_t seqs[N_STEPS];
    for (int i = 0; i < N_STEPS; i++) {
        memset(&steps[i], 0, sizeof steps[i]);
        memset(&seqs[i], 0, sizeof seqs[i]);
        seqs[i].seq_id = (uint64_t)i;
        seqs[i].out_token = -1;
        steps[i].seqs = &seqs[i];
        steps[i].n_seqs = 1;
        cr_assert_eq(ul_worker_submit(&f->worker, &steps[i]), 0);
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_assert_eq(c.n_done, N_STEPS);
    cr_assert(c.in_order, "completions out of submission order");
    cr_assert_eq(c.n_failed, fail_every ? N_STEPS / fail_every : 0);
    cr_assert(f->finish_on_worker, "finish ran off the worker thread");
    fake_free(f);
    free(f);
    cr_assert_eq(uv_loop_close(&loop), 0);
}

Test(worker, device_callbacks_one_at_a_time) { run_steps(1, 0); }

Test(worker, device_callbacks_in_bursts) { run_steps(8, 0); }

Test(worker, device_errors_mid_stream_fail_only_their_steps) { run_steps(4, 5); }

/* A synchronous backend on the same worker: the idle hook runs once the queue has been
 * empty for idle_after_ns, and stop drops queued steps without posting them. */
typedef struct {
    ul_backend_t base;
    ul_worker_t worker;
    pthread_mutex_t mu;
    int n_idle, n_run;
    int block; /* while set, the step function waits */
    pthread_cond_t cv;
} sync_t;

static int sync_step(void *ctx, ul_step_t *step) {
    sync_t *s = ctx;
    pthread_mutex_lock(&s->mu);
    s->n_run++;
    while (s->block) pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    step->status = 0;
    return UL_WORKER_DONE;
}

static void sync_idle(void *ctx) {
    sync_t *s = ctx;
    pthread_mutex_lock(&s->mu);
    s->n_idle++;
    pthread_mutex_unlock(&s->mu);
}

static void count_cb(ul_bridge_t *br, ul_queue_t *item) {
    loop_ctx_t *c = (loop_ctx_t *)br;
    (void)item;
    if (++c->n_done == c->expect) ul_bridge_close(br, NULL);
}

Test(worker, idle_hook_after_quiet_period) {
    uv_loop_t loop;
    cr_assert_eq(uv_loop_init(&loop), 0);
    loop_ctx_t c = {.expect = 1};
    cr_assert_eq(ul_bridge_init(&loop, &c.bridge, count_cb), 0);
    sync_t s = {0};
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cv, NULL);
    static const ul_worker_ops_t ops = {
        .step = sync_step, .idle = sync_idle, .idle_after_ns = 20000000};
    cr_assert_eq(ul_worker_init(&s.worker, &s.base, &ops, &s), 0);
    cr_assert_eq(ul_worker_submit(&s.worker, &(ul_step_t){0}), UL_ESTATE, "no bridge yet");
    s.base.bridge = &c.bridge;
    ul_step_t st = {0};
    cr_assert_eq(ul_worker_submit(&s.worker, &st), 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    struct timespec d = {0, 100000000};
    nanosleep(&d, NULL);
    pthread_mutex_lock(&s.mu);
    cr_assert_eq(s.n_idle, 1, "idle hook ran %d times in 100 ms after the step", s.n_idle);
    pthread_mutex_unlock(&s.mu);
    ul_worker_free(&s.worker);
    cr_assert_eq(uv_loop_close(&loop), 0);
    pthread_cond_destroy(&s.cv);
    pthread_mutex_destroy(&s.mu);
}

static void *unblock_later(void *arg) {
    sync_t *s = arg;
    struct timespec d = {0, 50000000};
    nanosleep(&d, NULL);
    pthread_mutex_lock(&s->mu);
    s->block = 0;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

Test(worker, stop_finishes_the_step_in_flight_and_drops_the_queue) {
    uv_loop_t loop;
    cr_assert_eq(uv_loop_init(&loop), 0);
    loop_ctx_t c = {.expect = -1};
    cr_assert_eq(ul_bridge_init(&loop, &c.bridge, count_cb), 0);
    sync_t s = {.block = 1};
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cv, NULL);
    static const ul_worker_ops_t ops = {.step = sync_step};
    cr_assert_eq(ul_worker_init(&s.worker, &s.base, &ops, &s), 0);
    s.base.bridge = &c.bridge;
    ul_step_t st[3];
    memset(st, 0, sizeof st);
    cr_assert_eq(ul_worker_submit(&s.worker, &st[0]), 0);
    for (;;) { /* until the worker holds st[0] */
        pthread_mutex_lock(&s.mu);
        int n = s.n_run;
        pthread_mutex_unlock(&s.mu);
        if (n) break;
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    cr_assert_eq(ul_worker_submit(&s.worker, &st[1]), 0);
    cr_assert_eq(ul_worker_submit(&s.worker, &st[2]), 0);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, unblock_later, &s), 0);
    ul_worker_stop(&s.worker); /* returns once st[0] is done */
    cr_assert_eq(ul_worker_submit(&s.worker, &st[1]), UL_ECLOSED);
    pthread_join(t, NULL);
    uv_run(&loop, UV_RUN_NOWAIT);
    cr_assert_eq(c.n_done, 1, "%d steps posted; only the one in flight should be", c.n_done);
    cr_assert_eq(s.n_run, 1);
    ul_worker_free(&s.worker);
    ul_bridge_close(&c.bridge, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_assert_eq(uv_loop_close(&loop), 0);
    pthread_cond_destroy(&s.cv);
    pthread_mutex_destroy(&s.mu);
}

/* ---- the watchdog: a device that does not call back ---- */

typedef struct {
    ul_bridge_t bridge;
    int n_done;
    int status[N_STEPS];
    int32_t token[N_STEPS];
    int64_t t_ns[N_STEPS]; /* when the loop got it */
} wd_loop_t;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void wd_on_step(ul_bridge_t *br, ul_queue_t *item) {
    wd_loop_t *c = (wd_loop_t *)br;
    ul_step_t *st = UL_QUEUE_DATA(item, ul_step_t, node);
    int id = (int)st->seqs[0].seq_id;
    c->status[id] = st->status;
    c->token[id] = st->seqs[0].out_token;
    c->t_ns[id] = now_ns();
    c->n_done++;
}

static ul_step_t wd_steps[N_STEPS];
static ul_step_seq_t wd_seqs[N_STEPS];

static void wd_submit(fake_t *f, int id) {
    memset(&wd_steps[id], 0, sizeof wd_steps[id]);
    memset(&wd_seqs[id], 0, sizeof wd_seqs[id]);
    wd_seqs[id].seq_id = (uint64_t)id;
    wd_seqs[id].out_token = -1;
    wd_steps[id].seqs = &wd_seqs[id];
    wd_steps[id].n_seqs = 1;
    cr_assert_eq(ul_worker_submit(&f->worker, &wd_steps[id]), 0);
}

/* Runs the loop until n steps have come back, at most 10 s. */
static void wd_wait(uv_loop_t *loop, wd_loop_t *c, int n) {
    int64_t until = now_ns() + 10000000000ll;
    while (c->n_done < n && now_ns() < until) uv_run(loop, UV_RUN_ONCE);
    cr_assert_eq(c->n_done, n, "%d of %d steps came back", c->n_done, n);
}

static void set_hold(fake_t *f, int hold) {
    pthread_mutex_lock(&f->mu);
    f->hold = hold;
    pthread_cond_signal(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

#define WD_TIMEOUT_NS 100000000 /* 100 ms */

/* A fake device with ops on a bridge to loop, for the watchdog tests. */
static fake_t *wd_open(uv_loop_t *loop, wd_loop_t *c, const ul_worker_ops_t *ops) {
    cr_assert_eq(uv_loop_init(loop), 0);
    cr_assert_eq(ul_bridge_init(loop, &c->bridge, wd_on_step), 0);
    fake_t *f = calloc(1, sizeof *f);
    fake_init_ops(f, 1, 0, ops);
    f->base.bridge = &c->bridge;
    return f;
}

/* Frees f (fake_free done), closes the bridge and checks the loop closes. */
static void wd_close(uv_loop_t *loop, wd_loop_t *c, fake_t *f) {
    free(f);
    ul_bridge_close(&c->bridge, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    cr_assert_eq(uv_loop_close(loop), 0);
}

/* A hung step fails with UL_ETIMEDOUT after the bound (the server answers its requests
 * with an error), steps submitted while the device still holds it fail at once, and once
 * the device returns it (late: dropped, its finish never runs) steps succeed again. */
Test(worker, watchdog_fails_a_hung_step_and_serving_resumes) {
    uv_loop_t loop;
    wd_loop_t c = {0};
    static const ul_worker_ops_t ops = {
        .step = launch, .max_in_flight = 2, .step_timeout_ns = WD_TIMEOUT_NS};
    fake_t *f = wd_open(&loop, &c, &ops);
    /* a healthy step first: the watchdog does not fire on normal work */
    wd_submit(f, 0);
    wd_wait(&loop, &c, 1);
    cr_assert_eq(c.status[0], 0);
    cr_assert_eq(c.token[0], 1000);
    /* the device hangs with two steps on it (id 1 needs host work, id 3 does not) */
    set_hold(f, 1);
    int64_t t0 = now_ns();
    wd_submit(f, 1);
    wd_submit(f, 3);
    wd_wait(&loop, &c, 3);
    for (int id = 1; id <= 3; id += 2) {
        cr_assert_eq(c.status[id], UL_ETIMEDOUT, "step %d: status %d", id, c.status[id]);
        cr_assert_eq(c.token[id], -1, "step %d's outputs were written", id);
        int64_t waited = c.t_ns[id] - t0;
        printf("hung step %d failed after %.0f ms (bound %d ms)\n", id, waited / 1e6,
               WD_TIMEOUT_NS / 1000000);
        cr_assert_geq(waited, WD_TIMEOUT_NS, "failed before the bound");
        cr_assert_lt(waited, 5000000000ll, "the watchdog took %.1f s", waited / 1e9);
    }
    cr_assert_eq(ul_worker_timed_out(&f->worker), 2);
    /* while the device holds them, a new step is refused at once, not queued behind them */
    int64_t t1 = now_ns();
    wd_submit(f, 4);
    wd_wait(&loop, &c, 4);
    cr_assert_eq(c.status[4], UL_ETIMEDOUT);
    cr_assert_lt(c.t_ns[4] - t1, WD_TIMEOUT_NS, "refused only after %.0f ms",
                 (c.t_ns[4] - t1) / 1e6);
    /* the device comes back: its late callbacks are dropped, steps run again */
    set_hold(f, 0);
    for (;;) { /* until the device has called back both (its head reaches its tail) */
        pthread_mutex_lock(&f->mu);
        int left = f->tail - f->head;
        pthread_mutex_unlock(&f->mu);
        pthread_mutex_lock(&f->worker.mu);
        int lost = f->worker.n_lost;
        pthread_mutex_unlock(&f->worker.mu);
        if (!left && !lost) break;
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    cr_assert_eq(wd_seqs[1].out_token, -1, "a late job's finish ran on a failed step");
    wd_submit(f, 5);
    wd_wait(&loop, &c, 5);
    cr_assert_eq(c.status[5], 0, "after recovery: status %d", c.status[5]);
    cr_assert_eq(c.token[5], 1005);
    fake_free(f);
    cr_assert_eq(ul_worker_orphaned(&f->worker), 0);
    wd_close(&loop, &c, f);
}

/* A device that never calls back: the step still fails within the bound, and shutdown does
 * not hang on it: stop gives up after one more bound and reports the worker orphaned, whose
 * memory stays valid for a callback that might still come. */
Test(worker, watchdog_device_that_never_calls_back_cannot_hang_shutdown) {
    uv_loop_t loop;
    wd_loop_t c = {0};
    static const ul_worker_ops_t ops = {
        .step = launch, .max_in_flight = 1, .step_timeout_ns = WD_TIMEOUT_NS};
    fake_t *f = wd_open(&loop, &c, &ops);
    set_hold(f, 1);
    wd_submit(f, 2);
    wd_wait(&loop, &c, 1);
    cr_assert_eq(c.status[2], UL_ETIMEDOUT);
    int64_t t0 = now_ns();
    ul_worker_stop(&f->worker);
    int64_t took = now_ns() - t0;
    printf("stop with a lost step took %.0f ms\n", took / 1e6);
    cr_assert_lt(took, 5000000000ll);
    cr_assert_eq(ul_worker_orphaned(&f->worker), 1);
    /* the device answers after all: the orphaned worker takes it without harm */
    ul_worker_job_done(&f->jobs[2]);
    pthread_mutex_lock(&f->worker.mu);
    cr_assert_eq(f->worker.n_lost, 0);
    pthread_mutex_unlock(&f->worker.mu);
    fake_free(f); /* drops the held job; the worker's locks were left alone */
    wd_close(&loop, &c, f);
}
