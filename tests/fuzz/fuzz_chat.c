/* libFuzzer harness for the chat layer's request normalisation: any bytes that parse as
 * JSON are rendered as a chat request (messages, tools, chat_template_kwargs,
 * add_generation_prompt in any shape) with ChatML and with a template that walks tool
 * calls, arguments and content parts. The result must be a prompt with a mask of the same
 * length or UL_EINVAL/UL_E2BIG with a message: odd shapes never crash. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat.h"
#include "uvllm/err.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char tools_tmpl[] =
    "{%- if tools is defined %}{{ tools | tojson }}{% endif -%}"
    "{%- for m in messages -%}<|{{ m.role }}|>{{ m.content | string | trim }}"
    "{%- for c in m.tool_calls | default([]) %}[{{ c.function.name }}:"
    "{{ c.function.arguments | tojson if c.function.arguments is mapping else "
    "c.function.arguments }}]{% endfor -%}"
    "{%- if loop.last and add_generation_prompt %}<|assistant|>{% endif -%}{%- endfor -%}"
    "{{ enable_thinking }}{{ date_string }}";

static ul_chat_tmpl_t *tmpl[2];

static void check(const ul_chat_tmpl_t *t, const cJSON *req) {
    ul_chat_opts_t o;
    ul_chat_opts_init(&o);
    o.bos_token = "<s>";
    o.now = 1795521600;
    ul_buf_t out = {0}, plain = {0};
    char msg[256];
    int rc = ul_chat_render(t, req, &o, &out, &plain, msg, sizeof msg);
    if (!rc && out.len != plain.len) abort();
    if (rc && (out.len || plain.len)) abort();
    if (rc && rc != UL_EINVAL && rc != UL_E2BIG && rc != UL_ENOMEM) abort();
    if (rc == UL_EINVAL && !msg[0]) abort();
    ul_buf_free(&out);
    ul_buf_free(&plain);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[256];
    if (!tmpl[0]) { /* built once; read-only afterwards */
        if (ul_chat_tmpl_new(ul_chat_chatml_template, strlen(ul_chat_chatml_template), &tmpl[0],
                             err, sizeof err) ||
            ul_chat_tmpl_new(tools_tmpl, strlen(tools_tmpl), &tmpl[1], err, sizeof err))
            abort();
    }
    cJSON *req = cJSON_ParseWithLength((const char *)data, size);
    if (!req) return 0;
    ul_chat_json_mark_floats(req, (const char *)data, size);
    check(tmpl[0], req);
    check(tmpl[1], req);
    cJSON_Delete(req);
    return 0;
}
