/* UTF-8 checks and the JSON string writer: every byte sequence becomes valid UTF-8 JSON
 * text (invalid bytes as U+FFFD), so no answer can carry raw bytes a client's JSON parser
 * refuses. */
#include <criterion/criterion.h>
#include <string.h>

#include "base/buf.h"
#include "base/utf8.h"

Test(utf8, strict_sequences) {
    cr_assert_eq(ul_utf8_seq("a", 1), 1);
    cr_assert_eq(ul_utf8_seq("\xc3\xa9", 2), 2);
    cr_assert_eq(ul_utf8_seq("\xe4\xb8\xad", 3), 3);
    cr_assert_eq(ul_utf8_seq("\xf0\x9f\x98\x80", 4), 4);
    cr_assert_eq(ul_utf8_seq("\xe4\xb8", 2), 0, "cut short");
    cr_assert_eq(ul_utf8_seq("\xc0\x80", 2), 0, "overlong NUL");
    cr_assert_eq(ul_utf8_seq("\xed\xa0\x80", 3), 0, "surrogate");
    cr_assert_eq(ul_utf8_seq("\xf4\x90\x80\x80", 4), 0, "past U+10FFFF");
    cr_assert_eq(ul_utf8_seq("\x80", 1), 0, "lone continuation");
    cr_assert_eq(ul_utf8_check("ab\xe4\xb8\xad\xff", 6), 5);
    cr_assert_eq(ul_utf8_check("ab\xe4\xb8\xad", 5), 5);
}

Test(utf8, sanitize_replaces_maximal_subparts) {
    /* a cut-short CJK character is one U+FFFD (as Python's errors="replace"), two stray
     * continuation bytes are two, an overlong lead is one per byte */
    const char in[] = "a\xe4\xb8z\x80\x80\xc0\xaf\xf0\x9f\x98\x80";
    size_t n = sizeof in - 1;
    char out[64];
    cr_assert_eq(ul_utf8_sanitized_len(in, n), 1 + 3 + 1 + 3 + 3 + 3 + 3 + 4);
    size_t w = ul_utf8_sanitize(in, n, out);
    cr_assert_eq(w, 21);
    const char want[] = "a\xef\xbf\xbdz\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
                        "\xf0\x9f\x98\x80";
    cr_assert(!memcmp(out, want, 21));
    cr_assert_eq(ul_utf8_bad_len("\xed\xa0\x80", 3), 1, "a surrogate's lead alone");
    cr_assert_eq(ul_utf8_bad_len("\xf0\x9f\x98", 3), 3);
}

Test(utf8, json_strings_are_always_valid_utf8) {
    ul_buf_t b = {0};
    /* a token that is half of a CJK character, a quote, a control byte, an emoji */
    const char in[] = "\xe4\xb8\"\x01\xf0\x9f\x98\x80\xff";
    cr_assert_eq(ul_buf_append_json_str(&b, in, sizeof in - 1), 0);
    const char want[] = "\xef\xbf\xbd\\\"\\u0001\xf0\x9f\x98\x80\xef\xbf\xbd";
    cr_assert_eq(b.len, sizeof want - 1, "%.*s", (int)b.len, b.p);
    cr_assert(!memcmp(b.p, want, b.len));
    cr_assert_eq(ul_utf8_check(b.p, b.len), b.len);
    ul_buf_free(&b);
}
