/* Chained entries resolved on the device (src/gpu/chain.h): which entries of step N + 1
 * gather their input token (and RNG state) from which of step N's device outputs, which
 * make the step defer to the host, and which are invalid; the gather itself through twin.h's
 * ul_tw_chain_apply, the arithmetic chain.cu runs. The last test checks random steps
 * against the worker's host resolution (engine/worker.c resolve_on_host): the same tokens
 * and RNG states wherever the device resolves. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "gpu/chain.h"
#include "gpu/support.h"
#include "uvllm/err.h"

#define MAXS 16

static ul_ch_place_t P(int32_t kind, int32_t idx) { return (ul_ch_place_t){kind, idx, -1}; }

/* n one-token entries at tok_offset i, sampling. */
static void decode_seqs(ul_step_seq_t *s, int32_t n) {
    memset(s, 0, (size_t)n * sizeof *s);
    for (int32_t i = 0; i < n; i++) {
        s[i].tok_offset = i;
        s[i].n_tokens = 1;
        s[i].sample = 1;
    }
}

static void apply_hist(const ul_tw_chain_t *pairs, int32_t n, int32_t *tokens, const int32_t *ids,
                       const ul_tw_sample_t *prev, ul_tw_sample_t *rows, int32_t *hist,
                       int32_t *out) {
    for (int32_t i = 0; i < n; i++)
        ul_tw_chain_apply(&pairs[i], tokens, ids, prev, rows, hist, &out[i]);
}

static void apply_all(const ul_tw_chain_t *pairs, int32_t n, int32_t *tokens, const int32_t *ids,
                      const ul_tw_sample_t *prev, ul_tw_sample_t *rows, int32_t *out) {
    apply_hist(pairs, n, tokens, ids, prev, rows, NULL, out);
}

Test(chain, greedy_rows_gather_their_argmax_token) {
    /* step N: entry 1 is a prefill chunk that samples nothing, so output rows are not
     * entry indices */
    const ul_ch_place_t prev[4] = {P(UL_CH_ARGMAX, 0), P(UL_CH_NONE, -1), P(UL_CH_ARGMAX, 1),
                                   P(UL_CH_ARGMAX, 2)};
    const int32_t ids[3] = {101, 102, 103};
    ul_step_seq_t s[3];
    decode_seqs(s, 3);
    s[0].chain = 4; /* N's entry 3 */
    s[1].chain = 1; /* N's entry 0 */
    s[2].chain = 3; /* N's entry 2 */
    const ul_ch_place_t cur[3] = {P(UL_CH_ARGMAX, 0), P(UL_CH_ARGMAX, 1), P(UL_CH_ARGMAX, 2)};
    ul_tw_chain_t pairs[3];
    int32_t n = -1;
    cr_assert_eq(ul_ch_plan(s, 3, cur, prev, 4, pairs, &n), 0);
    cr_assert_eq(n, 3);
    const int32_t want_ids[3] = {2, 0, 1}, want_prev[3] = {3, 0, 2};
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(pairs[i].tok, i);
        cr_assert_eq(pairs[i].ids, want_ids[i], "pair %d reads ids[%d]", i, pairs[i].ids);
        cr_assert_eq(pairs[i].smp, -1);
        cr_assert_eq(pairs[i].rng, -1);
        cr_assert_eq(pairs[i].hist, -1);
        cr_assert_eq(pairs[i].seq, i);
        cr_assert_eq(pairs[i].prev, want_prev[i]);
    }
    int32_t tokens[3] = {-1, -1, -1}, out[3];
    apply_all(pairs, n, tokens, ids, NULL, NULL, out);
    cr_assert_eq(tokens[0], 103);
    cr_assert_eq(tokens[1], 101);
    cr_assert_eq(tokens[2], 102);
    cr_assert_eq(memcmp(out, tokens, sizeof out), 0, "the tokens for the host, in pair order");
}

