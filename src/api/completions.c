/* POST /v1/completions: a raw prompt (a string, an array of strings, an array of token
 * ids, or an array of such arrays: one choice set per prompt, as OpenAI does) -> tokens ->
 * choices (api/gen.c) -> SSE text_completion chunks or one JSON object.
 *
 * On this endpoint special-token text in a prompt ("</s>", "<|im_end|>") is parsed as the
 * control token, as llama-server and vLLM do, so users who build a model's prompt format by
 * hand can send it (`--no-parse-special` turns that off). Chat content never is.
 * Fields honoured here besides the shared ones (params.c): prompt, echo, logprobs (the
 * integer form: tokens, token_logprobs, top_logprobs, text_offset), best_of, suffix
 * (refused unless empty: no model here does fill-in-the-middle). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/gen.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

/* One prompt of the request before tokenization. */
typedef struct cprompt_s {
    const char *text; /* string prompt (in the arena), or NULL */
    size_t len;
    int32_t *ids; /* token-id prompt / tokenized text */
    int n_ids;
} cprompt_t;

typedef struct creq_s {
    cprompt_t *prompts;
    int n;
    int echo;
    uv_work_t work; /* long prompts are tokenized on libuv's thread pool */
} creq_t;

/* ---- output ------------------------------------------------------------------------ */

/* The choice's logprobs object (the tokens since the last chunk), or null. */
static void logprobs_json(const ul_choice_t *ch, ul_buf_t *b) {
    if (ch->g->p.logprobs < 0) {
        ul_gen_add(b, "null", 4);
        return;
    }
    static const char *const keys[4] = {"{\"tokens\":[", "],\"token_logprobs\":[",
                                        "],\"top_logprobs\":[", "],\"text_offset\":["};
    const ul_buf_t *arrays[4] = {&ch->lp, &ch->lp_aux[0], &ch->lp_aux[1], &ch->lp_aux[2]};
    for (int i = 0; i < 4; i++) {
        ul_gen_add(b, keys[i], strlen(keys[i]));
        ul_gen_add(b, arrays[i]->p, arrays[i]->len);
    }
    ul_gen_add(b, "]}", 2);
}

static void chunk(ul_choice_t *ch, const char *text, size_t len, const char *finish_reason) {
    ul_gen_t *g = ch->g;
    ul_buf_t *f = &g->frame;
    f->len = 0;
    ul_gen_json_head(g, f, "text_completion");
    ul_gen_add(f, "{\"text\":", 8);
    ul_gen_json_str(f, text, len);
    ul_gen_printf(f, ",\"index\":%d,\"logprobs\":", ch->index);
    logprobs_json(ch, f);
    ch->lp.len = ch->lp_aux[0].len = ch->lp_aux[1].len = ch->lp_aux[2].len = 0;
    ch->n_lp = 0;
    if (finish_reason)
        ul_gen_printf(f, ",\"finish_reason\":\"%s\"}]}", finish_reason);
    else
        ul_gen_add(f, ",\"finish_reason\":null}]}", 24);
    ul_gen_send(g, finish_reason ? NULL : ch);
}

static void on_text(ul_choice_t *ch, const char *s, size_t n) {
    if (ch->g->p.stream)
        chunk(ch, s, n, NULL);
    else
        ul_gen_add(&ch->out, s, n);
}

static void on_end(ul_choice_t *ch, const char *finish_reason) {
    if (ch->g->p.stream) chunk(ch, "", 0, finish_reason);
}

/* One token: its text, logprob, the top candidates as {text: logprob}, its offset. */
static void on_logprob(ul_choice_t *ch, int32_t tok, const ul_token_lp_t *lp) {
    ul_gen_t *g = ch->g;
    char t[256];
    int n = ul_gen_token_text(g, tok, t, sizeof t);
    if (n < 0) n = 0;
    const char *sep = ch->n_lp ? "," : "";
    ul_gen_add(&ch->lp, sep, strlen(sep));
    ul_gen_json_str(&ch->lp, t, (size_t)n);
    ul_gen_printf(&ch->lp_aux[0], "%s%.9g", sep, lp->logprob);
    ul_gen_printf(&ch->lp_aux[1], "%s{", sep);
    for (int i = 0; i < lp->n_top; i++) {
        char tt[256];
        int m = ul_gen_token_text(g, lp->top_ids[i], tt, sizeof tt);
        if (i) ul_gen_add(&ch->lp_aux[1], ",", 1);
        ul_gen_json_str(&ch->lp_aux[1], tt, m > 0 ? (size_t)m : 0);
        ul_gen_printf(&ch->lp_aux[1], ":%.9g", lp->top_logprobs[i]);
    }
    ul_gen_add(&ch->lp_aux[1], "}", 1);
    ul_gen_printf(&ch->lp_aux[2], "%s%zu", sep, ch->text_off);
    ch->text_off += (size_t)n;
    ch->n_lp++;
}

