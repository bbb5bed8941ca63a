/* One request's generation, shared by /v1/completions and /v1/chat/completions: its
 * choices (one scheduler sequence each), their text through the streaming detokenizer and
 * the stop-string matcher, log-probabilities, and the end of the response.
 *
 * Choices: each prompt gets best_of choices; the first is queued with the prompt and the
 * others share its KV pages (ul_sched_add_shared), so n choices prefill the prompt once.
 * Choice i of a prompt samples with seed + i: reproducible with a seed, yet different.
 *
 * Ownership: g is created by the endpoint's handler and freed when its last choice has
 * finished (the scheduler calls on_finish exactly once per queued choice). The HTTP
 * request is held in g->req until the response is complete; when the client goes away
 * first, on_abort forgets it and cancels every choice, whose on_finish(CANCELLED) follow
 * within one step. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/gen.h"
#include "engine/grammar.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

void ul_gen_add(ul_buf_t *b, const char *s, size_t n) { UL_ASSERT(ul_buf_append(b, s, n) == 0); }

void ul_gen_json_str(ul_buf_t *b, const char *s, size_t n) {
    ul_gen_add(b, "\"", 1);
    UL_ASSERT(ul_buf_append_json_str(b, s, n) == 0);
    ul_gen_add(b, "\"", 1);
}

void ul_gen_printf(ul_buf_t *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = ul_buf_vprintf(b, fmt, ap);
    va_end(ap);
    UL_ASSERT(rc == 0);
}

void ul_gen_json_head(ul_gen_t *g, ul_buf_t *b, const char *object) {
    /* the id carries the client's X-Request-Id: any printable ASCII, so escaped */
    ul_gen_add(b, "{\"id\":", 6);
    ul_gen_json_str(b, g->id, strlen(g->id));
    ul_gen_printf(b, ",\"object\":\"%s\",\"created\":%lld,\"model\":", object,
                  (long long)g->created);
    ul_gen_json_str(b, g->api->model_id, strlen(g->api->model_id));
    ul_gen_add(b, ",\"choices\":[", 12);
}

int32_t ul_gen_cached_tokens(const ul_gen_t *g) {
    int32_t cached = 0;
    /* prompt tokens the prefix cache served: once per prompt (its choices share pages) */
    for (int i = 0; i < g->n_choices; i += g->p.best_of) cached += g->choices[i].seq.n_cached;
    return cached;
}

void ul_gen_json_usage(ul_gen_t *g, ul_buf_t *b) {
    int32_t gen = 0, cached = ul_gen_cached_tokens(g);
    for (int i = 0; i < g->n_choices; i++) gen += g->choices[i].n_gen;
    ul_gen_printf(b,
                  "\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,"
                  "\"total_tokens\":%d,\"prompt_tokens_details\":{\"cached_tokens\":%d}}",
                  (int)g->n_prompt_tokens, (int)gen, (int)(g->n_prompt_tokens + gen), (int)cached);
}

void ul_gen_respond(ul_gen_t *g, ul_buf_t *b) {
    ul_gen_add(b, "],", 2);
    ul_gen_json_usage(g, b);
    ul_gen_add(b, "}", 1);
    ul_http_respond_buf(g->req, 200, NULL, b);
    ul_buf_free(b);
}

int32_t *ul_api_tokenize_text(const ul_codec_t *codec, const char *text, size_t len,
                              const uint8_t *plain, int add_special, int parse_special, int *n) {
    int cap = len + 8 < (1u << 30) ? (int)len + 8 : 1 << 30;
    for (int tries = 0; tries < 2; tries++) {
        int32_t *ids = malloc((size_t)cap * sizeof *ids);
        if (!ids) break;
        int rc = codec->tokenize(codec, text, len, plain, add_special, parse_special, ids, cap);
        if (rc >= 0) {
            *n = rc;
            return ids;
        }
        free(ids);
        if (rc == UL_ENOMEM || rc == UL_EINVAL || rc <= -(1 << 30)) {
            *n = rc == UL_EINVAL ? UL_EINVAL : UL_ENOMEM;
            return NULL;
        }
        cap = -rc;
    }
    *n = UL_ENOMEM;
    return NULL;
}

