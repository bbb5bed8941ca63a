/* The OpenAI-compatible API on top of net (HTTP/SSE) and sched (sequences):
 *   GET  /health          {"status":"ok",...live counters} or 503 {"status":"draining"}
 *   GET  /metrics         Prometheus text
 *   GET  /v1/models       the served model
 *   POST /v1/completions  stream (SSE text_completion chunks + [DONE]) or one JSON object
 * Loop thread only. Request bodies are validated; every bad field is a 400 with an
 * OpenAI error body naming the param.
 *
 * Text <-> tokens goes through a codec: with a real model its vocabulary (ul_tokenize and
 * the streaming detokenizer), with the null backend pseudo-tokens: one token per
 * whitespace-separated word of the prompt (token = hash(word) % n_vocab), and each
 * generated token's text is " tok<ID>". The codec is a table of function pointers so this
 * module (and its tests) link without a tokenizer when none is used. */
#ifndef UL_API_API_H
#define UL_API_API_H

#include <stdint.h>

#include "model/vocab.h"
#include "net/http.h"
#include "sched/sched.h"

typedef struct ul_codec_s ul_codec_t;
struct ul_codec_s {
    const ul_vocab_t *vocab; /* NULL for the pseudo-token codec */
    int32_t n_vocab;
    int32_t eos_id;
    /* Prompt -> ids. Returns the count, -(needed) when cap is too small, or UL_E*. */
    int (*tokenize)(const ul_codec_t *c, const char *text, size_t len, int32_t *out, int cap);
    /* Optional: prepares a request's streaming detokenizer. */
    void (*detok_init)(const ul_codec_t *c, ul_detok_t *d);
    /* One generated id -> the UTF-8 bytes it completes. Returns bytes or -(needed). */
    int (*piece)(const ul_codec_t *c, ul_detok_t *d, int32_t id, char *out, int cap);
    /* End of stream: bytes still pending. */
    int (*flush)(const ul_codec_t *c, ul_detok_t *d, char *out, int cap);
    /* Optional (sched is_eog hook): ids other than eos_id that end generation. */
    int (*is_eog)(void *ctx, int32_t id);
};

/* The pseudo-token codec for the null backend. */
void ul_codec_init_null(ul_codec_t *c, int32_t n_vocab, int32_t eos_id);
/* The vocabulary codec (api/codec_vocab.c). */
void ul_codec_init_vocab(ul_codec_t *c, const ul_vocab_t *v);

typedef struct ul_api_stats_s {
    uint64_t completions_total;     /* accepted completion requests */
    uint64_t completions_rejected;  /* 4xx/5xx answers from the api */
    uint64_t completions_cancelled; /* client gone before the end */
    uint64_t active_sequences;      /* gauge: added to sched and not yet finished */
    uint64_t active_streams;        /* gauge: SSE completions open */
    uint64_t prompt_tokens, completion_tokens;
} ul_api_stats_t;

typedef struct ul_api_s {
    ul_sched_t *sched;
    ul_http_server_t *server; /* for counters and the draining state; may be NULL in tests */
    ul_codec_t codec;
    char model_id[128];         /* "null" for the null backend, else the model file's base name */
    int64_t created;            /* unix seconds at start, for /v1/models and responses */
    int32_t default_max_tokens; /* when the request has none; 16 like OpenAI */
    ul_api_stats_t stats;
    uint64_t next_cmpl;
} ul_api_t;

/* Sets the codec's is_eog into the scheduler config before ul_sched_init when needed. */
void ul_api_init(ul_api_t *a, ul_sched_t *sched, const ul_codec_t *codec, const char *model_id);
/* Registers every route on r with a as the handlers' data. */
int ul_api_register(ul_api_t *a, ul_router_t *r);

/* Answers {"error":{"message","type","param","code"}} and finishes the request.
 * param and code may be NULL (JSON null). */
int ul_api_error(ul_http_req_t *req, int status, const char *type, const char *param,
                 const char *code, const char *message);

/* Handlers (api.c, completions.c). */
int ul_api_health(ul_http_req_t *req, void *data);
int ul_api_metrics(ul_http_req_t *req, void *data);
int ul_api_models(ul_http_req_t *req, void *data);
int ul_api_completions(ul_http_req_t *req, void *data);

#endif