Test(chain, device_sampled_rows_gather_token_and_rng_state) {
    const ul_ch_place_t prev[2] = {P(UL_CH_DEV, 1), P(UL_CH_DEV, 0)};
    ul_tw_sample_t prow[2], rows[2];
    memset(prow, 0, sizeof prow);
    memset(rows, 0, sizeof rows);
    prow[0].token = 7;
    prow[0].rng[0] = 0x1111, prow[0].rng[1] = 0x2222;
    prow[1].token = 9;
    prow[1].rng[0] = 0x3333, prow[1].rng[1] = 0x4444;
    rows[0].rng[0] = rows[1].rng[0] = 0xdead; /* stale, as packed from the entries */
    ul_step_seq_t s[2];
    decode_seqs(s, 2);
    s[0].chain = 1; /* N's entry 0: its sampler row 1 */
    s[1].chain = 2; /* N's entry 1: its sampler row 0 */
    const ul_ch_place_t cur[2] = {P(UL_CH_DEV, 1), P(UL_CH_DEV, 0)};
    ul_tw_chain_t pairs[2];
    int32_t n = 0;
    cr_assert_eq(ul_ch_plan(s, 2, cur, prev, 2, pairs, &n), 0);
    cr_assert_eq(n, 2);
    cr_assert_eq(pairs[0].smp, 1);
    cr_assert_eq(pairs[0].rng, 1);
    cr_assert_eq(pairs[1].smp, 0);
    cr_assert_eq(pairs[1].rng, 0);
    int32_t tokens[2] = {-1, -1}, out[2];
    apply_all(pairs, n, tokens, NULL, prow, rows, out);
    cr_assert_eq(tokens[0], 9);
    cr_assert_eq(tokens[1], 7);
    cr_assert_eq(rows[1].rng[0], 0x3333);
    cr_assert_eq(rows[1].rng[1], 0x4444);
    cr_assert_eq(rows[0].rng[0], 0x1111);
    cr_assert_eq(rows[0].rng[1], 0x2222);
}

Test(chain, rows_sampled_on_the_host_defer) {
    const ul_ch_place_t prev[3] = {P(UL_CH_ARGMAX, 0), P(UL_CH_HOST, 0), P(UL_CH_DEV, 0)};
    ul_step_seq_t s[2];
    decode_seqs(s, 2);
    s[0].chain = 1; /* resolvable alone */
    s[1].chain = 2; /* the host row */
    const ul_ch_place_t cur[2] = {P(UL_CH_ARGMAX, 0), P(UL_CH_HOST, 0)};
    ul_tw_chain_t pairs[2];
    int32_t n = 5;
    cr_assert_eq(ul_ch_plan(s, 2, cur, prev, 3, pairs, &n), UL_CH_DEFER);
    cr_assert_eq(n, 0, "a deferred step gathers nothing");
    s[1].chain = 0; /* without it the step resolves */
    cr_assert_eq(ul_ch_plan(s, 2, cur, prev, 3, pairs, &n), 0);
    cr_assert_eq(n, 1);
}

Test(chain, a_device_sampled_row_into_a_row_sampled_otherwise_defers) {
    /* the RNG state N's sampler advanced is on the device only: a row sampled on the host
     * (or reported by the argmax path) would carry a stale one */
    const ul_ch_place_t prev[1] = {P(UL_CH_DEV, 0)};
    ul_step_seq_t s[1];
    decode_seqs(s, 1);
    s[0].chain = 1;
    ul_tw_chain_t pairs[1];
    int32_t n;
    ul_ch_place_t cur = P(UL_CH_HOST, 0);
    cr_assert_eq(ul_ch_plan(s, 1, &cur, prev, 1, pairs, &n), UL_CH_DEFER);
    cur = P(UL_CH_ARGMAX, 0);
    cr_assert_eq(ul_ch_plan(s, 1, &cur, prev, 1, pairs, &n), UL_CH_DEFER);
    /* not sampling this time: only the token */
    cur = P(UL_CH_NONE, -1);
    s[0].sample = 0;
    cr_assert_eq(ul_ch_plan(s, 1, &cur, prev, 1, pairs, &n), 0);
    cr_assert_eq(n, 1);
    cr_assert_eq(pairs[0].smp, 0);
    cr_assert_eq(pairs[0].rng, -1);
    /* N's argmax row into a host-sampled row: the token on the device, the RNG state from
     * the host (ul_ch_host_rng) */
    const ul_ch_place_t prev_g[1] = {P(UL_CH_ARGMAX, 0)};
    cur = P(UL_CH_HOST, 0);
    cr_assert_eq(ul_ch_plan(s, 1, &cur, prev_g, 1, pairs, &n), 0);
    cr_assert_eq(pairs[0].ids, 0);
}