int ul_gen_token_text(ul_gen_t *g, int32_t id, char *out, int cap) {
    const ul_codec_t *c = &g->api->codec;
    return c->token_piece ? c->token_piece(c, id, 1, 0, out, cap) : 0;
}

/* ---- sending ------------------------------------------------------------------------ */

static int may_hold(const ul_api_t *a, const ul_seq_t *q) {
    return ul_pace_may_hold(&a->pace, q, a->sched->stats.steps);
}

int ul_gen_send(ul_gen_t *g, ul_choice_t *ch) { return ul_gen_send_event(g, ch, NULL); }

int ul_gen_send_event(ul_gen_t *g, ul_choice_t *ch, const char *event) {
    if (!g->sse) return UL_ECLOSED;
    /* Output pacing (pace.h): a lone choice may let its chunk wait for a later write. */
    int hold = g->n_choices == 1 && ch && may_hold(g->api, &ch->seq);
    g->held = hold;
    int rc = ul_sse_send_event(g->sse, event, g->frame.p, g->frame.len, hold);
    if (rc == 0 && ul_sse_backpressured(g->sse))
        for (int i = 0; i < g->n_choices; i++)
            if (g->choices[i].added && !g->choices[i].ended)
                ul_sched_set_paused(g->api->sched, &g->choices[i].seq, 1);
    return rc;
}

ul_buf_t *ul_gen_event_head(ul_gen_t *g, const char *type) {
    ul_buf_t *f = &g->frame;
    f->len = 0;
    ul_gen_printf(f, "{\"type\":\"%s\"", type);
    return f;
}

int ul_gen_event_send(ul_gen_t *g, ul_choice_t *ch, const char *type) {
    ul_gen_add(&g->frame, "}", 1);
    return ul_gen_send_event(g, ch, type);
}

void ul_gen_answer_object(ul_gen_t *g, void (*build)(ul_buf_t *b, ul_gen_t *g, int final)) {
    ul_buf_t b = {0};
    build(&b, g, 1);
    ul_api_timing_answer(g);
    ul_http_respond(g->req, 200, NULL, b.p, b.len);
    ul_buf_free(&b);
}

/* Text the client may see now. */
static void deliver(ul_choice_t *ch, const char *text, size_t len) {
    if (!len || !ch->g->req) return;
    ch->g->ops->text(ch, text, len);
}

/* Runs a piece through the stop matcher; 1 when a stop string matched. */
static int emit(ul_choice_t *ch, const char *text, size_t len) {
    if (ch->stop.n == 0) {
        deliver(ch, text, len);
        return 0;
    }
    const char *out;
    size_t out_len;
    int rc = ul_stop_push(&ch->stop, text, len, &out, &out_len);
    UL_ASSERT(rc >= 0);
    if (rc == 1) ch->stop_str = ch->stop.strs[ch->stop.matched];
    deliver(ch, out, out_len);
    return rc;
}

static int on_token(ul_seq_t *q, int32_t tok, const ul_token_lp_t *lp) {
    ul_choice_t *ch = (ul_choice_t *)q;
    ul_gen_t *g = ch->g;
    const ul_codec_t *codec = &g->api->codec;
    ch->n_gen++;
    ch->sum_logprob += lp->logprob;
    g->api->stats.completion_tokens++;
    if (!g->req) return 0; /* answered or client gone: the cancel is on its way */
    if (g->p.logprobs >= 0 && g->ops->logprob) g->ops->logprob(ch, tok, lp);
    char piece[256];
    int n = codec->piece(codec, &ch->detok, tok, piece, sizeof piece);
    if (n < 0) { /* a piece longer than 256 bytes is not a real token; keep going */
        UL_LOG_WARN("seq=%llu token %d: piece does not fit", (unsigned long long)q->id, tok);
        return 0;
    }
    ch->stopped = emit(ch, piece, (size_t)n);
    /* A held chunk leaves by this step at the latest when this token sent nothing (text
     * held back for UTF-8 or a possible stop string): holding is bounded in steps. */
    if (g->held && !ch->stopped && !may_hold(g->api, q)) {
        ul_sse_flush(g->sse);
        g->held = 0;
    }
    return ch->stopped;
}

