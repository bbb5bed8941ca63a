/* Intrusive doubly-linked circular list (libuv's queue.h idea, as inline functions).
 * Embed a ul_queue_t in a struct, recover the struct with UL_QUEUE_DATA. */
#ifndef UL_BASE_QUEUE_H
#define UL_BASE_QUEUE_H

#include <stddef.h>

typedef struct ul_queue_s {
    struct ul_queue_s *next, *prev;
} ul_queue_t;

#define UL_QUEUE_DATA(ptr, type, field) ((type *)((char *)(ptr)-offsetof(type, field)))
#define UL_QUEUE_FOREACH(q, h) for ((q) = (h)->next; (q) != (h); (q) = (q)->next)

static inline void ul_queue_init(ul_queue_t *q) { q->next = q->prev = q; }
static inline int ul_queue_empty(const ul_queue_t *q) { return q->next == q; }
static inline ul_queue_t *ul_queue_head(const ul_queue_t *h) { return h->next; }
static inline void ul_queue_insert_tail(ul_queue_t *h, ul_queue_t *q) {
    q->next = h;
    q->prev = h->prev;
    q->prev->next = q;
    h->prev = q;
}
static inline void ul_queue_insert_head(ul_queue_t *h, ul_queue_t *q) {
    q->next = h->next;
    q->prev = h;
    q->next->prev = q;
    h->next = q;
}
static inline void ul_queue_remove(ul_queue_t *q) {
    q->prev->next = q->next;
    q->next->prev = q->prev;
    q->next = q->prev = q;
}
/* Moves every element of h to the (empty, initialised) list n; h becomes empty. */
static inline void ul_queue_move(ul_queue_t *h, ul_queue_t *n) {
    if (ul_queue_empty(h)) {
        ul_queue_init(n);
        return;
    }
    n->next = h->next;
    n->prev = h->prev;
    n->next->prev = n;
    n->prev->next = n;
    ul_queue_init(h);
}
static inline size_t ul_queue_len(const ul_queue_t *h) {
    size_t n = 0;
    for (const ul_queue_t *q = h->next; q != h; q = q->next) n++;
    return n;
}

#endif