Test(chain, invalid_chains_fail_the_step) {
    const ul_ch_place_t prev[2] = {P(UL_CH_ARGMAX, 0), P(UL_CH_NONE, -1)};
    const ul_ch_place_t cur[2] = {P(UL_CH_ARGMAX, 0), P(UL_CH_ARGMAX, 1)};
    ul_step_seq_t s[2];
    ul_tw_chain_t pairs[2];
    int32_t n;
    decode_seqs(s, 2);
    s[0].chain = 3; /* past N's two entries */
    cr_assert_eq(ul_ch_plan(s, 2, cur, prev, 2, pairs, &n), UL_EINVAL);
    s[0].chain = 2; /* N's entry 1 sampled nothing */
    cr_assert_eq(ul_ch_plan(s, 2, cur, prev, 2, pairs, &n), UL_EINVAL);
    s[0].chain = 1;
    cr_assert_eq(ul_ch_plan(s, 2, cur, prev, 2, pairs, &n), 0, "entry 0 alone is valid");
    s[0].n_tokens = 2; /* a chained entry brings exactly its one sampled token */
    cr_assert_eq(ul_ch_plan(s, 2, cur, prev, 2, pairs, &n), UL_EINVAL);
    /* invalid wins over defer, whatever the order */
    s[0].n_tokens = 1;
    const ul_ch_place_t prev_h[2] = {P(UL_CH_HOST, 0), P(UL_CH_ARGMAX, 0)};
    s[0].chain = 1; /* defers */
    s[1].chain = 3; /* invalid */
    cr_assert_eq(ul_ch_plan(s, 2, cur, prev_h, 2, pairs, &n), UL_EINVAL);
}

Test(chain, steps_without_chains_gather_nothing) {
    const ul_ch_place_t prev[2] = {P(UL_CH_HOST, 0), P(UL_CH_DEV, 0)};
    ul_step_seq_t s[3];
    decode_seqs(s, 3);
    s[0].n_tokens = 5; /* a prefill chunk first */
    s[1].tok_offset = 5;
    s[2].tok_offset = 6;
    const ul_ch_place_t cur[3] = {P(UL_CH_ARGMAX, 0), P(UL_CH_HOST, 0), P(UL_CH_DEV, 0)};
    ul_tw_chain_t pairs[3];
    int32_t n = 9;
    cr_assert_eq(ul_ch_plan(s, 3, cur, prev, 2, pairs, &n), 0);
    cr_assert_eq(n, 0);
    cr_assert_eq(ul_ch_plan(s, 3, cur, prev, 0, pairs, &n), 0, "even with no step before");
    cr_assert_eq(n, 0);
}

Test(chain, mixed_step_gathers_only_its_chained_entries) {
    /* N: entries 0 (argmax row 0), 1 (sampler row 0), 2 (argmax row 1) */
    const ul_ch_place_t prev[3] = {P(UL_CH_ARGMAX, 0), P(UL_CH_DEV, 0), P(UL_CH_ARGMAX, 1)};
    const int32_t ids[2] = {40, 42};
    ul_tw_sample_t prow[1], rows[2];
    memset(prow, 0, sizeof prow);
    memset(rows, 0, sizeof rows);
    prow[0].token = 41;
    prow[0].rng[0] = 5, prow[0].rng[1] = 6;
    /* N + 1: a prefill chunk of 3 tokens, N's entry 2, a new decode entry, N's entry 1 */
    ul_step_seq_t s[4];
    decode_seqs(s, 4);
    s[0].n_tokens = 3;
    s[0].sample = 0;
    s[1].tok_offset = 3, s[1].chain = 3;
    s[2].tok_offset = 4;
    s[3].tok_offset = 5, s[3].chain = 2;
    const ul_ch_place_t cur[4] = {P(UL_CH_NONE, -1), P(UL_CH_ARGMAX, 0), P(UL_CH_DEV, 0),
                                  P(UL_CH_DEV, 1)};
    ul_tw_chain_t pairs[4];
    int32_t n;
    cr_assert_eq(ul_ch_plan(s, 4, cur, prev, 3, pairs, &n), 0);
    cr_assert_eq(n, 2);
    int32_t tokens[6] = {1, 2, 3, -1, 77, -1}, out[2];
    apply_all(pairs, n, tokens, ids, prow, rows, out);
    const int32_t want[6] = {1, 2, 3, 42, 77, 41};
    for (int i = 0; i < 6; i++) cr_assert_eq(tokens[i], want[i], "token %d: %d", i, tokens[i]);
    cr_assert_eq(rows[1].rng[0], 5, "N's sampler row's RNG state into this step's row 1");
    cr_assert_eq(rows[1].rng[1], 6);
    cr_assert_eq(rows[0].rng[0], 0, "the unchained entry's row untouched");
}

