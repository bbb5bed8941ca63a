/* Reranking (issue 26), as llama-server's POST /v1/rerank (also /rerank, /v1/reranking,
 * /reranking; Jina's and Cohere's shape):
 *   {"model", "query": "text", "documents": ["text", ...], "top_n", "return_documents"}
 *   -> {"model","object":"list","usage":{"prompt_tokens","total_tokens"},
 *       "results":[{"index","relevance_score"(,"document":{"text"})}]}
 * Each document is one sequence of embed.c's (pooling rank, sched.h's embedding entries):
 * its input is the query and the document, each tokenized without specials (control-token
 * texts stay text, as llama-server's tokenize_input_subprompt), joined as the model's
 * vocabulary says ([CLS] q [SEP] d [SEP] for a converted BERT cross-encoder; the codec's
 * join_pair). The score is what the model's head gives, raw (llama-server answers the
 * logit, no sigmoid). Results are sorted by score, highest first (llama-server's
 * std::sort; equal scores here keep the documents' order), then cut to top_n.
 * return_documents (Jina, Cohere) echoes each document's text; llama-server's Jina shape
 * leaves it out whatever the request says, so false is the default. Refused with a 400
 * naming the field: a missing or non-string query, documents missing, empty, over 2048 or
 * holding a non-string, a top_n that is not a non-negative integer, a query or an input over
 * what one step computes (embed.c), inputs over UL_RERANK_MAX_TOKENS together. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/embed.h"
#include "uvllm/err.h"

/* Tokens of one request's inputs together (each document with its copy of the query): 4 MiB
 * of ids, 2048 documents of 512 tokens (a BERT reranker's context) */
#define UL_RERANK_MAX_TOKENS (1 << 20)

/* ---- parsing (on a job's thread for large bodies: no net or sched state) --------------- */

/* ids of a text without specials; NULL with *n = UL_ENOMEM or UL_EINVAL */
static int32_t *tokenize(const ul_codec_t *c, const char *text, int *n) {
    return ul_api_tokenize_text(c, text, strlen(text), NULL, 0, 0, n);
}

static int bad_doc(ul_embed_req_t *e, int i, const char *msg) {
    snprintf(e->bad.pbuf, sizeof e->bad.pbuf, "documents[%d]", i);
    return ul_api_bad(&e->bad, e->bad.pbuf, "%s", msg);
}

/* Document i's input: the query's ids q[0..nq) and the document's, joined. */
static int take_doc(ul_embed_req_t *e, int i, const int32_t *q, int nq, const char *text) {
    int nd;
    int32_t *d = tokenize(e->codec, text, &nd);
    if (!d) return nd == UL_ENOMEM ? UL_ENOMEM : bad_doc(e, i, "the document cannot be tokenized");
    ul_embed_input_t *in = &e->in[i];
    const int cap = nq + nd + 8; /* every join adds at most 4 specials */
    in->ids = malloc((size_t)cap * sizeof *in->ids);
    int n = in->ids ? 0 : UL_ENOMEM;
    if (in->ids && e->codec->join_pair) {
        n = e->codec->join_pair(e->codec, q, nq, d, nd, in->ids, cap);
    } else if (in->ids) {
        memcpy(in->ids, q, (size_t)nq * sizeof *q);
        memcpy(in->ids + nq, d, (size_t)nd * sizeof *d);
        n = nq + nd;
    }
    free(d);
    if (n < 0) return UL_ENOMEM; /* the join never needs more than cap */
    in->n = n;
    return n == 0 ? bad_doc(e, i, "the query and the document are both empty") : 0;
}

static int parse_top_n(ul_embed_req_t *e, const cJSON *root) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "top_n");
    e->top_n = e->n;
    if (!t || cJSON_IsNull(t)) return 0;
    if (!cJSON_IsNumber(t) || t->valuedouble < 0 || t->valuedouble != floor(t->valuedouble))
        return ul_api_bad(&e->bad, "top_n", "'top_n' must be a non-negative integer");
    if (t->valuedouble < e->n) e->top_n = (int)t->valuedouble;
    return 0;
}

static int parse_documents(ul_embed_req_t *e, const cJSON *docs) {
    if (!docs || cJSON_IsNull(docs))
        return ul_api_bad(&e->bad, "documents", "'documents' is required");
    if (!cJSON_IsArray(docs) || (e->n = cJSON_GetArraySize(docs)) == 0)
        return ul_api_bad(&e->bad, "documents", "'documents' must be a non-empty array of strings");
    if (e->n > UL_EMBED_MAX_INPUTS)
        return ul_api_bad(&e->bad, "documents", "at most %d documents in one request",
                          UL_EMBED_MAX_INPUTS);
    e->in = calloc((size_t)e->n, sizeof *e->in);
    return e->in ? 0 : UL_ENOMEM;
}

