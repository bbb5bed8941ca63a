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

/* One prompt of the request. */
typedef struct cprompt_s {
    const char *text; /* string prompt, or (echo) the text of a token-id prompt, or NULL */
    size_t len;
    int32_t *ids; /* token-id prompt / tokenized text (malloc'ed) */
    int n_ids;
} cprompt_t;

/* The request from its body to its tokens: a job (job.c) when the body is large, since
 * parsing, checking and tokenizing all grow with it; answered or handed to a ul_gen_t on
 * the loop afterwards. */
typedef struct creq_s {
    ul_api_job_t job; /* first */
    ul_api_t *a;
    ul_http_req_t *req; /* NULL once the client left */
    char *owned;        /* the body, when taken from the request */
    const char *body;
    size_t body_len;
    cJSON *root;
    ul_arena_t ar; /* the parsed request's strings and tables (params point here) */
    ul_api_params_t p;
    ul_api_bad_t bad;
    int failed;
    cprompt_t *prompts; /* [n], in ar */
    int n;
    int echo;
} creq_t;

/* What the endpoint keeps for a running request (g->ep, in g's arena). */
typedef struct cgen_s {
    cprompt_t *prompts; /* echo texts only */
    int n;
    int echo;
} cgen_t;

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

/* Tokenizes the text prompts (ids of token-id prompts are already there); with echo, a
 * token-id prompt's text is made here too (it grows with the prompt). */
static void tokenize_all(ul_api_t *a, creq_t *c) {
    for (int i = 0; i < c->n; i++) {
        cprompt_t *p = &c->prompts[i];
        if (p->text) {
            p->ids = ul_api_tokenize_text(&a->codec, p->text, p->len, NULL, 1, a->parse_special,
                                          &p->n_ids);
            continue;
        }
        if (!c->echo || !a->codec.token_piece) continue;
        ul_buf_t t = {0};
        for (int k = 0; k < p->n_ids; k++) {
            char piece[256];
            int n = a->codec.token_piece(&a->codec, p->ids[k], 1, 0, piece, sizeof piece);
            if (n > 0 && ul_buf_append(&t, piece, (size_t)n)) break;
        }
        p->text = t.len ? ul_arena_strndup(&c->ar, t.p, t.len) : NULL;
        p->len = p->text ? t.len : 0;
        ul_buf_free(&t);
    }
}

/* The prompts' texts as the answer's first text (echo). */
static void echo_prompts(ul_gen_t *g) {
    const cgen_t *cg = g->ep;
    for (int i = 0; i < g->n_choices; i++) {
        ul_choice_t *ch = &g->choices[i];
        const cprompt_t *p = &cg->prompts[ch->prompt];
        if (p->len) on_text(ch, p->text, p->len);
    }
}

static void start(ul_gen_t *g, creq_t *c) {
    int n = c->n;
    ul_gen_prompt_t pr[UL_API_MAX_CHOICES] = {{0}};
    for (int i = 0; i < n; i++) {
        pr[i] = (ul_gen_prompt_t){c->prompts[i].ids, c->prompts[i].n_ids};
        c->prompts[i].ids = NULL;
    }
    if (g->p.stream) ul_api_timing_stream(g->api, g->req);
    /* On failure g is gone (answered and freed); the scheduler copied the ids. */
    if (ul_gen_start(g, pr) == 0 && c->echo) echo_prompts(g);
    for (int i = 0; i < n; i++) free(pr[i].ids);
}

/* Parse, check and tokenize: off the loop for a job, so it touches only what it owns and
 * the api's immutable parts. */
