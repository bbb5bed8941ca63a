/* Integer arithmetic at the edges of int64 in the Jinja interpreter: a template (the
 * --chat-template file, or one in a GGUF) must not reach undefined behaviour or read out of
 * bounds through a slice step, abs(), truncate() or a range near INT64_MAX. Python's ints
 * do not overflow; where a result does not fit int64 the render fails with OverflowError,
 * elsewhere the answer is Python's. Run under ASan/UBSan (make test-asan) to see the bad
 * reads these guard against. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "chat/jinja.h"
#include "uvllm/err.h"

static int render(const char *src, char *out, size_t cap, char *msg, size_t msgcap) {
    ul_jinja_t *t;
    char err[256];
    int rc = ul_jinja_new(src, strlen(src), &t, err, sizeof err);
    cr_assert_eq(rc, 0, "compile %s: %s", src, err);
    ul_buf_t b = {0};
    rc = ul_jinja_render(t, NULL, 0, 0, NULL, &b, NULL, msg, msgcap);
    snprintf(out, cap, "%.*s", (int)b.len, b.p ? b.p : "");
    ul_buf_free(&b);
    ul_jinja_free(t);
    return rc;
}

Test(jinja_int, slice_steps_near_int64_max) {
    static const char *const cases[][2] = {
        {"{{ [1,2,3][1::9223372036854775807] }}", "[2]"},
        {"{{ [1,2,3][::-9223372036854775807] }}", "[3]"},
        {"{{ [1,2,3][0::4611686018427387904] }}", "[1]"},
        {"{{ 'abc'[1::9223372036854775807] }}", "b"},
        {"{{ [1,2,3][-9223372036854775807:9223372036854775807:9223372036854775807] }}", "[1]"},
        {"{{ range(9223372036854775800, 9223372036854775807, 3) | list }}",
         "[9223372036854775800, 9223372036854775803, 9223372036854775806]"},
        {"{{ 'abcdef' | truncate(9223372036854775807) }}", "abcdef"},
        {"{{ 'abcdef' | truncate(3, true, '...', 9223372036854775807) }}", "abcdef"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[256], msg[256] = "";
        int rc = render(cases[i][0], out, sizeof out, msg, sizeof msg);
        cr_assert_eq(rc, 0, "%s: %s", cases[i][0], msg);
        cr_assert_str_eq(out, cases[i][1], "%s", cases[i][0]);
    }
}

Test(jinja_int, results_past_int64_are_overflow_errors) {
    static const char *const cases[] = {
        "{{ (-9223372036854775807 - 1) | abs }}", "{{ 9223372036854775807 + 1 }}",
        "{{ 4611686018427387904 * 2 }}",          "{{ -(-9223372036854775807 - 1) }}",
        "{{ (-9223372036854775807 - 1) // -1 }}", "{{ 3 ** 40 }}",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[256], msg[256] = "";
        int rc = render(cases[i], out, sizeof out, msg, sizeof msg);
        cr_assert_eq(rc, UL_EFORMAT, "%s: rc %d out '%s'", cases[i], rc, out);
        cr_assert(strstr(msg, "OverflowError"), "%s: %s", cases[i], msg);
    }
}
