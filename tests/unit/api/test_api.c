/* The api layer in-process: the pseudo-token codec. (The whole stack on one loop, built
 * as `serve` builds it, is tested in tests/unit/server/test_server.c.) */
#include <criterion/criterion.h>
#include <string.h>

#include "api/api.h"

Test(codec, null_one_token_per_word) {
    ul_codec_t c;
    ul_codec_init_null(&c, 100, 99);
    int32_t ids[8];
    int n = c.tokenize(&c, "  hello\tworld \n hello ", 22, NULL, 1, 0, ids, 8);
    cr_assert_eq(n, 3);
    cr_assert_eq(ids[0], ids[2], "same word, same token");
    cr_assert_neq(ids[0], ids[1]);
    for (int i = 0; i < 3; i++) cr_assert(ids[i] >= 0 && ids[i] < 99, "never the eos id");
    cr_assert_eq(c.tokenize(&c, "a b c", 5, NULL, 1, 0, ids, 2), -3, "too small: -(needed)");
    cr_assert_eq(c.tokenize(&c, " \t", 2, NULL, 1, 0, ids, 8), 0);
    char piece[16];
    n = c.piece(&c, NULL, 42, piece, sizeof piece);
    cr_assert_eq(n, 6);
    cr_assert(!memcmp(piece, " tok42", 6));
}
