/* Embeddings (issue 26): OpenAI's POST /v1/embeddings and llama-server's POST /embedding.
 *   {"input": "text" | ["text", ...] | [ids] | [[ids], ...], "model", "encoding_format":
 *    "float"|"base64", "dimensions"} -> {"object":"list","data":[{"object":"embedding",
 *    "index","embedding"}],"model","usage":{"prompt_tokens","total_tokens"}}
 *   /embedding: the same inputs as "content" (or "input") -> [{"index","embedding":[[...]]}]
 * Each input is one scheduler sequence that wants its pooled hidden state instead of a token
 * (sched.h, ul_seq_t.embd): batched with everything else, prefilled whole in one step, its
 * KV pages freed right after. Vectors are L2-normalised, as llama-server's (embd_normalize 2).
 * Refused with a 400 naming the field: an empty input, a token id outside the vocabulary, an
 * input over what one step computes (min(context - 1, --max-batch-tokens) tokens),
 * "dimensions" other than the model's size (no model here is trained to be cut), and a
 * model without pooling (pooling_type none: start the server with --pooling).
 * POST /v1/rerank (rerank.c parses and answers it) runs here too: one sequence per document.
 *
 * Parsing and tokenizing grow with the body: bodies over UL_API_JOB_BYTES are parsed on a
 * pool thread (job.c), like the completions endpoints; the answer is written on the loop. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/embed.h"
#include "base/free_all.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

/* ---- parsing (runs on a job's thread for large bodies: no net or sched state) ---------- */

/* A 400 naming input i (or the whole input, i < 0; a single input is the whole input). */
static int bad_input(ul_embed_req_t *e, int i, const char *msg) {
    if (i >= 0 && e->n > 1)
        snprintf(e->bad.pbuf, sizeof e->bad.pbuf, "%s[%d]", e->input_name, i);
    else
        snprintf(e->bad.pbuf, sizeof e->bad.pbuf, "%s", e->input_name);
    return ul_api_bad(&e->bad, e->bad.pbuf, "%s", msg);
}

/* Input i's token ids from a JSON array of integers. */
static int take_ids(ul_embed_req_t *e, int i, const cJSON *arr) {
    ul_embed_input_t *in = &e->in[i];
    int n = cJSON_GetArraySize(arr);
    if (n == 0) return bad_input(e, i, "the input is empty");
    in->ids = malloc((size_t)n * sizeof *in->ids);
    if (!in->ids) return UL_ENOMEM;
    const cJSON *it;
    cJSON_ArrayForEach(it, arr) {
        double v = cJSON_IsNumber(it) ? it->valuedouble : -1;
        if (v < 0 || v >= e->n_vocab || v != (double)(int32_t)v)
            return bad_input(e, i, "a token array must hold token ids of this model's vocabulary");
        in->ids[in->n++] = (int32_t)v;
    }
    return 0;
}

static int take_text(ul_embed_req_t *e, int i, const cJSON *s) {
    ul_embed_input_t *in = &e->in[i];
    int n;
    in->ids = ul_api_tokenize_text(e->codec, s->valuestring, strlen(s->valuestring), NULL, 1,
                                   e->parse_special, &n);
    if (!in->ids)
        return n == UL_ENOMEM ? UL_ENOMEM : bad_input(e, i, "the input cannot be tokenized");
    in->n = n;
    if (n == 0) return bad_input(e, i, "the input is empty");
    return 0;
}

/* 1 when arr is a non-empty array of numbers only (one tokenized input). */
static int is_id_array(const cJSON *arr) {
    const cJSON *it;
    int any = 0;
    cJSON_ArrayForEach(it, arr) {
        if (!cJSON_IsNumber(it)) return 0;
        any = 1;
    }
    return any;
}

static int parse_inputs(ul_embed_req_t *e, const cJSON *input) {
    if (cJSON_IsString(input) || is_id_array(input)) {
        e->n = 1;
    } else if (cJSON_IsArray(input)) {
        e->n = cJSON_GetArraySize(input);
        if (e->n == 0) return bad_input(e, -1, "the input is an empty array");
        if (e->n > UL_EMBED_MAX_INPUTS)
            return ul_api_bad(&e->bad, e->input_name, "at most %d inputs in one request",
                              UL_EMBED_MAX_INPUTS);
    } else {
        return bad_input(e, -1,
                         "the input must be a string, an array of strings, an array of token "
                         "ids or an array of arrays of token ids");
    }
    e->in = calloc((size_t)e->n, sizeof *e->in);
    if (!e->in) return UL_ENOMEM;
    if (e->n == 1 && !cJSON_IsArray(input)) return take_text(e, 0, input);
    if (is_id_array(input)) return take_ids(e, 0, input);
    int i = 0, rc = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, input) {
        if (cJSON_IsString(it))
            rc = take_text(e, i, it);
        else if (cJSON_IsArray(it))
            rc = take_ids(e, i, it);
        else
            rc = bad_input(e, i, "each input must be a string or an array of token ids");
        if (rc) return rc;
        i++;
    }
    return 0;
}

