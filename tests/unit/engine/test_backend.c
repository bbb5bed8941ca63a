/* The backend's step limit as the scheduler reads it (ul_backend_max_step_tokens): a
 * configured budget may lower it, never raise it, and a backend without a limit gets the
 * default. */
#include <criterion/criterion.h>

#include "uvllm/backend.h"

Test(backend, max_step_tokens_caps_the_budget) {
    ul_backend_t b = {.max_step_tokens = 256};
    cr_assert_eq(ul_backend_max_step_tokens(&b, 0), 256, "0 asks the backend");
    cr_assert_eq(ul_backend_max_step_tokens(&b, 64), 64, "a smaller budget is kept");
    cr_assert_eq(ul_backend_max_step_tokens(&b, 4096), 256, "never more than the backend takes");
}

Test(backend, no_limit_means_default_or_configured) {
    ul_backend_t b = {0};
    cr_assert_eq(ul_backend_max_step_tokens(&b, 0), 512);
    cr_assert_eq(ul_backend_max_step_tokens(&b, 4096), 4096);
}
