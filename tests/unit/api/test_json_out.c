/* JSON mode (api/json_out.h): the byte acceptor takes exactly the JSON objects RFC 8259
 * allows (with llama.cpp's whitespace limits) and refuses a byte as soon as no allowed
 * document can follow; the token filter allows a token only when all its bytes fit and the
 * end-of-generation token only once the object is closed. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "api/json_out.h"
#include "uvllm/err.h"

/* Bytes accepted before the first refusal (or len), and whether the object is done. */
static size_t accepted(const char *s, size_t len, int *done) {
    ul_json_acc_t a;
    ul_json_acc_init(&a);
    size_t i = 0;
    while (i < len && ul_json_acc_feed(&a, (uint8_t)s[i]) == 0) i++;
    *done = i == len && ul_json_acc_done(&a);
    return i;
}

static void assert_doc(const char *s) {
    int done;
    size_t n = accepted(s, strlen(s), &done);
    cr_assert_eq(n, strlen(s), "refused byte %zu of %s", n, s);
    cr_assert(done, "%s accepted but not complete", s);
}

/* s is refused, at byte at (the first byte that cannot lead to a document). */
static void assert_refused_at(const char *s, size_t at) {
    int done;
    size_t n = accepted(s, strlen(s), &done);
    cr_assert_eq(n, at, "%s: refused at byte %zu, expected %zu", s, n, at);
}

Test(json_acc, objects_of_every_value_kind) {
    assert_doc("{}");
    assert_doc("{\"a\":1}");
    assert_doc("{\"a\":[1,2.5e-3,-0,0.5,1E+9,true,false,null,{\"b\":\"x\"}],\"c\":{}}");
    assert_doc("{\"esc\":\"\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u00e9\\uD83D\\uDE00\"}");
    assert_doc("{\"utf8\":\"\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"}");
    assert_doc("{\"\xc3\xa9\":[]}");
    assert_doc("{ \"a\": 1, \"b\": [ 2 ] }");
    assert_doc("{\n  \"a\": {\n    \"b\": [\n\t1\n    ]\n  }\n}");
}

Test(json_acc, refuses_the_first_impossible_byte) {
    assert_refused_at(" {}", 0);       /* nothing before the object */
    assert_refused_at("[1]", 0);       /* an object, not an array */
    assert_refused_at("\"s\"", 0);     /* nor a string */
    assert_refused_at("{}x", 2);       /* nothing after it */
    assert_refused_at("{} ", 2);       /* not even whitespace */
    assert_refused_at("{'a':1}", 1);   /* single quotes */
    assert_refused_at("{a:1}", 1);     /* bare keys */
    assert_refused_at("{\"a\" 1}", 5); /* the colon */
    assert_refused_at("{\"a\":01}", 6);
    assert_refused_at("{\"a\":1.}", 7);
    assert_refused_at("{\"a\":-}", 6);
    assert_refused_at("{\"a\":1e}", 7);
    assert_refused_at("{\"a\":+1}", 5);
    assert_refused_at("{\"a\":.5}", 5);
    assert_refused_at("{\"a\":tru}", 8);
    assert_refused_at("{\"a\":nul1}", 8);
    assert_refused_at("{\"a\":1,}", 7); /* trailing comma */
    assert_refused_at("{\"a\":[1,]}", 8);
    assert_refused_at("{\"a\":[1}", 7); /* mismatched closer */
    assert_refused_at("{\"a\":{]}", 6);
    assert_refused_at("{\"a\":\"\\x\"}", 7);
    assert_refused_at("{\"a\":\"\\u12g4\"}", 10);
    assert_refused_at("{\"a\":\"\\uD83D\"}", 12);    /* a high surrogate alone */
    assert_refused_at("{\"a\":\"\\uD83D\\n\"}", 13); /* ... then another escape */
    assert_refused_at("{\"a\":\"\\uD83D\\u0041\"}", 14);
    assert_refused_at("{\"a\":\"\\uDC00\"}", 9);          /* a low surrogate alone */
    assert_refused_at("{\"a\":\"\x01\"}", 6);             /* a raw control character */
    assert_refused_at("{\"a\":\"x\ny\"}", 7);             /* a raw newline in a string */
    assert_refused_at("{\"a\":\"\xc0\x80\"}", 6);         /* overlong */
    assert_refused_at("{\"a\":\"\xed\xa0\x80\"}", 7);     /* a surrogate */
    assert_refused_at("{\"a\":\"\xc3(\"}", 7);            /* a lead without its continuation */
    assert_refused_at("{\"a\":\"\x80\"}", 6);             /* a lone continuation */
    assert_refused_at("{\"a\":\"\xf4\x90\x80\x80\"}", 7); /* past U+10FFFF */
}

Test(json_acc, whitespace_is_one_space_or_a_newline_and_indentation) {
    assert_refused_at("{  \"a\":1}", 2);
    assert_refused_at("{\n\n\"a\":1}", 2);
    assert_refused_at("{ \n\"a\":1}", 2);
    assert_refused_at("{\r\n\"a\":1}", 1);
    char doc[64];
    snprintf(doc, sizeof doc, "{\n%*s\"a\":1}", UL_JSON_MAX_WS, "");
    assert_doc(doc);
    snprintf(doc, sizeof doc, "{\n%*s\"a\":1}", UL_JSON_MAX_WS + 1, "");
    assert_refused_at(doc, 2 + UL_JSON_MAX_WS);
}

