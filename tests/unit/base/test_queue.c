/* The intrusive queue: order, removal from the middle, head insertion, move, recovery of
 * the containing struct. */
#include <criterion/criterion.h>

#include "base/queue.h"

typedef struct {
    int v;
    ul_queue_t node;
} item_t;

static void collect(ul_queue_t *h, int *out, size_t *n) {
    ul_queue_t *q;
    *n = 0;
    UL_QUEUE_FOREACH(q, h) out[(*n)++] = UL_QUEUE_DATA(q, item_t, node)->v;
}

Test(queue, order_remove_move) {
    ul_queue_t h;
    ul_queue_init(&h);
    cr_assert(ul_queue_empty(&h));
    item_t it[5];
    for (int i = 0; i < 5; i++) {
        it[i].v = i;
        ul_queue_insert_tail(&h, &it[i].node);
    }
    cr_assert_eq(ul_queue_len(&h), 5);
    ul_queue_remove(&it[2].node);
    ul_queue_insert_head(&h, &it[2].node);
    int got[8];
    size_t n;
    collect(&h, got, &n);
    int want[] = {2, 0, 1, 3, 4};
    cr_assert_eq(n, 5);
    cr_assert_arr_eq(got, want, sizeof want);
    /* a removed node is self-linked: removing it again is harmless */
    ul_queue_remove(&it[4].node);
    ul_queue_remove(&it[4].node);
    cr_assert_eq(ul_queue_len(&h), 4);

    ul_queue_t m;
    ul_queue_move(&h, &m);
    cr_assert(ul_queue_empty(&h));
    collect(&m, got, &n);
    int want2[] = {2, 0, 1, 3};
    cr_assert_eq(n, 4);
    cr_assert_arr_eq(got, want2, sizeof want2);
    cr_assert_eq(UL_QUEUE_DATA(ul_queue_head(&m), item_t, node), &it[2]);

    ul_queue_t e, e2;
    ul_queue_init(&e);
    ul_queue_move(&e, &e2);
    cr_assert(ul_queue_empty(&e2));
}
