/* Internal to the api module: what /v1/completions and /v1/chat/completions share.
 *
 *   params.c  the OpenAI request fields both endpoints read (sampling, stop, n, logprobs,
 *             logit_bias, ...): each is honoured or answered with a 400 naming it; fields
 *             outside OpenAI's schema are ignored and listed in a debug line.
 *   gen.c     one request's generation: its choices (one scheduler sequence each, the n
 *             choices of a prompt sharing its KV pages), detokenizing, stop strings,
 *             log-probabilities, the SSE stream or the final JSON, cancellation.
 *   json.c    the JSON pieces every endpoint writes (chunk heads, logprobs, usage).
 * The endpoints (completions.c, chat.c) parse their own fields, build the prompts and
 * format their chunks through ul_gen_ops_t.
 *
 * Memory: a ul_gen_t and everything it points to live in its arena (g->arena) and die
 * together when the last choice has finished; growable output buffers are ul_buf_t, freed
 * with the choice. Loop thread only. */
#ifndef UL_API_GEN_H
#define UL_API_GEN_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "api/api.h"
#include "base/arena.h"
#include "base/buf.h"
#include "sched/stop.h"

#define UL_API_MAX_CHOICES 128 /* choices of one request, all prompts together */

typedef struct ul_api_bad_s {
    int status;       /* 400 unless set */
    const char *type; /* "invalid_request_error" unless set */
    const char *param;
    const char *code;
    char msg[256];
    char pbuf[128]; /* room for a param built on the fly (param may point here) */
} ul_api_bad_t;

/* The check behind ul_api_body_refuse: 0, or 1 (invalid UTF-8) / 2 (a \u0000 escape) with
 * the field's path ("messages[0].content", "" at the top) in param and the offending
 * byte's offset in *at. */
int ul_api_body_check(const char *body, size_t len, char *param, size_t cap, size_t *at);

