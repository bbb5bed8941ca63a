/* The null backend: deterministic tokens, validation of the step it is given, KV
 * bookkeeping that catches a scheduler mixing up pages, and the asynchronous path through
 * the bridge on a real loop. */
#include <criterion/criterion.h>
#include <string.h>
#include <time.h>

#include "base/bridge.h"
#include "uvllm/backend.h"
#include "uvllm/err.h"

static void one_seq_step(ul_step_t *st, ul_step_seq_t *ss, int32_t *toks, uint64_t id, int32_t pos0,
                         int32_t n, const int32_t *pages, int32_t n_pages) {
    memset(st, 0, sizeof *st);
    memset(ss, 0, sizeof *ss);
    st->tokens = toks;
    st->n_tokens = n;
    st->seqs = ss;
    st->n_seqs = 1;
    ss->seq_id = id;
    ss->n_tokens = n;
    ss->pos0 = pos0;
    ss->pages = pages;
    ss->n_pages = n_pages;
    ss->sample = 1;
}

/* Generates n tokens greedily for a sequence starting with a 3-token prompt. */
static void generate(ul_backend_t *b, uint64_t id, int32_t *out, int n) {
    int32_t pages[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    int32_t hist[64] = {5, 6, 7};
    int32_t n_hist = 3, pos = 0;
    ul_step_t st;
    ul_step_seq_t ss;
    for (int i = 0; i < n; i++) {
        int32_t cnt = n_hist - pos;
        one_seq_step(&st, &ss, hist + pos, id, pos, cnt, pages, 8);
        ss.history = hist;
        ss.n_history = n_hist;
        cr_assert_eq(ul_backend_run(b, &st), 0);
        pos = n_hist;
        hist[n_hist++] = ss.out_token;
        out[i] = ss.out_token;
    }
}

Test(null, deterministic_per_sequence) {
    ul_backend_t *b1, *b2;
    ul_null_config_t cfg = {.n_vocab = 1000, .page_size = 4, .n_pages = 64};
    cr_assert_eq(ul_null_backend_create(&cfg, &b1), 0);
    cr_assert_eq(ul_null_backend_create(&cfg, &b2), 0);
    int32_t a[10], c[10], d[10];
    generate(b1, 42, a, 10);
    generate(b2, 42, c, 10);
    cr_assert_arr_eq(a, c, sizeof a, "same sequence id must give the same tokens");
    generate(b2, 43, d, 10);
    cr_assert(memcmp(a, d, sizeof a) != 0, "another sequence should differ");
    for (int i = 0; i < 10; i++) cr_assert(a[i] >= 0 && a[i] < 1000);
    cr_assert_eq(b1->eos_id, -1);
    ul_backend_destroy(b1);
    ul_backend_destroy(b2);
}

Test(null, eos_every) {
    ul_backend_t *b;
    ul_null_config_t cfg = {.n_vocab = 100, .page_size = 4, .n_pages = 64, .eos_every = 4};
    cr_assert_eq(ul_null_backend_create(&cfg, &b), 0);
    cr_assert_eq(b->eos_id, 99);
    int32_t t[8];
    generate(b, 7, t, 8);
    /* prompt of 3: sampled positions are 3..10; eos at positions 3 and 7 */
    cr_assert_eq(t[0], 99);
    cr_assert_eq(t[4], 99);
    cr_assert_neq(t[1], 99);
    ul_backend_destroy(b);
}

Test(null, rejects_bad_steps) {
    ul_backend_t *b;
    ul_null_config_t cfg = {.n_vocab = 100, .n_ctx = 32, .page_size = 4, .n_pages = 8};
    cr_assert_eq(ul_null_backend_create(&cfg, &b), 0);
    int32_t toks[8] = {1, 2, 3, 4, 5, 6, 7, 8}, pages[2] = {0, 1};
    ul_step_t st;
    ul_step_seq_t ss;
    one_seq_step(&st, &ss, toks, 1, 0, 8, pages, 1); /* 8 tokens, one page of 4 */
    cr_assert_eq(ul_backend_run(b, &st), UL_EINVAL);
    int32_t bad[2] = {0, 8}; /* page 8 does not exist */
    one_seq_step(&st, &ss, toks, 1, 0, 8, bad, 2);
    cr_assert_eq(ul_backend_run(b, &st), UL_EINVAL);
    /* Continue a sequence whose earlier positions were never computed. */
    one_seq_step(&st, &ss, toks, 1, 4, 1, pages, 2);
    cr_assert_eq(ul_backend_run(b, &st), UL_ESTATE);
    cr_assert_eq(ul_null_backend_create(&(ul_null_config_t){.n_vocab = 1}, &(ul_backend_t *){0}),
                 UL_EINVAL);
    ul_backend_destroy(b);
}

Test(null, detects_page_reused_by_another_sequence) {
    ul_backend_t *b;
    ul_null_config_t cfg = {.n_vocab = 100, .page_size = 4, .n_pages = 8};
    cr_assert_eq(ul_null_backend_create(&cfg, &b), 0);
    int32_t toks[4] = {1, 2, 3, 4}, page[1] = {3};
    ul_step_t st;
    ul_step_seq_t ss;
    one_seq_step(&st, &ss, toks, 1, 0, 2, page, 1);
    cr_assert_eq(ul_backend_run(b, &st), 0);
    one_seq_step(&st, &ss, toks, 2, 0, 2, page, 1); /* seq 2 overwrites seq 1's page */
    cr_assert_eq(ul_backend_run(b, &st), 0);
    one_seq_step(&st, &ss, toks + 2, 1, 2, 1, page, 1);
    cr_assert_eq(ul_backend_run(b, &st), UL_ESTATE);
    ul_backend_destroy(b);
}

/* A sequence may start on pages another one wrote (the shared pages of a prompt) when they
 * end on a page boundary and hold its own history's tokens; otherwise the step fails. */
Test(null, shared_prompt_pages_must_hold_the_history) {
    ul_backend_t *b;
    ul_null_config_t cfg = {.n_vocab = 100, .page_size = 4, .n_pages = 8};
    cr_assert_eq(ul_null_backend_create(&cfg, &b), 0);
    int32_t hist[6] = {1, 2, 3, 4, 5, 6}, other[6] = {1, 2, 9, 4, 5, 6};
    int32_t pa[2] = {3, 5}, pb[2] = {3, 6};
    ul_step_t st;
    ul_step_seq_t ss;
    one_seq_step(&st, &ss, hist, 1, 0, 6, pa, 2); /* seq 1 writes pages 3 and 5 */
    cr_assert_eq(ul_backend_run(b, &st), 0);
    one_seq_step(&st, &ss, hist + 4, 2, 4, 2, pb, 2); /* seq 2 shares page 3 */
    ss.history = hist;
    ss.n_history = 6;
    cr_assert_eq(ul_backend_run(b, &st), 0);
    one_seq_step(&st, &ss, other + 4, 3, 4, 2, pb, 2); /* another prompt on page 3 */
    ss.history = other;
    ss.n_history = 6;
    cr_assert_eq(ul_backend_run(b, &st), UL_ESTATE);
    int32_t pc[2] = {3, 6}; /* starting mid-page on another's page: never a shared prefix */
    one_seq_step(&st, &ss, hist + 5, 4, 5, 1, pc, 2);
    ss.history = hist;
    ss.n_history = 6;
    cr_assert_eq(ul_backend_run(b, &st), UL_ESTATE);
    ul_backend_destroy(b);
}

typedef struct {
    ul_bridge_t bridge;
    int done;
    double elapsed_ms;
    struct timespec t0;
} async_ctx_t;

static void on_done(ul_bridge_t *br, ul_queue_t *item) {
    async_ctx_t *c = (async_ctx_t *)br;
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    c->elapsed_ms = (t1.tv_sec - c->t0.tv_sec) * 1e3 + (t1.tv_nsec - c->t0.tv_nsec) / 1e6;
    c->done++;
    (void)item;
    ul_bridge_close(br, NULL);
}

Test(null, submit_completes_through_bridge_after_delay) {
    uv_loop_t loop;
    cr_assert_eq(uv_loop_init(&loop), 0);
    async_ctx_t c = {0};
    cr_assert_eq(ul_bridge_init(&loop, &c.bridge, on_done), 0);
    ul_backend_t *b;
    ul_null_config_t cfg = {.delay_us = 50000, .n_vocab = 100, .page_size = 4, .n_pages = 8};
    cr_assert_eq(ul_null_backend_create(&cfg, &b), 0);
    b->bridge = &c.bridge;
    int32_t toks[2] = {1, 2}, page[1] = {0};
    ul_step_t st;
    ul_step_seq_t ss;
    one_seq_step(&st, &ss, toks, 9, 0, 2, page, 1);
    clock_gettime(CLOCK_MONOTONIC, &c.t0);
    cr_assert_eq(ul_backend_submit(b, &st), 0);
    cr_assert_eq(c.done, 0, "submit must not run the step inline");
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_assert_eq(c.done, 1);
    cr_assert_geq(c.elapsed_ms, 49.0, "delay not honoured: %.1f ms", c.elapsed_ms);
    cr_assert_eq(st.status, 0);
    cr_assert(ss.out_token >= 0 && ss.out_token < 100);
    ul_backend_destroy(b);
    cr_assert_eq(uv_loop_close(&loop), 0);
}

/* Virtual time: a step reports exactly its configured cost and takes none of it (here 2 s
 * of cost; the whole test is bounded far below that on any host), with the same tokens as
 * a step that sleeps; and a sleeping step reports its configured cost, not its sleep. */
Test(null, virtual_time_reports_the_cost_without_sleeping) {
    ul_backend_t *v, *real;
    ul_null_config_t cfg = {.delay_us = 1000000,
                            .token_us = 7,
                            .prefill_us = 300000,
                            .n_vocab = 1000,
                            .page_size = 4,
                            .n_pages = 64,
                            .virtual_time = 1};
    cr_assert_eq(ul_null_backend_create(&cfg, &v), 0);
    ul_null_config_t rc = {.n_vocab = 1000, .page_size = 4, .n_pages = 64};
    cr_assert_eq(ul_null_backend_create(&rc, &real), 0);
    int32_t pages[8] = {0, 1, 2, 3, 4, 5, 6, 7}, toks[3] = {5, 6, 7};
    ul_step_t st;
    ul_step_seq_t ss;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    one_seq_step(&st, &ss, toks, 9, 0, 3, pages, 8);
    cr_assert_eq(ul_backend_run(v, &st), 0);
    cr_assert_eq(st.compute_us, 1000000.0 + 3 * 300000.0, "a 3-token prefill: %.0f us",
                 st.compute_us);
    int32_t tok_v = ss.out_token, one = tok_v;
    one_seq_step(&st, &ss, &one, 9, 3, 1, pages, 8);
    cr_assert_eq(ul_backend_run(v, &st), 0);
    cr_assert_eq(st.compute_us, 1000000.0 + 7, "a decode token: %.0f us", st.compute_us);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double wall = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    cr_assert_lt(wall, 1.0, "%.2f s of wall time for 3.9 s of virtual steps", wall);
    one_seq_step(&st, &ss, toks, 9, 0, 3, pages, 8);
    cr_assert_eq(ul_backend_run(real, &st), 0);
    cr_assert_eq(ss.out_token, tok_v, "the same token as without virtual time");
    ul_backend_destroy(real);
    /* Sleeping, a step reports its configured cost too, not the sleep it got (later on a
     * loaded host): the scheduler's model prices the device, not the host's load. */
    ul_null_config_t sc = {.delay_us = 20000, .n_vocab = 1000, .page_size = 4, .n_pages = 64};
    cr_assert_eq(ul_null_backend_create(&sc, &real), 0);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    one_seq_step(&st, &ss, toks, 9, 0, 3, pages, 8);
    cr_assert_eq(ul_backend_run(real, &st), 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    wall = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    cr_assert_geq(wall, 0.02, "it sleeps its cost");
    cr_assert_eq(st.compute_us, 20000.0, "%.1f us", st.compute_us);
    ul_backend_destroy(v);
    ul_backend_destroy(real);
}
