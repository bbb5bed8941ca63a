/* Speculative decoding in the scheduler (sched.h): which decoding sequences propose tokens
 * in a step and how many, where the proposals come from, and what their verification leaves
 * behind. The backend verifies (backend.h, "Speculative decoding"); the loop thread only
 * looks up n-grams in a sequence's own tokens and keeps page tables.
 *
 * Proposers: n-gram lookup (cfg.spec_ngram N): the tokens that followed the latest earlier
 * occurrence of the sequence's last N tokens (N - 1, ... down to 1 when N finds none), from
 * its prompt and its output alike; a draft model (a speculative backend): it proposes where
 * n-gram lookup found nothing, on a KV pool of its own whose pages this file hands out like
 * the target's (a sequence's draft KV catches up on the draft the first time and after
 * every rejection, and holds only accepted positions).
 *
 * How many: each proposal j (1-based) of a sequence is expected to add a^j tokens, a being
 * its acceptance rate (per proposer: decayed counts of proposals accepted over proposals
 * reached, a verification reaching every accepted one and the first rejected one, from an
 * optimistic prior so a new sequence tries). Its cost is what the step-time model says the
 * step gains in time when the sequence's one decode token becomes a chunk of 1 + k tokens.
 * A sequence takes the k that maximises the step's expected tokens per second, within the
 * token budget left after one token for every later decoder and within the latency
 * target's plan (never pushing a step over it, so a step that the decoders alone fill gets
 * no proposals at all). Under batching every extra token costs about what a decode token
 * does and yields less than one: proposals stop by themselves; a sequence whose proposals
 * are wrong stops too, and probes with one proposal every PROBE_STEPS decode steps so it
 * can come back when its text turns repetitive. Until the model has seen UL_STEP_MIN_OBS
 * steps nobody proposes. Sampled sequences (temperature > 0) are the exception: their
 * draws depend on where proposals were made, so they decide from their acceptance rate and
 * a nominal cost alone (no clock), and a seed gives the same text on any host as long as
 * the step has room for their proposals (cfg.max_batch_tokens, free KV pages).
 *
 * After verification the sequence keeps the KV of its last token and of the accepted
 * proposals; the rejected positions are simply past n_computed (the next step writes them
 * again) and the pages past the one its next token needs go back to the pool. Only full
 * pages of accepted tokens are published to the prefix cache (share.c reads n_computed). */
#include <stdlib.h>
#include <string.h>

#include "sched/sched_impl.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

#define PRIOR_A 0.75f     /* acceptance rate assumed before any verification */
#define PRIOR_W 2.0f      /* ... weighing as much as this many proposals reached */
#define DECAY 0.9f        /* per verification: the rate follows the last ~10 */
#define PROBE_STEPS 16    /* a backed-off sequence's decode steps between probes */
#define NGRAM_WINDOW 8192 /* tokens searched back for an n-gram */
#define MAX_SPEC_SEQS 64  /* speculative entries per step */
#define NOMINAL_COST 0.2  /* a verified token's cost in decode steps, for sampled sequences */

enum { FROM_NGRAM = 0, FROM_DRAFT = 1 };

int ul_spec_init(ul_sched_t *s) {
    const ul_backend_t *b = s->backend;
    const int draft = b->draft_n_pages > 0 && b->draft_page_size > 0;
    ul_sched_config_t *c = &s->cfg;
    if (!b->spec || (c->spec_ngram <= 0 && !draft) || c->max_batch_tokens < 2) return 0;
    if (c->spec_draft_max <= 0) c->spec_draft_max = 6;
    if (c->spec_draft_max > UL_MAX_DRAFT) c->spec_draft_max = UL_MAX_DRAFT;
    if (c->spec_draft_min <= 0) c->spec_draft_min = 1;
    if (draft) {
        int rc = ul_kv_pool_init(&s->dpool, b->draft_n_pages, b->draft_page_size, 0);
        if (rc) return rc;
    }
    s->spec_cap = c->max_batch_tokens / 2 < MAX_SPEC_SEQS ? c->max_batch_tokens / 2 : MAX_SPEC_SEQS;
    for (int32_t i = 0; i < s->depth; i++) {
        s->slot[i].spec = calloc((size_t)s->spec_cap, sizeof *s->slot[i].spec);
        if (!s->slot[i].spec) return UL_ENOMEM;
    }
    return 0;
}

void ul_spec_free(ul_sched_t *s) {
    for (int32_t i = 0; i < 2; i++) {
        free(s->slot[i].spec);
        s->slot[i].spec = NULL;
    }
    if (s->dpool.n_pages > 0) ul_kv_pool_free(&s->dpool);
    memset(&s->dpool, 0, sizeof s->dpool);
    s->spec_cap = 0;
}

