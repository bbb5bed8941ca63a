/* The Messages encoder (chat_gen.h): Anthropic's answer. Every block of the answer is one
 * content block, in generation order: text -> {"type":"text"}, reasoning ->
 * {"type":"thinking"} (its signature empty: nothing here is signed), a tool call ->
 * {"type":"tool_use","id","name","input"}. Not streaming: one message object. Streaming:
 * Anthropic's named events message_start, ping, then per block content_block_start,
 * content_block_delta (text_delta, thinking_delta, input_json_delta) and
 * content_block_stop, then message_delta (stop_reason, stop_sequence, usage) and
 * message_stop; what the SDK accumulates from them is the plain answer.
 *
 * stop_reason: end_turn, max_tokens, stop_sequence (stop_sequence names the string) or
 * tool_use; a generation cut by its deadline is pause_turn (the client may continue it).
 * usage as Anthropic counts it: input_tokens are the prompt tokens not served from the
 * prefix cache, cache_read_input_tokens those that were. */
#include <stdio.h>
#include <string.h>

#include "api/chat_gen.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

static void put(ul_buf_t *b, const char *s) { ul_gen_add(b, s, strlen(s)); }

static const char *text_of(const ul_cblk_t *k) { return k->text.p ? k->text.p : ""; }

static const char *stop_reason(const ul_choice_t *ch) {
    const char *f = ch->finish_reason ? ch->finish_reason : "stop";
    if (!strcmp(f, "length")) return "max_tokens";
    if (!strcmp(f, "tool_calls")) return "tool_use";
    if (!strcmp(f, "deadline")) return "pause_turn";
    return ch->stop_str ? "stop_sequence" : "end_turn";
}

/* ,"stop_reason":..,"stop_sequence":..,"stop_details":null */
static void stop_fields(ul_buf_t *b, const ul_choice_t *ch) {
    const char *r = stop_reason(ch);
    ul_gen_printf(b, "\"stop_reason\":\"%s\",\"stop_sequence\":", r);
    if (!strcmp(r, "stop_sequence"))
        ul_gen_json_str(b, ch->stop_str, strlen(ch->stop_str));
    else
        put(b, "null");
    put(b, ",\"stop_details\":null");
}

/* {"input_tokens","cache_creation_input_tokens","cache_read_input_tokens","output_tokens"} */
static void usage(ul_buf_t *b, ul_gen_t *g, int final) {
    int32_t prompt, gen, cached;
    ul_chat_usage(g, &prompt, &gen, &cached);
    if (!final) gen = cached = 0;
    ul_gen_printf(b,
                  "{\"input_tokens\":%d,\"cache_creation_input_tokens\":0,"
                  "\"cache_read_input_tokens\":%d,\"output_tokens\":%d}",
                  (int)(prompt - cached), (int)cached, (int)gen);
}

/* A content block; done 0: as content_block_start shows it (empty). */
static void block(ul_buf_t *b, const ul_cblk_t *k, int done) {
    size_t n = done ? k->text.len : 0;
    if (k->kind == UL_CBLK_TEXT) {
        put(b, "{\"type\":\"text\",\"text\":");
        ul_gen_json_str(b, text_of(k), n);
    } else if (k->kind == UL_CBLK_REASONING) {
        put(b, "{\"type\":\"thinking\",\"thinking\":");
        ul_gen_json_str(b, text_of(k), n);
        put(b, ",\"signature\":\"\"");
    } else {
        /* Anthropic's ids read toolu_...: the chat core's call_ prefix swapped for it */
        char id[96];
        int idn =
            snprintf(id, sizeof id, "toolu_%.80s", k->id + (strncmp(k->id, "call_", 5) ? 0 : 5));
        put(b, "{\"type\":\"tool_use\",\"id\":");
        ul_gen_json_str(b, id, (size_t)idn);
        put(b, ",\"name\":");
        ul_gen_json_str(b, k->name, strlen(k->name));
        put(b, ",\"input\":");
        /* arguments the model left unparseable stay visible as a string */
        if (done && k->text.len)
            ul_chat_json_raw_or_str(b, text_of(k), k->text.len);
        else
            put(b, "{}");
    }
    put(b, "}");
}

