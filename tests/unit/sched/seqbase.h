/* What the scheduler tests' sequence records share: each starts with its ul_seq_t (the
 * callbacks cast back), is set up the same way and records its end the same way. */
#ifndef UL_TEST_SEQBASE_H
#define UL_TEST_SEQBASE_H

#include <criterion/criterion.h>
#include <stddef.h>
#include <string.h>

#include "engine/sampling.h"
#include "sched/sched.h"
#include "uvllm/err.h"

/* The record of size bytes that q heads, zeroed; q with max_tokens, default (greedy)
 * sampling and the callbacks. */
static inline void seq_base_init(ul_seq_t *q, size_t size, int32_t max_tokens,
                                 ul_seq_token_cb on_token, ul_seq_finish_cb on_finish) {
    memset((void *)q, 0, size);
    q->max_tokens = max_tokens;
    ul_sampling_default(&q->sampling);
    q->on_token = on_token;
    q->on_finish = on_finish;
}

/* on_finish's record: it runs once a sequence, and no step failed. */
static inline void seq_base_finish(int *finished, ul_finish_t *at, ul_finish_t reason, int status) {
    cr_assert_eq(*finished, 0, "on_finish twice");
    cr_assert_eq(status, 0, "step failed: %s", ul_strerror(status));
    *finished = 1;
    *at = reason;
}

#endif