/* best_of: the n choices of each prompt with the highest mean log-probability per token. */
static int better(const ul_choice_t *a, const ul_choice_t *b) {
    double ma = a->n_gen ? a->sum_logprob / a->n_gen : 0,
           mb = b->n_gen ? b->sum_logprob / b->n_gen : 0;
    return ma > mb;
}

static void pick(ul_gen_t *g, int prompt, ul_choice_t **out) {
    int bo = g->p.best_of, n = g->p.n;
    ul_choice_t *c = &g->choices[prompt * bo];
    for (int i = 0; i < n; i++) out[i] = NULL;
    for (int j = 0; j < bo; j++) {
        ul_choice_t *x = &c[j];
        for (int i = 0; i < n; i++) {
            if (!out[i] || better(x, out[i])) {
                for (int k = n - 1; k > i; k--) out[k] = out[k - 1];
                out[i] = x;
                break;
            }
        }
    }
}

static void on_answer(ul_gen_t *g) {
    ul_buf_t b = {0};
    ul_gen_json_head(g, &b, "text_completion");
    ul_choice_t *best[UL_API_MAX_CHOICES];
    for (int k = 0; k < g->n_prompts; k++) {
        pick(g, k, best);
        for (int i = 0; i < g->p.n; i++) {
            ul_choice_t *ch = best[i];
            if (k || i) ul_gen_add(&b, ",", 1);
            ul_gen_add(&b, "{\"text\":", 8);
            ul_gen_json_str(&b, ch->out.p ? ch->out.p : "", ch->out.len);
            ul_gen_printf(&b, ",\"index\":%d,\"logprobs\":", k * g->p.n + i);
            logprobs_json(ch, &b);
            ul_gen_printf(&b, ",\"finish_reason\":\"%s\"}", ch->finish_reason);
        }
    }
    ul_api_timing_answer(g);
    ul_gen_respond(g, &b);
}

static const ul_gen_ops_t ops = {
    .text = on_text, .end = on_end, .answer = on_answer, .logprob = on_logprob};

/* ---- request ----------------------------------------------------------------------- */

static const char *const known[] = {"prompt", "echo", "suffix", "best_of", NULL};

static int is_id_array(const cJSON *a) {
    if (!cJSON_IsArray(a) || !cJSON_GetArraySize(a)) return 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, a) if (!cJSON_IsNumber(it)) return 0;
    return 1;
}

static int copy_ids(ul_api_t *a, const cJSON *arr, cprompt_t *p, ul_api_bad_t *bad) {
    int n = cJSON_GetArraySize(arr);
    p->ids = malloc((size_t)n * sizeof *p->ids);
    if (!p->ids) return ul_api_bad(bad, "prompt", "out of memory");
    const cJSON *it;
    cJSON_ArrayForEach(it, arr) {
        double v = it->valuedouble;
        if (!(v >= 0 && v < a->codec.n_vocab) || v != (double)(int32_t)v)
            return ul_api_bad(bad, "prompt", "'prompt' token ids must be integers from 0 to %d",
                              (int)a->codec.n_vocab - 1);
        p->ids[p->n_ids++] = (int32_t)v;
    }
    return 0;
}

