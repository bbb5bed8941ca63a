/* Structured output as grammars (grammar.h): JSON mode, JSON Schema and regular expressions
 * translated to GBNF text, which the grammar engine compiles like any grammar.
 *
 * JSON Schema, as the SDKs write it (zod, pydantic):
 *   type            object, array, string, number, integer, boolean, null, or a list of them;
 *                   without "type", implied by the keywords present, and with none of them
 *                   any value ({} is any JSON value).
 *   object          properties (generated in the order given; required ones always, the
 *                   others optional), required, additionalProperties (false, true or a
 *                   schema for further keys after the listed ones), minProperties and
 *                   maxProperties (on objects without optional properties or with none).
 *   array           items (a schema, or false after prefixItems), prefixItems, minItems,
 *                   maxItems.
 *   string          minLength, maxLength (code points); pattern (ECMA-262 without
 *                   lookaround or backreferences; anchored by ^ and $, else it may match
 *                   inside); format date, time, date-time, uuid, email, uri, ipv4, ipv6,
 *                   hostname (a pattern the format cannot be combined with is refused; a
 *                   pattern with lookaround next to a known format yields to the format's
 *                   own grammar, written so the SDKs' patterns for it hold).
 *   integer         minimum, maximum, exclusiveMinimum, exclusiveMaximum (exact, 64-bit),
 *                   multipleOf (exact; with bounds the output stays within 15 digits).
 *   number          the same bounds: exact when they are integers, otherwise rounded
 *                   inward (only numbers inside are generated); no exponent when bounded.
 *   enum, const     any JSON values, output as their compact serialization.
 *   anyOf, oneOf    any branches (a oneOf whose branches overlap is not told apart:
 *                   discriminated unions are, by their const keys); nullable: true adds null.
 *   allOf           one schema, or several objects merged.
 *   $ref            "#", "#/$defs/<name>", "#/definitions/<name>"; recursion allowed.
 *   annotations     description, title, default, examples, $schema, $id, $comment, $defs,
 *                   definitions, deprecated, readOnly, writeOnly, discriminator: ignored.
 * Any other keyword is refused with its name. Whitespace between tokens: none, one space,
 * or one newline and up to 20 spaces or tabs (llama.cpp's json.gbnf); numbers have at most
 * 16 integer and 16 fraction digits. */
#ifndef UL_ENGINE_JSON_GBNF_H
#define UL_ENGINE_JSON_GBNF_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "base/buf.h"

/* JSON mode: one object. */
extern const char *const ul_json_gbnf_object;

/* Appends the grammar of schema to out. 0, UL_EINVAL (err: "keyword 'not' is not
 * supported") or UL_ENOMEM. */
int ul_json_schema_gbnf(const cJSON *schema, ul_buf_t *out, char *err, size_t err_len);

/* Several schemas into one grammar (tool calls: one rule per tool's arguments): each add
 * writes rule `name ::= ...` for schema (whose "$ref"s resolve in root, NULL: schema
 * itself); finish appends every rule and the shared lexical rules to out and frees the
 * builder (so does free alone). Errors as ul_json_schema_gbnf. */
typedef struct ul_json_gbnf_s ul_json_gbnf_t;
ul_json_gbnf_t *ul_json_gbnf_new(char *err, size_t err_len);
int ul_json_gbnf_add(ul_json_gbnf_t *b, const cJSON *schema, const cJSON *root, const char *name);
int ul_json_gbnf_finish(ul_json_gbnf_t *b, ul_buf_t *out);
void ul_json_gbnf_free(ul_json_gbnf_t *b);

/* A regular expression (ECMA-262 subset) as a GBNF expression appended to out. json: the
 * expression produces the body of a JSON string whose decoded value matches (quotes and
 * backslashes escaped); else the text itself. Anchoring: ^ and $ at the ends; without
 * them the match may be surrounded by other text. 0, UL_EINVAL (err) or UL_ENOMEM. */
int ul_regex_gbnf(const char *re, size_t len, int json, ul_buf_t *out, char *err, size_t err_len);

/* A GBNF literal for the bytes s[0..n) (quotes included). */
int ul_gbnf_literal(ul_buf_t *out, const char *s, size_t n);

#endif
