/* Model names a request may use (ul_api_model_known, ul_api_add_alias) and the optional
 * codec entries /tokenize and /detokenize use, on the pseudo-token codec. */
#include <criterion/criterion.h>
#include <string.h>

#include "api/api.h"
#include "uvllm/err.h"

static void api_with(ul_api_t *a, const char *id, const char *path) {
    ul_codec_t c;
    ul_codec_init_null(&c, 100, 99);
    ul_api_init(a, NULL, &c, id);
    a->model_path = path;
}

Test(names, id_path_and_stem) {
    ul_api_t a;
    api_with(&a, "mini-q4_0.gguf", "../shared/models/mini-q4_0.gguf");
    cr_assert(ul_api_model_known(&a, "mini-q4_0.gguf"));
    cr_assert(ul_api_model_known(&a, "mini-q4_0"), "without .gguf");
    cr_assert(ul_api_model_known(&a, "../shared/models/mini-q4_0.gguf"), "the path as given");
    cr_assert(!ul_api_model_known(&a, "shared/models/mini-q4_0.gguf"), "another path");
    cr_assert(!ul_api_model_known(&a, "MINI-Q4_0"), "case-sensitive");
    cr_assert(!ul_api_model_known(&a, "mini-q4_"), "prefix");
    cr_assert(!ul_api_model_known(&a, "mini-q4_0.gg"));
    cr_assert(!ul_api_model_known(&a, ".gguf"));
    cr_assert(!ul_api_model_known(&a, ""));
    cr_assert(!ul_api_model_known(&a, NULL));
    cr_assert(!ul_api_model_known(&a, "gpt-4"));
}

Test(names, null_backend) {
    ul_api_t a;
    api_with(&a, "null", NULL);
    cr_assert(ul_api_model_known(&a, "null"));
    cr_assert(!ul_api_model_known(&a, "nul"));
    cr_assert(!ul_api_model_known(&a, "null.gguf"));
}

Test(names, aliases) {
    ul_api_t a;
    api_with(&a, "m.gguf", "/models/m.gguf");
    cr_assert(!ul_api_model_known(&a, "gpt-4o"));
    cr_assert_eq(ul_api_add_alias(&a, "gpt-4o"), 0);
    cr_assert(ul_api_model_known(&a, "gpt-4o"));
    cr_assert_eq(ul_api_add_alias(&a, "gpt-4o"), UL_EBUSY);
    cr_assert_eq(ul_api_add_alias(&a, "m"), UL_EBUSY, "already a name of the model");
    cr_assert_eq(ul_api_add_alias(&a, ""), UL_EINVAL);
    cr_assert_eq(ul_api_add_alias(&a, "a\nb"), UL_EINVAL);
    char long_name[UL_API_NAME_MAX + 1];
    memset(long_name, 'x', UL_API_NAME_MAX);
    long_name[UL_API_NAME_MAX] = 0;
    cr_assert_eq(ul_api_add_alias(&a, long_name), UL_EINVAL);
    long_name[UL_API_NAME_MAX - 1] = 0;
    cr_assert_eq(ul_api_add_alias(&a, long_name), 0, "127 bytes fit");
    char name[24]; /* room for "alias-" and any int (gcc -O1 -Wformat-truncation) */
    for (int i = 2; i < UL_API_MAX_ALIASES; i++) {
        snprintf(name, sizeof name, "alias-%d", i);
        cr_assert_eq(ul_api_add_alias(&a, name), 0);
    }
    cr_assert_eq(a.n_aliases, UL_API_MAX_ALIASES);
    cr_assert_eq(ul_api_add_alias(&a, "one-too-many"), UL_EFULL);
    cr_assert(ul_api_model_known(&a, "alias-7"));
    cr_assert(!ul_api_model_known(&a, "one-too-many"));
    cr_assert(ul_api_model_known(&a, "m"), "the stem still works");
}

Test(names, defaults_and_free) {
    ul_api_t a;
    api_with(&a, "null", NULL);
    cr_assert_eq(a.parse_special, 1);
    cr_assert_eq(a.truncate_max_tokens, 0);
    cr_assert_eq(a.default_max_tokens, 0, "0: OpenAI's defaults per endpoint");
    a.chat_template_override = strdup("{{ x }}");
    ul_api_free(&a);
    cr_assert_null(a.chat_template_override);
    ul_api_free(&a);
}

Test(codec, null_optional_entries) {
    ul_codec_t c;
    ul_codec_init_null(&c, 100, 99);
    cr_assert_not_null(c.token_piece);
    int32_t a[4], b[4];
    cr_assert_eq(c.tokenize(&c, "x y", 3, NULL, 1, 1, a, 4), 2, "no BOS, no specials");
    cr_assert_eq(c.tokenize(&c, "x y", 3, NULL, 0, 0, b, 4), 2);
    cr_assert_eq(a[0], b[0]);
    cr_assert_eq(a[1], b[1]);
    char p[16];
    cr_assert_eq(c.token_piece(&c, 7, 1, 1, p, sizeof p), 5);
    cr_assert(!memcmp(p, " tok7", 5));
    cr_assert_eq(c.token_piece(&c, 7, 1, 0, p, 3), -5, "too small: -(needed)");
    cr_assert_eq(c.token_piece(&c, 100, 1, 0, p, sizeof p), UL_EINVAL);
    cr_assert_eq(c.token_piece(&c, -1, 1, 0, p, sizeof p), UL_EINVAL);
}
