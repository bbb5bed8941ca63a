/* Internal to the api module: one chat generation, three encoders.
 *
 * /v1/chat/completions (OpenAI), /v1/responses (OpenAI Responses) and /v1/messages
 * (Anthropic) are the same request underneath: messages rendered with the model's chat
 * template, the same special-token rule (only the template writes control tokens), the
 * same constrained decoding for tools and structured output, and the same output parser
 * (thinking -> reasoning, tool-call syntax -> calls, the rest -> text). They differ only in
 * how the request is written and how the answer is written. So:
 *
 *   request side (chat.c)   an endpoint's body is first turned into a chat request (the
 *                           Responses and Messages translators, responses.c and
 *                           messages.c), then validated, rendered, tokenized and started
 *                           exactly as a chat request (ul_chat_serve);
 *   output side (chat_out.c) the parser's events become an ordered list of blocks per
 *                           choice: text, reasoning, one per tool call. Streaming, each
 *                           block is opened, fed deltas and closed through the encoder as
 *                           it is generated; at the end the encoder writes the whole answer
 *                           from the same blocks, so a streamed answer and a plain one are
 *                           the same by construction;
 *   encoders                chat_enc.c (chat.completion[.chunk]), responses_enc.c (a
 *                           response object and its event sequence), messages_enc.c (a
 *                           message and Anthropic's events).
 *
 * Loop thread only, like gen.h. Blocks live until the choice is freed. */
#ifndef UL_API_CHAT_GEN_H
#define UL_API_CHAT_GEN_H

#include "api/gen.h"
#include "chat/toolcall.h"

enum { UL_CHAT_FORCE_NONE, UL_CHAT_FORCE_ALL, UL_CHAT_FORCE_NAMED, UL_CHAT_FORCE_STRICT };

typedef enum { UL_CBLK_TEXT, UL_CBLK_REASONING, UL_CBLK_TOOL } ul_cblk_kind_t;

/* One piece of an answer, in generation order. */
typedef struct ul_cblk_s {
    ul_cblk_kind_t kind;
    int index;     /* among the choice's blocks */
    int call;      /* UL_CBLK_TOOL: its index among the choice's calls */
    char id[40];   /* UL_CBLK_TOOL: the call id ("call_" + 24 alphanumerics) */
    char *name;    /* UL_CBLK_TOOL: the function's name (owned) */
    ul_buf_t text; /* the text, the reasoning, or the call's arguments (JSON text) */
} ul_cblk_t;

typedef struct ul_chat_enc_s ul_chat_enc_t;

/* What the request side decided, per request (copied into the generation's arena). */
typedef struct ul_chat_req_s {
    ul_chat_syntax_t syn;
    int starts_in_reasoning, parse_tools, parallel_tools;
    int force;         /* UL_CHAT_FORCE_*: tool calls constrained */
    const char *named; /* UL_CHAT_FORCE_NAMED: the function (points into the body) */
    const ul_chat_enc_t *enc;
    void *enc_req; /* the encoder's per-request state (enc->setup), in g's arena */
} ul_chat_req_t;

/* Per choice (ch->ep). */
typedef struct ul_chat_choice_s {
    ul_chat_parser_t parser;
    ul_cblk_t *blk; /* [n_blk], in order */
    int n_blk, cap_blk;
    int open;           /* streaming: the last block was opened and not closed yet */
    int n_calls;        /* calls kept */
    int skip;           /* the call being parsed is dropped (parallel_tool_calls false) */
    int32_t n_thinking; /* generated tokens whose text was reasoning */
    void *enc_ch;       /* the encoder's per-choice state, in g's arena */
} ul_chat_choice_t;

