/* JSON mode (response_format {"type": "json_object"}): the generated text is constrained,
 * token by token, to one JSON object (RFC 8259), optionally preceded by a little whitespace
 * and followed by nothing but the end-of-generation token, as llama-server and vLLM do.
 *
 *   ul_json_acc_t      a byte-level pushdown acceptor: feeds one byte at a time and says
 *                      whether the text so far is a prefix of an allowed document. Plain
 *                      value, copied to try a token without changing it.
 *   ul_json_vocab_t    every token's bytes (the codec's raw pieces) and whether it ends
 *                      generation, built once per model on first use.
 *   ul_json_filter_t   the ul_token_filter_t a sequence's sampler consults (backend
 *                      thread): a token is allowed when all its bytes are accepted; an
 *                      end-of-generation token only once the object is complete.
 *
 * Limits keep a constrained model from looping (as llama.cpp's json.gbnf): between tokens
 * of structure one space, or one newline and at most UL_JSON_MAX_WS spaces or tabs; no
 * whitespace before the object; numbers of at most UL_JSON_MAX_NUM bytes; nesting of at
 * most UL_JSON_MAX_DEPTH. Strings take any UTF-8 but control characters, which must be escaped;
 * \\u escapes of surrogates only as a high-low pair (as strict parsers require). */
#ifndef UL_API_JSON_OUT_H
#define UL_API_JSON_OUT_H

#include <stddef.h>
#include <stdint.h>

#include "api/api.h"
#include "uvllm/backend.h"

#define UL_JSON_MAX_DEPTH 64
#define UL_JSON_MAX_WS 20
#define UL_JSON_MAX_NUM 40

typedef struct ul_json_acc_s {
    uint64_t stack;  /* bit d: container at depth d+1 is an array (1) or an object (0) */
    uint8_t depth;   /* open containers */
    uint8_t mode;    /* what comes next (json_out.c's enum) */
    uint8_t sub;     /* in strings: escape state; in numbers: number state; literals: which */
    uint8_t n;       /* in literals: bytes matched; in numbers: bytes so far */
    uint8_t utf8;    /* in strings: UTF-8 continuation bytes still expected */
    uint8_t utf8_lo; /* the allowed range of the next continuation byte */
    uint8_t utf8_hi;
    uint8_t ws;      /* whitespace run state (json_out.c, whitespace()) */
    uint8_t surr;    /* in strings: 1 after a \\u escape of a high surrogate (a low one must
                        follow) */
    uint8_t any_top; /* 1: the document may be any value, not only an object (json_schema.h) */
    uint16_t hex;    /* in strings: the \\u escape's value so far */
} ul_json_acc_t;

/* What an acceptor expects next (its mode), for acceptors layered on this one. */
enum {
    UL_JSON_M_TOP,            /* before the document: its first byte */
    UL_JSON_M_VALUE,          /* a value */
    UL_JSON_M_VALUE_OR_CLOSE, /* after '[': a value or ']' */
    UL_JSON_M_KEY,            /* after ',' in an object: a key string */
    UL_JSON_M_KEY_OR_CLOSE,   /* after '{': a key string or '}' */
    UL_JSON_M_COLON,          /* after a key */
    UL_JSON_M_AFTER,          /* after a value in a container: ',' or its closer */
    UL_JSON_M_STRING,         /* inside a value string */
    UL_JSON_M_KEYSTR,         /* inside a key string */
    UL_JSON_M_NUMBER,
    UL_JSON_M_LITERAL,
    UL_JSON_M_DONE, /* the document is complete */
};

/* Expecting the first byte of a top-level object. */
void ul_json_acc_init(ul_json_acc_t *a);
/* Expecting the first byte of any top-level value (no whitespace before it); a top-level
 * number is complete once it could end, and nothing may follow it. */
void ul_json_acc_init_any(ul_json_acc_t *a);
/* Feeds one byte: 0 when the text stays a prefix of an allowed document (a is advanced),
 * -1 when it does not (a is left in an unspecified state: feed a copy). */
int ul_json_acc_feed(ul_json_acc_t *a, uint8_t c);
/* Feeds n bytes; 0 or -1 as ul_json_acc_feed. */
int ul_json_acc_feed_n(ul_json_acc_t *a, const char *s, size_t n);
/* 1 when the document is complete: the top-level object closed (only the end may follow),
 * or with ul_json_acc_init_any, a top-level value complete. */
int ul_json_acc_done(const ul_json_acc_t *a);

typedef struct ul_json_vocab_s ul_json_vocab_t;
/* Every id's bytes through c->token_piece (control tokens as ""), and which ids end
 * generation (c->eos_id, or c->is_eog on c->vocab). NULL on ENOMEM. */
ul_json_vocab_t *ul_json_vocab_new(const ul_codec_t *c);
void ul_json_vocab_free(ul_json_vocab_t *v);
/* Token id's bytes (*n of them; 0 for control tokens) and whether it ends generation. */
const char *ul_json_vocab_piece(const ul_json_vocab_t *v, int32_t id, uint32_t *n);
int ul_json_vocab_is_eog(const ul_json_vocab_t *v, int32_t id);
int32_t ul_json_vocab_size(const ul_json_vocab_t *v);

typedef struct ul_json_filter_s {
    ul_token_filter_t base; /* first: the sampler's view */
    const ul_json_vocab_t *vocab;
    ul_json_acc_t acc;
} ul_json_filter_t;

/* A filter at the start of a document over v (which must outlive it). */
void ul_json_filter_init(ul_json_filter_t *f, const ul_json_vocab_t *v);

#endif