Test(json_acc, limits_on_numbers_and_depth) {
    char doc[256];
    int n = snprintf(doc, sizeof doc, "{\"a\":");
    for (int i = 0; i < UL_JSON_MAX_NUM; i++) doc[n++] = '1';
    doc[n] = 0;
    int done;
    cr_assert_eq(accepted(doc, strlen(doc), &done), strlen(doc));
    strcat(doc, "1");
    assert_refused_at(doc, strlen(doc) - 1);
    /* no '.', 'e' or sign that leaves no room within the limit for the digit after it (the
     * acceptor would be stuck) */
    static const char *const tails[] = {".", "e", "E"};
    for (int k = 0; k < 3; k++) {
        n = snprintf(doc, sizeof doc, "{\"a\":");
        for (int i = 0; i < UL_JSON_MAX_NUM - 1; i++) doc[n++] = '1';
        doc[n] = 0;
        strcat(doc, tails[k]);
        assert_refused_at(doc, strlen(doc) - 1);
        doc[strlen(doc) - 2] = 0; /* one digit fewer: room for the tail and a digit */
        strcat(doc, tails[k]);
        strcat(doc, "1}");
        assert_doc(doc);
    }
    n = snprintf(doc, sizeof doc, "{\"a\":");
    for (int i = 0; i < UL_JSON_MAX_NUM - 2; i++) doc[n++] = '1';
    strcpy(doc + n, "e-");
    assert_refused_at(doc, strlen(doc) - 1);

    n = snprintf(doc, sizeof doc, "{\"a\":");
    for (int i = 1; i < UL_JSON_MAX_DEPTH; i++) doc[n++] = '[';
    doc[n] = 0;
    cr_assert_eq(accepted(doc, strlen(doc), &done), strlen(doc), "depth %d", UL_JSON_MAX_DEPTH);
    strcat(doc, "[");
    assert_refused_at(doc, strlen(doc) - 1);
}

Test(json_acc, done_only_when_the_object_closes) {
    ul_json_acc_t a;
    ul_json_acc_init(&a);
    const char *s = "{\"a\":{\"b\":[1]}}";
    for (size_t i = 0; s[i]; i++) {
        cr_assert(!ul_json_acc_done(&a), "done before byte %zu", i);
        cr_assert_eq(ul_json_acc_feed(&a, (uint8_t)s[i]), 0);
    }
    cr_assert(ul_json_acc_done(&a));
}

/* ---- the token filter over a small codec ---------------------------------------------- */

static const char *const pieces[] = {"{", "}", "\"a\"", ":", "1", " ", "x", "", "1}", "\"b"};
enum { T_OPEN, T_CLOSE, T_KEY, T_COLON, T_ONE, T_SPACE, T_X, T_EOS, T_ONE_CLOSE, T_OPEN_B };
#define N_PIECES ((int32_t)(sizeof pieces / sizeof *pieces))

static int piece(const ul_codec_t *c, int32_t id, int special, int lstrip, char *out, int cap) {
    if (id < 0 || id >= N_PIECES) return UL_EINVAL;
    int n = (int)strlen(pieces[id]);
    if (n > cap) return -n;
    memcpy(out, pieces[id], (size_t)n);
    return n;
}

static int allowed_set(const ul_json_filter_t *f, char *out) {
    int n = 0;
    for (int32_t i = 0; i < N_PIECES; i++)
        if (f->base.allows(&f->base, i)) out[n++] = (char)('0' + i);
    out[n] = 0;
    return n;
}

Test(json_filter, allows_tokens_whose_bytes_fit_and_the_end_after_the_object) {
    ul_codec_t c = {.n_vocab = N_PIECES, .eos_id = T_EOS, .token_piece = piece};
    ul_json_vocab_t *v = ul_json_vocab_new(&c);
    cr_assert_not_null(v);
    ul_json_filter_t f;
    ul_json_filter_init(&f, v);
    char set[16];
    allowed_set(&f, set);
    cr_assert_str_eq(set, "0", "only '{' starts (got %s)", set);
    f.base.accept(&f.base, T_OPEN);
    allowed_set(&f, set);
    cr_assert_str_eq(set, "1259", "'}', a key, a space, a key prefix (got %s)", set);
    f.base.accept(&f.base, T_KEY);
    allowed_set(&f, set);
    cr_assert_str_eq(set, "35", "a colon or a space (got %s)", set);
    f.base.accept(&f.base, T_COLON);
    f.base.accept(&f.base, T_ONE);
    allowed_set(&f, set);
    cr_assert_str_eq(set, "1458", "more digits, '}', a space, \"1}\" (got %s)", set);
    cr_assert(!f.base.allows(&f.base, T_EOS), "the end before the object closes");
    f.base.accept(&f.base, T_ONE_CLOSE);
    allowed_set(&f, set);
    cr_assert_str_eq(set, "7", "only the end once closed (got %s)", set);
    cr_assert(!f.base.allows(&f.base, -1) && !f.base.allows(&f.base, N_PIECES));
    ul_json_vocab_free(v);
}
