/* The prefix cache: full computed pages published by hash, taken again by a later sequence
 * whose tokens start the same way (it prefills only the rest), kept after their sequence
 * ends and evicted least recently used when the pool runs dry. On the null backend (whose
 * KV bookkeeping fails a step that reads a page holding other tokens) and on the CPU
 * backend with aidreams260K, where the tokens with the cache must equal those without. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sampling.h"
#include "model/model.h"
#include "sched/sched.h"
#include "uvllm/err.h"

#include "cpu_fixture.h"
#include "steps.h"

#include "seqbase.h"

#define PS 16
#define CTX 256

typedef struct {
    ul_seq_t seq;
    int32_t out[CTX];
    int n_out;
    int finished;
} pseq_t;

static int on_token(ul_seq_t *q, int32_t tok, const ul_token_lp_t *lp) {
    pseq_t *c = (pseq_t *)q;
    (void)lp;
    cr_assert_lt(c->n_out, CTX);
    c->out[c->n_out++] = tok;
    return 0;
}

static void on_finish(ul_seq_t *q, ul_finish_t reason, int status) {
    pseq_t *c = (pseq_t *)q;
    cr_assert_eq(status, 0, "step failed: %s", ul_strerror(status));
    cr_assert_eq(reason, UL_FINISH_LENGTH);
    cr_assert_eq(c->finished, 0);
    c->finished = 1;
}

static void pseq_init(pseq_t *c, int32_t max_tokens) {
    seq_base_init(&c->seq, sizeof *c, max_tokens, on_token, on_finish); /* greedy */
    c->seq.ignore_eos = 1;
}

static ul_backend_t *null_backend(int32_t n_pages) {
    ul_backend_t *b;
    ul_null_config_t cfg = {.n_vocab = 500, .n_ctx = CTX, .page_size = PS, .n_pages = n_pages};
    cr_assert_eq(ul_null_backend_create(&cfg, &b), 0);
    return b;
}

static ul_backend_t *cpu_backend(int32_t n_pages) { return aidreams_backend(n_pages, PS, CTX); }

typedef ul_backend_t *(*mk_backend_t)(int32_t n_pages);

static void init(ul_sched_t *s, ul_backend_t *b, int cache) {
    ul_sched_config_t cfg = {.max_batch_tokens = 64, .no_prefix_cache = !cache};
    cr_assert_eq(ul_sched_init(s, b, &cfg), 0);
}

/* A 64-token "system prompt" then a few tokens of its own (vocabulary of aidreams: < 512) */
static int32_t make_prompt(int32_t *p, int which, int32_t n_own) {
    p[0] = 1;
    for (int k = 1; k < 64; k++) p[k] = 2 + (k * 37) % 300;
    for (int k = 0; k < n_own; k++) p[64 + k] = 2 + (k * 13 + which * 101) % 400;
    return 64 + n_own;
}

/* ---- the pool ------------------------------------------------------------------------ */

Test(prefix, pool_keeps_released_pages_and_evicts_least_recently_used) {
    ul_kv_pool_t p;
    cr_assert_eq(ul_kv_pool_init(&p, 3, 2, 1), 0);
    int32_t pg[3], toks[3][2] = {{1, 2}, {3, 4}, {5, 6}};
    uint64_t h[3];
    cr_assert_eq(ul_kv_page_alloc(&p, 3, pg), 0);
    for (int i = 0; i < 3; i++) {
        h[i] = ul_kv_prefix_hash(i ? h[i - 1] : 0, toks[i], 2);
        ul_kv_prefix_publish(&p, pg[i], h[i], i ? h[i - 1] : 0, toks[i]);
    }
    ul_kv_page_release(&p, &pg[1], 1); /* released first: least recently used */
    ul_kv_page_release(&p, &pg[0], 1);
    ul_kv_page_release(&p, &pg[2], 1);
    cr_assert_eq(p.n_free, 3, "cached unreferenced pages count as free");
    cr_assert_eq(p.n_lru, 3);
    /* found again by content; the wrong parent or tokens is a miss */
    cr_assert_eq(ul_kv_prefix_take(&p, h[0], 0, toks[0]), pg[0]);
    cr_assert_eq(p.n_free, 2);
    cr_assert_eq(ul_kv_prefix_take(&p, h[1], 7, toks[1]), -1);
    cr_assert_eq(ul_kv_prefix_take(&p, h[1], h[0], toks[2]), -1);
    int32_t got;
    cr_assert_eq(ul_kv_page_alloc(&p, 1, &got), 0);
    cr_assert_eq(got, pg[1], "the least recently used cached page is evicted");
    cr_assert_eq(p.evictions, 1);
    cr_assert_eq(ul_kv_prefix_take(&p, h[1], h[0], toks[1]), -1, "evicted: gone from the index");
    cr_assert_eq(ul_kv_prefix_take(&p, h[2], h[1], toks[2]), pg[2], "others stay");
    ul_kv_page_release(&p, &pg[0], 1);
    ul_kv_page_release(&p, &pg[2], 1);
    ul_kv_page_release(&p, &got, 1);
    cr_assert_eq(p.n_free, 3);
    ul_kv_pool_free(&p);
}

