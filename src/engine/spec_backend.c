/* The speculative backend (backend.h, ul_spec_backend_create): a target backend and a draft
 * model's backend behind one interface. For each step, on its own worker thread, it first
 * drafts the proposals of the entries that ask for them (spec->propose) on the draft, then
 * runs the step on the target, which verifies them with everything else in the step.
 *
 * Drafting an entry whose token t0 sits at position P: the draft's KV holds positions
 * [0, draft_pos0) of the sequence; it computes the rest of the history up to and including
 * t0 (the catch-up: the whole prompt the first time, a few tokens later), samples d1 after
 * t0, then feeds each proposal back for the next, until it has n_draft of them, the draft
 * gives one less than p_min, or the filter refuses one. All entries draft together, each
 * draft pass one step of the draft backend (catch-up chunks and single tokens mixed, under
 * its step limit), so several streams cost one pass of the draft per proposal. Proposals
 * are written into the step's tokens and the history after n_history (backend.h); an entry
 * left with fewer is shortened and the step's later tokens moved down.
 *
 * Sampling on the draft: the entry's own parameters without penalties, filter or logprobs;
 * with temperature > 0 the draft also returns each proposal's distribution q (out_probs),
 * which the target's verification needs, from an RNG stream derived from the entry's, so a
 * seed reproduces the whole run. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/mix.h"
#include "engine/spec.h"
#include "engine/worker.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

typedef struct {
    int32_t e;      /* index of the entry in the target step */
    int32_t caught; /* draft positions computed */
    int32_t end;    /* P + 1: the catch-up ends with t0 */
    int32_t kmax, made, active;
    uint64_t rng[2];
    ul_sampling_t sampling;
    float *q; /* [kmax][n_vocab] or NULL (greedy) */
} dent_t;

typedef struct spec_backend_s {
    ul_backend_t base;
    ul_backend_t *target, *draft;
    ul_worker_t worker;
    ul_step_t dstep;   /* one draft pass: tokens [dmax], seqs [dmax] */
    int32_t *downer;   /* [dmax]: the dent of each draft entry */
    int32_t dmax;      /* tokens of a draft pass */
    dent_t *dents;     /* [target max_step_tokens] */
    int32_t dents_cap; /* entries a step may have */
    float *q;          /* the proposals' distributions */
    size_t q_cap;      /* floats */
} spec_backend_t;

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* The draft's sampling: the entry's, without what only the target may do. */
static ul_sampling_t draft_sampling(const ul_sampling_t *sp) {
    ul_sampling_t d = *sp;
    d.filter = NULL;
    d.repeat_last_n = 0;
    d.n_logprobs = 0;
    return d;
}

/* The entries that ask for proposals, checked; returns how many (or UL_EINVAL/UL_ENOMEM). */
static int collect(spec_backend_t *b, const ul_step_t *st) {
    int32_t n = 0;
    size_t need_q = 0;
    for (int32_t i = 0; i < st->n_seqs; i++) {
        const ul_step_seq_t *ss = &st->seqs[i];
        const ul_step_spec_t *sp = ss->spec;
        if (!sp || !sp->propose) continue;
        const int32_t k = sp->n_draft, p = ss->pos0 + ss->n_tokens - 1 - k;
        if (k < 1 || k > UL_MAX_DRAFT || p < 0 || !ss->history || ss->n_history != p + 1 ||
            sp->draft_pos0 < 0 || sp->draft_pos0 > p || !sp->draft_pages || n >= b->dents_cap)
            return UL_EINVAL;
        dent_t *d = &b->dents[n++];
        *d = (dent_t){.e = i, .caught = sp->draft_pos0, .end = p + 1, .kmax = k, .active = 1};
        d->sampling = draft_sampling(&ss->sampling);
        /* a stream of its own, derived from the entry's: the verification draws from that */
        d->rng[0] = ul_mix64(ss->rng[0] ^ 0x9e3779b97f4a7c15ull);
        d->rng[1] = ul_mix64(ss->rng[1] + 0x632be59bd9b4e019ull);
        if (ss->sampling.temperature > 0.0f) need_q += (size_t)k * (size_t)b->base.n_vocab;
    }
    if (need_q > b->q_cap) {
        float *q = realloc(b->q, need_q * sizeof *q);
        if (!q) return UL_ENOMEM;
        b->q = q;
        b->q_cap = need_q;
    }
    size_t off = 0;
    for (int32_t i = 0; i < n; i++) {
        dent_t *d = &b->dents[i];
        d->q = NULL;
        if (d->sampling.temperature > 0.0f) {
            d->q = b->q + off;
            off += (size_t)d->kmax * (size_t)b->base.n_vocab;
        }
    }
    return n;
}

