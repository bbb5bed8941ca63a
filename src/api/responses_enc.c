/* The Responses encoder (chat_gen.h): every block of the answer is one output item (text:
 * a message with one output_text part; reasoning: a reasoning item with one reasoning_text
 * part; a tool call: a function_call item), in generation order. Not streaming: one
 * response object. Streaming: OpenAI's event sequence, every event with its
 * sequence_number: response.created, response.in_progress, then per item
 * response.output_item.added, (response.content_part.added, the text's or the reasoning's
 * .delta events, .done, response.content_part.done | the arguments' .delta events and
 * .done), response.output_item.done, and last response.completed (or response.incomplete
 * when max_output_tokens cut it) carrying the same response object as the plain answer. */
#include <string.h>

#include "api/chat_gen.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

typedef struct rreq_s {
    char *echo; /* the request's settings as JSON members (responses.c), each after a comma */
    size_t echo_len;
    int seq; /* sequence_number of the next event */
} rreq_t;

static void put(ul_buf_t *b, const char *s) { ul_gen_add(b, s, strlen(s)); }

static rreq_t *rreq(ul_gen_t *g) { return ul_chat_req_of(g)->enc_req; }

static int setup(ul_gen_t *g, const char *echo, size_t len) {
    rreq_t *r = ul_arena_alloc(&g->arena, sizeof *r);
    if (!r) return UL_ENOMEM;
    memset(r, 0, sizeof *r);
    r->echo = ul_arena_strndup(&g->arena, echo ? echo : "", echo ? len : 0);
    if (!r->echo) return UL_ENOMEM;
    r->echo_len = echo ? len : 0;
    ul_chat_req_of(g)->enc_req = r;
    return 0;
}

/* ---- the response object ------------------------------------------------------------ */

/* An item's id: its kind's prefix, the request id, its index ("msg_<req>_0"). */
static void item_id(ul_buf_t *b, const ul_gen_t *g, const ul_cblk_t *k) {
    static const char *const pre[] = {"msg_", "rs_", "fc_"};
    const char *req = g->id + strlen("resp_");
    put(b, "\"");
    ul_gen_add(b, pre[k->kind], strlen(pre[k->kind]));
    UL_ASSERT(ul_buf_append_json_str(b, req, strlen(req)) == 0);
    ul_gen_printf(b, "_%d\"", k->index);
}

static const char *text_of(const ul_cblk_t *k) { return k->text.p ? k->text.p : ""; }

static void part(ul_buf_t *b, const ul_cblk_t *k, int done) {
    put(b, k->kind == UL_CBLK_TEXT ? "{\"type\":\"output_text\",\"text\":"
                                   : "{\"type\":\"reasoning_text\",\"text\":");
    ul_gen_json_str(b, text_of(k), done ? k->text.len : 0);
    if (k->kind == UL_CBLK_TEXT) put(b, ",\"annotations\":[],\"logprobs\":[]");
    put(b, "}");
}

/* "completed", or "incomplete" when the output was cut (max_output_tokens, deadline). */
static const char *status_of(const ul_gen_t *g) {
    const char *f = g->choices[0].finish_reason;
    return f && (!strcmp(f, "length") || !strcmp(f, "deadline")) ? "incomplete" : "completed";
}

/* An item's status: the item the cut fell in is incomplete, those before it completed. An
 * item closes either when the next begins (the choice has no finish_reason yet) or at the
 * end, so output_item.done and the final object agree. */
static const char *item_status(const ul_gen_t *g, const ul_cblk_t *k) {
    const ul_chat_choice_t *cc = g->choices[0].ep;
    return k->index == cc->n_blk - 1 && g->choices[0].finish_reason ? status_of(g) : "completed";
}

