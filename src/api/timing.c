/* Server-Timing (W3C) on completion responses, for proxies and clients that want to know
 * where a request's time went without scraping /metrics. A non-streaming answer knows it
 * all: queue (arrival at the scheduler -> first step), prefill (first step -> first token)
 * and decode (first token -> last token), over all of the request's choices. A stream's
 * head leaves before the request is scheduled, so it carries only what is known then:
 * setup (request received -> stream start: parsing, chat template, tokenization). The
 * scheduler's predicted wait is left out: it prices a full prefill chunk, so for a short
 * prompt on an idle server it says a second where the wait is a millisecond.
 * Beside it, X-Uvllm-Cached-Tokens: the prompt tokens the prefix cache served (usage's
 * cached_tokens), so a proxy can log whether its routing sent a conversation to the replica
 * holding its prefix (docker/nginx/README.md) without reading bodies. */
#include <stdio.h>

#include "api/gen.h"

static double ms(uint64_t a, uint64_t b) { return b > a ? (double)(b - a) / 1e6 : 0.0; }

void ul_api_timing_answer(ul_gen_t *g) {
    uint64_t add = 0, sched = 0, first = 0, last = 0;
    for (int i = 0; i < g->n_choices; i++) {
        const ul_seq_t *q = &g->choices[i].seq;
        if (!q->t_add_ns) continue;
        if (!add || q->t_add_ns < add) add = q->t_add_ns;
        if (q->t_sched_ns && (!sched || q->t_sched_ns < sched)) sched = q->t_sched_ns;
        if (q->t_first_ns && (!first || q->t_first_ns < first)) first = q->t_first_ns;
        if (q->t_last_ns > last) last = q->t_last_ns;
    }
    if (!add || !g->req) return;
    if (!sched) sched = add;
    if (!first) first = uv_hrtime(); /* no token (eos at once): prefill ran until now */
    if (!last) last = first;
    char v[128];
    snprintf(v, sizeof v, "queue;dur=%.3f, prefill;dur=%.3f, decode;dur=%.3f", ms(add, sched),
             ms(sched, first), ms(first, last));
    ul_http_resp_header(g->req, "Server-Timing", v);
    snprintf(v, sizeof v, "%d", (int)ul_gen_cached_tokens(g));
    ul_http_resp_header(g->req, "X-Uvllm-Cached-Tokens", v);
}

void ul_api_timing_stream(ul_api_t *a, ul_http_req_t *req) {
    char v[64];
    snprintf(v, sizeof v, "setup;dur=%.3f", ms(req->t_start_ns, uv_hrtime()));
    ul_http_resp_header(req, "Server-Timing", v);
}
