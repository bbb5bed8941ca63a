/* The OpenAI-compatible API on top of net (HTTP/SSE) and sched (sequences):
 *   GET  /health          {"status":"ok",...live counters} or 503 {"status":"draining"}
 *   GET  /metrics         Prometheus text
 *   GET  /v1/models       the served model
 *   GET  /v1/models/{id}  one of its names (the id or an alias)
 *   POST /v1/completions  stream (SSE text_completion chunks + [DONE]) or one JSON object
 *   POST /tokenize        {"content",...} -> {"tokens":[...]} (llama-server's shape)
 *   POST /detokenize      {"tokens":[...]} -> {"content":"..."}
 *   POST /v1/embeddings   OpenAI's embeddings (embed.c); POST /embedding llama-server's
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

#include "api/pace.h"
#include "chat/toolcall.h"
#include "model/vocab.h"
#include "net/http.h"
#include "sched/driver.h"
#include "sched/sched.h"

typedef struct ul_codec_s ul_codec_t;
struct ul_codec_s {
    const ul_vocab_t *vocab; /* NULL for the pseudo-token codec */
    int32_t n_vocab;
    int32_t eos_id;
    /* Text -> ids. add_special: BOS/EOS as the vocabulary asks. parse_special: control-token
     * texts ("</s>") become their ids, except in bytes marked plain (plain: len bytes, or
     * NULL). Returns the count, -(needed) when cap is too small, or UL_E*. */
    int (*tokenize)(const ul_codec_t *c, const char *text, size_t len, const uint8_t *plain,
                    int add_special, int parse_special, int32_t *out, int cap);
    /* Optional: prepares a request's streaming detokenizer. */
    void (*detok_init)(const ul_codec_t *c, ul_detok_t *d);
    /* One generated id -> the UTF-8 bytes it completes. Returns bytes or -(needed). */
    int (*piece)(const ul_codec_t *c, ul_detok_t *d, int32_t id, char *out, int cap);
    /* End of stream: bytes still pending. */
    int (*flush)(const ul_codec_t *c, ul_detok_t *d, char *out, int cap);
    /* Optional (sched is_eog hook): ids other than eos_id that end generation. */
    int (*is_eog)(void *ctx, int32_t id);
    /* Optional: the raw bytes of one id, no streaming state (may be an incomplete UTF-8
     * sequence). special: control tokens give their text (else ""); lstrip: drop the space
     * the tokenizer puts before a text (SPM) when the piece starts with it. Returns bytes,
     * -(needed) when cap is too small, or UL_EINVAL for an id out of range. */
    int (*token_piece)(const ul_codec_t *c, int32_t id, int special, int lstrip, char *out,
                       int cap);
    /* Optional (rerank.c): the ids of a query a and a document b (each tokenized without
     * specials) joined into one cross-encoder input (model/vocab.h ul_vocab_join_pair);
     * without it, a then b. Returns the count, -(needed) when cap is too small, or UL_E*. */
    int (*join_pair)(const ul_codec_t *c, const int32_t *a, int na, const int32_t *b, int nb,
                     int32_t *out, int cap);
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
    uint64_t completions_overloaded; /* of rejected: 429 for --max-queue / --max-queue-wait-s */
} ul_api_stats_t;

/* Per-client counts (share.c): sequences in flight and worker jobs queued or running. */
enum { UL_API_SHARE_SEQS = 0, UL_API_SHARE_JOBS = 1 };
typedef struct ul_api_share_entry_s {
    uint64_t key; /* hash of the client (0: empty slot) */
    int32_t n[2];
} ul_api_share_entry_t;
typedef struct ul_api_share_s {
    ul_api_share_entry_t *e; /* [cap], cap a power of two */
    size_t cap, used;
} ul_api_share_t;

/* Work proportional to a client's input, off the loop (job.c). The owner fills req, run,
 * done (and its own data around the struct) and submits; run() executes on a pool thread
 * (it may read the api's immutable parts: codec, templates, texts; nothing else), done()
 * on the loop with 0, or UL_ECANCELED when *req was NULL (the client left) before run()
 * started, or UL_ENOMEM. The owner sets *req to NULL when the client leaves (its on_abort)
 * and must keep j alive until done() runs. */
typedef struct ul_api_job_s ul_api_job_t;
struct ul_api_job_s {
    uv_work_t work;
    ul_queue_t node; /* in the api's waiting list */
    struct ul_api_s *api;
    ul_http_req_t **req; /* where the owner keeps its request; NULL once the client left */
    uint64_t client;
    void (*run)(ul_api_job_t *j);
    void (*done)(ul_api_job_t *j, int status);
    size_t charge; /* bytes it may hold (body, parse tree, answer): charged to the memory
                      budget from submit to done (ul_http_mem_charge) */
    int state;     /* 0 not queued, 1 waiting, 2 running */
};

