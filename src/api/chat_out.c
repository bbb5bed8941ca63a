/* The output side every chat endpoint shares (chat_gen.h): the text generation decided for
 * the client goes through the chat output parser (chat/toolcall.h), whose events become
 * the choice's blocks: consecutive text joins one text block, consecutive reasoning one
 * reasoning block, and every tool call is a block of its own (its arguments the block's
 * text). Streaming, the encoder hears each block open, grow and close as it happens; the
 * plain answer is written from the same blocks at the end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "api/chat_gen.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

static ul_cblk_t *last(ul_chat_choice_t *cc) { return cc->n_blk ? &cc->blk[cc->n_blk - 1] : NULL; }

static int streaming(const ul_choice_t *ch) { return ch->g->p.stream && ch->g->req; }

static const ul_chat_enc_t *enc_of(ul_choice_t *ch) { return ul_chat_req_of(ch->g)->enc; }

/* The current block ends (streaming: the encoder closes it). */
static void blk_close(ul_choice_t *ch) {
    ul_chat_choice_t *cc = ch->ep;
    if (!cc->open) return;
    cc->open = 0;
    if (streaming(ch)) enc_of(ch)->close(ch, last(cc));
}

/* A new block; blocks are bounded by max_tokens, so growth failing is fatal like other
 * small internal allocations. */
static ul_cblk_t *blk_begin(ul_choice_t *ch, ul_cblk_kind_t kind, const char *id,
                            const char *name) {
    ul_chat_choice_t *cc = ch->ep;
    blk_close(ch);
    if (cc->n_blk == cc->cap_blk) {
        int cap = cc->cap_blk ? 2 * cc->cap_blk : 4;
        ul_cblk_t *nb = realloc(cc->blk, (size_t)cap * sizeof *nb);
        UL_ASSERT(nb);
        cc->blk = nb;
        cc->cap_blk = cap;
    }
    ul_cblk_t *b = &cc->blk[cc->n_blk];
    memset(b, 0, sizeof *b);
    b->kind = kind;
    b->index = cc->n_blk++;
    if (kind == UL_CBLK_TOOL) {
        b->call = cc->n_calls++;
        snprintf(b->id, sizeof b->id, "%s", id);
        b->name = strdup(name);
        UL_ASSERT(b->name);
    }
    cc->open = 1;
    if (streaming(ch)) enc_of(ch)->open(ch, b);
    return b;
}

static void blk_add(ul_choice_t *ch, ul_cblk_t *b, const char *s, size_t n) {
    if (!n) return;
    ul_gen_add(&b->text, s, n);
    if (streaming(ch)) enc_of(ch)->delta(ch, b, s, n);
}

static void text_event(ul_choice_t *ch, ul_cblk_kind_t kind, const char *s, size_t n) {
    ul_chat_choice_t *cc = ch->ep;
    ul_cblk_t *b = last(cc);
    if (!cc->open || b->kind != kind) b = blk_begin(ch, kind, NULL, NULL);
    blk_add(ch, b, s, n);
}

static void on_event(void *ud, const ul_chat_ev_t *ev) {
    ul_choice_t *ch = ud;
    ul_chat_choice_t *cc = ch->ep;
    const ul_chat_req_t *c = ul_chat_req_of(ch->g);
    switch (ev->kind) {
    case UL_CHAT_EV_CONTENT:
        text_event(ch, UL_CBLK_TEXT, ev->text, ev->len);
        break;
    case UL_CHAT_EV_REASONING:
        text_event(ch, UL_CBLK_REASONING, ev->text, ev->len);
        break;
    case UL_CHAT_EV_TOOL_START:                       /* its arguments follow as TOOL_ARGS */
        cc->skip = cc->n_calls && !c->parallel_tools; /* parallel_tool_calls: false */
        if (!cc->skip) blk_begin(ch, UL_CBLK_TOOL, ev->id, ev->name);
        break;
    case UL_CHAT_EV_TOOL_ARGS: {
        ul_cblk_t *b = last(cc);
        if (cc->skip || !cc->open || b->kind != UL_CBLK_TOOL) break;
        blk_add(ch, b, ev->text, ev->len);
        break;
    }
    case UL_CHAT_EV_TOOL_CALL:
        if (cc->n_calls && !c->parallel_tools) break;
        blk_add(ch, blk_begin(ch, UL_CBLK_TOOL, ev->id, ev->name), ev->arguments,
                strlen(ev->arguments));
        break;
    }
}