int ul_rerank_parse(ul_embed_req_t *e, const void *root_, int *keep_root) {
    const cJSON *root = root_;
    const cJSON *query = cJSON_GetObjectItemCaseSensitive(root, "query");
    if (!query || cJSON_IsNull(query)) return ul_api_bad(&e->bad, "query", "'query' is required");
    if (!cJSON_IsString(query)) return ul_api_bad(&e->bad, "query", "'query' must be a string");
    int rc = parse_documents(e, cJSON_GetObjectItemCaseSensitive(root, "documents"));
    if (!rc) rc = parse_top_n(e, root);
    if (rc) return rc;
    const cJSON *rd = cJSON_GetObjectItemCaseSensitive(root, "return_documents");
    if (rd && !cJSON_IsNull(rd) && !cJSON_IsBool(rd))
        return ul_api_bad(&e->bad, "return_documents", "'return_documents' must be a boolean");
    if (cJSON_IsTrue(rd)) {
        if (!(e->doc_text = calloc((size_t)e->n, sizeof *e->doc_text))) return UL_ENOMEM;
        *keep_root = 1;
    }
    int nq;
    int32_t *q = tokenize(e->codec, query->valuestring, &nq);
    if (!q)
        return nq == UL_ENOMEM ? UL_ENOMEM
                               : ul_api_bad(&e->bad, "query", "the query cannot be tokenized");
    if (nq >= e->max_len) {
        free(q);
        e->bad.code = "context_length_exceeded";
        return ul_api_bad(&e->bad, "query",
                          "the query is %d tokens; this server scores at most %d tokens of "
                          "query and document together (the context, and --max-batch-tokens)",
                          nq, e->max_len);
    }
    /* the query is repeated in every input: stop at the first input too long (embed.c's
     * check_lengths names it) and at UL_RERANK_MAX_TOKENS in all */
    int i = 0;
    int64_t total = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(root, "documents")) {
        rc = cJSON_IsString(it) ? take_doc(e, i, q, nq, it->valuestring)
                                : bad_doc(e, i, "each document must be a string");
        if (rc || e->in[i].n > e->max_len) break;
        if ((total += e->in[i].n) > UL_RERANK_MAX_TOKENS) {
            rc = ul_api_bad(&e->bad, "documents",
                            "the documents, each with the query, come to over %d tokens: send "
                            "fewer in one request",
                            UL_RERANK_MAX_TOKENS);
            break;
        }
        if (e->doc_text) e->doc_text[i] = it->valuestring;
        i++;
    }
    free(q);
    return rc;
}

/* ---- the answer (loop thread) ----------------------------------------------------------- */

typedef struct {
    float score;
    int index;
} ranked_t;

static int by_score(const void *pa, const void *pb) {
    const ranked_t *a = pa, *b = pb;
    if (a->score != b->score) return a->score > b->score ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

static int put_result(ul_embed_req_t *e, ul_buf_t *b, const ranked_t *r, int first) {
    char tmp[96];
    int k = isfinite(r->score)
                ? snprintf(tmp, sizeof tmp, "%s{\"index\":%d,\"relevance_score\":%.9g",
                           first ? "" : ",", r->index, (double)r->score)
                : snprintf(tmp, sizeof tmp, "%s{\"index\":%d,\"relevance_score\":null",
                           first ? "" : ",", r->index);
    int rc = ul_buf_append(b, tmp, (size_t)k);
    if (!rc && e->doc_text) {
        const char *t = e->doc_text[r->index];
        rc = ul_buf_puts(b, ",\"document\":{\"text\":\"");
        if (!rc) rc = ul_buf_append_json_str(b, t, strlen(t));
        if (!rc) rc = ul_buf_puts(b, "\"}");
    }
    return rc ? rc : ul_buf_append(b, "}", 1);
}

int ul_rerank_answer(ul_embed_req_t *e) {
    ranked_t *r = malloc((size_t)e->n * sizeof *r);
    if (!r) return UL_ENOMEM;
    for (int i = 0; i < e->n; i++) r[i] = (ranked_t){e->vec[(size_t)i * (size_t)e->n_embd], i};
    qsort(r, (size_t)e->n, sizeof *r, by_score);
    ul_buf_t b = {0};
    char tmp[160];
    int rc = ul_buf_puts(&b, "{\"model\":\"");
    if (!rc) rc = ul_buf_append_json_str(&b, e->a->model_id, strlen(e->a->model_id));
    snprintf(tmp, sizeof tmp,
             "\",\"object\":\"list\",\"usage\":{\"prompt_tokens\":%lld,\"total_tokens\":%lld},"
             "\"results\":[",
             (long long)e->n_tokens, (long long)e->n_tokens);
    if (!rc) rc = ul_buf_puts(&b, tmp);
    for (int i = 0; i < e->top_n && !rc; i++) rc = put_result(e, &b, &r[i], i == 0);
    if (!rc) rc = ul_buf_puts(&b, "]}");
    if (!rc) ul_http_respond_buf(e->req, 200, NULL, &b);
    ul_buf_free(&b);
    free(r);
    return rc;
}