/* ---- the end ------------------------------------------------------------------------ */

static void gen_free(ul_gen_t *g) {
    for (int i = 0; i < g->n_choices; i++) {
        ul_choice_t *ch = &g->choices[i];
        if (ch->filter) ul_gfilter_free(ch->filter);
        if (g->ops->free_choice) g->ops->free_choice(ch);
        ul_stop_free(&ch->stop);
        ul_buf_free(&ch->out);
        ul_buf_free(&ch->lp);
        for (int k = 0; k < 3; k++) ul_buf_free(&ch->lp_aux[k]);
    }
    ul_buf_free(&g->frame);
    if (g->p.grammar) ul_grammar_unref(g->p.grammar);
    ul_arena_free(&g->arena);
    free(g);
}

static void answer_error(ul_gen_t *g, int status, const char *type, const char *msg) {
    if (!g->sse) {
        ul_api_error(g->req, status, type, NULL, NULL, msg);
        return;
    }
    /* Headers are out already: an error event, then end without [DONE]. */
    if (g->ops->stream_error && g->ops->stream_error(g, status, type, msg)) {
        ul_sse_end(g->sse);
        return;
    }
    ul_buf_t *f = &g->frame;
    f->len = 0;
    UL_ASSERT(ul_buf_error_body(f, type, NULL, NULL, msg) == 0);
    ul_sse_send(g->sse, f->p, f->len);
    ul_sse_end(g->sse);
}

/* Text held back for undecided UTF-8 or stop strings is decided now. */
static void flush_choice(ul_gen_t *g, ul_choice_t *ch) {
    if (ch->stopped) return;
    char tail[64];
    int n = g->api->codec.flush(&g->api->codec, &ch->detok, tail, sizeof tail);
    if (n > 0) ch->stopped = emit(ch, tail, (size_t)n);
    if (!ch->stopped && ch->stop.n) {
        const char *out;
        size_t len;
        ul_stop_flush(&ch->stop, &out, &len);
        deliver(ch, out, len);
    }
}

static void finish_all(ul_gen_t *g) {
    ul_api_t *a = g->api;
    if (!g->req) {
        a->stats.completions_cancelled++;
    } else if (g->failed) {
        answer_error(g, g->fail_status, "server_error", g->fail_msg);
    } else if (g->sse && g->ops->stream_end && g->ops->stream_end(g)) {
        /* the endpoint ended its stream */
    } else if (g->sse) {
        if (g->p.include_usage) {
            ul_buf_t *f = &g->frame;
            f->len = 0;
            ul_gen_json_head(g, f,
                             g->kind == UL_GEN_CHAT ? "chat.completion.chunk" : "text_completion");
            ul_gen_add(f, "],", 2);
            ul_gen_json_usage(g, f);
            ul_gen_add(f, "}", 1);
            ul_sse_send(g->sse, f->p, f->len);
        }
        ul_sse_done(g->sse);
    } else {
        g->ops->answer(g);
    }
    gen_free(g);
}