/* ---- reuse --------------------------------------------------------------------------- */

/* A's tokens, then B's (sharing A's 64-token prefix), cache on or off; returns the tokens
 * the backend computed for B. */
static uint64_t run_pair(mk_backend_t mk, int cache, pseq_t *a, pseq_t *bq) {
    ul_backend_t *b = mk(64);
    ul_sched_t s;
    init(&s, b, cache);
    int32_t p[CTX];
    pseq_init(a, 8);
    pseq_init(bq, 8);
    cr_assert_eq(ul_sched_add(&s, &a->seq, p, make_prompt(p, 0, 10)), 0);
    run_all(&s);
    uint64_t before = s.stats.tokens_computed, hits = s.stats.prefix_hit_tokens;
    cr_assert_eq(ul_sched_add(&s, &bq->seq, p, make_prompt(p, 1, 7)), 0);
    run_all(&s);
    cr_assert(a->finished && bq->finished);
    cr_assert_eq(s.stats.prefix_hit_tokens - hits, cache ? 64 : 0);
    cr_assert_eq(s.pool.n_free, 64, "every page back");
    uint64_t computed = s.stats.tokens_computed - before;
    ul_sched_free(&s);
    ul_backend_destroy(b);
    return computed;
}

static void second_request_reuses(mk_backend_t mk) {
    pseq_t a0, b0, a1, b1;
    uint64_t uncached = run_pair(mk, 0, &a0, &b0), cached = run_pair(mk, 1, &a1, &b1);
    /* B: 71 prompt tokens and 7 generated ones fed back (the 8th is never computed) */
    cr_assert_eq(uncached, 71 + 7);
    cr_assert_eq(cached, 7 + 7, "only B's own prompt tokens are prefilled");
    cr_assert_eq(b1.seq.n_cached, 64);
    if (mk == cpu_backend) { /* the null backend's tokens depend on the sequence id */
        cr_assert_arr_eq(a1.out, a0.out, sizeof a0.out);
        cr_assert_arr_eq(b1.out, b0.out, sizeof b0.out, "cached KV gives the same tokens");
    }
}

Test(prefix, null_second_request_prefills_only_new_tokens) { second_request_reuses(null_backend); }

Test(prefix, cpu_second_request_same_tokens_as_uncached, .fini = free_model) {
    second_request_reuses(cpu_backend);
}

/* Multi-turn: turn 2's prompt is turn 1's prompt, its answer and a new message. The pages
 * holding turn 1's answer were published as they filled, so turn 2 recomputes neither. */