/* The message object; final 0: as message_start shows it (no content, no stop yet). */
static void message(ul_buf_t *b, ul_gen_t *g, int final) {
    ul_choice_t *ch = &g->choices[0];
    const ul_chat_choice_t *cc = ch->ep;
    put(b, "{\"id\":");
    ul_gen_json_str(b, g->id, strlen(g->id));
    put(b, ",\"type\":\"message\",\"role\":\"assistant\",\"model\":");
    ul_gen_json_str(b, g->api->model_id, strlen(g->api->model_id));
    put(b, ",\"content\":[");
    for (int i = 0; final && i < cc->n_blk; i++) {
        if (i) put(b, ",");
        block(b, &cc->blk[i], 1);
    }
    put(b, "],");
    if (final)
        stop_fields(b, ch);
    else
        put(b, "\"stop_reason\":null,\"stop_sequence\":null,\"stop_details\":null");
    put(b, ",\"usage\":");
    usage(b, g, final);
    put(b, "}");
}

static void answer_message(ul_gen_t *g) { ul_gen_answer_object(g, message); }

/* ---- events ------------------------------------------------------------------------- */

static void start(ul_gen_t *g) {
    ul_buf_t *f = ul_gen_event_head(g, "message_start");
    put(f, ",\"message\":");
    message(f, g, 0);
    ul_gen_event_send(g, NULL, "message_start");
    ul_gen_event_head(g, "ping");
    ul_gen_event_send(g, NULL, "ping");
}

static void blk_open(ul_choice_t *ch, const ul_cblk_t *k) {
    ul_buf_t *f = ul_gen_event_head(ch->g, "content_block_start");
    ul_gen_printf(f, ",\"index\":%d,\"content_block\":", k->index);
    block(f, k, 0);
    ul_gen_event_send(ch->g, ch, "content_block_start");
}

static void blk_delta(ul_choice_t *ch, const ul_cblk_t *k, const char *s, size_t n) {
    static const char *const kinds[][2] = {
        [UL_CBLK_TEXT] = {"text_delta", "text"},
        [UL_CBLK_REASONING] = {"thinking_delta", "thinking"},
        [UL_CBLK_TOOL] = {"input_json_delta", "partial_json"},
    };
    ul_buf_t *f = ul_gen_event_head(ch->g, "content_block_delta");
    ul_gen_printf(f, ",\"index\":%d,\"delta\":{\"type\":\"%s\",\"%s\":", k->index,
                  kinds[k->kind][0], kinds[k->kind][1]);
    ul_gen_json_str(f, s, n);
    put(f, "}");
    ul_gen_event_send(ch->g, ch, "content_block_delta");
}

static void blk_close(ul_choice_t *ch, const ul_cblk_t *k) {
    ul_buf_t *f = ul_gen_event_head(ch->g, "content_block_stop");
    ul_gen_printf(f, ",\"index\":%d", k->index);
    ul_gen_event_send(ch->g, ch, "content_block_stop");
}

static void blk_end(ul_choice_t *ch) {}

static int stream_end(ul_gen_t *g) {
    ul_buf_t *f = ul_gen_event_head(g, "message_delta");
    put(f, ",\"delta\":{");
    stop_fields(f, &g->choices[0]);
    put(f, "},\"usage\":");
    usage(f, g, 1);
    ul_gen_event_send(g, NULL, "message_delta");
    ul_gen_event_head(g, "message_stop");
    ul_gen_event_send(g, NULL, "message_stop");
    ul_sse_end(g->sse);
    return 1;
}

/* Anthropic's error event: {"type":"error","error":{"type","message"}} */
static int stream_error(ul_gen_t *g, int status, const char *type, const char *msg) {
    ul_buf_t *f = ul_gen_event_head(g, "error");
    ul_gen_printf(f, ",\"error\":{\"type\":\"%s\",\"message\":", ul_api_anthropic_type(status));
    ul_gen_json_str(f, msg, strlen(msg));
    put(f, "}");
    ul_gen_event_send(g, NULL, "error");
    (void)type;
    return 1;
}

const ul_chat_enc_t ul_messages_enc = {.id_prefix = "msg_",
                                       .calls_as_generated = 1,
                                       .start = start,
                                       .open = blk_open,
                                       .delta = blk_delta,
                                       .close = blk_close,
                                       .end = blk_end,
                                       .stream_end = stream_end,
                                       .stream_error = stream_error,
                                       .answer = answer_message};
