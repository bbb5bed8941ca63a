/* The api's defences against hostile bodies and clients, without a server: the body check
 * names the field that carries invalid UTF-8 or a \u0000 escape, and the fair-share table
 * counts per client and forgets a client whose counts are back to 0. */
#include <criterion/criterion.h>
#include <string.h>

#include "api/gen.h"
#include "uvllm/err.h"

static int check(const char *body, char *param, size_t *at) {
    return ul_api_body_check(body, strlen(body), param, 128, at);
}

Test(body, names_the_field) {
    char p[128];
    size_t at;
    cr_assert_eq(check("{\"prompt\":\"ok\",\"n\":2}", p, &at), 0);
    cr_assert_eq(check("{\"prompt\":\"a\\u0000b\"}", p, &at), 2);
    cr_assert_str_eq(p, "prompt");
    cr_assert_eq(check("{\"prompt\":\"a\\\\u0000b\"}", p, &at), 0, "an escaped backslash");
    cr_assert_eq(check("{\"messages\":[{\"role\":\"user\"},{\"role\":\"user\",\"content\":"
                       "\"x\\u0000\"}]}",
                       p, &at),
                 2);
    cr_assert_str_eq(p, "messages[1].content");
    cr_assert_eq(check("{\"stop\":[\"a\",\"\xff\"]}", p, &at), 1);
    cr_assert_str_eq(p, "stop[1]");
    cr_assert_eq(at, 14);
    cr_assert_eq(check("{\"a\":{\"b\\u0000c\":1}}", p, &at), 2);
    cr_assert_str_eq(p, "a.b", "a key: the path up to it");
    cr_assert_eq(check("[\"\xe4\xb8\"]", p, &at), 1, "cut-short character");
    cr_assert_str_eq(p, "[0]");
    cr_assert_eq(check("{\"x\":\"\xe4\xb8\xad\xf0\x9f\x98\x80\"}", p, &at), 0, "valid UTF-8");
}

Test(share, counts_per_client_and_forgets) {
    ul_api_share_t s = {0};
    for (uint64_t c = 1; c <= 1000; c++)
        cr_assert_eq(ul_api_share_add(&s, c * 7919, UL_API_SHARE_SEQS, 3, 4), 0);
    cr_assert_eq(ul_api_share_add(&s, 7919, UL_API_SHARE_SEQS, 2, 4), UL_EFULL);
    cr_assert_eq(ul_api_share_add(&s, 7919, UL_API_SHARE_SEQS, 1, 4), 0);
    cr_assert_eq(ul_api_share_get(&s, 7919, UL_API_SHARE_SEQS), 4);
    cr_assert_eq(ul_api_share_add(&s, 7919, UL_API_SHARE_JOBS, 1, 1), 0);
    cr_assert_eq(ul_api_share_add(&s, 7919, UL_API_SHARE_JOBS, 1, 1), UL_EFULL);
    for (uint64_t c = 2; c <= 1000; c++) ul_api_share_del(&s, c * 7919, UL_API_SHARE_SEQS, 3);
    cr_assert_eq(s.used, 1, "clients with nothing in flight are forgotten");
    cr_assert_eq(ul_api_share_get(&s, 7919, UL_API_SHARE_SEQS), 4, "survives the deletions");
    ul_api_share_del(&s, 7919, UL_API_SHARE_SEQS, 4);
    cr_assert_eq(s.used, 1, "jobs still counted");
    ul_api_share_del(&s, 7919, UL_API_SHARE_JOBS, 1);
    cr_assert_eq(s.used, 0);
    cr_assert_eq(ul_api_share_add(&s, 5, UL_API_SHARE_SEQS, 100, 0), 0, "0: no limit");
    ul_api_share_free(&s);
}