static void two_turns(int cache, pseq_t *t1, pseq_t *t2, uint64_t *hit) {
    ul_backend_t *b = cpu_backend(64);
    ul_sched_t s;
    init(&s, b, cache);
    int32_t p[CTX];
    int32_t n = make_prompt(p, 2, 5);
    pseq_init(t1, 40);
    cr_assert_eq(ul_sched_add(&s, &t1->seq, p, n), 0);
    run_all(&s);
    memcpy(p + n, t1->out, (size_t)t1->n_out * sizeof *p);
    n += t1->n_out;
    for (int k = 0; k < 9; k++) p[n++] = 3 + k * 17;
    pseq_init(t2, 16);
    uint64_t h0 = s.stats.prefix_hit_tokens;
    cr_assert_eq(ul_sched_add(&s, &t2->seq, p, n), 0);
    run_all(&s);
    *hit = s.stats.prefix_hit_tokens - h0;
    ul_sched_free(&s);
    ul_backend_destroy(b);
}

Test(prefix, cpu_second_turn_reuses_the_first, .fini = free_model) {
    pseq_t a0, b0, a1, b1;
    uint64_t hit0, hit1;
    two_turns(0, &a0, &b0, &hit0);
    two_turns(1, &a1, &b1, &hit1);
    cr_assert_eq(hit0, 0);
    /* turn 1 computed 69 prompt + 39 answer tokens = 108: 6 full pages */
    cr_assert_eq(hit1, 96, "turn 2 found %llu tokens", (unsigned long long)hit1);
    cr_assert_arr_eq(a1.out, a0.out, sizeof a0.out);
    cr_assert_arr_eq(b1.out, b0.out, sizeof b0.out, "turn 2 with the cache = without");
}

/* ---- eviction ------------------------------------------------------------------------ */

#define NE 24
/* NE requests drawn from 4 prefixes of 1..3 pages plus a few tokens of their own, in
 * waves; pool of 14 pages (one sequence needs up to 5): cached pages are evicted all the
 * time, and every output must still be the one computed with no cache and no pressure. */
static void eviction_run(mk_backend_t mk, int32_t n_pages, int cache, pseq_t *c,
                         ul_sched_stats_t *st, uint64_t *evictions) {
    ul_backend_t *b = mk(n_pages);
    ul_sched_t s;
    init(&s, b, cache);
    for (int wave = 0; wave < 4; wave++) {
        for (int i = wave * NE / 4; i < (wave + 1) * NE / 4; i++) {
            int32_t p[CTX], n = 0, pre = (i * 7) % 4, len = (1 + pre % 3) * PS;
            for (; n < len; n++) p[n] = 2 + (n * 29 + pre * 53) % 450;
            for (int k = 0; k < 3 + i % 5; k++) p[n++] = 2 + (k * 11 + i * 41) % 450;
            pseq_init(&c[i], 6 + i % 7);
            cr_assert_eq(ul_sched_add(&s, &c[i].seq, p, n), 0);
        }
        run_all(&s);
    }
    *st = s.stats;
    *evictions = s.pool.evictions;
    cr_assert_eq(s.pool.n_free, n_pages, "every page back");
    ul_sched_free(&s);
    ul_backend_destroy(b);
}

Test(prefix, cpu_eviction_small_pool_outputs_unchanged, .fini = free_model) {
    static pseq_t ref[NE], c[NE];
    ul_sched_stats_t st;
    uint64_t ev;
    eviction_run(cpu_backend, 128, 0, ref, &st, &ev);
    eviction_run(cpu_backend, 14, 1, c, &st, &ev);
    for (int i = 0; i < NE; i++) {
        cr_assert(c[i].finished);
        cr_assert_eq(c[i].n_out, ref[i].n_out);
        cr_assert_arr_eq(c[i].out, ref[i].out, sizeof(int32_t) * (size_t)ref[i].n_out,
                         "request %d differs from its uncached twin", i);
    }
    cr_assert_gt(st.prefix_hit_tokens, 0);
    cr_assert_gt(ev, 0, "the small pool evicted cached pages");
}

Test(prefix, null_eviction_small_pool_kv_checked) {
    static pseq_t c[NE];
    ul_sched_stats_t st;
    uint64_t ev;
    eviction_run(null_backend, 14, 1, c, &st, &ev); /* a wrong page fails the step */
    for (int i = 0; i < NE; i++) cr_assert(c[i].finished);
    cr_assert_gt(st.prefix_hit_tokens, 0);
    cr_assert_gt(ev, 0);
}