static int parse_format(ul_embed_req_t *e, const cJSON *root) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, "encoding_format");
    if (!f || cJSON_IsNull(f)) return 0;
    if (cJSON_IsString(f) && !strcmp(f->valuestring, "float")) return 0;
    if (cJSON_IsString(f) && !strcmp(f->valuestring, "base64")) {
        e->base64 = 1;
        return 0;
    }
    return ul_api_bad(&e->bad, "encoding_format", "'encoding_format' must be %s",
                      "\"float\" or \"base64\"");
}

/* "dimensions": the model's own size is accepted (nothing to cut), any other refused. */
static int parse_dimensions(ul_embed_req_t *e, const cJSON *root) {
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(root, "dimensions");
    if (!d || cJSON_IsNull(d)) return 0;
    if (cJSON_IsNumber(d) && d->valuedouble == (double)e->n_embd) return 0;
    return ul_api_bad(&e->bad, "dimensions",
                      "'dimensions' is not supported by this model: its embeddings have %d "
                      "dimensions and it is not trained to be shortened",
                      (int)e->n_embd);
}

static int parse_model(ul_embed_req_t *e, const cJSON *root) {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!m || cJSON_IsNull(m)) return 0;
    if (!cJSON_IsString(m)) return ul_api_bad(&e->bad, "model", "'model' must be a string");
    if (ul_api_model_known(e->a, m->valuestring)) return 0;
    e->bad.status = 404;
    e->bad.code = "model_not_found";
    return ul_api_bad(&e->bad, "model",
                      "The model '%.100s' does not exist; this server serves '%s'", m->valuestring,
                      e->a->model_id);
}

/* Every input fits one step (sched.h: an embedding is prefilled whole). */
static int check_lengths(ul_embed_req_t *e) {
    for (int i = 0; i < e->n; i++) {
        e->n_tokens += e->in[i].n;
        if (e->in[i].n <= e->max_len) continue;
        e->bad.code = "context_length_exceeded";
        snprintf(e->bad.pbuf, sizeof e->bad.pbuf, "%s[%d]", e->input_name, i);
        return ul_api_bad(&e->bad, e->n > 1 ? e->bad.pbuf : e->input_name,
                          "input %d is %d tokens; this server embeds at most %d tokens per "
                          "input (the context, and --max-batch-tokens)",
                          i, e->in[i].n, e->max_len);
    }
    return 0;
}

static int parse_embed(ul_embed_req_t *e, const cJSON *root) {
    const cJSON *input = cJSON_GetObjectItemCaseSensitive(root, "input");
    if (!input && !e->oai) {
        input = cJSON_GetObjectItemCaseSensitive(root, "content");
        if (input) e->input_name = "content";
    }
    if (!input || cJSON_IsNull(input))
        return ul_api_bad(&e->bad, e->input_name, "'%s' is required", e->input_name);
    int rc = parse_model(e, root);
    if (!rc) rc = parse_format(e, root);
    if (!rc) rc = parse_dimensions(e, root);
    if (!rc) rc = parse_inputs(e, input);
    return rc;
}

/* The job's run (or inline): the body into token ids, or e->bad set. */
static void prepare(ul_api_job_t *j) {
    ul_embed_req_t *e = (ul_embed_req_t *)j;
    size_t at;
    int rc = ul_api_body_check(e->body, e->body_len, e->bad.pbuf, sizeof e->bad.pbuf, &at);
    if (rc) {
        e->bad.code = rc == 2 ? "nul_character" : "invalid_utf8";
        ul_api_bad(&e->bad, e->bad.pbuf[0] ? e->bad.pbuf : NULL, "%s",
                   rc == 2 ? "the request contains \\u0000 (a NUL character)"
                           : "the request body is not valid UTF-8");
        e->failed = 1;
        return;
    }
    cJSON *root = cJSON_ParseWithLength(e->body, e->body_len);
    int keep = 0;
    if (!root || !cJSON_IsObject(root)) {
        e->bad.code = "invalid_json";
        rc = ul_api_bad(&e->bad, NULL, "the request body is not a JSON object");
    } else if (e->rerank) {
        rc = parse_model(e, root);
        if (!rc) rc = ul_rerank_parse(e, root, &keep);
    } else {
        rc = parse_embed(e, root);
    }
    if (!rc) rc = check_lengths(e);
    if (rc == UL_ENOMEM) {
        e->bad = (ul_api_bad_t){.status = 503, .type = "server_error"};
        ul_api_bad(&e->bad, NULL, "out of memory");
    }
    e->failed = rc != 0;
    if (keep && !rc)
        e->keep = root; /* the documents' texts, for the answer */
    else
        cJSON_Delete(root);
}

