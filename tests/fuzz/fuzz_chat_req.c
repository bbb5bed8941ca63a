/* libFuzzer harness for chat request bodies: any bytes as the body of POST
 * /v1/chat/completions, /v1/responses or /v1/messages go through the endpoint's translator,
 * the shared field checks, the chat validation and the template rendering (api/chat.c's
 * path up to generation, without HTTP). Every input must be answered with a rendered prompt
 * whose plain mask has its length, or a refusal with a message: never a crash, a leak, a
 * hang or a sanitizer report. The first byte picks the template (its low 4 bits: ChatML, or
 * one of the shared real templates when ../shared is there) and the endpoint (its high 4
 * bits: 0 chat, 1 responses, 2 messages, modulo 3). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/gen.h"
#include "base/small_file.h"
#include "chat/chat.h"
#include "uvllm/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static const char *const files[] = {"Qwen-Qwen2.5-7B-Instruct.jinja",
                                    "meta-llama-Llama-3.1-8B-Instruct.jinja",
                                    "mistralai-Mistral-Nemo-Instruct-2407.jinja",
                                    "Qwen-Qwen3-0.6B.jinja", "google-gemma-2-2b-it.jinja"};
#define N_TMPL (1 + sizeof files / sizeof *files)
static ul_chat_tmpl_t *tmpl[N_TMPL];
static int n_tmpl;
static ul_api_t api;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    ul_log_set_level(UL_LOG_LEVEL_OFF);
    ul_codec_t codec;
    ul_codec_init_null(&codec, 32000, 31999);
    ul_api_init(&api, NULL, &codec, "null");
    snprintf(api.bos_text, sizeof api.bos_text, "<s>");
    snprintf(api.eos_text, sizeof api.eos_text, "</s>");
    char err[256];
    const char *c = ul_chat_chatml_template;
    if (ul_chat_tmpl_new(c, strlen(c), &tmpl[n_tmpl], err, sizeof err) == 0) n_tmpl++;
    const char *shared = getenv("UVLLM_SHARED") ? getenv("UVLLM_SHARED") : "../shared";
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        char path[1024];
        size_t len;
        snprintf(path, sizeof path, "%s/chat-templates/templates/%s", shared, files[i]);
        char *src = ul_small_file_dup(path, &len);
        if (src && ul_chat_tmpl_new(src, len, &tmpl[n_tmpl], err, sizeof err) == 0) n_tmpl++;
        free(src);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    api.chat_tmpl = tmpl[(data[0] & 15) % n_tmpl];
    api.chat_syn_ready = 0;
    ul_buf_t text = {0}, plain = {0};
    ul_api_bad_t bad = {0};
    ul_api_body_t ep = (ul_api_body_t)((data[0] >> 4) % 3);
    int rc =
        ul_api_chat_prepare_body(&api, ep, (const char *)data + 1, size - 1, &text, &plain, &bad);
    if (rc == 0 && text.len != plain.len) __builtin_trap();
    if (rc != 0 && !bad.msg[0]) __builtin_trap();
    ul_buf_free(&text);
    ul_buf_free(&plain);
    return 0;
}