#define UL_API_MAX_ALIASES 8
#define UL_API_NAME_MAX 128

/* Readiness (api/ready.c): a canary sequence, a one-token prompt and one generated token
 * through the scheduler and the real backend, runs at start and whenever no step has
 * completed for interval_s; /health/ready is 200 while the last step (canary or not)
 * succeeded and one succeeded within 3 x interval_s. */
typedef struct ul_api_ready_s {
    double interval_s; /* serve --canary-interval-s; 0: no canaries (tests without a loop) */
    uv_timer_t timer;
    int timer_up;    /* timer initialised: closed by ul_api_ready_stop */
    ul_seq_t canary; /* the canary while live */
    float *embd;     /* [backend n_embd]: an encoder's canary embeds instead (malloc'ed at the
                      * first one, freed by ul_api_free) */
    int canary_live; /* added, on_finish not yet run */
    uint64_t canaries, canary_failures;
} ul_api_ready_t;

typedef struct ul_api_s {
    ul_sched_t *sched;
    ul_http_server_t *server; /* for counters and the draining state; may be NULL in tests */
    ul_codec_t codec;
    char model_id[128];         /* "null" for the null backend, else the model file's base name */
    int64_t created;            /* unix seconds at start, for /v1/models and responses */
    int32_t default_max_tokens; /* when the request has none (serve --max-tokens-default);
                                   0: OpenAI's (16 for completions, the rest of the context
                                   for chat) */
    struct ul_chat_tmpl_s *chat_tmpl;      /* the model's chat template (or ChatML) */
    struct ul_chat_tmpl_s *chat_tmpl_tool; /* tokenizer.chat_template.tool_use, or NULL */
    char bos_text[64], eos_text[64];       /* the vocabulary's BOS/EOS texts, for templates */
    /* The output syntax of each template (tool-call format, thinking markers), found from
     * its source on first use: scanning the source per request cost 5% of a chat request. */
    ul_chat_syntax_t chat_syn, chat_syn_tool, chat_syn_hermes;
    struct ul_chat_tmpl_s *chat_tmpl_hermes; /* ChatML with tools (Hermes), compiled on the
                                                first tools request the template cannot
                                                render; owned */
    int chat_syn_ready;                      /* reset when the templates change */
    ul_api_stats_t stats;
    uint64_t next_cmpl;
    /* Set by `uvllm serve` after ul_api_init; read by the request handlers. */
    int truncate_max_tokens; /* 1: a max_tokens that does not fit the context is clipped to
                                what fits instead of answered 400 (--truncate-max-tokens) */
    int parse_special;       /* 1 (default): special token texts in prompts become their ids, as
                                llama-server does; 0: plain text (--no-parse-special) */
    int32_t pooling;         /* embeddings (embed.c): UL_POOL_* (--pooling, else the model's
                                pooling_type); UL_POOL_NONE refuses them; UL_POOL_RANK
                                serves /v1/rerank instead */
    int rank_ok;             /* 1: the backend computes pooling rank (a bert encoder with its
                                classification head, or the null backend's stand-in) */
    int embed_only;          /* 1: the model is an encoder (bert): it embeds, never generates;
                                the generation endpoints answer 501 (ul_api_refuse_generate) */
    char *chat_template_override; /* --chat-template FILE's text, NUL-terminated, or NULL;
                                     malloc'ed, owned by a, freed by ul_api_free */
    const char *model_path;       /* the model file as given on the command line, or NULL; must
                                     outlive a (ul_api_model_known accepts it) */
    char aliases[UL_API_MAX_ALIASES][UL_API_NAME_MAX]; /* --model-alias, in order */
    int n_aliases;
    /* Admission (serve --max-queue, --max-queue-wait-s): a request is answered 429 with
     * Retry-After (the predicted wait, ul_sched_predict_wait_s) when the sequences waiting
     * for prefill would exceed max_queue, or its predicted wait exceeds max_queue_wait_s.
     * 0: no limit. */
    int32_t max_queue;
    double max_queue_wait_s;
    /* Deployment (serve --api-key, --api-key-file, UVLLM_API_KEY, --metrics-key; owned by
     * a, freed by ul_api_free): with keys, the routes api/auth.c protects answer 401
     * without "Authorization: Bearer <key>". */
    ul_http_keys_t api_keys, metrics_keys;
    uint64_t unauthorized; /* requests answered 401 */
    int draining;          /* SIGTERM seen (serve): readiness, /health and new /v1 work 503 */
    ul_api_ready_t ready;
    struct ul_gvocab_s *gvocab;     /* structured output's token index (engine/grammar.h),
                                       built on the first request that asks for it; owned */
    struct ul_api_gcache_s *gcache; /* compiled grammars by text (structured.c); owned */
    ul_pace_t pace;                 /* output pacing; writes every step until ul_api_pace_start */
    /* Fair share (serve --max-seqs-per-client): a request whose choices would take its
     * client (API key, else address) over this many sequences in flight is answered 429;
     * 0: no limit. */
    int32_t max_seqs_per_client;
    uint64_t seqs_refused; /* requests answered 429 for it */
    ul_api_share_t share;
    /* Worker jobs (job.c) */
    ul_queue_t jobs_waiting;
    int jobs_init, jobs_running, jobs_queued;
    int jobs_pending; /* admitted by ul_api_head, body still being read (ul_api_job_hold) */
    uint64_t jobs_total, jobs_refused;
} ul_api_t;