int ul_spec_seq_init(ul_sched_t *s, ul_seq_t *q, int32_t cap) {
    memset(q->spec_acc, 0, sizeof q->spec_acc);
    memset(q->spec_seen, 0, sizeof q->spec_seen);
    q->spec_prior[0] = q->spec_prior[1] = PRIOR_W;
    q->spec_idle = 0;
    q->spec_k = -1;
    q->spec_from = -1;
    q->n_dpages = q->d_computed = 0;
    q->dpages_cap = s->dpool.n_pages > 0 ? ul_kv_pages_for(&s->dpool, cap) : 0;
    q->dpages = q->dpages_cap ? malloc((size_t)q->dpages_cap * sizeof *q->dpages) : NULL;
    return q->dpages_cap && !q->dpages ? UL_ENOMEM : 0;
}

void ul_spec_seq_free(ul_seq_t *q) {
    free(q->dpages);
    q->dpages = NULL;
    q->dpages_cap = 0;
}

void ul_spec_release(ul_sched_t *s, ul_seq_t *q) {
    if (q->n_dpages > 0) ul_kv_page_release(&s->dpool, q->dpages, q->n_dpages);
    q->n_dpages = q->d_computed = 0;
}

/* ---- planning ---------------------------------------------------------------------- */

static struct ul_sched_slot_s *building(ul_sched_t *s) {
    return &s->slot[(s->head + s->n_flight) % s->depth];
}

void ul_spec_begin(ul_sched_t *s, int32_t n) {
    if (!s->spec_cap) return;
    memset(&s->spec_feat, 0, sizeof s->spec_feat);
    for (int32_t i = 0; i < n; i++)
        ul_step_feat_add(&s->spec_feat, 1, ul_seq_next_pos(s->scratch[i]));
    s->spec_tokens = n;
}

static float rate(const ul_seq_t *q, int from) {
    return (q->spec_acc[from] + PRIOR_A * q->spec_prior[from]) /
           (q->spec_seen[from] + q->spec_prior[from]);
}

/* The step as planned with q's decode token turned into a chunk of 1 + k tokens. */
static ul_step_feat_t with_chunk(const ul_sched_t *s, int32_t p, int32_t k) {
    ul_step_feat_t f = s->spec_feat;
    f.n_decode -= 1;
    f.attended -= p + 1;
    ul_step_feat_add(&f, 1 + k, p);
    return f;
}

/* The number of proposals (0..kmax) at acceptance rate a that gives the step the most
 * expected tokens per predicted second, within the latency target's plan. */
static int32_t best_k(const ul_sched_t *s, const ul_seq_t *q, float a, int32_t kmax) {
    if (s->model.n_obs < UL_STEP_MIN_OBS) return 0;
    const int32_t p = q->n_tokens - 1;
    const double t0 = ul_step_model_predict(&s->model, &s->spec_feat), e0 = s->spec_tokens;
    if (!(t0 > 0)) return 0;
    const double cap = ul_budget_step_cap_us(s), lim = cap > t0 ? cap : t0;
    int32_t best = 0;
    double best_rate = e0 / t0, gain = 0, ak = 1;
    for (int32_t k = 1; k <= kmax; k++) {
        ak *= a;
        gain += ak;
        ul_step_feat_t f = with_chunk(s, p, k);
        double t = ul_step_model_predict(&s->model, &f);
        if (cap > 0 && t > lim) break;
        if (t > 0 && (e0 + gain) / t > best_rate) {
            best = k;
            best_rate = (e0 + gain) / t;
        }
    }
    return best;
}

/* A sampled sequence's draws depend on where its proposals were made, so for its seed to
 * reproduce the text, how many it makes is decided without the clock: from its own
 * acceptance rate alone, the k that maximises expected tokens per step when a verified
 * token costs NOMINAL_COST of a decode step (memory-bound decode). */
static int32_t best_k_nominal(float a, int32_t kmax) {
    int32_t best = 0;
    double best_rate = 1, gain = 0, ak = 1;
    for (int32_t k = 1; k <= kmax; k++) {
        ak *= a;
        gain += ak;
        if ((1 + gain) / (1 + NOMINAL_COST * k) > best_rate) {
            best = k;
            best_rate = (1 + gain) / (1 + NOMINAL_COST * k);
        }
    }
    return best;
}

/* How many proposals q should make from proposer from (at most kmax); a backed-off sequence
 * probes with one every PROBE_STEPS decode steps (when the step has room for it). */
