/* The one OpenAI-style error body builder (ul_buf_error_body): every field present, null
 * where not given, strings escaped. */
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