/* Sets the codec's is_eog into the scheduler config before ul_sched_init when needed. */
void ul_api_init(ul_api_t *a, ul_sched_t *sched, const ul_codec_t *codec, const char *model_id);
/* Output pacing (pace.h) from the loop's load, measured at each step the driver completes;
 * call after ul_driver_init. */
void ul_api_pace_start(ul_api_t *a, ul_driver_t *d);
/* Registers every route on r with a as the handlers' data. */
int ul_api_register(ul_api_t *a, ul_router_t *r);
/* Frees what a owns (chat_template_override); a stays usable as after ul_api_init. */
void ul_api_free(ul_api_t *a);

/* Adds a name the model answers to (listed by /v1/models, accepted in requests).
 * Returns 0, UL_EINVAL (empty, over UL_API_NAME_MAX - 1 bytes, control characters),
 * UL_EFULL (more than UL_API_MAX_ALIASES) or UL_EBUSY (already a name of the model). */
int ul_api_add_alias(ul_api_t *a, const char *name);
/* 1 if a request's "model" value names the served model: model_id, an alias, model_path,
 * or model_path's base name with or without ".gguf". Exact, case-sensitive; 0 for NULL. */
int ul_api_model_known(const ul_api_t *a, const char *name);

/* Answers {"error":{"message","type","param","code"}} and finishes the request.
 * param and code may be NULL (JSON null). */
int ul_api_error(ul_http_req_t *req, int status, const char *type, const char *param,
                 const char *code, const char *message);
/* Anthropic's error type for an HTTP status ("invalid_request_error", "overloaded_error").
 * Errors answered on /v1/messages and below have Anthropic's shape (api.c). */
const char *ul_api_anthropic_type(int status);

/* Handlers (api.c, completions.c). */
int ul_api_health(ul_http_req_t *req, void *data);
int ul_api_metrics(ul_http_req_t *req, void *data);
int ul_api_models(ul_http_req_t *req, void *data);
int ul_api_model(ul_http_req_t *req, void *data); /* GET /v1/models/{id} */
int ul_api_completions(ul_http_req_t *req, void *data);
int ul_api_tokenize(ul_http_req_t *req, void *data);   /* tokenize.c */
int ul_api_detokenize(ul_http_req_t *req, void *data); /* tokenize.c */
int ul_api_chat_completions(ul_http_req_t *req, void *data);
int ul_api_apply_template(ul_http_req_t *req, void *data);
int ul_api_responses(ul_http_req_t *req, void *data);             /* responses.c */
int ul_api_messages(ul_http_req_t *req, void *data);              /* messages.c */
int ul_api_messages_count_tokens(ul_http_req_t *req, void *data); /* messages.c */
int ul_api_embeddings(ul_http_req_t *req, void *data);            /* embed.c: /v1/embeddings */
int ul_api_embedding(ul_http_req_t *req, void *data);             /* embed.c: /embedding */
int ul_api_rerank(ul_http_req_t *req, void *data); /* embed.c, rerank.c: /v1/rerank */

/* Readiness (ready.c). GET /health/live: 200 {"status":"live"} while the process runs.
 * GET /health/ready: 200 {"status":"ready"} or 503 {"status":"loading"|"draining"|
 * "failing","reason":...}. */
int ul_api_health_live(ul_http_req_t *req, void *data);
int ul_api_health_ready(ul_http_req_t *req, void *data);
/* "ready", "loading", "draining" or "failing"; *reason (may be NULL) gets a sentence. */
const char *ul_api_ready_state(const ul_api_t *a, char *reason, size_t cap);
/* Starts the canary timer on loop (interval_s > 0) and runs the first canary. */
int ul_api_ready_start(ul_api_t *a, uv_loop_t *loop, double interval_s);
/* Stops canaries (draining) and closes the timer; a canary in flight ends with the
 * scheduler's cancel. */
void ul_api_ready_stop(ul_api_t *a);

/* The http hooks (auth.c): authentication, and the X-Uvllm-Load line. ul_api_head is the
 * on_head hook `uvllm serve` installs: ul_api_authorize, then a request whose announced body
 * is large enough for a job (UL_API_JOB_BYTES) is refused with 429/503 before its body is
 * read when it would not find a job slot (ul_api_job_precheck). */
