/* The streaming detokenizer: a character split over several byte tokens comes out only
 * when complete; bytes that can never be valid come out as U+FFFD; a too-small buffer
 * leaves the state untouched; flush ends an incomplete character. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "test_vocab_util.h"

static tv_vocab_t g_t;
static ul_detok_t g_d; /* a fresh detokenizer for each test */
static char g_out[64];

static void setup(void) {
    char p[1200];
    snprintf(p, sizeof p, "%s/tokenizer/ggml-vocab-llama-spm.gguf", tv_shared());
    tv_load(&g_t, p);
    ul_detok_init(&g_d);
}
static void teardown(void) { tv_free(&g_t); }

static int32_t byte_tok(int b) {
    char name[8];
    snprintf(name, sizeof name, "<0x%02X>", b);
    int32_t id = ul_vocab_find(g_t.v, name, 6);
    cr_assert(id >= 0, "%s missing", name);
    return id;
}

/* Pushes token id with room for cap bytes of g_out: the bytes written (< 0: room needed). */
static int push(int32_t id, int cap) { return ul_detok_push(&g_d, g_t.v, id, g_out, cap); }
static int flush(void) { return ul_detok_flush(&g_d, g_out, sizeof g_out); }
static int out_is(const char *s, size_t n) { return memcmp(g_out, s, n) == 0; }

TestSuite(detok, .init = setup, .fini = teardown);

Test(detok, character_held_until_complete) {
    static const int emoji[4] = {0xF0, 0x9F, 0x98, 0x80};
    for (int i = 0; i < 3; i++) cr_expect_eq(push(byte_tok(emoji[i]), 64), 0);
    cr_assert_eq(push(byte_tok(emoji[3]), 64), 4);
    cr_expect(out_is("\xf0\x9f\x98\x80", 4));
    cr_expect_eq(flush(), 0);
}

Test(detok, invalid_bytes_become_replacement) {
    /* 0xFF can never start a character */
    cr_assert_eq(push(byte_tok(0xFF), 64), 3);
    cr_expect(out_is("\xef\xbf\xbd", 3));
    /* a lead byte followed by a normal token: the lead is replaced, the token kept */
    cr_expect_eq(push(byte_tok(0xE2), 64), 0);
    int32_t a = ul_vocab_find(g_t.v,
                              "\xe2\x96\x81"
                              "a",
                              4);
    cr_assert(a >= 0);
    cr_assert_eq(push(a, 64), 5);
    cr_expect(out_is("\xef\xbf\xbd a", 5));
    /* an unfinished character at the end */
    cr_expect_eq(push(byte_tok(0xC3), 64), 0);
    cr_assert_eq(flush(), 3);
    cr_expect(out_is("\xef\xbf\xbd", 3));
    cr_expect_eq(flush(), 0);
}

Test(detok, small_buffer_keeps_state) {
    int32_t id = ul_vocab_find(g_t.v, "\xe2\x96\x81quick", 8);
    cr_assert(id >= 0);
    cr_expect_eq(push(byte_tok(0xC3), 64), 0);
    /* pending 0xC3 then ' ': U+FFFD + " quick" = 9 bytes */
    cr_expect_eq(push(id, 4), -9);
    cr_assert_eq(push(id, 64), 9);
    cr_expect(out_is("\xef\xbf\xbd quick", 9));
}

Test(detok, first_space_stripped_when_asked) {
    g_d.first = 1;
    int32_t id = ul_vocab_find(g_t.v, "\xe2\x96\x81quick", 8);
    cr_assert_eq(push(id, 64), 5);
    cr_expect(out_is("quick", 5));
    cr_assert_eq(push(id, 64), 6);
    cr_expect(out_is(" quick", 6));
    /* control tokens produce nothing */
    cr_expect_eq(push(ul_vocab_eos(g_t.v), 64), 0);
}