/* An output item; done 0: as output_item.added shows it (empty, in progress). */
static void item(ul_buf_t *b, const ul_gen_t *g, const ul_cblk_t *k, int done) {
    const char *st = item_status(g, k);
    put(b, "{\"id\":");
    item_id(b, g, k);
    if (k->kind == UL_CBLK_TOOL) {
        ul_gen_printf(b, ",\"type\":\"function_call\",\"status\":\"%s\",\"call_id\":",
                      done ? st : "in_progress");
        ul_gen_json_str(b, k->id, strlen(k->id));
        put(b, ",\"name\":");
        ul_gen_json_str(b, k->name, strlen(k->name));
        put(b, ",\"arguments\":");
        ul_gen_json_str(b, text_of(k), done ? k->text.len : 0);
    } else if (k->kind == UL_CBLK_REASONING) {
        put(b, ",\"type\":\"reasoning\",\"summary\":[],\"content\":[");
        if (done) part(b, k, 1);
        put(b, "]");
    } else {
        ul_gen_printf(
            b, ",\"type\":\"message\",\"status\":\"%s\",\"role\":\"assistant\",\"content\":[",
            done ? st : "in_progress");
        if (done) part(b, k, 1);
        put(b, "]");
    }
    put(b, "}");
}

/* The response object; final 0: as response.created shows it (in progress, no output). */
static void response(ul_buf_t *b, ul_gen_t *g, int final) {
    const rreq_t *r = rreq(g);
    const char *st = final ? status_of(g) : "in_progress";
    put(b, "{\"id\":");
    ul_gen_json_str(b, g->id, strlen(g->id));
    ul_gen_printf(b,
                  ",\"object\":\"response\",\"created_at\":%lld,\"status\":\"%s\","
                  "\"background\":false,\"error\":null,\"incomplete_details\":",
                  (long long)g->created, st);
    const char *f = g->choices[0].finish_reason;
    if (final && !strcmp(st, "incomplete"))
        ul_gen_printf(b, "{\"reason\":\"%s\"}",
                      !strcmp(f, "length") ? "max_output_tokens" : "deadline");
    else
        put(b, "null");
    ul_gen_add(b, r->echo, r->echo_len);
    put(b, ",\"model\":");
    ul_gen_json_str(b, g->api->model_id, strlen(g->api->model_id));
    put(b, ",\"output\":[");
    const ul_chat_choice_t *cc = g->choices[0].ep;
    for (int i = 0; final && i < cc->n_blk; i++) {
        if (i) put(b, ",");
        item(b, g, &cc->blk[i], 1);
    }
    put(b, "],\"usage\":");
    if (!final) {
        put(b, "null}");
        return;
    }
    int32_t prompt, gen, cached;
    ul_chat_usage(g, &prompt, &gen, &cached);
    ul_gen_printf(b,
                  "{\"input_tokens\":%d,\"input_tokens_details\":{\"cached_tokens\":%d},"
                  "\"output_tokens\":%d,\"output_tokens_details\":{\"reasoning_tokens\":%d},"
                  "\"total_tokens\":%d}}",
                  (int)prompt, (int)cached, (int)gen, (int)cc->n_thinking, (int)(prompt + gen));
}

static void answer_response(ul_gen_t *g) { ul_gen_answer_object(g, response); }

/* ---- events ------------------------------------------------------------------------- */

/* Starts an event in g->frame: {"type":TYPE,"sequence_number":N */
static ul_buf_t *ev_head(ul_gen_t *g, const char *type) {
    ul_buf_t *f = ul_gen_event_head(g, type);
    ul_gen_printf(f, ",\"sequence_number\":%d", rreq(g)->seq++);
    return f;
}

/* ,"item_id":..,"output_index":N[,"content_index":0] */
static void ev_item(ul_buf_t *f, const ul_gen_t *g, const ul_cblk_t *k, int content) {
    put(f, ",\"item_id\":");
    item_id(f, g, k);
    ul_gen_printf(f, ",\"output_index\":%d", k->index);
    if (content) put(f, ",\"content_index\":0");
}

static void ev_response(ul_gen_t *g, const char *type, int final) {
    ul_buf_t *f = ev_head(g, type);
    put(f, ",\"response\":");
    response(f, g, final);
    ul_gen_event_send(g, NULL, type);
}

static void start(ul_gen_t *g) {
    ev_response(g, "response.created", 0);
    ev_response(g, "response.in_progress", 0);
}