struct ul_chat_enc_s {
    const char *id_prefix; /* of the response id: "chatcmpl-", "resp_", "msg_" */
    /* 1: tool calls come as a start and argument fragments (the text as generated) also
     * when not streaming, so the plain answer is the stream's accumulation exactly */
    int calls_as_generated;
    /* Optional: per-request state from what the translator left (echo: its JSON text). */
    int (*setup)(ul_gen_t *g, const char *echo, size_t echo_len);
    /* Streaming: the generation started (role chunk, response.created, message_start). */
    void (*start)(ul_gen_t *g);
    /* Streaming: a block begins, grows, ends. */
    void (*open)(ul_choice_t *ch, const ul_cblk_t *b);
    void (*delta)(ul_choice_t *ch, const ul_cblk_t *b, const char *s, size_t n);
    void (*close)(ul_choice_t *ch, const ul_cblk_t *b);
    /* Streaming: the choice ended (ch->finish_reason, after its last block closed). */
    void (*end)(ul_choice_t *ch);
    /* Streaming, optional: as gen.h's stream_end and stream_error. */
    int (*stream_end)(ul_gen_t *g);
    int (*stream_error)(ul_gen_t *g, int status, const char *type, const char *msg);
    /* Not streaming: the whole answer. */
    void (*answer)(ul_gen_t *g);
    /* Optional: a token's log-probabilities (chat's logprobs). */
    void (*logprob)(ul_choice_t *ch, int32_t token, const ul_token_lp_t *lp);
};

/* The generation ops of every chat endpoint (chat_out.c). */
extern const ul_gen_ops_t ul_chat_gen_ops;
/* Attaches the request's decisions and the encoder to g and prepares its choices' parsers;
 * echo: the translator's text for enc->setup (may be NULL). 0 or UL_ENOMEM. */
int ul_chat_gen_setup(ul_gen_t *g, const ul_chat_req_t *c, const char *echo, size_t echo_len);

static inline ul_chat_req_t *ul_chat_req_of(ul_gen_t *g) { return g->ep; }
static inline ul_chat_choice_t *ul_chat_choice_of(ul_choice_t *ch) { return ch->ep; }

/* An endpoint that speaks chat underneath (chat.c runs it). */
typedef struct ul_chat_ep_s {
    const ul_chat_enc_t *enc;
    /* Optional: turns the endpoint's body into a chat request in place, validating its own
     * fields (a 400 names them as the client wrote them), and writes into echo what the
     * encoder's setup will need. 0 or UL_EINVAL/UL_ENOMEM with bad set. */
    int (*translate)(ul_api_t *a, cJSON *root, ul_buf_t *echo, ul_api_bad_t *bad);
} ul_chat_ep_t;

extern const ul_chat_ep_t ul_chat_ep_chat;      /* chat_enc.c */
extern const ul_chat_ep_t ul_chat_ep_responses; /* responses.c */
extern const ul_chat_ep_t ul_chat_ep_messages;  /* messages.c */

typedef enum {
    UL_CHAT_GENERATE, /* answer with the generation */
    UL_CHAT_APPLY,    /* answer {"prompt": text} (/apply-template) */
    UL_CHAT_COUNT     /* answer {"input_tokens": n} (/v1/messages/count_tokens) */
} ul_chat_mode_t;

/* Serves req (its body) as endpoint ep: parse, translate, validate, render, tokenize, then
 * the mode's answer. Answers every error itself. Returns 0. */
int ul_chat_serve(ul_api_t *a, ul_http_req_t *req, const ul_chat_ep_t *ep, ul_chat_mode_t mode);

/* Helpers the encoders share (chat_out.c). */
/* usage counters: prompt tokens, generated tokens, prompt tokens from the prefix cache */
void ul_chat_usage(ul_gen_t *g, int32_t *prompt, int32_t *gen, int32_t *cached);
/* Appends JSON text that is already a valid JSON value (tool arguments) or, when it is
 * not, the same as a JSON string: model output is never trusted to be JSON. */
void ul_chat_json_raw_or_str(ul_buf_t *b, const char *s, size_t n);

#endif