static int32_t choose(const ul_sched_t *s, const ul_seq_t *q, int from, int32_t kmax) {
    if (kmax < 1) return 0;
    if (s->cfg.spec_eager) return kmax;
    const int nominal = q->sampling.temperature > 0.0f;
    int32_t k = nominal ? best_k_nominal(rate(q, from), kmax) : best_k(s, q, rate(q, from), kmax);
    /* a probe also shows the step-time model what a verification costs, which it cannot
     * learn from steps without any */
    if (k == 0 && q->spec_idle >= PROBE_STEPS) k = 1;
    return k;
}

/* Prompt lookup: the continuation (up to kmax tokens, into out = t + n) of the latest
 * earlier occurrence of t's last len tokens, for len = N down to 1. */
static int32_t ngram_lookup(int32_t *t, int32_t n, int32_t N, int32_t kmax) {
    const int32_t lo = n > NGRAM_WINDOW ? n - NGRAM_WINDOW : 0;
    for (int32_t len = N < n - 1 ? N : n - 1; len >= 1; len--) {
        const int32_t *suf = t + n - len;
        for (int32_t i = n - len - 1; i >= lo; i--) {
            if (t[i] != suf[0] || memcmp(t + i, suf, (size_t)len * sizeof *t)) continue;
            int32_t c = n - (i + len) < kmax ? n - (i + len) : kmax;
            memcpy(t + n, t + i + len, (size_t)c * sizeof *t);
            return c;
        }
    }
    return 0;
}

/* Pages for the proposals, without preempting anyone: the target's for positions up to
 * t0 + k, the draft's for those it computes (up to t0 + k - 1). Returns the k they allow. */
static int32_t take_pages(ul_sched_t *s, ul_seq_t *q, int from, int32_t k) {
    const int32_t n = q->n_tokens, p = n - 1;
    int64_t room = (int64_t)(q->n_pages + s->pool.n_free) * s->pool.page_size - n;
    if (k > room) k = (int32_t)room;
    if (from == FROM_DRAFT) {
        room = (int64_t)(q->n_dpages + s->dpool.n_free) * s->dpool.page_size - p;
        if (k > room) k = (int32_t)room;
        if (k < s->cfg.spec_draft_min) return 0;
        int32_t need = ul_kv_pages_for(&s->dpool, (int64_t)p + k) - q->n_dpages;
        if (need > 0) {
            UL_ASSERT(q->n_dpages + need <= q->dpages_cap);
            if (ul_kv_page_alloc(&s->dpool, need, q->dpages + q->n_dpages)) return 0;
            q->n_dpages += need;
        }
    }
    if (k < s->cfg.spec_draft_min || ul_sched_grow_pages(s, q, n + k)) return 0;
    return k;
}

/* n-gram proposals the sequence's filter refuses are cut (its state left as it is; q is in
 * no step, so nothing else touches it now). */
static int32_t cut_by_filter(const ul_seq_t *q, int32_t k) {
    ul_token_filter_t *f = q->sampling.filter;
    if (!f || !f->prefix) return k;
    int32_t ok = f->prefix(f, q->tokens + q->n_tokens, k);
    return ok >= 0 && ok < k ? ok : k;
}

int32_t ul_spec_plan(ul_sched_t *s, ul_seq_t *q, int32_t room) {
    if (!s->spec_cap || q->probe || building(s)->n_spec >= s->spec_cap) return 0;
    const ul_sched_config_t *c = &s->cfg;
    const int32_t n = q->n_tokens, p = n - 1, dmin = c->spec_draft_min;
    if (q->n_computed != p) return 0;
    /* at most room, and never past max_tokens or the context: k proposals give k + 1 */
    int32_t kmax = c->spec_draft_max;
    if (kmax > room) kmax = room;
    if (kmax > q->max_tokens - (n - q->n_prompt) - 1) kmax = q->max_tokens - (n - q->n_prompt) - 1;
    if (kmax > q->cap - n - 1) kmax = q->cap - n - 1;
    int from = -1;
    int32_t k = 0;
    if (kmax >= dmin && c->spec_ngram > 0) {
        k = choose(s, q, FROM_NGRAM, kmax);
        if (k >= dmin) k = cut_by_filter(q, ngram_lookup(q->tokens, n, c->spec_ngram, k));
        if (k >= dmin) from = FROM_NGRAM;
    }
    if (from < 0 && kmax >= dmin && s->dpool.n_pages > 0) {
        int32_t kd = kmax < s->backend->draft_n_ctx - p ? kmax : s->backend->draft_n_ctx - p;
        k = choose(s, q, FROM_DRAFT, kd);
        if (k >= dmin) from = FROM_DRAFT;
    }
    if (from < 0 || (k = take_pages(s, q, from, k)) < dmin) {
        q->spec_idle++;
        return 0;
    }
    q->spec_idle = 0;
    q->spec_from = from;
    if (from == FROM_DRAFT)
        for (int32_t j = 0; j < k; j++) q->tokens[n + j] = -1; /* the draft's to fill in */
    /* the step as planned now: this chunk and what it is expected to add */
    float a = rate(q, from), ak = 1;
    for (int32_t j = 1; j <= k; j++) s->spec_tokens += ak *= a;
    s->spec_feat = with_chunk(s, p, k);
    return k;
}