/* One draft pass: every active entry's next chunk (catch-up) or last proposal, as room
 * allows. Returns the number of entries in it. */
static int32_t build_pass(spec_backend_t *b, const ul_step_t *st, int32_t n) {
    ul_step_t *ds = &b->dstep;
    ds->n_tokens = ds->n_seqs = 0;
    ds->status = 0;
    for (int32_t i = 0; i < n && ds->n_tokens < b->dmax; i++) {
        dent_t *d = &b->dents[i];
        if (!d->active) continue;
        const ul_step_seq_t *ss = &st->seqs[d->e];
        const int32_t room = b->dmax - ds->n_tokens;
        int32_t c = d->caught < d->end ? d->end - d->caught : 1;
        if (c > room) c = room;
        ul_step_seq_t *x = &ds->seqs[ds->n_seqs];
        memset(x, 0, sizeof *x);
        x->seq_id = ss->seq_id;
        x->tok_offset = ds->n_tokens;
        x->n_tokens = c;
        x->pos0 = d->caught;
        x->pages = ss->spec->draft_pages;
        x->n_pages = ss->spec->n_draft_pages;
        x->sample = d->caught + c >= d->end;
        x->sampling = d->sampling;
        x->rng[0] = d->rng[0];
        x->rng[1] = d->rng[1];
        /* positions past t0 hold the proposals, which follow the history (backend.h) */
        memcpy(ds->tokens + ds->n_tokens, ss->history + d->caught, (size_t)c * sizeof(int32_t));
        if (x->sample && d->q) x->out_probs = d->q + (size_t)d->made * (size_t)b->base.n_vocab;
        x->out_token = -1;
        b->downer[ds->n_seqs++] = i;
        ds->n_tokens += c;
    }
    return ds->n_seqs;
}

/* Takes a pass's samples: each is a proposal unless it is below p_min. */
static void absorb_pass(spec_backend_t *b, ul_step_t *st) {
    const ul_step_t *ds = &b->dstep;
    for (int32_t i = 0; i < ds->n_seqs; i++) {
        const ul_step_seq_t *x = &ds->seqs[i];
        dent_t *d = &b->dents[b->downer[i]];
        ul_step_seq_t *ss = &st->seqs[d->e];
        d->caught += x->n_tokens;
        if (!x->sample) continue;
        d->rng[0] = x->rng[0];
        d->rng[1] = x->rng[1];
        const int32_t t = x->out_token;
        const float p_min = ss->spec->p_min;
        if (t < 0 || t >= b->base.n_vocab || (p_min > 0 && expf(x->out_logprob) < p_min)) {
            d->active = 0;
            continue;
        }
        ((int32_t *)ss->history)[ss->n_history + d->made++] = t;
        if (d->made == d->kmax) d->active = 0;
    }
}

/* Proposals the filter refuses are cut (with its state left as it is). */
static void cut_by_filter(const ul_step_t *st, dent_t *d) {
    const ul_step_seq_t *ss = &st->seqs[d->e];
    ul_token_filter_t *f = ss->sampling.filter;
    if (!f || !f->prefix || d->made == 0) return;
    int32_t ok = f->prefix(f, ss->history + ss->n_history, d->made);
    if (ok >= 0 && ok < d->made) d->made = ok;
}

/* Writes the proposals into the step and moves every entry to its final place. */
static void compact(spec_backend_t *b, ul_step_t *st, int32_t n) {
    int32_t at = 0, di = 0;
    for (int32_t i = 0; i < st->n_seqs; i++) {
        ul_step_seq_t *ss = &st->seqs[i];
        const dent_t *d = di < n && b->dents[di].e == i ? &b->dents[di++] : NULL;
        const int32_t keep = d ? ss->n_tokens - d->kmax : ss->n_tokens;
        memmove(st->tokens + at, st->tokens + ss->tok_offset, (size_t)keep * sizeof(int32_t));
        ss->tok_offset = at;
        if (d) {
            memcpy(st->tokens + at + keep, ss->history + ss->n_history,
                   (size_t)d->made * sizeof(int32_t));
            ss->n_tokens = keep + d->made;
            ss->spec->n_draft = d->made;
            ss->spec->propose = 0;
            ss->spec->draft_q = d->q;
            ss->spec->draft_computed = d->caught;
        }
        at += ss->n_tokens;
    }
    st->n_tokens = at;
}