/* Sets bad (param, printf message) and returns UL_EINVAL. */
int ul_api_bad(ul_api_bad_t *bad, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Answers bad as an OpenAI error body (and counts the rejection). */
int ul_api_reject(ul_api_t *a, ul_http_req_t *req, const ul_api_bad_t *bad);

typedef enum { UL_GEN_COMPLETION, UL_GEN_CHAT } ul_gen_kind_t;

typedef struct ul_api_params_s {
    ul_gen_kind_t kind;
    int32_t max_tokens;          /* 0: not given */
    const char *max_tokens_name; /* the field that gave it, for error.param */
    int stream, include_usage;
    int n, best_of;
    ul_sampling_t sampling;
    int seed_given;
    int ignore_eos;
    const char *stop[UL_STOP_MAX];
    int n_stop;
    int logprobs;          /* completions: candidates per token (0..20), -1 when absent;
                              chat: 1 when logprobs is true */
    int top_logprobs;      /* chat: candidates per token */
    ul_logit_bias_t *bias; /* [n_bias], in the request's arena */
    int32_t n_bias;
    const char *user;
    int json_object;              /* the output is constrained to JSON (JSON mode or a schema) */
    struct ul_grammar_s *grammar; /* structured output (structured.c): borrowed from the
                         server's grammar cache until ul_gen_new takes a reference (a
                         reference of p's own when grammar_ref); NULL: unconstrained */
    int grammar_ref; /* parsed on a job's thread: p holds a reference (ul_api_params_release) */
    const char *grammar_trigger; /* lazy grammar (strict tools): free text until this static
                         text, then the grammar; NULL: the grammar from the start */
    double timeout_s; /* "timeout" (or header X-Request-Timeout): seconds from arrival after
                         which the choices end with finish_reason "deadline"; 0 = none */
} ul_api_params_t;

/* Reads the fields both endpoints share from root into p (strings point into root).
 * Touches nothing of a but its immutable settings, so it may run on a worker thread; an
 * unseeded request gets its seed in ul_gen_new.
 * known: NULL-terminated names the endpoint reads itself, so they are not reported as
 * unknown. Returns 0 or UL_EINVAL with bad set. */
int ul_api_params_parse(ul_api_t *a, const cJSON *root, ul_gen_kind_t kind, ul_arena_t *arena,
                        const char *const *known, ul_api_params_t *p, ul_api_bad_t *bad);

/* Structured output (structured.c): reads response_format, grammar, json_schema,
 * structured_outputs and guided_* into p->grammar / p->json_object. 0 or UL_EINVAL (bad). */
int ul_api_structured_parse(ul_api_t *a, const cJSON *root, ul_api_params_t *p, ul_api_bad_t *bad);
/* 1 when a request body may ask for a grammar (a structured output field, tools, or a key
 * it cannot tell for escapes): such a request is prepared as a job (job.c) whatever its
 * size, since a schema of a few hundred bytes can compile for tens of milliseconds (a
 * string's maxLength of 500 is thousands of automaton states). */
int ul_api_body_may_constrain(const char *body, size_t len);
/* The compiled grammar of GBNF text for a's vocabulary, from a's cache or compiled into it:
 * borrowed, valid until the cache evicts it (a later call; take a reference to keep it).
 * On a job's thread (ul_api_job_thread) it comes with a reference for the caller, since
 * the loop may evict it before the job's done() runs. Any thread (the cache is locked).
 * 0, UL_EINVAL (err set) or UL_ENOMEM. */
int ul_api_grammar_get(ul_api_t *a, const char *src, size_t len, struct ul_grammar_s **out,
                       char *err, size_t err_len);
void ul_api_structured_free(ul_api_t *a);
/* Drops the reference p holds on its grammar when it was parsed on a job's thread. */
void ul_api_params_release(ul_api_params_t *p);

typedef enum { UL_API_BODY_CHAT, UL_API_BODY_RESPONSES, UL_API_BODY_MESSAGES } ul_api_body_t;

/* A chat endpoint up to generation, without HTTP (for the request-body fuzzer): parses,
 * translates (Responses, Messages), validates and renders body into text and its plain
 * mask. Returns 0 or UL_EINVAL/UL_ENOMEM with bad's message set (bad->param is not kept). */
int ul_api_chat_prepare_body(ul_api_t *a, ul_api_body_t endpoint, const char *body, size_t len,
                             ul_buf_t *text, ul_buf_t *plain, ul_api_bad_t *bad);

typedef struct ul_gen_s ul_gen_t;
typedef struct ul_choice_s ul_choice_t;

typedef struct ul_gen_ops_s {
    /* Text decided for the client (after stop strings and UTF-8 completion). */
    void (*text)(ul_choice_t *ch, const char *s, size_t n);
    /* The choice ended with finish_reason ("stop", "length"): flush what the endpoint holds
     * and, when streaming, send the choice's last chunk. */
    void (*end)(ul_choice_t *ch, const char *finish_reason);
    /* Not streaming, every choice ended: answer the whole response. */
    void (*answer)(ul_gen_t *g);
    /* Records a generated token's log-probabilities (when the request asked for them). */
    void (*logprob)(ul_choice_t *ch, int32_t token, const ul_token_lp_t *lp);
    /* Optional: frees the endpoint's part of a choice. */
    void (*free_choice)(ul_choice_t *ch);
    /* Optional, streaming: every choice ended well; sends the last events and ends the
     * stream (ul_sse_end), returning 1, or returns 0 for the default: the include_usage
     * chunk, then [DONE]. */
    int (*stream_end)(ul_gen_t *g);
    /* Optional, streaming: the generation failed after the head was sent; sends the error
     * event in the endpoint's shape and returns 1 (the stream is ended after it), or
     * returns 0 for the default: an OpenAI error body as a data event. */
    int (*stream_error)(ul_gen_t *g, int status, const char *type, const char *msg);
} ul_gen_ops_t;

struct ul_choice_s {
    ul_seq_t seq; /* first: the scheduler's callbacks get &seq */
    ul_gen_t *g;
    int index;  /* in the response, before best_of selection */
    int prompt; /* which prompt */
    int added, ended, stopped;
    const char *finish_reason;
    int32_t n_gen;
    double sum_logprob;
    ul_detok_t detok;
    ul_stop_t stop;
    const char *stop_str;        /* the stop string that ended it (borrowed from g->p), or NULL */
    size_t text_off;             /* bytes of text so far (for completions' text_offset) */
    ul_buf_t out;                /* the endpoint's: non-stream text / chat content */
    ul_buf_t lp;                 /* log-probability entries as JSON, since the last chunk */
    int n_lp;                    /* entries in lp */
    ul_buf_t lp_aux[3];          /* completions: token_logprobs, top_logprobs, text_offset arrays */
    void *ep;                    /* the endpoint's per-choice state */
    struct ul_gfilter_s *filter; /* structured output's matcher (in g's arena), or NULL */
};

struct ul_gen_s {
    ul_api_t *api;
    ul_http_req_t *req; /* NULL once answered or the client is gone */
    ul_sse_t *sse;
    const ul_gen_ops_t *ops;
    ul_gen_kind_t kind;
    ul_arena_t arena;
    ul_api_params_t p;
    char id[16 + UL_HTTP_REQUEST_ID_MAX]; /* prefix + the request id */
    int64_t created;
    int n_choices, n_live, n_prompts;
    int n_answer;         /* choices in the response (n per prompt; best_of keeps the best n) */
    ul_choice_t *choices; /* [n_choices] */
    int32_t n_prompt_tokens;
    int failed; /* an error ended some choice: answered at the end */
    int fail_status;
    const char *fail_msg;
    int held;
    uint64_t deadline_ns; /* uv_hrtime() when its choices end with "deadline", or 0 */
    uint64_t client;      /* fair share: whose sequences these are (ul_api_client_of) */
    int shared;           /* the choices are counted in the api's share table */
    ul_buf_t frame;       /* scratch for one chunk */
    void *ep;             /* the endpoint's per-request state */
};

/* A request's prompt, tokenized. */
typedef struct ul_gen_prompt_s {
    int32_t *ids;
    int n_ids;
} ul_gen_prompt_t;

/* Allocates a generation for n_prompts prompts with p->best_of choices each (p->n of them
 * answered per prompt). The params are copied (stop strings into the arena). NULL on
 * ENOMEM. */
ul_gen_t *ul_gen_new(ul_api_t *a, ul_http_req_t *req, const ul_api_params_t *p,
                     const ul_gen_ops_t *ops, int n_prompts, const char *id_prefix);
/* Queues every choice (prompts[i] for the choices of prompt i, ids copied by the
 * scheduler), starts the SSE stream when streaming, and takes over the request. On
 * failure answers the error itself and frees g. Returns 0 or the UL_E* it answered. */
int ul_gen_start(ul_gen_t *g, const ul_gen_prompt_t *prompts);
/* Frees g without starting it (nothing queued yet). */
void ul_gen_discard(ul_gen_t *g);

/* Sends a chunk the endpoint built in g->frame (held when output pacing allows). */
int ul_gen_send(ul_gen_t *g, ul_choice_t *ch);
/* The same as a named SSE event ("event: NAME"); ch NULL: never held. */
int ul_gen_send_event(ul_gen_t *g, ul_choice_t *ch, const char *event);
/* The typed events of the Messages and Responses streams: ul_gen_event_head starts g->frame
 * as {"type":"TYPE" for the endpoint's fields; ul_gen_event_send closes the object and sends
 * it as the SSE event TYPE (ul_gen_send_event). */
ul_buf_t *ul_gen_event_head(ul_gen_t *g, const char *type);
int ul_gen_event_send(ul_gen_t *g, ul_choice_t *ch, const char *type);
/* Not streaming, for endpoints whose answer is one object (Messages, Responses): answers 200
 * with what build(b, g, 1) writes, after the timing fields (ul_api_timing_answer). */
void ul_gen_answer_object(ul_gen_t *g, void (*build)(ul_buf_t *b, ul_gen_t *g, int final));
/* Appends the common head {"id":..,"object":OBJ,"created":..,"model":..,"choices":[ to b. */
void ul_gen_json_head(ul_gen_t *g, ul_buf_t *b, const char *object);
/* Not streaming: closes the choices array of b (begun with ul_gen_json_head), adds usage,
 * answers 200 with it and frees b. */
void ul_gen_respond(ul_gen_t *g, ul_buf_t *b);
/* Appends "usage":{...} (no comma). */
void ul_gen_json_usage(ul_gen_t *g, ul_buf_t *b);
/* Prompt tokens the prefix cache served (usage's cached_tokens, X-Uvllm-Cached-Tokens). */
int32_t ul_gen_cached_tokens(const ul_gen_t *g);
/* Appends a JSON string (with quotes). */
void ul_gen_json_str(ul_buf_t *b, const char *s, size_t n);
/* Appends printf output. */
void ul_gen_printf(ul_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The token's text for log-probabilities (raw piece bytes, special tokens as their text). */
int ul_gen_token_text(ul_gen_t *g, int32_t id, char *out, int cap);
/* Output text is bounded by max_tokens pieces: failure to grow is fatal like other small
 * internal allocations. */
void ul_gen_add(ul_buf_t *b, const char *s, size_t n);

#endif