/* prompt: "text" | ["text", ...] | [id, ...] | [[id, ...], ...]. */
static int parse_prompts(ul_api_t *a, const cJSON *root, ul_arena_t *ar, creq_t *c, int best_of,
                         ul_api_bad_t *bad) {
    const cJSON *pr = cJSON_GetObjectItemCaseSensitive(root, "prompt");
    if (!pr || cJSON_IsNull(pr)) return ul_api_bad(bad, "prompt", "'prompt' is required");
    int n = cJSON_IsString(pr) || is_id_array(pr) ? 1
            : cJSON_IsArray(pr)                   ? cJSON_GetArraySize(pr)
                                                  : 0;
    if (n < 1)
        return ul_api_bad(bad, "prompt",
                          "'prompt' must be a string, an array of strings, an array of token ids "
                          "or an array of token-id arrays");
    if ((int64_t)n * best_of > UL_API_MAX_CHOICES)
        return ul_api_bad(bad, "prompt", "at most %d choices (prompts x best_of) per request",
                          UL_API_MAX_CHOICES);
    c->prompts = ul_arena_alloc(ar, (size_t)n * sizeof *c->prompts);
    if (!c->prompts) return ul_api_bad(bad, "prompt", "out of memory");
    memset(c->prompts, 0, (size_t)n * sizeof *c->prompts);
    c->n = n;
    if (n == 1 && !cJSON_IsArray(pr)) {
        c->prompts[0].text = pr->valuestring;
        c->prompts[0].len = strlen(pr->valuestring);
        return 0;
    }
    if (is_id_array(pr)) return copy_ids(a, pr, &c->prompts[0], bad);
    int i = 0, strings = cJSON_IsString(pr->child);
    const cJSON *it;
    cJSON_ArrayForEach(it, pr) {
        cprompt_t *p = &c->prompts[i++];
        if (strings && cJSON_IsString(it)) {
            p->text = it->valuestring;
            p->len = strlen(it->valuestring);
        } else if (!strings && is_id_array(it)) {
            int rc = copy_ids(a, it, p, bad);
            if (rc) return rc;
        } else {
            return ul_api_bad(bad, "prompt",
                              "'prompt' arrays hold strings or token-id arrays, not a mix");
        }
    }
    return 0;
}

static int parse_own(const cJSON *root, ul_api_params_t *p, creq_t *c, ul_api_bad_t *bad) {
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(root, "echo");
    if (e && !cJSON_IsNull(e) && !cJSON_IsBool(e))
        return ul_api_bad(bad, "echo", "'echo' must be a boolean");
    c->echo = e && cJSON_IsTrue(e);
    if (c->echo && p->logprobs >= 0)
        return ul_api_bad(bad, "echo",
                          "'echo' together with 'logprobs' (prompt log-probabilities) is not "
                          "supported yet");
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(root, "suffix");
    if (s && !cJSON_IsNull(s) && (!cJSON_IsString(s) || s->valuestring[0]))
        return ul_api_bad(bad, "suffix", "'suffix' (fill-in-the-middle) is not supported yet");
    return 0;
}

/* Tokenizes the text prompts (ids of token-id prompts are already there). */
static void tokenize_all(ul_api_t *a, creq_t *c) {
    for (int i = 0; i < c->n; i++) {
        cprompt_t *p = &c->prompts[i];
        if (p->text)
            p->ids =
                ul_api_tokenize_text(&a->codec, p->text, p->len, NULL, a->parse_special, &p->n_ids);
    }
}

/* Token-id prompts echo their detokenized text. */
static void echo_prompts(ul_gen_t *g, const creq_t *c, const ul_gen_prompt_t *ids) {
    ul_buf_t t = {0};
    for (int i = 0; i < g->n_choices; i++) {
        ul_choice_t *ch = &g->choices[i];
        const cprompt_t *p = &c->prompts[ch->prompt];
        const ul_gen_prompt_t *pi = &ids[ch->prompt];
        t.len = 0;
        if (p->text) {
            ul_gen_add(&t, p->text, p->len);
        } else {
            for (int k = 0; k < pi->n_ids; k++) {
                char piece[256];
                int n = ul_gen_token_text(g, pi->ids[k], piece, sizeof piece);
                if (n > 0) ul_gen_add(&t, piece, (size_t)n);
            }
        }
        if (t.len) on_text(ch, t.p, t.len);
    }
    ul_buf_free(&t);
}

