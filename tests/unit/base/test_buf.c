/* The one OpenAI-style error body builder (ul_buf_error_body): every field present, null
 * where not given, strings escaped; and ul_buf_printf, appending text of any length. */
#include <criterion/criterion.h>

#include "base/buf.h"

Test(buf, error_body_fields_and_escaping) {
    ul_buf_t b = {0};
    cr_assert_eq(ul_buf_error_body(&b, "invalid_request_error", "top_p", "bad_value",
                                   "top_p must be \"in\" (0, 1]\n"),
                 0);
    cr_assert_str_eq(ul_buf_cstr(&b),
                     "{\"error\":{\"message\":\"top_p must be \\\"in\\\" (0, 1]\\n\",\"type\":"
                     "\"invalid_request_error\",\"param\":\"top_p\",\"code\":\"bad_value\"}}");
    b.len = 0;
    cr_assert_eq(ul_buf_error_body(&b, NULL, NULL, NULL, NULL), 0);
    cr_assert_str_eq(ul_buf_cstr(&b), "{\"error\":{\"message\":\"\",\"type\":\"server_error\","
                                      "\"param\":null,\"code\":null}}");
    b.len = 0;
    cr_assert_eq(ul_buf_error_body(&b, "x", NULL, NULL, "\x01"), 0);
    cr_assert_str_eq(ul_buf_cstr(&b), "{\"error\":{\"message\":\"\\u0001\",\"type\":\"x\","
                                      "\"param\":null,\"code\":null}}");
    ul_buf_free(&b);
}

/* ul_buf_printf appends after what is there, whether the text fits the free space, fills it
 * exactly or is longer than the buffer has ever been (a GBNF rule of many branches, an SSE
 * frame). */
Test(buf, printf_appends_any_length) {
    ul_buf_t b = {0};
    cr_assert_eq(ul_buf_printf(&b, "%s=%d", "n", 42), 0);
    cr_assert_eq(ul_buf_printf(&b, ";%s", "x"), 0);
    cr_assert_eq(b.len, 6);
    cr_assert_str_eq(ul_buf_cstr(&b), "n=42;x");
    char big[3000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = 0;
    b.len = 2;
    cr_assert_eq(ul_buf_printf(&b, "[%s]", big), 0);
    cr_assert_eq(b.len, 2 + 1 + 2999 + 1);
    cr_assert(!memcmp(b.p, "n=[", 3) && b.p[3 + 2998] == 'a' && b.p[b.len - 1] == ']');
    size_t room = b.cap - b.len;
    memset(big, 'b', room); /* exactly the free space: no NUL room, so the buffer grows */
    big[room] = 0;
    size_t before = b.len;
    cr_assert_eq(ul_buf_printf(&b, "%s", big), 0);
    cr_assert_eq(b.len, before + room);
    cr_assert_eq(b.p[b.len - 1], 'b');
    cr_assert_eq(b.p[before - 1], ']');
    ul_buf_free(&b);
}