/* Every proposal of the step from the draft; a failing draft only costs the proposals. */
static int draft_phase(spec_backend_t *b, ul_step_t *st) {
    int n = collect(b, st);
    if (n <= 0) return n;
    while (build_pass(b, st, n) > 0) {
        int rc = b->draft->vt->run(b->draft, &b->dstep);
        if (rc) {
            UL_LOG_WARN("spec: draft pass of %d tokens failed (%s): no proposals this step",
                        b->dstep.n_tokens, ul_strerror(rc));
            for (int32_t i = 0; i < n; i++) {
                b->dents[i].made = 0;
                b->dents[i].caught = st->seqs[b->dents[i].e].spec->draft_pos0;
            }
            break;
        }
        absorb_pass(b, st);
    }
    for (int32_t i = 0; i < n; i++) cut_by_filter(st, &b->dents[i]);
    compact(b, st, n);
    return 0;
}

static void compute(spec_backend_t *b, ul_step_t *st) {
    double t0 = now_us();
    int rc = draft_phase(b, st);
    double dus = now_us() - t0;
    st->compute_us = 0;
    st->status = rc ? rc : b->target->vt->run(b->target, st);
    /* the target's own time (a virtual-time backend reports its configured cost) */
    st->compute_us += dus;
    st->draft_us = dus;
}

static int worker_step(void *ctx, ul_step_t *step) {
    compute(ctx, step);
    return UL_WORKER_DONE;
}

static int spec_submit(ul_backend_t *base, ul_step_t *step) {
    return ul_worker_submit(&((spec_backend_t *)base)->worker, step);
}

static int spec_run(ul_backend_t *base, ul_step_t *step) {
    compute((spec_backend_t *)base, step);
    return step->status;
}

static void spec_destroy(ul_backend_t *base) {
    spec_backend_t *b = (spec_backend_t *)base;
    ul_worker_free(&b->worker);
    if (b->draft) ul_backend_destroy(b->draft);
    if (b->target) ul_backend_destroy(b->target);
    free(b->dstep.tokens);
    free(b->dstep.seqs);
    free(b->downer);
    free(b->dents);
    free(b->q);
    free(b);
}

static const ul_backend_vtbl_t spec_vtbl = {
    .name = "spec",
    .submit = spec_submit,
    .run = spec_run,
    .destroy = spec_destroy,
};

int ul_spec_backend_create(ul_backend_t *target, ul_backend_t *draft, ul_backend_t **out) {
    *out = NULL;
    if (!target || !draft || !target->spec || target->n_vocab != draft->n_vocab) return UL_EINVAL;
    spec_backend_t *b = calloc(1, sizeof *b);
    if (!b) return UL_ENOMEM;
    b->dmax = ul_backend_max_step_tokens(draft, 0);
    b->dents_cap = ul_backend_max_step_tokens(target, 0);
    b->dstep.tokens = malloc((size_t)b->dmax * sizeof *b->dstep.tokens);
    b->dstep.seqs = calloc((size_t)b->dmax, sizeof *b->dstep.seqs);
    b->downer = malloc((size_t)b->dmax * sizeof *b->downer);
    b->dents = calloc((size_t)b->dents_cap, sizeof *b->dents);
    if (!b->dstep.tokens || !b->dstep.seqs || !b->downer || !b->dents) {
        spec_destroy(&b->base);
        return UL_ENOMEM;
    }
    b->base = *target;
    b->base.vt = &spec_vtbl;
    b->base.bridge = NULL;
    b->base.draft_n_pages = draft->n_pages;
    b->base.draft_page_size = draft->page_size;
    b->base.draft_n_ctx = draft->n_ctx;
    static const ul_worker_ops_t ops = {.step = worker_step};
    int rc = ul_worker_init(&b->worker, &b->base, &ops, b);
    if (rc) {
        spec_destroy(&b->base);
        return rc;
    }
    b->target = target;
    b->draft = draft;
    *out = &b->base;
    return 0;
}
