/* Chat templates: turns an OpenAI-style chat request into the prompt text a model's Jinja
 * chat template makes of it, the way llama-server does (see
 * ../shared/chat-templates/README.md): tool-call arguments given as JSON strings are
 * passed as objects, null content becomes "", text parts are joined, a system message is
 * merged into the first user turn when the template has no system role, enable_thinking
 * is set when the template reacts to it, tools are passed only when there are some, and
 * date_string/datetime/strftime_now use a pinned clock.
 *
 * The prompt comes with a per-byte plain mask: 1 where the byte came from the request
 * (message text, tool definitions, kwargs), 0 where the template or the vocabulary's
 * bos/eos wrote it. The mask is exact per byte through concatenation, slicing, strip,
 * split, join, replace (inserted text takes the replacement's origin), case mapping and
 * tojson/repr (escape sequences of request text count as request text). The tokenizer
 * must match a special token only where all of its bytes are 0, so a user who types
 * "<|im_end|>" cannot forge a turn boundary.
 *
 * A ul_chat_tmpl_t is immutable after ul_chat_tmpl_new and may be used by several threads
 * at once; ul_chat_render allocates only for its own call and frees it before returning. */
#ifndef UL_CHAT_CHAT_H
#define UL_CHAT_CHAT_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

typedef struct ul_chat_tmpl_s ul_chat_tmpl_t;

/* Compiles src (len bytes) and probes it like llama.cpp: does a system message reach the
 * output, does enable_thinking change the generation prompt. On failure returns
 * UL_EFORMAT (syntax error, err: "line N: ...") or UL_ENOMEM. */
int ul_chat_tmpl_new(const char *src, size_t len, ul_chat_tmpl_t **out, char *err, size_t errcap);
void ul_chat_tmpl_free(ul_chat_tmpl_t *t);
/* The template source, NUL-terminated. */
const char *ul_chat_tmpl_src(const ul_chat_tmpl_t *t);
/* Probe results: 1/0. */
int ul_chat_tmpl_supports_system(const ul_chat_tmpl_t *t);
int ul_chat_tmpl_thinking(const ul_chat_tmpl_t *t);

typedef struct ul_chat_opts_s {
    const char *bos_token, *eos_token; /* NULL = "" */
    int add_generation_prompt;         /* the request's "add_generation_prompt" wins */
    int64_t now;                       /* unix seconds (UTC) for the date; 0 = time(NULL) */
} ul_chat_opts_t;

/* Defaults: no bos/eos, generation prompt on, now = current time. */
void ul_chat_opts_init(ul_chat_opts_t *o);

/* req: the request JSON object: "messages" (array), optional "tools" (array),
 * "chat_template_kwargs" (object: its keys override context variables),
 * "add_generation_prompt" (bool). Appends the prompt to out and its plain mask to plain
 * (plain may be NULL). Returns 0; UL_EINVAL with msg when the request is malformed or the
 * template raised or failed (msg: the template's message, e.g. "Conversation roles must
 * alternate user/assistant/user/assistant/..."); UL_E2BIG when a render limit was hit;
 * UL_ENOMEM. */
int ul_chat_render(const ul_chat_tmpl_t *t, const cJSON *req, const ul_chat_opts_t *o,
                   ul_buf_t *out, ul_buf_t *plain, char *msg, size_t msgcap);

/* Marks the number items of root (parsed from text) that were written as floats ("1.0",
 * "2e3") with UL_CHAT_JSON_FLOAT, so the template sees 1.0 as a float like Python's json
 * would; unmarked integral numbers are ints. Call it on the request body after cJSON
 * parsed it. UL_EINVAL when text is not what root was parsed from. */
#define UL_CHAT_JSON_FLOAT (1 << 12)
int ul_chat_json_mark_floats(cJSON *root, const char *text, size_t len);

/* The ChatML template used when a model has none. */
extern const char ul_chat_chatml_template[];
/* ChatML with tools in the Hermes style (Qwen2.5's): the fallback for requests with tools
 * when the chat template cannot render them. */
extern const char ul_chat_chatml_tools_template[];

#endif
