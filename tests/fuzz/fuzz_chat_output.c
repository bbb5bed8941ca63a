/* libFuzzer harness for the chat output parser (src/chat/toolcall*.c): any model output,
 * in any format, fed in any pieces, must give the same events as the whole text at once,
 * never crash, and every tool call must carry a name, a 29-byte id and arguments that are
 * a JSON object. When the input is valid UTF-8 (and is cut only between characters, as the
 * detokenizer delivers it), every delta must be whole UTF-8 too.
 *
 * Input layout: byte 0 picks the syntax (a template snippet run through detection), byte 1
 * the flags (bit 0 starts in reasoning, bit 1 parses tools), byte 2 seeds the piece sizes;
 * the rest is the model's output. */
#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "chat/toolcall.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Snippets containing the markers detection keys on, one per format family. */
static const char *const g_snippets[] = {"",
                                         "<tool_call> <think>",
                                         "<tool_call><parameter= <think>",
                                         "<|python_tag|>",
                                         "<|start_header_id|>ipython",
                                         "[TOOL_CALLS]",
                                         "[TOOL_CALLS][ARGS]",
                                         "<|python_tag|><function=",
                                         "Action: ```json",
                                         "<|START_ACTION|><|START_THINKING|>",
                                         "<|tool_call|><think><response></response>",
                                         "tool▁calls▁begin <think>",
                                         "｜DSML｜ <think>",
                                         "<|tool_calls_section_begin|>",
                                         "<arg_key> <think>",
                                         "<|channel|><|message|>",
                                         "<minimax:tool_call><think>",
                                         "<seed:tool_call><seed:think>",
                                         "functools[",
                                         "<|tool_call_start|><think>",
                                         "<tool_calls>[BEGIN FINAL RESPONSE]",
                                         "<|tools_prefix|><|inner_prefix|>",
                                         "function call<|role_sep|>",
                                         "<|tool_call:begin|>",
                                         "<|channel>",
                                         "<|channel> <|tool_call>call:"};
#define N_SNIPPETS (sizeof g_snippets / sizeof g_snippets[0])

#define MAX_CALLS 64

typedef struct {
    ul_buf_t text[2]; /* content, reasoning */
    ul_buf_t calls;   /* "id\0name\0args\0" records */
    int n_calls, check_utf8;
} res_t;

/* Whole, valid UTF-8 (deltas are checked only when the input is). */
static int utf8_whole(const char *s, size_t n) { return ul_utf8_check(s, n) == n; }

static void on_ev(void *ud, const ul_chat_ev_t *ev) {
    res_t *r = ud;
    if (ev->kind == UL_CHAT_EV_TOOL_CALL) {
        if (ev->index != r->n_calls++ || strlen(ev->id) != 29 || !ev->name[0]) __builtin_trap();
        cJSON *a = cJSON_Parse(ev->arguments);
        if (!cJSON_IsObject(a)) __builtin_trap();
        cJSON_Delete(a);
        ul_buf_append(&r->calls, ev->id, strlen(ev->id) + 1);
        ul_buf_append(&r->calls, ev->name, strlen(ev->name) + 1);
        ul_buf_append(&r->calls, ev->arguments, strlen(ev->arguments) + 1);
        return;
    }
    if (!ev->len || (r->check_utf8 && !utf8_whole(ev->text, ev->len))) __builtin_trap();
    ul_buf_append(&r->text[ev->kind == UL_CHAT_EV_REASONING], ev->text, ev->len);
}

/* seed 0: the whole text at once; 1: one character (byte) at a time; else random pieces. */
static void run(const ul_chat_syntax_t *s, int flags, const char *t, size_t n, unsigned seed,
                int utf8, res_t *r) {
    memset(r, 0, sizeof *r);
    r->check_utf8 = utf8;
    ul_chat_parser_t p;
    ul_chat_parser_init(&p, s, flags & 1, (flags >> 1) & 1, 99);
    size_t i = 0;
    while (i < n) {
        size_t k = seed == 0 ? n - i : seed == 1 ? 1 : 1 + (seed = seed * 1103515245u + 12345u) % 9;
        if (k > n - i) k = n - i;
        while (utf8 && i + k < n && ((unsigned char)t[i + k] & 0xC0) == 0x80) k++;
        if (ul_chat_parser_push(&p, t + i, k, on_ev, r)) __builtin_trap();
        i += k;
    }
    if (ul_chat_parser_finish(&p, on_ev, r)) __builtin_trap();
    ul_chat_parser_free(&p);
}

static int buf_eq(const ul_buf_t *a, const ul_buf_t *b) {
    return a->len == b->len && (!a->len || !memcmp(a->p, b->p, a->len));
}

static int same(const res_t *a, const res_t *b) {
    return buf_eq(&a->text[0], &b->text[0]) && buf_eq(&a->text[1], &b->text[1]) &&
           buf_eq(&a->calls, &b->calls);
}

static void res_free(res_t *r) {
    ul_buf_free(&r->text[0]);
    ul_buf_free(&r->text[1]);
    ul_buf_free(&r->calls);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 3) return 0;
    ul_chat_syntax_t s;
    const char *snip = g_snippets[data[0] % N_SNIPPETS];
    ul_chat_syntax_detect(snip, strlen(snip), &s);
    const char *t = (const char *)data + 3;
    size_t n = size - 3;
    int utf8 = utf8_whole(t, n);
    res_t whole, split, bytes;
    run(&s, data[1], t, n, 0, utf8, &whole);
    run(&s, data[1], t, n, data[2] | 1u << 8, utf8, &split);
    run(&s, data[1], t, n, 1, utf8, &bytes);
    if (!same(&whole, &split) || !same(&whole, &bytes)) __builtin_trap();
    res_free(&whole);
    res_free(&split);
    res_free(&bytes);
    return 0;
}