static void ev_output_item(ul_choice_t *ch, const ul_cblk_t *k, int done) {
    const char *type = done ? "response.output_item.done" : "response.output_item.added";
    ul_buf_t *f = ev_head(ch->g, type);
    ul_gen_printf(f, ",\"output_index\":%d,\"item\":", k->index);
    item(f, ch->g, k, done);
    ul_gen_event_send(ch->g, ch, type);
}

static void ev_part(ul_choice_t *ch, const ul_cblk_t *k, int done) {
    const char *type = done ? "response.content_part.done" : "response.content_part.added";
    ul_buf_t *f = ev_head(ch->g, type);
    ev_item(f, ch->g, k, 1);
    put(f, ",\"part\":");
    part(f, k, done);
    ul_gen_event_send(ch->g, ch, type);
}

static void blk_open(ul_choice_t *ch, const ul_cblk_t *k) {
    ev_output_item(ch, k, 0);
    if (k->kind != UL_CBLK_TOOL) ev_part(ch, k, 0);
}

static const char *delta_type(const ul_cblk_t *k) {
    return k->kind == UL_CBLK_TEXT        ? "response.output_text.delta"
           : k->kind == UL_CBLK_REASONING ? "response.reasoning_text.delta"
                                          : "response.function_call_arguments.delta";
}

static void blk_delta(ul_choice_t *ch, const ul_cblk_t *k, const char *s, size_t n) {
    ul_buf_t *f = ev_head(ch->g, delta_type(k));
    ev_item(f, ch->g, k, k->kind != UL_CBLK_TOOL);
    put(f, ",\"delta\":");
    ul_gen_json_str(f, s, n);
    if (k->kind == UL_CBLK_TEXT) put(f, ",\"logprobs\":[]");
    ul_gen_event_send(ch->g, ch, delta_type(k));
}

static void blk_close(ul_choice_t *ch, const ul_cblk_t *k) {
    const char *type = k->kind == UL_CBLK_TEXT        ? "response.output_text.done"
                       : k->kind == UL_CBLK_REASONING ? "response.reasoning_text.done"
                                                      : "response.function_call_arguments.done";
    ul_buf_t *f = ev_head(ch->g, type);
    ev_item(f, ch->g, k, k->kind != UL_CBLK_TOOL);
    if (k->kind == UL_CBLK_TOOL) {
        put(f, ",\"name\":");
        ul_gen_json_str(f, k->name, strlen(k->name));
    }
    put(f, k->kind == UL_CBLK_TOOL ? ",\"arguments\":" : ",\"text\":");
    ul_gen_json_str(f, text_of(k), k->text.len);
    if (k->kind == UL_CBLK_TEXT) put(f, ",\"logprobs\":[]");
    ul_gen_event_send(ch->g, ch, type);
    if (k->kind != UL_CBLK_TOOL) ev_part(ch, k, 1);
    ev_output_item(ch, k, 1);
}

static void blk_end(ul_choice_t *ch) {}

static int stream_end(ul_gen_t *g) {
    ev_response(g, strcmp(status_of(g), "completed") ? "response.incomplete" : "response.completed",
                1);
    ul_sse_end(g->sse);
    return 1;
}

/* OpenAI's error event: {"type":"error","code","message","param","sequence_number"} */
static int stream_error(ul_gen_t *g, int status, const char *type, const char *msg) {
    ul_buf_t *f = ev_head(g, "error");
    put(f, ",\"code\":");
    ul_gen_json_str(f, type, strlen(type));
    put(f, ",\"message\":");
    ul_gen_json_str(f, msg, strlen(msg));
    put(f, ",\"param\":null");
    ul_gen_event_send(g, NULL, "error");
    return 1;
}

const ul_chat_enc_t ul_responses_enc = {.id_prefix = "resp_",
                                        .calls_as_generated = 1,
                                        .setup = setup,
                                        .start = start,
                                        .open = blk_open,
                                        .delta = blk_delta,
                                        .close = blk_close,
                                        .end = blk_end,
                                        .stream_end = stream_end,
                                        .stream_error = stream_error,
                                        .answer = answer_response};