static void on_finish(ul_seq_t *q, ul_finish_t reason, int status) {
    ul_choice_t *ch = (ul_choice_t *)q;
    ul_gen_t *g = ch->g;
    ul_api_t *a = g->api;
    ch->ended = 1;
    a->stats.active_sequences--;
    if (g->shared) ul_api_share_del(&a->share, g->client, UL_API_SHARE_SEQS, 1);
    if (g->req && !g->failed) {
        if (reason == UL_FINISH_STOP || reason == UL_FINISH_LENGTH ||
            reason == UL_FINISH_DEADLINE) {
            flush_choice(g, ch);
            ch->finish_reason = ul_finish_name(reason);
            g->ops->end(ch, ch->finish_reason);
        } else if (reason == UL_FINISH_CANCELLED) {
            g->failed = 1, g->fail_status = 503, g->fail_msg = "the server is shutting down";
        } else {
            g->failed = 1, g->fail_status = 500;
            char msg[128];
            snprintf(msg, sizeof msg, "generation failed: %s", ul_strerror(status));
            g->fail_msg = ul_arena_strndup(&g->arena, msg, strlen(msg));
            if (!g->fail_msg) g->fail_msg = "generation failed";
        }
    }
    if (--g->n_live > 0) return;
    if (g->p.stream) a->stats.active_streams--;
    finish_all(g);
}

static void on_abort(ul_http_req_t *req, void *data, int reason) {
    ul_gen_t *g = data;
    UL_LOG_DEBUG("conn=%llu req=%llu client gone (%s): cancelling %d choices",
                 (unsigned long long)req->conn_id, (unsigned long long)req->req_id,
                 ul_err_name(reason), g->n_live);
    g->req = NULL;
    g->sse = NULL;
    for (int i = 0; i < g->n_choices; i++)
        if (g->choices[i].added && !g->choices[i].ended)
            ul_sched_cancel(g->api->sched, &g->choices[i].seq);
}

static void on_drain(ul_http_req_t *req, void *data) {
    ul_gen_t *g = data;
    for (int i = 0; i < g->n_choices; i++)
        if (g->choices[i].added && !g->choices[i].ended)
            ul_sched_set_paused(g->api->sched, &g->choices[i].seq, 0);
}

/* ---- start -------------------------------------------------------------------------- */

ul_gen_t *ul_gen_new(ul_api_t *a, ul_http_req_t *req, const ul_api_params_t *p,
                     const ul_gen_ops_t *ops, int n_prompts, const char *id_prefix) {
    ul_gen_t *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    ul_arena_init(&g->arena, 4096);
    g->api = a;
    g->req = req;
    g->ops = ops;
    g->kind = p->kind;
    g->p = *p;
    g->p.grammar = NULL;  /* referenced below, once g can be freed */
    g->p.grammar_ref = 0; /* g's reference is its own; p's stays p's */
    g->created = (int64_t)time(NULL);
    /* without a seed each request samples differently, as OpenAI's do */
    if (!p->seed_given)
        g->p.sampling.seed = ((uint64_t)g->created * 0x9e3779b97f4a7c15ULL) ^ ++a->next_cmpl;
    g->n_prompts = n_prompts;
    g->n_answer = n_prompts * p->n;
    snprintf(g->id, sizeof g->id, "%s%s", id_prefix, ul_http_req_id_str(req));
    int n_choices = n_prompts * p->best_of;
    g->choices = ul_arena_alloc(&g->arena, (size_t)n_choices * sizeof *g->choices);
    if (!g->choices) goto fail;
    memset(g->choices, 0, (size_t)n_choices * sizeof *g->choices);
    g->n_choices = n_choices;
    /* Stop strings and logit biases must outlive the request body. */
    for (int i = 0; i < p->n_stop; i++)
        if (!(g->p.stop[i] = ul_arena_strndup(&g->arena, p->stop[i], strlen(p->stop[i]))))
            goto fail;
    if (p->n_bias) {
        g->p.bias = ul_arena_alloc(&g->arena, (size_t)p->n_bias * sizeof *p->bias);
        if (!g->p.bias) goto fail;
        memcpy(g->p.bias, p->bias, (size_t)p->n_bias * sizeof *p->bias);
        g->p.sampling.logit_bias = g->p.bias;
    }
    g->p.user = p->user ? ul_arena_strndup(&g->arena, p->user, strlen(p->user)) : NULL;
    if (p->grammar) { /* shared by the choices; released with g */
        ul_grammar_ref(p->grammar);
        g->p.grammar = p->grammar;
    }
    for (int i = 0; i < g->n_choices; i++) {
        ul_choice_t *ch = &g->choices[i];
        ch->g = g;
        ch->index = i;
        ch->prompt = i / p->best_of;
        ch->seq.sampling = g->p.sampling;
        ch->seq.sampling.seed = g->p.sampling.seed + (uint64_t)(i % p->best_of);
        if (p->grammar) {
            ul_gfilter_t *f = ul_arena_alloc(&g->arena, sizeof *f);
            if (!f) goto fail;
            memset(f, 0, sizeof *f);
            ch->filter = f;
            if (p->grammar_trigger ? ul_gfilter_init_lazy(f, p->grammar, p->grammar_trigger)
                                   : ul_gfilter_init(f, p->grammar))
                goto fail;
            ch->seq.sampling.filter = &f->base;
        }
        ch->seq.ignore_eos = p->ignore_eos;
        ch->seq.on_token = on_token;
        ch->seq.on_finish = on_finish;
        ch->seq.data = ch;
        if (a->codec.detok_init) a->codec.detok_init(&a->codec, &ch->detok);
        ul_stop_init(&ch->stop, g->p.stop, g->p.n_stop);
    }
    ul_http_req_set_cbs(req, &(ul_http_req_cbs_t){.on_abort = on_abort, .on_drain = on_drain}, g);
    return g;
fail:
    gen_free(g);
    return NULL;
}

