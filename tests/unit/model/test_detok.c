/* The streaming detokenizer: a character split over several byte tokens comes out only
 * when complete; bytes that can never be valid come out as U+FFFD; a too-small buffer
 * leaves the state untouched; flush ends an incomplete character. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "test_vocab_util.h"

static tv_vocab_t g_t;

static void setup(void) {
    char p[1200];
    snprintf(p, sizeof p, "%s/tokenizer/ggml-vocab-llama-spm.gguf", tv_shared());
    tv_load(&g_t, p);
}
static void teardown(void) { tv_free(&g_t); }

static int32_t byte_tok(int b) {
    char name[8];
    snprintf(name, sizeof name, "<0x%02X>", b);
    int32_t id = ul_vocab_find(g_t.v, name, 6);
    cr_assert(id >= 0, "%s missing", name);
    return id;
}

TestSuite(detok, .init = setup, .fini = teardown);

Test(detok, character_held_until_complete) {
    ul_detok_t d;
    ul_detok_init(&d);
    char out[64];
    static const int emoji[4] = {0xF0, 0x9F, 0x98, 0x80};
    for (int i = 0; i < 3; i++)
        cr_expect_eq(ul_detok_push(&d, g_t.v, byte_tok(emoji[i]), out, 64), 0);
    cr_assert_eq(ul_detok_push(&d, g_t.v, byte_tok(emoji[3]), out, 64), 4);
    cr_expect_eq(memcmp(out, "\xf0\x9f\x98\x80", 4), 0);
    cr_expect_eq(ul_detok_flush(&d, out, 64), 0);
}

Test(detok, invalid_bytes_become_replacement) {
    ul_detok_t d;
    ul_detok_init(&d);
    char out[64];
    /* 0xFF can never start a character */
    cr_assert_eq(ul_detok_push(&d, g_t.v, byte_tok(0xFF), out, 64), 3);
    cr_expect_eq(memcmp(out, "\xef\xbf\xbd", 3), 0);
    /* a lead byte followed by a normal token: the lead is replaced, the token kept */
    cr_expect_eq(ul_detok_push(&d, g_t.v, byte_tok(0xE2), out, 64), 0);
    int32_t a = ul_vocab_find(g_t.v,
                              "\xe2\x96\x81"
                              "a",
                              4);
    cr_assert(a >= 0);
    cr_assert_eq(ul_detok_push(&d, g_t.v, a, out, 64), 5);
    cr_expect_eq(memcmp(out, "\xef\xbf\xbd a", 5), 0);
    /* an unfinished character at the end */
    cr_expect_eq(ul_detok_push(&d, g_t.v, byte_tok(0xC3), out, 64), 0);
    cr_assert_eq(ul_detok_flush(&d, out, 64), 3);
    cr_expect_eq(memcmp(out, "\xef\xbf\xbd", 3), 0);
    cr_expect_eq(ul_detok_flush(&d, out, 64), 0);
}

Test(detok, small_buffer_keeps_state) {
    ul_detok_t d;
    ul_detok_init(&d);
    char out[64];
    int32_t id = ul_vocab_find(g_t.v, "\xe2\x96\x81quick", 8);
    cr_assert(id >= 0);
    cr_expect_eq(ul_detok_push(&d, g_t.v, byte_tok(0xC3), out, 64), 0);
    /* pending 0xC3 then ' ': U+FFFD + " quick" = 9 bytes */
    cr_expect_eq(ul_detok_push(&d, g_t.v, id, out, 4), -9);
    cr_assert_eq(ul_detok_push(&d, g_t.v, id, out, 64), 9);
    cr_expect_eq(memcmp(out, "\xef\xbf\xbd quick", 9), 0);
}

Test(detok, first_space_stripped_when_asked) {
    ul_detok_t d;
    ul_detok_init(&d);
    d.first = 1;
    char out[64];
    int32_t id = ul_vocab_find(g_t.v, "\xe2\x96\x81quick", 8);
    cr_assert_eq(ul_detok_push(&d, g_t.v, id, out, 64), 5);
    cr_expect_eq(memcmp(out, "quick", 5), 0);
    cr_assert_eq(ul_detok_push(&d, g_t.v, id, out, 64), 6);
    cr_expect_eq(memcmp(out, " quick", 6), 0);
    /* control tokens produce nothing */
    cr_expect_eq(ul_detok_push(&d, g_t.v, ul_vocab_eos(g_t.v), out, 64), 0);
}