Test(chain, argmax_rows_take_the_rng_state_from_the_host) {
    const ul_ch_place_t prev[2] = {P(UL_CH_ARGMAX, 0), P(UL_CH_DEV, 0)};
    ul_step_seq_t ps[2], s[3];
    decode_seqs(ps, 2);
    ps[0].rng[0] = 11, ps[0].rng[1] = 12;
    ps[1].rng[0] = 13, ps[1].rng[1] = 14; /* stale on the host: the sampler advances it */
    decode_seqs(s, 3);
    s[0].chain = 2;
    s[1].chain = 1;
    s[2].chain = 0;
    for (int i = 0; i < 3; i++) s[i].rng[0] = s[i].rng[1] = 99;
    const ul_ch_place_t cur[3] = {P(UL_CH_DEV, 0), P(UL_CH_DEV, 1), P(UL_CH_DEV, 2)};
    ul_tw_sample_t rows[3];
    memset(rows, 0, sizeof rows);
    ul_tw_chain_t pairs[3];
    int32_t n;
    cr_assert_eq(ul_ch_plan(s, 3, cur, prev, 2, pairs, &n), 0);
    cr_assert_eq(n, 2);
    ul_ch_host_rng(pairs, n, s, ps, cur, rows);
    cr_assert_eq(s[1].rng[0], 11);
    cr_assert_eq(s[1].rng[1], 12);
    cr_assert_eq(rows[1].rng[0], 11, "packed before the copy: the row gets it too");
    cr_assert_eq(rows[1].rng[1], 12);
    cr_assert_eq(s[0].rng[0], 99, "the sampler row's state comes from the device");
    cr_assert_eq(rows[0].rng[0], 0);
    cr_assert_eq(s[2].rng[0], 99);
    cr_assert_eq(rows[2].rng[0], 0);
}

static void penalize(ul_step_seq_t *s, const int32_t *history, int32_t n_history) {
    s->sampling.temperature = 0.8f;
    s->sampling.top_p = 1.0f;
    s->sampling.repeat_penalty = 1.3f;
    s->sampling.repeat_last_n = 4;
    s->history = history;
    s->n_history = n_history;
}