/* ---- the sequences (loop thread) -------------------------------------------------------- */

static void ereq_free(ul_embed_req_t *e) {
    for (int i = 0; e->in && i < e->n; i++) free(e->in[i].ids);
    UL_FREE_ALL(e->in, e->seqs, e->vec, e->owned, e->doc_text);
    cJSON_Delete(e->keep);
    free(e);
}

static int on_token(ul_seq_t *q, int32_t token, const ul_token_lp_t *lp) {
    (void)q, (void)token, (void)lp;
    return 1; /* never called: an embedding samples nothing */
}

/* The last sequence's end: answer (when the client is still there) and free. */
static void finish(ul_embed_req_t *e) {
    ul_api_t *a = e->a;
    ul_http_req_t *req = e->req;
    a->stats.active_sequences -= (uint64_t)e->n_added;
    if (req) {
        ul_http_req_set_cbs(req, NULL, NULL);
        if (e->error)
            ul_api_error(req, 500, "server_error", NULL, NULL, "the backend failed the request");
        else if (ul_embed_answer(e) != 0)
            ul_api_error(req, 503, "server_error", NULL, NULL, "out of memory");
    }
    ereq_free(e);
}

static void on_finish(ul_seq_t *q, ul_finish_t reason, int status) {
    ul_embed_req_t *e = q->data;
    if (reason != UL_FINISH_STOP) {
        e->error = status ? status : UL_ECANCELED;
        if (e->req && reason != UL_FINISH_CANCELLED)
            UL_LOG_ERROR("conn=%llu req=%llu embedding failed: %s %s",
                         (unsigned long long)e->req->conn_id, (unsigned long long)e->req->req_id,
                         ul_finish_name(reason), ul_strerror(status));
    }
    if (--e->n_live == 0) finish(e);
}

static void on_abort(ul_http_req_t *req, void *data, int reason) {
    ul_embed_req_t *e = data;
    (void)req, (void)reason;
    e->req = NULL;
    if (e->n_live == 0) return; /* still in its job: prepared() frees it */
    for (int i = 0; i < e->n_added; i++) ul_sched_cancel(e->a->sched, &e->seqs[i]);
}

static int reject_add(ul_embed_req_t *e, int rc) {
    ul_http_req_t *req = e->req;
    ul_api_bad_t bad = {.status = 503, .type = "server_error", .code = "server_busy"};
    ul_http_resp_header(req, "Retry-After", "1");
    ul_api_bad(&bad, NULL, "%s",
               rc == UL_EFULL ? "too many requests in flight; retry later" : ul_strerror(rc));
    return ul_api_reject(e->a, req, &bad);
}

/* Queues one sequence per input; on a refusal the ones queued are cancelled and the
 * refusal answered once they have finished... or at once when none was queued. */
static void start(ul_embed_req_t *e) {
    ul_api_t *a = e->a;
    const size_t E = (size_t)e->n_embd;
    e->seqs = calloc((size_t)e->n, sizeof *e->seqs);
    e->vec = malloc((size_t)e->n * E * sizeof *e->vec);
    int rc = e->seqs && e->vec ? 0 : UL_ENOMEM;
    for (int i = 0; !rc && i < e->n; i++) {
        ul_seq_t *q = &e->seqs[i];
        q->max_tokens = 1;
        ul_sampling_default(&q->sampling);
        q->on_token = on_token;
        q->on_finish = on_finish;
        q->data = e;
        q->embd = e->vec + (size_t)i * E;
        q->pooling = a->pooling;
        rc = ul_sched_add(a->sched, q, e->in[i].ids, e->in[i].n);
        if (!rc) e->n_added++, e->n_live++;
    }
    a->stats.active_sequences += (uint64_t)e->n_added;
    if (!rc) {
        a->stats.prompt_tokens += (uint64_t)e->n_tokens;
        ul_http_req_set_cbs(e->req, &(ul_http_req_cbs_t){.on_abort = on_abort}, e);
        return;
    }
    reject_add(e, rc);
    e->req = NULL;
    if (e->n_live == 0) {
        a->stats.active_sequences -= (uint64_t)e->n_added;
        ereq_free(e);
        return;
    }
    for (int i = 0; i < e->n_added; i++) ul_sched_cancel(a->sched, &e->seqs[i]);
}

