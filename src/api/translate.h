/* Internal to the api module: what the Responses (responses.c) and Messages (messages.c)
 * translators share. Both turn their endpoint's body into a chat request (chat_gen.h) in
 * place; their own fields are validated first, so a 400 names a field as the client wrote
 * it ("input[2].content[0].type", "messages.1.content.0.tool_use_id"). */
#ifndef UL_API_TRANSLATE_H
#define UL_API_TRANSLATE_H

#include <cjson/cJSON.h>

#include "api/gen.h"

/* ul_api_bad with a param built on the fly (copied into bad->pbuf). */
int ul_tr_bad(ul_api_bad_t *bad, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The field, or NULL when absent or JSON null. */
const cJSON *ul_tr_get(const cJSON *o, const char *key);

/* Moves field `from` of src (when present and not null) to dst as `to`. */
void ul_tr_move(cJSON *dst, cJSON *src, const char *from, const char *to);

/* Appends {"role": role} to the array msgs and returns it (NULL: out of memory). */
cJSON *ul_tr_message(cJSON *msgs, const char *role);

/* Sets chat's tool_choice to the function called name: {"type":"function","function":
 * {"name":name}}. 0 or UL_ENOMEM. */
int ul_tr_tool_choice_fn(cJSON *chat, const char *name);

/* Copies the fields keys[0..n) of src that are present (and not null) into dst. 0 or
 * UL_ENOMEM. */
int ul_tr_copy_keys(cJSON *dst, const cJSON *src, const char *const *keys, int n);

/* Replaces root's members with chat's (chat is freed). */
void ul_tr_swap(cJSON *root, cJSON *chat);

/* Appends the JSON text of v (or null) to b as "key":value with a leading comma. */
int ul_tr_echo(ul_buf_t *b, const char *key, const cJSON *v, const char *dflt);

#endif
