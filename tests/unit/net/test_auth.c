/* API keys: what a key may be, and that only an exact token matches (no prefix, no
 * extension, no case folding, no match against the zero padding). */
#include <criterion/criterion.h>
#include <string.h>

#include "net/http.h"
#include "uvllm/err.h"

static int match(const ul_http_keys_t *k, const char *t) {
    return ul_http_keys_match(k, t, strlen(t));
}

Test(auth, keys_must_be_printable_and_bounded) {
    ul_http_keys_t k = {0};
    char big[UL_HTTP_KEY_MAX + 2];
    memset(big, 'k', sizeof big);
    cr_assert_eq(ul_http_keys_add(&k, "", 0), UL_EINVAL);
    cr_assert_eq(ul_http_keys_add(&k, "a b", 3), UL_EINVAL);
    cr_assert_eq(ul_http_keys_add(&k, "a\tb", 3), UL_EINVAL);
    cr_assert_eq(ul_http_keys_add(&k, "caf\xc3\xa9", 5), UL_EINVAL);
    cr_assert_eq(ul_http_keys_add(&k, big, UL_HTTP_KEY_MAX + 1), UL_EINVAL);
    cr_assert_eq(k.n, 0);
    cr_assert_eq(ul_http_keys_add(&k, big, UL_HTTP_KEY_MAX), 0);
    cr_assert(ul_http_keys_match(&k, big, UL_HTTP_KEY_MAX));
    cr_assert_not(ul_http_keys_match(&k, big, UL_HTTP_KEY_MAX + 1)); /* longer than any key */
    cr_assert_not(ul_http_keys_match(&k, big, UL_HTTP_KEY_MAX - 1));
    ul_http_keys_free(&k);
    cr_assert_eq(k.n, 0);
}

Test(auth, only_the_exact_token_matches) {
    ul_http_keys_t k = {0};
    const char *keys[] = {"sk-alpha-0001", "sk-beta-0002", "x"};
    for (int i = 0; i < 3; i++) cr_assert_eq(ul_http_keys_add(&k, keys[i], strlen(keys[i])), 0);
    for (int i = 0; i < 3; i++) cr_assert(match(&k, keys[i]), "%s", keys[i]);
    const char *wrong[] = {
        "sk-alpha-000", "sk-alpha-00011", "SK-ALPHA-0001", "sk-beta-0003", "xx", "",
        "sk-alpha-0002"};
    for (size_t i = 0; i < sizeof wrong / sizeof *wrong; i++)
        cr_assert_not(match(&k, wrong[i]), "%s", wrong[i]);
    /* the zero padding is not part of a key */
    cr_assert_not(ul_http_keys_match(&k, "x\0", 2));
    ul_http_keys_free(&k);
}

Test(auth, no_keys_match_nothing) {
    ul_http_keys_t k = {0};
    cr_assert_not(match(&k, ""));
    cr_assert_not(match(&k, "anything"));
}

Test(auth, many_keys) {
    ul_http_keys_t k = {0};
    char key[32];
    for (int i = 0; i < 500; i++) {
        int n = snprintf(key, sizeof key, "key-%04d", i);
        cr_assert_eq(ul_http_keys_add(&k, key, (size_t)n), 0);
    }
    cr_assert(match(&k, "key-0000"));
    cr_assert(match(&k, "key-0499"));
    cr_assert_not(match(&k, "key-0500"));
    ul_http_keys_free(&k);
}