static void prepare(ul_api_job_t *j) {
    creq_t *c = (creq_t *)j;
    ul_api_t *a = c->a;
    size_t at;
    int bc = ul_api_body_check(c->body, c->body_len, c->bad.pbuf, sizeof c->bad.pbuf, &at);
    if (bc) {
        c->failed = 1;
        c->bad.param = c->bad.pbuf[0] ? c->bad.pbuf : NULL;
        c->bad.code = bc == 2 ? "nul_character" : "invalid_utf8";
        ul_api_bad(&c->bad, c->bad.param,
                   bc == 2 ? "the request contains \\u0000 (a NUL character), which this "
                             "server does not accept"
                           : "the request body is not valid UTF-8 (byte %zu)",
                   at);
        return;
    }
    c->root = cJSON_ParseWithLength(c->body, c->body_len);
    if (!c->root) {
        c->failed = 1;
        c->bad.code = "invalid_json";
        ul_api_bad(&c->bad, NULL, "the request body is not valid JSON");
        return;
    }
    int rc = ul_api_params_parse(a, c->root, UL_GEN_COMPLETION, &c->ar, known, &c->p, &c->bad);
    if (!rc) rc = parse_own(c->root, &c->p, c, &c->bad);
    if (!rc) rc = parse_prompts(a, c->root, &c->ar, c, c->p.best_of, &c->bad);
    if (rc) {
        c->failed = 1;
        return;
    }
    tokenize_all(a, c);
}

static void creq_free(creq_t *c) {
    for (int i = 0; i < c->n; i++) free(c->prompts[i].ids);
    ul_api_params_release(&c->p);
    cJSON_Delete(c->root);
    ul_arena_free(&c->ar);
    free(c->owned);
    free(c);
}

/* The prompts' echo texts into g's arena: the body and the job go with this handler. */
static int keep_echo(ul_gen_t *g, const creq_t *c) {
    cgen_t *cg = ul_arena_alloc(&g->arena, sizeof *cg);
    if (!cg) return UL_ENOMEM;
    *cg = (cgen_t){.n = c->n, .echo = c->echo};
    cg->prompts = ul_arena_alloc(&g->arena, (size_t)c->n * sizeof *cg->prompts);
    if (!cg->prompts) return UL_ENOMEM;
    memset(cg->prompts, 0, (size_t)c->n * sizeof *cg->prompts);
    for (int i = 0; c->echo && i < c->n; i++) {
        if (!c->prompts[i].len) continue;
        cg->prompts[i].text = ul_arena_strndup(&g->arena, c->prompts[i].text, c->prompts[i].len);
        if (!cg->prompts[i].text) return UL_ENOMEM;
        cg->prompts[i].len = c->prompts[i].len;
    }
    g->ep = cg;
    return 0;
}

/* On the loop: answers the refusal or starts the generation. */
static void prepared(ul_api_job_t *j, int status) {
    creq_t *c = (creq_t *)j;
    ul_api_t *a = c->a;
    ul_http_req_t *req = c->req;
    if (!req) {
        creq_free(c);
        return;
    }
    ul_http_req_set_cbs(req, NULL, NULL);
    if (status || c->failed) {
        if (!c->failed) {
            c->bad = (ul_api_bad_t){.status = 503, .type = "server_error"};
            ul_api_bad(&c->bad, NULL, "the request could not be processed");
        }
        ul_api_reject(a, req, &c->bad);
        creq_free(c);
        return;
    }
    ul_gen_t *g = ul_gen_new(a, req, &c->p, &ops, c->n, "cmpl-");
    if (!g || keep_echo(g, c)) {
        if (g) ul_gen_discard(g);
        ul_api_error(req, 503, "server_error", NULL, NULL, "out of memory");
    } else {
        start(g, c);
    }
    creq_free(c);
}

static void on_abort(ul_http_req_t *req, void *data, int reason) {
    creq_t *c = data;
    c->req = NULL;
}

int ul_api_completions(ul_http_req_t *req, void *data) {
    ul_api_t *a = data;
    if (ul_api_refuse_generate(a, req)) return 0;
    creq_t *c = calloc(1, sizeof *c);
    if (!c) return ul_api_error(req, 503, "server_error", NULL, NULL, "out of memory");
    c->a = a;
    c->req = req;
    ul_arena_init(&c->ar, 1024);
    c->job = (ul_api_job_t){.req = &c->req, .run = prepare, .done = prepared};
    int small =
        req->body_len <= UL_API_JOB_BYTES && !ul_api_body_may_constrain(req->body, req->body_len);
    if (ul_api_job_inline(a, req, &c->job, small, &c->body, &c->body_len, &c->owned)) return 0;
    c->job.charge = 4 * c->body_len; /* body, parse tree, prompt texts and token ids */
    if (ul_api_job_start(a, req, &c->job, on_abort, c)) creq_free(c);
    return 0;
}
