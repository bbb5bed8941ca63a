/* The bridge: items posted from other threads arrive on the loop thread, all of them, each
 * producer's in posting order, even when sends coalesce; closing releases every handle so
 * uv_loop_close succeeds. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>

#include "base/bridge.h"

#define PRODUCERS 4
#define PER_PRODUCER 5000

typedef struct {
    ul_queue_t q;
    int producer, seq;
} msg_t;

typedef struct {
    ul_bridge_t bridge;
    pthread_t loop_thread;
    int received;
    int last_seq[PRODUCERS];
    int out_of_order;
    int wrong_thread;
    int closed;
    msg_t *msgs;
} ctx_t;

static void on_closed(ul_bridge_t *b) { ((ctx_t *)b->data)->closed = 1; }

static void on_item(ul_bridge_t *b, ul_queue_t *item) {
    ctx_t *c = b->data;
    msg_t *m = UL_QUEUE_DATA(item, msg_t, q);
    if (!pthread_equal(pthread_self(), c->loop_thread)) c->wrong_thread++;
    if (m->seq != c->last_seq[m->producer] + 1) c->out_of_order++;
    c->last_seq[m->producer] = m->seq;
    if (++c->received == PRODUCERS * PER_PRODUCER) ul_bridge_close(b, on_closed);
}

typedef struct {
    ctx_t *c;
    int id;
} prod_t;

static void *producer(void *arg) {
    prod_t *p = arg;
    for (int i = 0; i < PER_PRODUCER; i++) {
        msg_t *m = &p->c->msgs[p->id * PER_PRODUCER + i];
        m->producer = p->id;
        m->seq = i;
        ul_bridge_post(&p->c->bridge, &m->q);
    }
    return NULL;
}

Test(bridge, posts_from_threads_arrive_in_order_and_loop_closes) {
    uv_loop_t loop;
    cr_assert_eq(uv_loop_init(&loop), 0);
    ctx_t c = {0};
    c.msgs = calloc(PRODUCERS * PER_PRODUCER, sizeof *c.msgs);
    for (int i = 0; i < PRODUCERS; i++) c.last_seq[i] = -1;
    c.loop_thread = pthread_self();
    cr_assert_eq(ul_bridge_init(&loop, &c.bridge, on_item), 0);
    c.bridge.data = &c;
    pthread_t t[PRODUCERS];
    prod_t p[PRODUCERS];
    for (int i = 0; i < PRODUCERS; i++) {
        p[i] = (prod_t){&c, i};
        pthread_create(&t[i], NULL, producer, &p[i]);
    }
    /* the async handle keeps the loop alive until the last item closes the bridge */
    uv_run(&loop, UV_RUN_DEFAULT);
    for (int i = 0; i < PRODUCERS; i++) pthread_join(t[i], NULL);
    cr_assert_eq(c.received, PRODUCERS * PER_PRODUCER);
    cr_assert_eq(c.out_of_order, 0);
    cr_assert_eq(c.wrong_thread, 0);
    cr_assert(c.closed, "close callback did not run");
    cr_assert_eq(uv_loop_close(&loop), 0);
    free(c.msgs);
}

static void noop_item(ul_bridge_t *b, ul_queue_t *item) {}

Test(bridge, close_without_posts) {
    uv_loop_t loop;
    cr_assert_eq(uv_loop_init(&loop), 0);
    ul_bridge_t b;
    cr_assert_eq(ul_bridge_init(&loop, &b, noop_item), 0);
    ctx_t c = {0};
    b.data = &c;
    ul_bridge_close(&b, on_closed);
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_assert(c.closed);
    cr_assert_eq(uv_loop_close(&loop), 0);
}
