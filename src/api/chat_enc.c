/* The chat.completion encoder (chat_gen.h): OpenAI's /v1/chat/completions answer, streamed
 * as chat.completion.chunk deltas (the first of each choice carries the role; a tool call
 * starts with its id and name, then argument fragments) or as one chat.completion whose
 * message has content, reasoning_content (the template's thinking) and tool_calls. */
#include <string.h>

#include "api/chat_gen.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

static void chunk_head(ul_choice_t *ch) {
    ul_gen_t *g = ch->g;
    g->frame.len = 0;
    ul_gen_json_head(g, &g->frame, "chat.completion.chunk");
    ul_gen_printf(&g->frame, "{\"index\":%d,\"delta\":{", ch->index);
}

/* Closes a chunk: pending logprobs ride on it. */
static void chunk_tail(ul_choice_t *ch, const char *finish_reason) {
    ul_gen_t *g = ch->g;
    ul_buf_t *f = &g->frame;
    ul_gen_add(f, "},\"logprobs\":", 13);
    if (g->p.logprobs == 1 && ch->n_lp) {
        ul_gen_add(f, "{\"content\":[", 12);
        ul_gen_add(f, ch->lp.p, ch->lp.len);
        ul_gen_add(f, "]}", 2);
        ch->lp.len = 0;
        ch->n_lp = 0;
    } else {
        ul_gen_add(f, "null", 4);
    }
    if (finish_reason)
        ul_gen_printf(f, ",\"finish_reason\":\"%s\"}]", finish_reason);
    else
        ul_gen_add(f, ",\"finish_reason\":null}]", 23);
    if (g->p.include_usage) ul_gen_add(f, ",\"usage\":null", 13);
    ul_gen_add(f, "}", 1);
    ul_gen_send(g, finish_reason ? NULL : ch);
}

/* The role chunk every streamed choice starts with. */
static void send_roles(ul_gen_t *g) {
    for (int i = 0; i < g->n_choices && g->sse; i++) {
        ul_choice_t *ch = &g->choices[i];
        chunk_head(ch);
        ul_gen_add(&g->frame, "\"role\":\"assistant\",\"content\":\"\"", 31);
        chunk_tail(ch, NULL);
    }
}

/* A streamed call starts with its id and name (OpenAI's first delta of a call). */
static void blk_open(ul_choice_t *ch, const ul_cblk_t *b) {
    if (b->kind != UL_CBLK_TOOL) return;
    ul_buf_t *f = &ch->g->frame;
    chunk_head(ch);
    ul_gen_printf(f, "\"tool_calls\":[{\"index\":%d,\"id\":", b->call);
    ul_gen_json_str(f, b->id, strlen(b->id));
    ul_gen_add(f, ",\"type\":\"function\",\"function\":{\"name\":", 38);
    ul_gen_json_str(f, b->name, strlen(b->name));
    ul_gen_add(f, ",\"arguments\":\"\"}}]", 18);
    chunk_tail(ch, NULL);
}

static void blk_delta(ul_choice_t *ch, const ul_cblk_t *b, const char *s, size_t n) {
    ul_buf_t *f = &ch->g->frame;
    chunk_head(ch);
    if (b->kind == UL_CBLK_TOOL) {
        ul_gen_printf(f, "\"tool_calls\":[{\"index\":%d,\"function\":{\"arguments\":", b->call);
        ul_gen_json_str(f, s, n);
        ul_gen_add(f, "}}]", 3);
    } else {
        ul_gen_add(f, b->kind == UL_CBLK_TEXT ? "\"content\":" : "\"reasoning_content\":",
                   b->kind == UL_CBLK_TEXT ? 10 : 20);
        ul_gen_json_str(f, s, n);
    }
    chunk_tail(ch, NULL);
}

static void blk_close(ul_choice_t *ch, const ul_cblk_t *b) {}

static void blk_end(ul_choice_t *ch) {
    chunk_head(ch);
    chunk_tail(ch, ch->finish_reason);
}

/* {"token","logprob","bytes":[...],"top_logprobs":[{"token","logprob","bytes"}]} */
static void lp_entry(ul_buf_t *b, const char *t, int n, float lp) {
    ul_gen_add(b, "{\"token\":", 9);
    ul_gen_json_str(b, t, (size_t)n);
    ul_gen_printf(b, ",\"logprob\":%.9g,\"bytes\":[", lp);
    for (int i = 0; i < n; i++) ul_gen_printf(b, "%s%d", i ? "," : "", (unsigned char)t[i]);
    ul_gen_add(b, "]", 1);
}

