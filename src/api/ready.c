/* Readiness by a real decode. /health says the process answers; a load balancer or
 * Kubernetes also needs to know the model can still produce a token. So a canary, a
 * one-token prompt that asks for one token, goes through the scheduler and the real
 * backend at start-up and again whenever no step has completed for --canary-interval-s
 * (a busy server proves itself with every step and runs none). /health/ready is 200 while
 * the last step absorbed (canary or request) succeeded and some step succeeded within
 * three intervals; a failed step turns it 503 "failing" at once, a backend that stopped
 * completing steps (hung) within three intervals. /health/live only says the loop runs.
 * An encoder (bert), which generates nothing, proves itself with a one-token embedding. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

#define STALE_INTERVALS 3

int ul_api_health_live(ul_http_req_t *req, void *data) {
    static const char body[] = "{\"status\":\"live\"}";
    return ul_http_respond(req, 200, NULL, body, sizeof body - 1);
}

static int draining(const ul_api_t *a) {
    return a->draining || (a->server && ul_http_server_draining(a->server));
}

const char *ul_api_ready_state(const ul_api_t *a, char *reason, size_t cap) {
    const ul_sched_t *s = a->sched;
    char tmp[8];
    if (!reason) reason = tmp, cap = sizeof tmp;
    reason[0] = '\0';
    if (draining(a)) {
        snprintf(reason, cap, "the server is shutting down");
        return "draining";
    }
    if (s->t_step_done_ns && s->step_status) {
        snprintf(reason, cap, "the last backend step failed: %s", ul_strerror(s->step_status));
        return "failing";
    }
    if (!s->t_step_ok_ns) {
        snprintf(reason, cap, "waiting for the first canary step");
        return "loading";
    }
    double age = (double)(uv_hrtime() - s->t_step_ok_ns) / 1e9;
    double stale = STALE_INTERVALS * (a->ready.interval_s > 0 ? a->ready.interval_s : 5);
    if (age > stale) {
        snprintf(reason, cap, "no backend step succeeded for %.1f s", age);
        return "failing";
    }
    return "ready";
}

int ul_api_health_ready(ul_http_req_t *req, void *data) {
    ul_api_t *a = data;
    char reason[160], body[320];
    const char *st = ul_api_ready_state(a, reason, sizeof reason);
    int ok = !strcmp(st, "ready"), n;
    if (ok) {
        n = snprintf(body, sizeof body, "{\"status\":\"ready\"}");
    } else {
        n = snprintf(body, sizeof body, "{\"status\":\"%s\",\"reason\":\"%s\"}", st, reason);
        ul_http_resp_header(req, "Retry-After", "5");
    }
    return ul_http_respond(req, ok ? 200 : 503, NULL, body, (size_t)n);
}

/* ---- the canary --------------------------------------------------------------------- */

static ul_api_t *api_of(ul_seq_t *q) { return q->data; }

static int on_canary_token(ul_seq_t *q, int32_t token, const ul_token_lp_t *lp) { return 0; }

static void on_canary_finish(ul_seq_t *q, ul_finish_t reason, int status) {
    ul_api_t *a = api_of(q);
    a->ready.canary_live = 0;
    if (reason == UL_FINISH_ERROR) {
        a->ready.canary_failures++;
        UL_LOG_ERROR("readiness canary failed: %s", ul_strerror(status));
    } else {
        UL_LOG_DEBUG("readiness canary: %s", ul_finish_name(reason));
    }
}

static void run_canary(ul_api_t *a) {
    ul_api_ready_t *r = &a->ready;
    if (r->canary_live || draining(a)) return;
    const ul_codec_t *c = &a->codec;
    int32_t tok = c->vocab && ul_vocab_bos(c->vocab) >= 0 ? ul_vocab_bos(c->vocab)
                                                          : 1 % a->sched->backend->n_vocab;
    ul_seq_t *q = &r->canary;
    memset(q, 0, sizeof *q);
    q->max_tokens = 1;
    ul_sampling_default(&q->sampling);
    q->sampling.temperature = 0;
    q->ignore_eos = 1; /* always one real token */
    q->probe = 1;      /* not load: no max-seqs slot, no latency or token counts */
    q->on_token = on_canary_token;
    q->on_finish = on_canary_finish;
    q->data = a;
    if (a->embed_only) { /* an encoder only embeds: its canary is an embedding of [CLS] */
        if (!r->embd && !(r->embd = malloc(sizeof *r->embd * (size_t)a->sched->backend->n_embd)))
            return;
        q->embd = r->embd;
        q->pooling = UL_POOL_CLS;
    }
    int rc = ul_sched_add(a->sched, q, &tok, 1);
    if (rc) {
        /* UL_EFULL: max-seqs sequences are in flight, so steps are being made anyway */
        UL_LOG_WARN("readiness canary not queued: %s", ul_strerror(rc));
        return;
    }
    r->canary_live = 1;
    r->canaries++;
}

static void on_timer(uv_timer_t *t) {
    ul_api_t *a = t->data;
    uint64_t quiet_ns = (uint64_t)(a->ready.interval_s * 1e9);
    if (uv_hrtime() - a->sched->t_step_done_ns >= quiet_ns) run_canary(a);
}

int ul_api_ready_start(ul_api_t *a, uv_loop_t *loop, double interval_s) {
    ul_api_ready_t *r = &a->ready;
    r->interval_s = interval_s;
    if (interval_s <= 0) return UL_EINVAL;
    int rc = uv_timer_init(loop, &r->timer);
    if (rc) return rc;
    r->timer.data = a;
    r->timer_up = 1;
    /* a quarter interval between checks: a canary starts at most S/4 late */
    uint64_t ms = (uint64_t)(interval_s * 1000 / 4);
    if (ms < 10) ms = 10;
    uv_timer_start(&r->timer, on_timer, ms, ms);
    run_canary(a);
    return 0;
}

void ul_api_ready_stop(ul_api_t *a) {
    ul_api_ready_t *r = &a->ready;
    if (!r->timer_up) return;
    r->timer_up = 0;
    uv_close((uv_handle_t *)&r->timer, NULL);
}
