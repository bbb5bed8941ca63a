/* The error table: every code has a distinct message and name, system codes equal libuv's,
 * uvllm's own codes stay out of errno range, unknown codes get a non-NULL fallback. */
#include <criterion/criterion.h>
#include <string.h>
#include <uv.h>

#include "uvllm/err.h"

static const int g_codes[] = {
#define XX(name, value, msg) UL_##name,
    UL_ERRNO_MAP(XX)
#undef XX
};

Test(err, names_and_messages) {
    cr_assert_str_eq(ul_err_name(UL_EINVAL), "EINVAL");
    cr_assert_str_eq(ul_err_name(UL_EFORMAT), "EFORMAT");
    cr_assert_str_eq(ul_strerror(UL_ENOMEM), "out of memory");
    cr_assert_str_eq(ul_strerror(UL_ECLOSED), "closed");
    cr_assert_str_eq(ul_strerror(0), "success");
    cr_assert_str_eq(ul_err_name(0), "OK");
    cr_assert_str_eq(ul_err_name(-12345), "UNKNOWN");
    cr_assert_str_eq(ul_strerror(-12345), "unknown error");
    cr_assert_str_eq(ul_strerror(1), "unknown error");
}

Test(err, codes_distinct_negative_and_libuv_compatible) {
    size_t n = sizeof g_codes / sizeof g_codes[0];
    for (size_t i = 0; i < n; i++) {
        cr_assert_lt(g_codes[i], 0);
        cr_assert_str_neq(ul_err_name(g_codes[i]), "UNKNOWN");
        for (size_t j = i + 1; j < n; j++) {
            cr_assert_neq(g_codes[i], g_codes[j]);
            cr_assert_str_neq(ul_err_name(g_codes[i]), ul_err_name(g_codes[j]));
        }
    }
    /* a libuv status can be returned as it is */
    cr_assert_eq(UL_EINVAL, UV_EINVAL);
    cr_assert_eq(UL_ENOMEM, UV_ENOMEM);
    cr_assert_eq(UL_ETIMEDOUT, UV_ETIMEDOUT);
    cr_assert_eq(UL_ECANCELED, UV_ECANCELED);
    cr_assert_eq(UL_EBUSY, UV_EBUSY);
    /* own codes do not collide with any errno libuv knows */
    cr_assert_lt(UL_EFORMAT, -30000);
    cr_assert_str_eq(uv_err_name(UL_EIO), "EIO");
}
