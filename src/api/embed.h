/* Internal to the api module: one embeddings or rerank request (embed.c parses it and runs
 * its sequences, embed_out.c writes an embeddings answer; rerank.c parses a rerank body and
 * writes its answer: one sequence per document, its input the query and the document joined,
 * its pooling rank). Loop thread only, except the parsing half of
 * embed.c, which may run as a job (job.c) and then reads nothing but the fields set before
 * it was submitted. */
#ifndef UL_API_EMBED_H
#define UL_API_EMBED_H

#include <stdint.h>

#include "api/gen.h"

#define UL_EMBED_MAX_INPUTS 2048 /* inputs of one request (OpenAI's limit) */

typedef struct ul_embed_input_s {
    int32_t *ids; /* [n], malloc'ed */
    int32_t n;
} ul_embed_input_t;

typedef struct ul_embed_req_s {
    ul_api_job_t job; /* first: the job's callbacks cast back */
    ul_api_t *a;
    ul_http_req_t *req;     /* NULL once the client left */
    int oai;                /* 1: /v1/embeddings' shapes; 0: /embedding's (llama-server) */
    int rerank;             /* 1: /v1/rerank (rerank.c); oai is 1 */
    const char *input_name; /* "input", or "content" (/embedding) */
    /* set before parsing (the job reads them, never a) */
    const ul_codec_t *codec;
    int32_t n_vocab, n_embd, max_len;
    int parse_special;
    char *owned; /* the body, taken from the request (jobs), else NULL */
    const char *body;
    size_t body_len;
    /* parsed */
    int failed;
    ul_api_bad_t bad;
    int base64;
    ul_embed_input_t *in; /* [n] */
    int n;
    int64_t n_tokens; /* of every input: usage.prompt_tokens */
    /* rerank: results kept (top_n, at most n), and with return_documents each document's
     * text (doc_text[i] into keep, the parsed body, freed with the request; else NULL) */
    int top_n;
    const char **doc_text;
    void *keep; /* cJSON * */
    /* running */
    ul_seq_t *seqs; /* [n] */
    float *vec;     /* [n][n_embd]: the pooled hidden states the backend writes */
    int n_added, n_live;
    int error; /* a sequence ended otherwise than by its embedding: UL_E* */
} ul_embed_req_t;

/* Normalises every vector (L2) and answers the request (rerank: ul_rerank_answer); 0 or
 * UL_ENOMEM (nothing sent). */
int ul_embed_answer(ul_embed_req_t *e);
/* rerank.c: the body's query, documents, top_n and return_documents into e (on the job's
 * thread for large bodies, as embed.c's parsing); 0, UL_ENOMEM, or e->bad set. */
int ul_rerank_parse(ul_embed_req_t *e, const void *root /* cJSON */, int *keep_root);
/* rerank.c: the scores sorted (highest first, llama-server's order), top_n of them. */
int ul_rerank_answer(ul_embed_req_t *e);
/* x /= |x| (Euclidean, summed in double as llama.cpp's common_embd_normalize); a zero vector
 * stays zero. */
void ul_embed_normalize(float *x, int32_t n);
/* Standard base64 (RFC 4648, with padding) of n bytes, appended to b. */
int ul_embed_base64(ul_buf_t *b, const uint8_t *p, size_t n);

#endif
