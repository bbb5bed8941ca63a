/* Shared by the output-parser tests: runs a parser over a text whole, in 1-byte pieces and
 * in random pieces (cut at character boundaries), asserts the three agree event for event
 * (concatenated deltas, tool calls with ids), that every delta is non-empty whole UTF-8,
 * and returns the result. */
#ifndef UL_TEST_TOOLCALL_TESTUTIL_H
#define UL_TEST_TOOLCALL_TESTUTIL_H

#include <cjson/cJSON.h>
#include <ctype.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../test_data.h"
#include "base/utf8.h"
#include "chat/toolcall.h"
#include "uvllm/err.h"

#define T_MAX_CALLS 8

typedef struct {
    ul_buf_t content, reasoning;
    int n;
    char name[T_MAX_CALLS][64], args[T_MAX_CALLS][1024], id[T_MAX_CALLS][32];
    int order_err; /* an index out of sequence */
} t_res_t;

/* Whole, valid UTF-8: a delta never splits a character. */
static inline int t_utf8_whole(const char *s, size_t n) { return ul_utf8_check(s, n) == n; }

static inline void t_on_ev(void *ud, const ul_chat_ev_t *ev) {
    t_res_t *r = ud;
    if (ev->kind == UL_CHAT_EV_TOOL_CALL) {
        cr_assert_lt(r->n, T_MAX_CALLS);
        if (ev->index != r->n) r->order_err = 1;
        for (const char *a = ev->arguments; *a; a++) /* strict JSON: no raw control bytes */
            cr_assert_geq((unsigned char)*a, 0x20, "raw control byte in %s", ev->arguments);
        snprintf(r->name[r->n], sizeof r->name[0], "%s", ev->name);
        snprintf(r->args[r->n], sizeof r->args[0], "%s", ev->arguments);
        snprintf(r->id[r->n], sizeof r->id[0], "%s", ev->id);
        r->n++;
        return;
    }
    cr_assert_gt(ev->len, 0, "empty delta");
    cr_assert(t_utf8_whole(ev->text, ev->len), "delta splits a character");
    ul_buf_t *b = ev->kind == UL_CHAT_EV_CONTENT ? &r->content : &r->reasoning;
    ul_buf_append(b, ev->text, ev->len);
}

static inline void t_res_free(t_res_t *r) {
    ul_buf_free(&r->content);
    ul_buf_free(&r->reasoning);
}

/* piece: 0 whole, 1 one byte at a time, else random pieces from seed piece. */
static inline void t_run(const ul_chat_syntax_t *s, int sir, int tools, const char *text,
                         size_t len, unsigned piece, t_res_t *r) {
    memset(r, 0, sizeof *r);
    ul_chat_parser_t p;
    ul_chat_parser_init(&p, s, sir, tools, 42);
    unsigned rng = piece;
    size_t i = 0;
    while (i < len) {
        size_t n = piece == 0   ? len - i
                   : piece == 1 ? 1
                                : 1 + (rng = rng * 1103515245u + 12345u) % 17;
        if (n > len - i) n = len - i;
        while (i + n < len && ((unsigned char)text[i + n] & 0xC0) == 0x80) n++;
        cr_assert_eq(ul_chat_parser_push(&p, text + i, n, t_on_ev, r), 0);
        i += n;
    }
    cr_assert_eq(ul_chat_parser_finish(&p, t_on_ev, r), 0);
    ul_chat_parser_free(&p);
    ul_buf_cstr(&r->content);
    ul_buf_cstr(&r->reasoning);
    cr_assert_not(r->order_err);
}

static inline int t_res_eq(t_res_t *a, t_res_t *b) {
    if (a->content.len != b->content.len || a->reasoning.len != b->reasoning.len || a->n != b->n)
        return 0;
    if (a->content.len && memcmp(a->content.p, b->content.p, a->content.len)) return 0;
    if (a->reasoning.len && memcmp(a->reasoning.p, b->reasoning.p, a->reasoning.len)) return 0;
    for (int i = 0; i < a->n; i++)
        if (strcmp(a->name[i], b->name[i]) || strcmp(a->args[i], b->args[i]) ||
            strcmp(a->id[i], b->id[i]))
            return 0;
    return 1;
}

/* Whole, 1-byte and random pieces must agree; returns the whole-text result. */
static inline void t_parse(const ul_chat_syntax_t *s, int sir, int tools, const char *text,
                           t_res_t *r) {
    size_t len = strlen(text);
    t_run(s, sir, tools, text, len, 0, r);
    cr_assert(t_utf8_whole(r->content.p ? r->content.p : "", r->content.len));
    cr_assert(t_utf8_whole(r->reasoning.p ? r->reasoning.p : "", r->reasoning.len));
    unsigned pieces[] = {1, 7, 99, 12345};
    for (size_t k = 0; k < sizeof pieces / sizeof pieces[0]; k++) {
        t_res_t o;
        t_run(s, sir, tools, text, len, pieces[k], &o);
        cr_assert(t_res_eq(r, &o),
                  "pieces %u differ on %s:\n whole content [%s] reasoning [%s] calls %d\n "
                  "split content [%s] reasoning [%s] calls %d",
                  pieces[k], text, r->content.p ? r->content.p : "",
                  r->reasoning.p ? r->reasoning.p : "", r->n, o.content.p ? o.content.p : "",
                  o.reasoning.p ? o.reasoning.p : "", o.n);
        t_res_free(&o);
    }
}

/* JSON texts equal as values. */
static inline int t_json_eq(const char *a, const char *b) {
    cJSON *x = cJSON_Parse(a), *y = cJSON_Parse(b);
    int eq = x && y && cJSON_Compare(x, y, 1);
    cJSON_Delete(x);
    cJSON_Delete(y);
    return eq;
}

/* The source of a shared chat template (a missing one fails the test). Caller frees. */
static inline char *t_read_template(const char *file, size_t *len) {
    char path[2048];
    snprintf(path, sizeof path, "%s/chat-templates/templates/%s", ut_shared_dir(), file);
    return ut_slurp(path, len);
}

static inline void t_detect(const char *file, ul_chat_syntax_t *s) {
    size_t n;
    char *src = t_read_template(file, &n);
    ul_chat_syntax_detect(src, n, s);
    free(src);
}

#endif
