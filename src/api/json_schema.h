/* Structured output (response_format {"type": "json_schema", ...}): the generated text is
 * constrained, token by token, to one JSON document that validates against a JSON Schema,
 * in the subset OpenAI's strict mode uses:
 *
 *   type            object, array, string, number, integer, boolean, null, or a list of them;
 *                   without "type", implied by the keywords present (properties/required ->
 *                   object, items/minItems/maxItems -> array, minLength/maxLength -> string),
 *                   and with none of them any value ({} is any JSON value).
 *   object          properties, required, additionalProperties (only false). With
 *                   "properties", only the listed keys are allowed, whether or not
 *                   additionalProperties is given: each at most once, in any order, every
 *                   required one before '}'. Without "properties", any object
 *                   (but with additionalProperties false only {}).
 *   array           items (one schema; without it any items), minItems, maxItems.
 *   string          minLength, maxLength (code points).
 *   enum, const     any JSON values, matched as their compact serialization (cJSON's),
 *                   byte by byte: a string must come out exactly as that serialization
 *                   writes it.
 *   anyOf, oneOf    branches that start with different bytes (differ by type: object,
 *                   array, string, number/integer, boolean, null); chosen by the first byte.
 *   $ref            "#", "#/$defs/<name>" or "#/definitions/<name>"; recursion allowed.
 *   allOf           with exactly one schema (how pydantic annotates a $ref): that schema.
 *   annotations     description, title, default, examples, $schema, $comment, $defs,
 *                   definitions: ignored.
 *
 * Any other keyword is refused at compile time with its name rather than ignored. The
 * document also obeys JSON mode's rules (json_out.h: whitespace, number length, depth,
 * strict UTF-8), which the acceptor here runs underneath; it may be any value, not only an
 * object. A schema is refused when no document of it fits in UL_JSON_MAX_DEPTH levels, and
 * the acceptor never lets a prefix start what it could not finish (an optional property,
 * an item, a container too deep to complete), so at every state some byte is acceptable.
 *
 *   ul_json_schema_t        the compiled schema: one position-independent block (copy it
 *                           with memcpy, ul_json_schema_size bytes), read-only once built
 *                           and shared by every sequence of a request.
 *   ul_json_sacc_t          the acceptor's state; copy with ul_json_sacc_copy.
 *   ul_json_schema_filter_t the ul_token_filter_t for a sequence (as ul_json_filter_t). */
#ifndef UL_API_JSON_SCHEMA_H
#define UL_API_JSON_SCHEMA_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "api/json_out.h"

typedef struct ul_json_schema_s ul_json_schema_t;

/* Compiles schema into *out (one malloc'd block: free()). Returns 0, UL_EINVAL with a
 * message in err (e.g. "keyword 'pattern' is not supported"), or UL_ENOMEM. */
int ul_json_schema_compile(const cJSON *schema, ul_json_schema_t **out, char *err, size_t err_len);
size_t ul_json_schema_size(const ul_json_schema_t *s);

typedef struct ul_json_sframe_s {
    int32_t node;   /* the container's schema node */
    int32_t prop;   /* -1 in arrays; objects: the property whose value comes next (index in
                       the table), -2 before the first key */
    uint32_t count; /* arrays: items started */
    uint64_t seen;  /* objects: properties given (bit i: the node's i-th property) */
} ul_json_sframe_t;

typedef struct ul_json_sacc_s {
    const ul_json_schema_t *s;
    ul_json_acc_t lex; /* the JSON syntax underneath */
    uint8_t scalar;    /* what is in progress (json_schema.c's enum) */
    uint8_t d0;        /* the depth the scalar (or free value) started at */
    uint8_t integer;   /* a number of type integer only */
    int32_t node;      /* the scalar's node */
    uint32_t lo, hi;   /* enum literals or keys still matching: [lo, hi) of a sorted table */
    uint32_t pos;      /* bytes of them matched */
    uint32_t count;    /* strings: code points so far */
    uint32_t n_frames;
    ul_json_sframe_t frames[UL_JSON_MAX_DEPTH]; /* last: copies take only the used ones */
} ul_json_sacc_t;

void ul_json_sacc_init(ul_json_sacc_t *a, const ul_json_schema_t *s);
/* dst = src, copying only the frames in use. */
void ul_json_sacc_copy(ul_json_sacc_t *dst, const ul_json_sacc_t *src);
/* 0 when the text stays a prefix of a valid document (a advanced), -1 otherwise (a is left
 * unspecified: feed a copy). */
int ul_json_sacc_feed(ul_json_sacc_t *a, uint8_t c);
int ul_json_sacc_feed_n(ul_json_sacc_t *a, const char *p, size_t n);
/* 1 when the text is a complete valid document. */
int ul_json_sacc_done(const ul_json_sacc_t *a);

typedef struct ul_json_schema_filter_s {
    ul_token_filter_t base; /* first: the sampler's view */
    const ul_json_vocab_t *vocab;
    uint32_t calls;          /* allows() calls since the last accept (saturating at 3) */
    uint32_t first_ok[8];    /* from the second call on: bit c, byte c may come next */
    uint32_t after_ws[2][8]; /* the same after ' ' and after '\n' (most BPE pieces start
                                with one), when first_ok has them */
    ul_json_sacc_t acc;      /* last: its frames are copied only as far as used */
} ul_json_schema_filter_t;

/* A filter at the start of a document of s over v (both must outlive it). When the sampler
 * asks about more than one token for a step (a full mask), allows() builds a table of the
 * acceptable next bytes once (and the bytes after a space or a newline) and refuses most
 * tokens by their first two bytes: it writes to the
 * filter, which the filter contract (one thread per sequence, uvllm/backend.h) allows. */
void ul_json_schema_filter_init(ul_json_schema_filter_t *f, const ul_json_vocab_t *v,
                                const ul_json_schema_t *s);

#endif
