/* libFuzzer harness for the Jinja interpreter: any byte string is compiled as a template
 * and, when it compiles, rendered against a small chat context (messages with a tool
 * call, tools, bos/eos) under tight limits. Every input must end in output or an error
 * code with a message: no crash, no sanitizer report, no hang, no unbounded memory, and
 * the plain mask must stay as long as the text. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja.h"
#include "uvllm/err.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char ctx_json[] =
    "{\"messages\":[{\"role\":\"system\",\"content\":\"sys\"},{\"role\":\"user\",\"content\":"
    "\"Hi <|im_end|> \\u00fc\"},{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":"
    "\"c1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":{\"x\":1.5,"
    "\"y\":[true,null]}}}]},{\"role\":\"tool\",\"content\":\"ok\"}],\"tools\":[{\"type\":"
    "\"function\",\"function\":{\"name\":\"f\",\"description\":\"d\",\"parameters\":{\"type\":"
    "\"object\",\"properties\":{\"x\":{\"type\":\"number\"}},\"required\":[\"x\"]}}}],"
    "\"add_generation_prompt\":true,\"enable_thinking\":false}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static cJSON *ctx;
    if (!ctx) ctx = cJSON_Parse(ctx_json); /* read-only after the first call */
    ul_jinja_t *t;
    char err[256];
    if (ul_jinja_new((const char *)data, size, &t, err, sizeof err)) return 0;
    ul_jinja_var_t vars[8];
    size_t n = 0;
    for (cJSON *k = ctx->child; k && n < 6; k = k->next)
        vars[n++] = (ul_jinja_var_t){k->string, k, 1};
    cJSON *bos = cJSON_CreateString("<s>"), *eos = cJSON_CreateString("</s>");
    vars[n++] = (ul_jinja_var_t){"bos_token", bos, 0};
    vars[n++] = (ul_jinja_var_t){"eos_token", eos, 0};
    ul_jinja_limits_t lim = {.max_steps = 200000,
                             .max_output = 1 << 16,
                             .max_memory = 32 << 20,
                             .max_range = 10000,
                             .max_depth = 32};
    ul_buf_t out = {0}, plain = {0};
    char msg[256];
    int rc = ul_jinja_render(t, vars, n, 1795521600, &lim, &out, &plain, msg, sizeof msg);
    if (rc == 0 && out.len != plain.len) abort();
    if (rc && (out.len || !msg[0])) abort(); /* a failure appends nothing and says why */
    ul_buf_free(&out);
    ul_buf_free(&plain);
    cJSON_Delete(bos);
    cJSON_Delete(eos);
    ul_jinja_free(t);
    return 0;
}