static void on_text(ul_choice_t *ch, const char *s, size_t n) {
    ul_chat_choice_t *cc = ch->ep;
    int before = cc->n_blk;
    size_t had = before ? last(cc)->text.len : 0;
    UL_ASSERT(ul_chat_parser_push(&cc->parser, s, n, on_event, ch) == 0);
    /* a token that only grew reasoning is a thinking token (usage's reasoning_tokens) */
    ul_cblk_t *b = last(cc);
    if (b && b->kind == UL_CBLK_REASONING && (cc->n_blk != before || b->text.len != had))
        cc->n_thinking++;
}

static void on_end(ul_choice_t *ch, const char *finish_reason) {
    ul_chat_choice_t *cc = ch->ep;
    UL_ASSERT(ul_chat_parser_finish(&cc->parser, on_event, ch) == 0);
    blk_close(ch);
    if (cc->n_calls && !strcmp(finish_reason, "stop")) ch->finish_reason = "tool_calls";
    if (streaming(ch)) enc_of(ch)->end(ch);
}

static void on_answer(ul_gen_t *g) { ul_chat_req_of(g)->enc->answer(g); }

static void on_logprob(ul_choice_t *ch, int32_t tok, const ul_token_lp_t *lp) {
    if (enc_of(ch)->logprob) enc_of(ch)->logprob(ch, tok, lp);
}

static void free_choice(ul_choice_t *ch) {
    ul_chat_choice_t *cc = ch->ep;
    if (!cc) return;
    ul_chat_parser_free(&cc->parser);
    for (int i = 0; i < cc->n_blk; i++) {
        free(cc->blk[i].name);
        ul_buf_free(&cc->blk[i].text);
    }
    free(cc->blk);
}

static int stream_end(ul_gen_t *g) {
    const ul_chat_enc_t *e = ul_chat_req_of(g)->enc;
    return e->stream_end ? e->stream_end(g) : 0;
}

static int stream_error(ul_gen_t *g, int status, const char *type, const char *msg) {
    const ul_chat_enc_t *e = ul_chat_req_of(g)->enc;
    return e->stream_error ? e->stream_error(g, status, type, msg) : 0;
}

const ul_gen_ops_t ul_chat_gen_ops = {.text = on_text,
                                      .end = on_end,
                                      .answer = on_answer,
                                      .logprob = on_logprob,
                                      .free_choice = free_choice,
                                      .stream_end = stream_end,
                                      .stream_error = stream_error};

int ul_chat_gen_setup(ul_gen_t *g, const ul_chat_req_t *c, const char *echo, size_t echo_len) {
    ul_chat_req_t *gc = ul_arena_alloc(&g->arena, sizeof *gc);
    if (!gc) return UL_ENOMEM;
    *gc = *c;
    gc->enc_req = NULL;
    g->ep = gc;
    for (int i = 0; i < g->n_choices; i++) {
        ul_choice_t *ch = &g->choices[i];
        ul_chat_choice_t *cc = ul_arena_alloc(&g->arena, sizeof *cc);
        if (!cc) return UL_ENOMEM;
        memset(cc, 0, sizeof *cc);
        ul_chat_parser_init(&cc->parser, &gc->syn, gc->starts_in_reasoning, gc->parse_tools,
                            ch->seq.sampling.seed ^ (uint64_t)(uintptr_t)g);
        ul_chat_parser_stream_calls(&cc->parser, g->p.stream || c->enc->calls_as_generated);
        ch->ep = cc;
    }
    return c->enc->setup ? c->enc->setup(g, echo, echo_len) : 0;
}

void ul_chat_usage(ul_gen_t *g, int32_t *prompt, int32_t *gen, int32_t *cached) {
    *prompt = g->n_prompt_tokens;
    *gen = *cached = 0;
    for (int i = 0; i < g->n_choices; i++) *gen += g->choices[i].n_gen;
    /* prompt tokens the prefix cache served: once per prompt (its choices share pages) */
    for (int i = 0; i < g->n_choices; i += g->p.best_of) *cached += g->choices[i].seq.n_cached;
}

void ul_chat_json_raw_or_str(ul_buf_t *b, const char *s, size_t n) {
    const char *end = s;
    cJSON *v = n ? cJSON_ParseWithLengthOpts(s, n, &end, 0) : NULL;
    while (v && end < s + n && memchr(" \t\r\n", *end, 4)) end++;
    if (v && end == s + n) /* one JSON value and nothing after it */
        ul_gen_add(b, s, n);
    else
        ul_gen_json_str(b, s, n);
    cJSON_Delete(v);
}