static void logprob(ul_choice_t *ch, int32_t tok, const ul_token_lp_t *lp) {
    ul_gen_t *g = ch->g;
    char t[256];
    int n = ul_gen_token_text(g, tok, t, sizeof t);
    if (ch->n_lp) ul_gen_add(&ch->lp, ",", 1);
    lp_entry(&ch->lp, t, n > 0 ? n : 0, lp->logprob);
    ul_gen_add(&ch->lp, ",\"top_logprobs\":[", 17);
    for (int i = 0; i < lp->n_top && i < g->p.top_logprobs; i++) {
        char tt[256];
        int m = ul_gen_token_text(g, lp->top_ids[i], tt, sizeof tt);
        if (i) ul_gen_add(&ch->lp, ",", 1);
        lp_entry(&ch->lp, tt, m > 0 ? m : 0, lp->top_logprobs[i]);
        ul_gen_add(&ch->lp, "}", 1);
    }
    ul_gen_add(&ch->lp, "]}", 2);
    ch->n_lp++;
}

/* Appends every block of kind k, joined, as a JSON string; 0 when there is none. */
static int joined(ul_buf_t *b, const ul_chat_choice_t *cc, ul_cblk_kind_t k) {
    int n = 0;
    for (int i = 0; i < cc->n_blk; i++) {
        if (cc->blk[i].kind != k) continue;
        if (!n++) ul_gen_add(b, "\"", 1);
        UL_ASSERT(ul_buf_append_json_str(b, cc->blk[i].text.p ? cc->blk[i].text.p : "",
                                         cc->blk[i].text.len) == 0);
    }
    if (n) ul_gen_add(b, "\"", 1);
    return n;
}

static void message(ul_buf_t *b, const ul_chat_choice_t *cc) {
    ul_gen_add(b, "{\"role\":\"assistant\",\"content\":", 30);
    if (!joined(b, cc, UL_CBLK_TEXT))
        ul_gen_add(b, cc->n_calls ? "null" : "\"\"", cc->n_calls ? 4 : 2);
    size_t at = b->len;
    ul_gen_add(b, ",\"reasoning_content\":", 21);
    if (!joined(b, cc, UL_CBLK_REASONING)) b->len = at;
    if (cc->n_calls) {
        ul_gen_add(b, ",\"tool_calls\":[", 15);
        for (int i = 0; i < cc->n_blk; i++) {
            const ul_cblk_t *t = &cc->blk[i];
            if (t->kind != UL_CBLK_TOOL) continue;
            ul_gen_add(b, t->call ? ",{\"id\":" : "{\"id\":", t->call ? 7 : 6);
            ul_gen_json_str(b, t->id, strlen(t->id));
            ul_gen_add(b, ",\"type\":\"function\",\"function\":{\"name\":", 38);
            ul_gen_json_str(b, t->name, strlen(t->name));
            ul_gen_add(b, ",\"arguments\":", 13);
            ul_gen_json_str(b, t->text.p ? t->text.p : "", t->text.len);
            ul_gen_add(b, "}}", 2);
        }
        ul_gen_add(b, "]", 1);
    }
    ul_gen_add(b, "}", 1);
}

static void answer(ul_gen_t *g) {
    ul_buf_t b = {0};
    ul_gen_json_head(g, &b, "chat.completion");
    for (int i = 0; i < g->n_choices; i++) {
        ul_choice_t *ch = &g->choices[i];
        if (i) ul_gen_add(&b, ",", 1);
        ul_gen_printf(&b, "{\"index\":%d,\"message\":", i);
        message(&b, ch->ep);
        ul_gen_add(&b, ",\"logprobs\":", 12);
        if (g->p.logprobs == 1) {
            ul_gen_add(&b, "{\"content\":[", 12);
            ul_gen_add(&b, ch->lp.p, ch->lp.len);
            ul_gen_add(&b, "]}", 2);
        } else {
            ul_gen_add(&b, "null", 4);
        }
        ul_gen_printf(&b, ",\"finish_reason\":\"%s\"}", ch->finish_reason);
    }
    ul_api_timing_answer(g);
    ul_gen_respond(g, &b);
}

static const ul_chat_enc_t enc = {.id_prefix = "chatcmpl-",
                                  .start = send_roles,
                                  .open = blk_open,
                                  .delta = blk_delta,
                                  .close = blk_close,
                                  .end = blk_end,
                                  .answer = answer,
                                  .logprob = logprob};

const ul_chat_ep_t ul_chat_ep_chat = {.enc = &enc};