static void start(ul_gen_t *g) {
    creq_t *c = g->ep;
    int n = c->n, echo = c->echo;
    ul_gen_prompt_t pr[UL_API_MAX_CHOICES] = {{0}};
    for (int i = 0; i < n; i++) {
        pr[i] = (ul_gen_prompt_t){c->prompts[i].ids, c->prompts[i].n_ids};
        c->prompts[i].ids = NULL;
    }
    if (g->p.stream) ul_api_timing_stream(g->api, g->req);
    /* On failure g is gone (answered and freed); the scheduler copied the ids. */
    if (ul_gen_start(g, pr) == 0 && echo) echo_prompts(g, c, pr);
    for (int i = 0; i < n; i++) free(pr[i].ids);
}

static void tokenize_work(uv_work_t *w) {
    ul_gen_t *g = w->data;
    tokenize_all(g->api, g->ep);
}

static void tokenized_cb(uv_work_t *w, int status) {
    ul_gen_t *g = w->data;
    creq_t *c = g->ep;
    if (!g->req || status) { /* the client left meanwhile (or libuv cancelled: not expected) */
        for (int i = 0; i < c->n; i++) free(c->prompts[i].ids);
        if (g->req) ul_api_error(g->req, 503, "server_error", NULL, NULL, "tokenization cancelled");
        ul_gen_discard(g);
        return;
    }
    start(g);
}

/* Prompts longer than this are tokenized off the loop thread, so one huge prompt does
 * not stall every other stream. */
#define ASYNC_TOKENIZE_BYTES 4096

int ul_api_completions(ul_http_req_t *req, void *data) {
    ul_api_t *a = data;
    if (ul_api_refuse_draining(a, req)) return 0;
    cJSON *root = cJSON_ParseWithLength(req->body, req->body_len);
    if (!root) {
        a->stats.completions_rejected++;
        return ul_api_error(req, 400, "invalid_request_error", NULL, "invalid_json",
                            "the request body is not valid JSON");
    }
    ul_arena_t ar;
    ul_arena_init(&ar, 1024);
    ul_api_params_t p;
    creq_t c = {0};
    ul_api_bad_t bad = {0};
    int rc = ul_api_params_parse(a, root, UL_GEN_COMPLETION, &ar, known, &p, &bad);
    if (!rc) rc = parse_own(root, &p, &c, &bad);
    if (!rc) rc = parse_prompts(a, root, &ar, &c, p.best_of, &bad);
    ul_gen_t *g = NULL;
    if (!rc && !(g = ul_gen_new(a, req, &p, &ops, c.n, "cmpl-"))) {
        bad = (ul_api_bad_t){.status = 503, .type = "server_error"};
        rc = ul_api_bad(&bad, NULL, "out of memory");
    }
    creq_t *gc = g ? ul_arena_alloc(&g->arena, sizeof *gc) : NULL;
    if (g && !gc) {
        ul_gen_discard(g);
        g = NULL;
        bad = (ul_api_bad_t){.status = 503, .type = "server_error"};
        rc = ul_api_bad(&bad, NULL, "out of memory");
    }
    if (rc) {
        for (int i = 0; i < c.n; i++) free(c.prompts[i].ids);
        ul_api_reject(a, req, &bad);
        ul_arena_free(&ar);
        cJSON_Delete(root);
        return 0;
    }
    /* The prompts move into g's arena: the body and ar die with this handler. */
    *gc = c;
    gc->prompts = ul_arena_alloc(&g->arena, (size_t)c.n * sizeof *gc->prompts);
    size_t text_bytes = 0;
    for (int i = 0; gc->prompts && i < c.n; i++) {
        gc->prompts[i] = c.prompts[i];
        if (c.prompts[i].text) {
            gc->prompts[i].text = ul_arena_strndup(&g->arena, c.prompts[i].text, c.prompts[i].len);
            if (!gc->prompts[i].text) gc->prompts = NULL;
            text_bytes += c.prompts[i].len;
        }
    }
    ul_arena_free(&ar);
    cJSON_Delete(root);
    g->ep = gc;
    if (!gc->prompts) {
        for (int i = 0; i < c.n; i++) free(c.prompts[i].ids);
        ul_api_error(req, 503, "server_error", NULL, NULL, "out of memory");
        ul_gen_discard(g);
        return 0;
    }
    if (text_bytes > ASYNC_TOKENIZE_BYTES && a->server) {
        gc->work.data = g;
        if (uv_queue_work(a->server->loop, &gc->work, tokenize_work, tokenized_cb) == 0) return 0;
    }
    tokenize_all(a, gc);
    start(g);
    return 0;
}