Test(chain, penalty_windows_get_the_token_on_the_device_or_defer) {
    /* N's sampler row 0; N + 1's entry on the sampler with a penalty window whose last
     * place (ul_gpu_sample_pack leaves -1 there) is hist[6] */
    static const int32_t history[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    const ul_ch_place_t prev[1] = {P(UL_CH_DEV, 0)};
    ul_tw_sample_t prow[1], rows[1];
    memset(prow, 0, sizeof prow);
    memset(rows, 0, sizeof rows);
    prow[0].token = 55;
    ul_step_seq_t s[1];
    decode_seqs(s, 1);
    s[0].chain = 1;
    penalize(&s[0], history, 10);
    ul_ch_place_t cur = {UL_CH_DEV, 0, 6};
    ul_tw_chain_t pairs[1];
    int32_t n;
    cr_assert_eq(ul_ch_plan(s, 1, &cur, prev, 1, pairs, &n), 0);
    cr_assert_eq(pairs[0].hist, 6);
    int32_t tokens[1] = {-1}, hist[8] = {0, 0, 0, 8, 9, 10, -1, 0}, out[1];
    ul_tw_chain_apply(&pairs[0], tokens, NULL, prow, rows, hist, out);
    cr_assert_eq(tokens[0], 55);
    cr_assert_eq(hist[6], 55, "the window ends with the gathered token");
    cr_assert_eq(hist[5], 10);
    cr_assert_eq(hist[7], 0);
    /* on the host (rows past the device sampler's): the worker extends the history */
    cur = P(UL_CH_HOST, 0);
    cr_assert_eq(ul_ch_plan(s, 1, &cur, prev, 1, pairs, &n), UL_CH_DEFER);
    const ul_ch_place_t prev_g[1] = {P(UL_CH_ARGMAX, 0)};
    cr_assert_eq(ul_ch_plan(s, 1, &cur, prev_g, 1, pairs, &n), UL_CH_DEFER);
    /* a filter samples on the host, where it lives */
    ul_token_filter_t filter = {0};
    decode_seqs(s, 1);
    s[0].chain = 1;
    s[0].sampling.filter = &filter;
    cr_assert_eq(ul_ch_plan(s, 1, &cur, prev_g, 1, pairs, &n), UL_CH_DEFER);
    s[0].sampling.filter = NULL;
    cr_assert_eq(ul_ch_plan(s, 1, &cur, prev_g, 1, pairs, &n), 0, "plain host rows resolve");
}

static uint64_t rnd(uint64_t *x) { return ul_splitmix64(x); }

/* The penalty window packed for a chained entry, its last place filled by the gather,
 * equals the one packed after the worker's host resolution (engine/worker.c
 * extend_histories: the last window(ss) tokens of the history, then the token). */
Test(chain, chained_penalty_window_equals_the_host_resolutions) {
    int32_t history[40];
    for (int i = 0; i < 40; i++) history[i] = 100 + i;
    uint64_t x = 99;
    for (int it = 0; it < 2000; it++) {
        const int32_t n_h = (int32_t)(rnd(&x) % 41), tok = 7;
        const int32_t rlns[] = {-1, 1, 3, 16, 64};
        ul_step_seq_t s;
        decode_seqs(&s, 1);
        penalize(&s, n_h ? history : NULL, n_h);
        s.sampling.repeat_last_n = rlns[rnd(&x) % 5];
        s.chain = 1;
        ul_tw_sample_t dev, host;
        int32_t hd[64], hh[64], ext[64], nhd = 0, nhh = 0, nbd = 0, nbh = 0;
        cr_assert_eq(ul_gpu_sample_pack(&s, 0, &dev, hd, 64, &nhd, NULL, NULL, 0, &nbd), 0);
        cr_assert_gt(dev.n_hist, 0);
        cr_assert_eq(hd[dev.hist_off + dev.n_hist - 1], -1, "the token's place left open");
        hd[dev.hist_off + dev.n_hist - 1] = tok; /* the gather */
        /* the worker's extension, then the pack of a resolved (unchained) entry */
        int32_t k = s.sampling.repeat_last_n < 0 || s.sampling.repeat_last_n > n_h
                        ? n_h
                        : s.sampling.repeat_last_n;
        if (k) memcpy(ext, history + n_h - k, (size_t)k * sizeof *ext);
        ext[k] = tok;
        ul_step_seq_t r = s;
        r.chain = 0;
        r.history = ext;
        r.n_history = k + 1;
        cr_assert_eq(ul_gpu_sample_pack(&r, 0, &host, hh, 64, &nhh, NULL, NULL, 0, &nbh), 0);
        cr_assert_eq(dev.n_hist, host.n_hist, "it %d: window %d vs %d", it, dev.n_hist,
                     host.n_hist);
        cr_assert_eq(memcmp(hd, hh, (size_t)dev.n_hist * sizeof *hd), 0, "it %d: windows differ",
                     it);
    }
}

/* Random step pairs: wherever the plan resolves on the device, the gathered tokens and RNG
 * states equal what the host resolution gives from step N's finished outputs; it defers
 * exactly when a chain reads a host row, or a sampler row into a row not on the sampler. */
Test(chain, random_steps_match_the_host_resolution) {
    uint64_t x = 12345;
    int resolved = 0, deferred = 0;
    for (int it = 0; it < 20000; it++) {
        /* step N: its entries' placements and outputs */
        const int32_t np = 1 + (int32_t)(rnd(&x) % MAXS);
        ul_ch_place_t prev[MAXS];
        ul_step_seq_t ps[MAXS];
        int32_t ids[MAXS], n_out = 0, n_dev = 0, n_host = 0;
        ul_tw_sample_t prow[MAXS];
        int32_t fin_tok[MAXS];
        uint64_t fin_rng[MAXS][2];
        for (int32_t i = 0; i < np; i++) {
            ps[i].rng[0] = rnd(&x), ps[i].rng[1] = rnd(&x);
            const int k = (int)(rnd(&x) % 4);
            fin_tok[i] = -1;
            fin_rng[i][0] = ps[i].rng[0], fin_rng[i][1] = ps[i].rng[1];
            if (k == UL_CH_NONE) {
                prev[i] = P(UL_CH_NONE, -1);
                continue;
            }
            const int32_t row = n_out++;
            ids[row] = (int32_t)(rnd(&x) % 1000);
            if (k == UL_CH_ARGMAX) {
                prev[i] = P(UL_CH_ARGMAX, row);
                fin_tok[i] = ids[row];
            } else if (k == UL_CH_DEV) {
                prev[i] = P(UL_CH_DEV, n_dev);
                prow[n_dev].token = fin_tok[i] = (int32_t)(rnd(&x) % 1000);
                prow[n_dev].rng[0] = fin_rng[i][0] = rnd(&x);
                prow[n_dev].rng[1] = fin_rng[i][1] = rnd(&x);
                n_dev++;
            } else {
                prev[i] = P(UL_CH_HOST, n_host++);
                fin_tok[i] = (int32_t)(rnd(&x) % 1000);
                fin_rng[i][0] = rnd(&x), fin_rng[i][1] = rnd(&x);
            }
        }
        /* step N + 1: some of N's sampled entries chained (shuffled), some new entries */
        int32_t order[MAXS], m = 0;
        for (int32_t i = 0; i < np; i++)
            if (prev[i].kind != UL_CH_NONE && rnd(&x) % 4) order[m++] = i;
        for (int32_t i = m - 1; i > 0; i--) {
            int32_t j = (int32_t)(rnd(&x) % (uint64_t)(i + 1)), t = order[i];
            order[i] = order[j], order[j] = t;
        }
        const int32_t ns = m + (int32_t)(rnd(&x) % 3);
        ul_step_seq_t s[MAXS + 2];
        ul_ch_place_t cur[MAXS + 2];
        ul_tw_sample_t rows[MAXS + 2];
        int32_t tokens[MAXS + 2], c_dev = 0, c_out = 0, c_host = 0;
        decode_seqs(s, ns);
        int want_defer = 0;
        for (int32_t i = 0; i < ns; i++) {
            s[i].rng[0] = s[i].rng[1] = 0xbad;
            tokens[i] = i < m ? -1 : 2000 + i;
            if (i < m) s[i].chain = order[i] + 1;
            const int k = 1 + (int)(rnd(&x) % 3);
            cur[i] = k == UL_CH_ARGMAX ? P(k, c_out)
                     : k == UL_CH_DEV  ? P(k, c_dev++)
                                       : P(k, c_host++);
            c_out++;
            if (k == UL_CH_DEV) rows[cur[i].idx].rng[0] = rows[cur[i].idx].rng[1] = 0xbad;
            if (k == UL_CH_DEV && i < m && rnd(&x) % 2) cur[i].hist = 3 * i + 1; /* penalties */
            if (i < m) {
                const int pk = prev[order[i]].kind;
                want_defer |= pk == UL_CH_HOST || (pk == UL_CH_DEV && k != UL_CH_DEV);
            }
        }
        ul_tw_chain_t pairs[MAXS + 2];
        int32_t n = -1, out[MAXS + 2], hist[3 * (MAXS + 2)];
        for (int i = 0; i < 3 * (MAXS + 2); i++) hist[i] = -1;
        const int rc = ul_ch_plan(s, ns, cur, prev, np, pairs, &n);
        if (want_defer) {
            cr_assert_eq(rc, UL_CH_DEFER, "it %d: should defer", it);
            deferred++;
            continue;
        }
        cr_assert_eq(rc, 0, "it %d: rc %d", it, rc);
        cr_assert_eq(n, m);
        resolved++;
        ul_ch_host_rng(pairs, n, s, ps, cur, rows);
        apply_hist(pairs, n, tokens, ids, prow, rows, hist, out);
        for (int32_t i = 0; i < ns; i++) {
            cr_assert_eq(hist[3 * i + 1], cur[i].hist >= 0 ? fin_tok[order[i]] : -1,
                         "it %d: entry %d's window", it, i);
            if (i >= m) {
                cr_assert_eq(tokens[i], 2000 + i, "it %d: an unchained token changed", it);
                continue;
            }
            const int32_t p = order[i];
            cr_assert_eq(tokens[i], fin_tok[p], "it %d: entry %d got %d, host resolves %d", it, i,
                         tokens[i], fin_tok[p]);
            const uint64_t *r = cur[i].kind == UL_CH_DEV ? rows[cur[i].idx].rng : s[i].rng;
            cr_assert(r[0] == fin_rng[p][0] && r[1] == fin_rng[p][1],
                      "it %d: entry %d carries another RNG state than N left", it, i);
        }
    }
    printf("chain: %d random steps resolved on the device, %d deferred\n", resolved, deferred);
    cr_assert_gt(resolved, 1000);
    cr_assert_gt(deferred, 1000);
}
