/* Locked queue + uv_async: the only hand-off from other threads to the loop. */
#include "base/bridge.h"

static void on_async(uv_async_t *h) {
    ul_bridge_t *b = (ul_bridge_t *)h;
    ul_queue_t items;
    pthread_mutex_lock(&b->mu);
    ul_queue_move(&b->pending, &items);
    pthread_mutex_unlock(&b->mu);
    /* Drain the whole batch: sends coalesce, so one wake-up may carry many items. */
    while (!ul_queue_empty(&items)) {
        ul_queue_t *q = ul_queue_head(&items);
        ul_queue_remove(q);
        b->cb(b, q);
    }
}

int ul_bridge_init(uv_loop_t *loop, ul_bridge_t *b, ul_bridge_cb cb) {
    pthread_mutex_init(&b->mu, NULL);
    ul_queue_init(&b->pending);
    b->cb = cb;
    b->close_cb = NULL;
    int rc = uv_async_init(loop, &b->async, on_async);
    if (rc) pthread_mutex_destroy(&b->mu);
    return rc;
}

void ul_bridge_post(ul_bridge_t *b, ul_queue_t *item) {
    pthread_mutex_lock(&b->mu);
    ul_queue_insert_tail(&b->pending, item);
    pthread_mutex_unlock(&b->mu);
    uv_async_send(&b->async);
}

static void on_close(uv_handle_t *h) {
    ul_bridge_t *b = (ul_bridge_t *)h;
    pthread_mutex_destroy(&b->mu);
    if (b->close_cb) b->close_cb(b);
}

void ul_bridge_close(ul_bridge_t *b, void (*close_cb)(ul_bridge_t *b)) {
    b->close_cb = close_cb;
    uv_close((uv_handle_t *)&b->async, on_close);
}