void ul_gen_discard(ul_gen_t *g) { gen_free(g); }

static int reject_add(ul_gen_t *g, int rc, int n_prompt) {
    ul_api_t *a = g->api;
    ul_http_req_t *req = g->req;
    ul_api_bad_t bad = {.param = "prompt"};
    switch (rc) {
    case UL_E2BIG:
        bad.code = "context_length_exceeded";
        snprintf(bad.msg, sizeof bad.msg,
                 "the prompt is %d tokens; this model's context holds %d tokens", n_prompt,
                 a->sched->backend->n_ctx);
        break;
    case UL_EFULL:
        ul_http_resp_header(req, "Retry-After", "1");
        bad = (ul_api_bad_t){.status = 503, .type = "server_error", .code = "server_busy"};
        snprintf(bad.msg, sizeof bad.msg, "too many requests in flight; retry later");
        break;
    case UL_EINVAL:
        snprintf(bad.msg, sizeof bad.msg, "the prompt has no tokens");
        break;
    default:
        ul_http_resp_header(req, "Retry-After", "1");
        bad = (ul_api_bad_t){.status = 503, .type = "server_error"};
        snprintf(bad.msg, sizeof bad.msg, "out of memory");
    }
    return ul_api_reject(a, req, &bad);
}

/* max_tokens for a prompt of n tokens: as asked when prompt + max_tokens fits the context
 * (else a 400, or the rest of the context with --truncate-max-tokens); when not asked, the
 * operator's default, else OpenAI's (16 for completions, the rest of the context for
 * chat), cut to the context. Returns 0 when it fits the context at all. */
static int32_t max_tokens_for(ul_gen_t *g, int32_t n, ul_api_bad_t *bad) {
    ul_api_t *a = g->api;
    int32_t ctx = a->sched->backend->n_ctx, room = ctx - n;
    if (room < 1) {
        bad->code = "context_length_exceeded";
        ul_api_bad(bad, g->kind == UL_GEN_CHAT ? "messages" : "prompt",
                   "the prompt is %d tokens; this model's context holds %d tokens", (int)n,
                   (int)ctx);
        return 0;
    }
    int32_t want = g->p.max_tokens;
    if (want && want > room && !a->truncate_max_tokens) {
        bad->code = "context_length_exceeded";
        ul_api_bad(bad, g->p.max_tokens_name,
                   "this model's context holds %d tokens; the prompt is %d and %d more were "
                   "asked for (at most %d)",
                   (int)ctx, (int)n, (int)want, (int)room);
        return 0;
    }
    if (!want)
        want = a->default_max_tokens          ? a->default_max_tokens
               : g->kind == UL_GEN_COMPLETION ? 16
                                              : room;
    return want < room ? want : room;
}

