/* The CUDA graph cache's policy (src/gpu/graphs.h) with a fake device: a decode shape is
 * captured once and replayed after; a shape whose capture fails runs eagerly and is never
 * captured again; a failed replay frees its graph and runs the step eagerly; the least
 * recently used shape is evicted past UL_GC_ENTRIES; every graph is freed exactly once. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>

#include "gpu/graphs.h"

typedef struct {
    int n_eager, n_capture, n_launch, n_destroy, live;
    int fail_capture_tokens; /* captures of this n_tokens fail */
    int fail_next_launch;
    int32_t cur_tokens;
    int ran_last; /* 1 graph, 2 eager */
} fake_t;

static int f_eager(void *ctx) {
    fake_t *f = ctx;
    f->n_eager++;
    f->ran_last = 2;
    return 0;
}
static int f_capture(void *ctx, void **exec) {
    fake_t *f = ctx;
    f->n_capture++;
    if (f->cur_tokens == f->fail_capture_tokens) return -1;
    *exec = malloc(1); /* ASan checks the frees */
    f->live++;
    return 0;
}
static int f_launch(void *ctx, void *exec) {
    fake_t *f = ctx;
    cr_assert_not_null(exec);
    if (f->fail_next_launch) {
        f->fail_next_launch = 0;
        return -1;
    }
    f->n_launch++;
    f->ran_last = 1;
    return 0;
}
static void f_destroy(void *ctx, void *exec) {
    fake_t *f = ctx;
    f->n_destroy++;
    f->live--;
    free(exec);
}

static const ul_gc_ops_t ops = {f_eager, f_capture, f_launch, f_destroy};

static int run(ul_gc_t *c, fake_t *f, int32_t slot, int32_t tokens) {
    f->cur_tokens = tokens;
    ul_gc_key_t k = {slot, tokens, tokens, 0};
    cr_assert_eq(ul_gc_run(c, k, &ops, f), 0);
    return f->ran_last;
}

Test(graphs, capture_once_then_replay_per_shape) {
    ul_gc_t c = {0};
    fake_t f = {.fail_capture_tokens = -1};
    for (int step = 0; step < 100; step++) cr_assert_eq(run(&c, &f, step % 2, 8), 1);
    cr_assert_eq(f.n_capture, 2, "one capture per slot, got %d", f.n_capture);
    cr_assert_eq(f.n_launch, 100);
    run(&c, &f, 0, 9); /* a new batch size: a new graph */
    cr_assert_eq(f.n_capture, 3);
    ul_gc_clear(&c, &ops, &f);
    cr_assert_eq(f.live, 0);
}

Test(graphs, failed_capture_falls_back_to_eager_and_is_not_retried) {
    ul_gc_t c = {0};
    fake_t f = {.fail_capture_tokens = 5};
    for (int i = 0; i < 10; i++) cr_assert_eq(run(&c, &f, 0, 5), 2, "step %d not eager", i);
    cr_assert_eq(f.n_capture, 1, "capture retried %d times", f.n_capture - 1);
    cr_assert_eq(f.n_eager, 10);
    cr_assert_eq(run(&c, &f, 0, 6), 1, "other shapes still replay");
    ul_gc_clear(&c, &ops, &f);
    cr_assert_eq(f.live, 0);
}

Test(graphs, failed_replay_frees_the_graph_and_runs_eagerly) {
    ul_gc_t c = {0};
    fake_t f = {.fail_capture_tokens = -1};
    cr_assert_eq(run(&c, &f, 0, 4), 1);
    f.fail_next_launch = 1;
    cr_assert_eq(run(&c, &f, 0, 4), 2, "the failed replay's step must still run");
    cr_assert_eq(f.live, 0, "the failed graph was not freed");
    cr_assert_eq(run(&c, &f, 0, 4), 2, "a shape that failed stays eager");
    ul_gc_clear(&c, &ops, &f);
}

Test(graphs, least_recently_used_shape_is_evicted) {
    ul_gc_t c = {0};
    fake_t f = {.fail_capture_tokens = -1};
    for (int t = 1; t <= UL_GC_ENTRIES; t++) run(&c, &f, 0, t);
    run(&c, &f, 0, 1); /* 1 is now the most recent; 2 the least */
    run(&c, &f, 0, 1000);
    cr_assert_eq(f.n_destroy, 1);
    cr_assert_eq(f.live, UL_GC_ENTRIES);
    int before = f.n_capture;
    run(&c, &f, 0, 1);
    cr_assert_eq(f.n_capture, before, "shape 1 was evicted");
    run(&c, &f, 0, 2);
    cr_assert_eq(f.n_capture, before + 1, "shape 2 was kept");
    ul_gc_clear(&c, &ops, &f);
    cr_assert_eq(f.live, 0);
}