int ul_api_authorize(ul_http_req_t *req, void *data);
int ul_api_head(ul_http_req_t *req, void *data);
size_t ul_api_load_header(char *out, size_t cap, void *data);

/* Server-Timing (timing.c). Non-streaming answers: "queue;dur=X, prefill;dur=Y,
 * decode;dur=Z" (ms) over the request's choices. Streams, before their head is written:
 * "setup;dur=X" (request complete -> now; queue, prefill and decode are not known yet). */
struct ul_gen_s;
void ul_api_timing_answer(struct ul_gen_s *g);
void ul_api_timing_stream(ul_api_t *a, ul_http_req_t *req);

/* 1 when the server is draining: answered 503 (and counted). */
int ul_api_refuse_draining(ul_api_t *a, ul_http_req_t *req);
/* 1 after answering a generation request the server cannot serve at all: draining (503), or
 * an embedding-only model (501, code generation_not_supported). */
int ul_api_refuse_generate(ul_api_t *a, ul_http_req_t *req);
/* Fair share (share.c). The client a request counts for: a hash of its bearer token when
 * the server has API keys, else of its address. */
uint64_t ul_api_client_of(const ul_api_t *a, const ul_http_req_t *req);
/* Adds n to the client's count of kind (UL_API_SHARE_*); UL_EFULL when that would pass max
 * (max 0: no limit), UL_ENOMEM. */
int ul_api_share_add(ul_api_share_t *s, uint64_t client, int kind, int32_t n, int32_t max);
void ul_api_share_del(ul_api_share_t *s, uint64_t client, int kind, int32_t n);
int32_t ul_api_share_get(const ul_api_share_t *s, uint64_t client, int kind);
void ul_api_share_free(ul_api_share_t *s);

/* Jobs (job.c): queues j; 0, UL_EFULL (every slot taken: answer 503), UL_EBUSY (the
 * client's share taken: 429), or UL_ENOMEM / UL_E2BIG (j->charge does not fit the memory
 * budget: 503 / 413). */
int ul_api_job_submit(ul_api_t *a, ul_api_job_t *j);
/* 1 on a pool thread while it runs a job's run(), else 0. */
int ul_api_job_thread(void);
/* Whether a request with a large body would find a job slot: 0, UL_EFULL or UL_EBUSY, as
 * ul_api_job_submit would say now (before the body is read). */
int ul_api_job_precheck(ul_api_t *a, const ul_http_req_t *req);
/* After a precheck that passed: the request holds one of its client's job slots (and one
 * of the waiting ones) until it is dispatched or its connection ends, so bodies still
 * being read count against the share; 0 or UL_EBUSY / UL_ENOMEM. */
int ul_api_job_hold(ul_api_t *a, ul_http_req_t *req);
/* Answers a refused submission (429 or 503 with Retry-After). */
int ul_api_job_refuse(ul_api_t *a, ul_http_req_t *req, int rc);
/* The body the job of req reads. When small (or there is no pool) it is the request's own
 * and the job runs at once on the loop thread: run(), then done(j, 0), which may free the
 * job's owner; returns 1. Else the body is taken from the request into *owned (the owner
 * frees it) before ul_api_job_start: the worker may start before that returns; returns 0. */
int ul_api_job_inline(ul_api_t *a, ul_http_req_t *req, ul_api_job_t *j, int small,
                      const char **body, size_t *len, char **owned);
/* Submits the job of request req with on_abort(req, data, reason) set for while it is
 * queued or running. 0: queued. Else the submission was refused: req is answered
 * (ul_api_job_refuse), its callbacks cleared, and the caller frees data. */
int ul_api_job_start(ul_api_t *a, ul_http_req_t *req, ul_api_job_t *j,
                     void (*on_abort)(ul_http_req_t *req, void *data, int reason), void *data);
/* Bodies larger than this are handled as jobs; smaller ones inline (a hop to the pool and
 * back costs more than the work). */
#define UL_API_JOB_BYTES 4096

/* Checks a request body before it is parsed (body.c): invalid UTF-8 anywhere, or a \u0000
 * escape in a string (cJSON would cut the string there: a filter in front would see text
 * the model does not), is answered 400 naming the field. Returns 1 after answering. */
int ul_api_body_refuse(ul_api_t *a, ul_http_req_t *req, const char *body, size_t len);

/* Tokenizes with the codec into a malloc'ed array (*n ids), or NULL with *n = UL_E*;
 * add_special: the model's BOS/EOS around the text (as its GGUF asks). */
int32_t *ul_api_tokenize_text(const ul_codec_t *codec, const char *text, size_t len,
                              const uint8_t *plain, int add_special, int parse_special, int *n);

#endif