/* Queues the choices of prompt k. */
static int add_prompt(ul_gen_t *g, int k, const ul_gen_prompt_t *pr, int32_t max_tokens) {
    ul_sched_t *s = g->api->sched;
    ul_choice_t *first = &g->choices[k * g->p.best_of];
    for (int i = 0; i < g->p.best_of; i++) {
        ul_choice_t *ch = first + i;
        ch->seq.max_tokens = max_tokens;
        ch->seq.deadline_ns = g->deadline_ns;
        int rc = i == 0 ? ul_sched_add(s, &ch->seq, pr->ids, pr->n_ids)
                        : ul_sched_add_shared(s, &ch->seq, pr->ids, pr->n_ids, &first->seq);
        if (rc) return rc;
        ch->added = 1;
        g->n_live++;
        g->api->stats.active_sequences++;
    }
    return 0;
}

/* The request's deadline: "timeout" in the body, else the X-Request-Timeout header. */
static int set_deadline(ul_gen_t *g) {
    double t = g->p.timeout_s;
    const ul_http_header_t *h = ul_http_req_header(g->req, "X-Request-Timeout");
    if (!t && h) {
        char v[32], *end;
        snprintf(v, sizeof v, "%.*s", (int)(h->value_len < 31 ? h->value_len : 31), h->value);
        t = strtod(v, &end);
        if (end == v || *end || !(t > 0 && t <= 86400)) {
            ul_api_bad_t bad = {0};
            ul_api_bad(&bad, "X-Request-Timeout",
                       "the X-Request-Timeout header must be seconds in (0, 86400]");
            ul_api_reject(g->api, g->req, &bad);
            return UL_EINVAL;
        }
    }
    g->deadline_ns = t > 0 ? uv_hrtime() + (uint64_t)(t * 1e9) : 0;
    return 0;
}

/* Admission: 429 with an honest Retry-After when the queue is over --max-queue or the
 * predicted wait over --max-queue-wait-s. */
static int admit(ul_gen_t *g, const ul_gen_prompt_t *prompts) {
    ul_api_t *a = g->api;
    if (!a->max_queue && !(a->max_queue_wait_s > 0)) return 0;
    int32_t n = 0;
    for (int k = 0; k < g->n_prompts; k++) n += prompts[k].n_ids;
    double wait = ul_sched_predict_wait_s(a->sched, n);
    int over_queue = a->max_queue && a->sched->n_waiting + g->n_choices > a->max_queue;
    int over_wait = a->max_queue_wait_s > 0 && wait > a->max_queue_wait_s;
    if (!over_queue && !over_wait) return 0;
    char ra[32];
    long secs = (long)ceil(wait);
    snprintf(ra, sizeof ra, "%ld", secs < 1 ? 1 : secs);
    ul_http_resp_header(g->req, "Retry-After", ra);
    ul_api_bad_t bad = {.status = 429, .type = "rate_limit_error", .code = "queue_full"};
    if (over_queue)
        snprintf(bad.msg, sizeof bad.msg,
                 "%d requests are waiting (the server takes %d); predicted wait %.1f s",
                 (int)a->sched->n_waiting, (int)a->max_queue, wait);
    else
        snprintf(bad.msg, sizeof bad.msg,
                 "%d requests are waiting; predicted wait %.1f s is over the server's limit "
                 "(%.1f s)",
                 (int)a->sched->n_waiting, wait, a->max_queue_wait_s);
    a->stats.completions_overloaded++;
    UL_LOG_DEBUG("conn=%llu req=%llu 429: waiting=%d predicted wait %.2f s",
                 (unsigned long long)g->req->conn_id, (unsigned long long)g->req->req_id,
                 (int)a->sched->n_waiting, wait);
    ul_api_reject(a, g->req, &bad);
    return UL_EFULL;
}

/* Fair share (--max-seqs-per-client): 429 when the request's choices would take its client
 * over its share of the sequences in flight. */