void ul_spec_attach(ul_sched_t *s, ul_seq_t *q, ul_step_seq_t *ss, int32_t k) {
    struct ul_sched_slot_s *sl = building(s);
    UL_ASSERT(sl->n_spec < s->spec_cap);
    ul_step_spec_t *sp = &sl->spec[sl->n_spec++];
    memset(sp, 0, offsetof(ul_step_spec_t, out));
    sp->n_draft = k;
    if (q->spec_from == FROM_DRAFT) {
        sp->propose = 1;
        sp->draft_pages = q->dpages;
        sp->n_draft_pages = q->n_dpages;
        sp->draft_pos0 = q->d_computed;
        sp->p_min = s->cfg.spec_p_min;
        sl->proposing = 1;
    }
    ss->spec = sp;
    q->spec_k = k;
}

/* ---- results ------------------------------------------------------------------------ */

void ul_spec_refeature(ul_sched_t *s, struct ul_sched_slot_s *sl) {
    (void)s;
    memset(&sl->feat, 0, sizeof sl->feat);
    for (int32_t i = 0; i < sl->step.n_seqs; i++)
        ul_step_feat_add(&sl->feat, sl->step.seqs[i].n_tokens, sl->step.seqs[i].pos0);
}

/* The acceptance counts and the metrics of one verification: k proposals, a accepted (a
 * draft that proposed nothing counts as one rejected). */
static void observe(ul_sched_t *s, ul_seq_t *q, int32_t k, int32_t a) {
    const int from = q->spec_from;
    const float reached = (float)a + (a < k || k == 0 ? 1.0f : 0.0f);
    q->spec_acc[from] = DECAY * q->spec_acc[from] + (float)a;
    q->spec_seen[from] = DECAY * q->spec_seen[from] + reached;
    q->spec_prior[from] *= DECAY; /* else it would hold the rate up forever */
    if (k == 0 || q->probe) return;
    ul_sched_stats_t *st = &s->stats;
    st->spec_verifications++;
    st->spec_proposed += (uint64_t)k;
    st->spec_accepted += (uint64_t)a;
    st->spec_accept_hist[(a * (UL_SPEC_HIST_N - 1) + k - 1) / k]++; /* ceil(10 a / k) */
}

/* Pages past the one q's next token needs held only rejected positions. */
static void roll_back(ul_sched_t *s, ul_seq_t *q) {
    int32_t keep = ul_kv_pages_for(&s->pool, (int64_t)q->n_computed + 1);
    if (q->n_pages <= keep) return;
    ul_kv_page_release(&s->pool, q->pages + keep, q->n_pages - keep);
    q->n_pages = keep;
}

void ul_spec_absorb(ul_sched_t *s, ul_seq_t *q, const ul_step_seq_t *ss) {
    const ul_step_spec_t *sp = ss->spec;
    const int32_t k = sp->n_draft;
    const int32_t a = sp->n_accepted < 0 ? 0 : sp->n_accepted > k ? k : sp->n_accepted;
    /* the entry's tokens up to t0 and the accepted proposals hold KV now */
    const int32_t computed = ss->n_tokens - k + a;
    q->n_computed += computed;
    s->stats.tokens_computed += (uint64_t)computed;
    if (q->spec_from == FROM_DRAFT) {
        int32_t d = sp->draft_computed;
        q->d_computed = d < q->n_computed ? d : q->n_computed;
    }
    ul_share_publish(s, q); /* the accepted proposals are in q->tokens already */
    q->rng[0] = ss->rng[0];
    q->rng[1] = ss->rng[1];
    observe(s, q, k, a);
    for (int32_t j = 0; j <= a; j++)
        if (!ul_sched_take_token(s, q, sp->out[j].token, &sp->out[j])) break;
    if (!q->ending) roll_back(s, q);
}