/* On the loop: answers the refusal or queues the sequences. */
static void prepared(ul_api_job_t *j, int status) {
    ul_embed_req_t *e = (ul_embed_req_t *)j;
    if (!e->req) {
        ereq_free(e);
        return;
    }
    ul_http_req_set_cbs(e->req, NULL, NULL);
    if (status || e->failed) {
        if (!e->failed) {
            e->bad = (ul_api_bad_t){.status = 503, .type = "server_error"};
            ul_api_bad(&e->bad, NULL, "the request could not be processed");
        }
        ul_api_reject(e->a, e->req, &e->bad);
        ereq_free(e);
        return;
    }
    start(e);
}

static void on_job_abort(ul_http_req_t *req, void *data, int reason) {
    (void)req, (void)reason;
    ((ul_embed_req_t *)data)->req = NULL;
}

/* Refuses what no input could change: draining, embeddings off (no pooling, a backend
 * without them), reranking off (a model that is not a reranker) or embeddings of a
 * reranker. Returns 1 after answering. */
static int refuse_server(ul_api_t *a, ul_http_req_t *req, int rerank) {
    if (ul_api_refuse_draining(a, req)) return 1;
    ul_api_bad_t bad = {0};
    if (a->sched->backend->n_embd <= 0) {
        bad.status = 501;
        bad.code = "embeddings_not_supported";
        ul_api_bad(&bad, NULL, "the %s backend does not compute %s", a->sched->backend->vt->name,
                   rerank ? "rerank scores" : "embeddings");
    } else if (rerank && (a->pooling != UL_POOL_RANK || !a->rank_ok)) {
        bad.status = 501; /* llama-server: 501, "Start it with `--reranking`" */
        bad.code = "rerank_not_supported";
        if (a->pooling != UL_POOL_RANK)
            ul_api_bad(&bad, NULL,
                       "this server does not rerank: the model is not a reranker (its "
                       "pooling_type is not rank); serve a reranker, or start the server with "
                       "--pooling rank");
        else
            ul_api_bad(&bad, NULL,
                       "this server does not rerank: pooling rank is computed for bert "
                       "rerankers (a classification head on [CLS]) only");
    } else if (rerank) {
        return 0;
    } else if (a->pooling == UL_POOL_RANK) {
        bad.code = "model_is_reranker";
        ul_api_bad(&bad, NULL,
                   "this model is a reranker (pooling rank): it scores documents against a "
                   "query on /v1/rerank and gives no embedding; start the server with "
                   "--pooling mean|cls|last for embeddings of its hidden states");
    } else if (a->pooling < UL_POOL_MEAN || a->pooling > UL_POOL_LAST) {
        bad.code = "pooling_none";
        ul_api_bad(&bad, NULL,
                   "this model has no pooling (pooling_type none or rank), so it gives no "
                   "embedding per input; start the server with --pooling mean|cls|last");
    } else {
        return 0;
    }
    ul_api_reject(a, req, &bad);
    return 1;
}

static int handle(ul_http_req_t *req, ul_api_t *a, int oai, int rerank) {
    if (refuse_server(a, req, rerank)) return 0;
    ul_embed_req_t *e = calloc(1, sizeof *e);
    if (!e) return ul_api_error(req, 503, "server_error", NULL, NULL, "out of memory");
    const ul_backend_t *b = a->sched->backend;
    *e = (ul_embed_req_t){.a = a,
                          .req = req,
                          .oai = oai,
                          .rerank = rerank,
                          .input_name = rerank ? "documents" : "input"};
    e->codec = &a->codec;
    e->n_vocab = a->codec.n_vocab;
    e->n_embd = b->n_embd;
    e->parse_special = a->parse_special;
    e->max_len = b->n_ctx - 1 < a->sched->cfg.max_batch_tokens ? b->n_ctx - 1
                                                               : a->sched->cfg.max_batch_tokens;
    e->job = (ul_api_job_t){.req = &e->req, .run = prepare, .done = prepared};
    if (ul_api_job_inline(a, req, &e->job, req->body_len <= UL_API_JOB_BYTES, &e->body,
                          &e->body_len, &e->owned))
        return 0;
    e->job.charge = 4 * e->body_len; /* body, parse tree and token ids */
    if (ul_api_job_start(a, req, &e->job, on_job_abort, e)) ereq_free(e);
    return 0;
}

int ul_api_embeddings(ul_http_req_t *req, void *data) { return handle(req, data, 1, 0); }
int ul_api_embedding(ul_http_req_t *req, void *data) { return handle(req, data, 0, 0); }
int ul_api_rerank(ul_http_req_t *req, void *data) { return handle(req, data, 1, 1); }
