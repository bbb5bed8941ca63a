/* The request arena: alignment, large allocations, reset keeping one block, and
 * user-sized requests that cannot be satisfied returning NULL instead of crashing. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "base/arena.h"

Test(arena, aligned_and_distinct) {
    ul_arena_t a;
    ul_arena_init(&a, 256);
    char *prev = NULL;
    for (int i = 1; i < 200; i++) {
        char *p = ul_arena_alloc(&a, (size_t)i);
        cr_assert_not_null(p);
        cr_assert_eq((uintptr_t)p % 16, 0, "allocation %d misaligned", i);
        memset(p, i & 0xff, (size_t)i); /* ASan catches overlap/overrun */
        if (prev) cr_assert_neq(p, prev);
        prev = p;
    }
    cr_assert_geq(a.used, 199 * 200 / 2);
    ul_arena_free(&a);
    cr_assert_null(a.head);
    cr_assert_eq(a.used, 0);
}

Test(arena, large_block_and_strndup) {
    ul_arena_t a;
    ul_arena_init(&a, 64);
    char *big = ul_arena_alloc(&a, 100000); /* bigger than the block size */
    cr_assert_not_null(big);
    memset(big, 1, 100000);
    char *s = ul_arena_strndup(&a, "hello world", 5);
    cr_assert_str_eq(s, "hello");
    cr_assert_eq(big[99999], 1);
    ul_arena_free(&a);
}

Test(arena, reset_keeps_one_block_and_reuses_it) {
    ul_arena_t a;
    ul_arena_init(&a, 1024);
    void *first = ul_arena_alloc(&a, 100);
    for (int i = 0; i < 50; i++) cr_assert_not_null(ul_arena_alloc(&a, 500));
    ul_arena_reset(&a);
    cr_assert_eq(a.used, 0);
    cr_assert_not_null(a.head);
    /* after reset the next allocation comes from the kept block's start; the kept
     * block is the newest, which is not necessarily where `first` lived */
    void *again = ul_arena_alloc(&a, 100);
    cr_assert_not_null(again);
    void *again2 = ul_arena_alloc(&a, 100);
    cr_assert_eq((char *)again2 - (char *)again, 112);
    (void)first;
    ul_arena_free(&a);
}

Test(arena, impossible_sizes_return_null) {
    ul_arena_t a;
    ul_arena_init(&a, 0); /* 0 picks a default */
    cr_assert_gt(a.block_size, 0);
    cr_assert_null(ul_arena_alloc(&a, SIZE_MAX));
    cr_assert_null(ul_arena_alloc(&a, SIZE_MAX - 8));
    cr_assert_not_null(ul_arena_alloc(&a, 8));
    ul_arena_free(&a);
}
