/* The one way work comes back to the loop thread from other threads: a mutex-guarded
 * queue plus uv_async_send. Producers (worker threads, CUDA host callbacks) call
 * ul_bridge_post from any thread; the loop drains the whole queue in one callback per
 * wake-up, because libuv coalesces async sends. No other libuv call crosses threads. */
#ifndef UL_BASE_BRIDGE_H
#define UL_BASE_BRIDGE_H

#include <pthread.h>
#include <uv.h>

#include "base/queue.h"

typedef struct ul_bridge_s ul_bridge_t;
/* Called on the loop thread once per posted item, in posting order. */
typedef void (*ul_bridge_cb)(ul_bridge_t *b, ul_queue_t *item);

struct ul_bridge_s {
    uv_async_t async; /* embedded; memory released only after ul_bridge_close's close_cb */
    pthread_mutex_t mu;
    ul_queue_t pending; /* guarded by mu */
    ul_bridge_cb cb;
    void *data; /* owner's */
    void (*close_cb)(ul_bridge_t *b);
};

int ul_bridge_init(uv_loop_t *loop, ul_bridge_t *b, ul_bridge_cb cb);
/* Any thread. The item must stay valid until cb has run for it. */
void ul_bridge_post(ul_bridge_t *b, ul_queue_t *item);
/* Loop thread. Items still pending are dropped (not delivered). */
void ul_bridge_close(ul_bridge_t *b, void (*close_cb)(ul_bridge_t *b));

#endif