static int share(ul_gen_t *g) {
    ul_api_t *a = g->api;
    g->client = ul_api_client_of(a, g->req);
    int rc = ul_api_share_add(&a->share, g->client, UL_API_SHARE_SEQS, g->n_choices,
                              a->max_seqs_per_client);
    if (rc == 0) {
        g->shared = 1;
        return 0;
    }
    if (rc != UL_EFULL) return 0; /* no memory for the table: not a reason to refuse */
    int32_t have = ul_api_share_get(&a->share, g->client, UL_API_SHARE_SEQS);
    ul_http_resp_header(g->req, "Retry-After", "1");
    ul_api_bad_t bad = {.status = 429, .type = "rate_limit_error", .code = "too_many_sequences"};
    snprintf(bad.msg, sizeof bad.msg,
             "this request's %d choice(s) would take this client over its %d sequences in "
             "flight (%d running); retry when some finish",
             g->n_choices, (int)a->max_seqs_per_client, (int)have);
    a->seqs_refused++;
    ul_api_reject(a, g->req, &bad);
    return 1;
}

int ul_gen_start(ul_gen_t *g, const ul_gen_prompt_t *prompts) {
    ul_api_t *a = g->api;
    int32_t max_tokens[UL_API_MAX_CHOICES];
    ul_api_bad_t bad = {0};
    int arc = set_deadline(g);
    if (!arc) arc = admit(g, prompts);
    if (arc) {
        gen_free(g);
        return arc;
    }
    for (int k = 0; k < g->n_prompts; k++) {
        int rc = prompts[k].n_ids;
        if (rc > 0 && !(max_tokens[k] = max_tokens_for(g, prompts[k].n_ids, &bad))) {
            ul_api_reject(a, g->req, &bad);
            gen_free(g);
            return UL_EINVAL;
        }
        if (rc <= 0) {
            reject_add(g, rc ? rc : UL_EINVAL, 0);
            gen_free(g);
            return rc ? rc : UL_EINVAL;
        }
    }
    if (share(g)) {
        gen_free(g);
        return UL_EFULL;
    }
    int rc = 0, k;
    for (k = 0; k < g->n_prompts && !rc; k++) {
        rc = add_prompt(g, k, &prompts[k], max_tokens[k]);
        if (!rc) g->n_prompt_tokens += prompts[k].n_ids;
    }
    if (rc) {
        /* the choices queued give their share back in on_finish, the others now */
        if (g->shared)
            ul_api_share_del(&a->share, g->client, UL_API_SHARE_SEQS, g->n_choices - g->n_live);
        g->shared = g->n_live > 0 && g->shared;
        reject_add(g, rc, prompts[k - 1].n_ids);
        if (g->n_live == 0) {
            gen_free(g);
            return rc;
        }
        /* Some choices are queued: cancel them; the last on_finish frees g. */
        g->req = NULL;
        for (int i = 0; i < g->n_choices; i++)
            if (g->choices[i].added) ul_sched_cancel(a->sched, &g->choices[i].seq);
        return rc;
    }
    a->stats.completions_total++;
    a->stats.prompt_tokens += (uint64_t)g->n_prompt_tokens;
    if (g->p.user && ul_log_get_level() <= UL_LOG_LEVEL_DEBUG) {
        char id[2 * sizeof g->id + 8], user[200];
        UL_LOG_DEBUG("conn=%llu req=%llu id=%s user=%s", (unsigned long long)g->req->conn_id,
                     (unsigned long long)g->req->req_id,
                     ul_log_field(g->id, strlen(g->id), id, sizeof id),
                     ul_log_field(g->p.user, strlen(g->p.user), user, sizeof user));
    }
    if (g->p.stream) {
        a->stats.active_streams++;
        rc = ul_sse_start(g->req, &g->sse);
        /* On failure the connection is going away: on_abort follows and cancels. */
        if (rc)
            UL_LOG_DEBUG("conn=%llu sse start: %s", (unsigned long long)g->req->conn_id,
                         ul_strerror(rc));
    }
    return 0;
}
