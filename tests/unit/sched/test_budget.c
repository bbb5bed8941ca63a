/* The latency budget: with a per-token step cost configured on the null backend, 16
 * clients each send two 50-token prompts (the second when the first ends, so prompts keep
 * arriving while others decode). The contract: when a decode-only step takes at most 0.8 T,
 * the p99 gap between tokens of running streams stays within 1.1 T. Without the budget
 * the same load breaks it (the test can fail), and the step-time model learns the costs. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sampling.h"
#include "sched/sched.h"
#include "uvllm/err.h"

#define NCLI 16
#define NTOK 32
#define NPROMPT 50
#define T_MS 40.0
#define DELAY_US 2000  /* per step */
#define TOKEN_US 1000  /* per decode token: 16 decoders = 18 ms <= 0.8 T */
#define PREFILL_US 600 /* per prefill token: one 50-token prompt = 30 ms */

typedef struct {
    ul_seq_t seq;
    int client, round, n_out;
    uint64_t t_add, t_last;
} bseq_t;

static ul_sched_t *g_s;
static bseq_t g_seqs[NCLI][2];
static double g_gaps[NCLI * 2 * NTOK];
static int g_n_gaps, g_finished;
static double g_ttft_max_ms;

static void add_req(int client, int round) {
    bseq_t *b = &g_seqs[client][round];
    memset(b, 0, sizeof *b);
    b->client = client;
    b->round = round;
    b->seq.max_tokens = NTOK;
    ul_sampling_default(&b->seq.sampling);
    b->seq.on_token = NULL;
    int32_t p[NPROMPT];
    for (int k = 0; k < NPROMPT; k++) p[k] = 1 + (client * 131 + round * 17 + k * 7) % 900;
    extern int budget_on_token(ul_seq_t *, int32_t, const ul_token_lp_t *);
    extern void budget_on_finish(ul_seq_t *, ul_finish_t, int);
    b->seq.on_token = budget_on_token;
    b->seq.on_finish = budget_on_finish;
    b->t_add = uv_hrtime();
    cr_assert_eq(ul_sched_add(g_s, &b->seq, p, NPROMPT), 0);
}

int budget_on_token(ul_seq_t *q, int32_t tok, const ul_token_lp_t *lp) {
    bseq_t *b = (bseq_t *)q;
    (void)tok, (void)lp;
    uint64_t now = uv_hrtime();
    if (b->n_out++ == 0) {
        double ttft = (double)(now - b->t_add) / 1e6;
        if (ttft > g_ttft_max_ms) g_ttft_max_ms = ttft;
    } else {
        g_gaps[g_n_gaps++] = (double)(now - b->t_last) / 1e6;
    }
    b->t_last = now;
    return 0;
}

void budget_on_finish(ul_seq_t *q, ul_finish_t reason, int status) {
    bseq_t *b = (bseq_t *)q;
    cr_assert_eq(status, 0);
    cr_assert_eq(reason, UL_FINISH_LENGTH);
    g_finished++;
    if (b->round == 0) add_req(b->client, 1);
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void on_timer(uv_timer_t *t) {
    int *next = t->data;
    add_req(*next, 0);
    if (++*next == NCLI) uv_timer_stop(t);
}

static void on_closed(ul_sched_t *s) { (void)s; }

/* Runs the load; returns the p99 gap in ms. */
static double run_load(double itl_target_ms, ul_sched_stats_t *st, ul_step_model_t *m) {
    ul_backend_t *b;
    ul_null_config_t nc = {.delay_us = DELAY_US,
                           .token_us = TOKEN_US,
                           .prefill_us = PREFILL_US,
                           .n_vocab = 1000,
                           .n_ctx = 256};
    cr_assert_eq(ul_null_backend_create(&nc, &b), 0);
    uv_loop_t loop;
    cr_assert_eq(uv_loop_init(&loop), 0);
    ul_sched_t s;
    ul_sched_config_t cfg = {.max_batch_tokens = 512, .itl_target_ms = itl_target_ms};
    cr_assert_eq(ul_sched_init(&s, b, &cfg), 0);
    cr_assert_eq(ul_sched_start(&s, &loop), 0);
    g_s = &s;
    g_n_gaps = g_finished = 0;
    g_ttft_max_ms = 0;
    /* clients arrive 10 ms apart */
    uv_timer_t timer;
    int next = 0;
    uv_timer_init(&loop, &timer);
    timer.data = &next;
    uv_timer_start(&timer, on_timer, 0, 10);
    while (g_finished < 2 * NCLI) uv_run(&loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&timer, NULL);
    ul_sched_close(&s, on_closed);
    uv_run(&loop, UV_RUN_DEFAULT);
    *st = s.stats;
    *m = s.model;
    ul_sched_free(&s);
    ul_backend_destroy(b);
    cr_assert_eq(uv_loop_close(&loop), 0);
    cr_assert_eq(g_n_gaps, 2 * NCLI * (NTOK - 1));
    qsort(g_gaps, (size_t)g_n_gaps, sizeof *g_gaps, cmp_d);
    return g_gaps[(int)(0.99 * (g_n_gaps - 1))];
}

Test(budget, p99_gap_within_target_on_null_backend) {
    ul_sched_stats_t st;
    ul_step_model_t m;
    double p99 = run_load(T_MS, &st, &m);
    double ttft = g_ttft_max_ms;
    cr_log_info("target %.0f ms: p99 gap %.1f ms, max ttft %.1f ms, %llu of %llu steps cut; "
                "model: %.0f + %.0f/dec + %.0f/prefill + %.0f/1000 attended us",
                T_MS, p99, ttft, (unsigned long long)st.steps_budgeted,
                (unsigned long long)st.steps, m.coef[0], m.coef[1], m.coef[2], m.coef[3]);
    cr_assert_leq(p99, 1.1 * T_MS, "p99 gap %.1f ms over 1.1 x %.0f ms", p99, T_MS);
    cr_assert_gt(st.steps_budgeted, 0);
    cr_assert_lt(ttft, 1000.0, "time to first token stays bounded");
    /* the model learnt the configured costs (within 25%) */
    cr_assert_lt(m.coef[1] > TOKEN_US ? m.coef[1] - TOKEN_US : TOKEN_US - m.coef[1],
                 0.25 * TOKEN_US, "decode cost %.0f us", m.coef[1]);
    double pred = st.predicted_us, act = st.compute_us;
    cr_assert_lt(pred > act ? pred - act : act - pred, 0.15 * act,
                 "predicted %.0f ms vs actual %.0f ms", pred / 1e3, act / 1e3);

    double p99_off = run_load(-1, &st, &m);
    cr_log_info("no target: p99 gap %.1f ms; predicted %.0f ms vs actual %.0f ms", p99_off,
                st.predicted_us / 1e3, st.compute_us / 1e3);
    cr_assert_gt(p99_off, 1.1 * T_MS, "without the budget the load breaks the target");
    /* big prefill-only steps are predicted as well (the attention term stays honest) */
    pred = st.predicted_us, act = st.compute_us;
    cr_assert_lt(pred > act ? pred - act : act - pred, 0.15 * act,
                 "predicted %.0f ms vs actual %.0f ms without target", pred / 1e3, act / 1e3);
}
