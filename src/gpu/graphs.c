/* The graph cache's policy (graphs.h). */
#include "gpu/graphs.h"

#include <string.h>

static int same(ul_gc_key_t a, ul_gc_key_t b) {
    return a.slot == b.slot && a.n_tokens == b.n_tokens && a.n_out == b.n_out && a.n_dev == b.n_dev;
}

static ul_gc_entry_t *find(ul_gc_t *c, ul_gc_key_t key) {
    for (int i = 0; i < UL_GC_ENTRIES; i++)
        if (c->e[i].used && same(c->e[i].key, key)) return &c->e[i];
    return NULL;
}

/* An empty entry, or the least recently used one emptied. */
static ul_gc_entry_t *take(ul_gc_t *c, const ul_gc_ops_t *ops, void *ctx) {
    ul_gc_entry_t *v = &c->e[0];
    for (int i = 0; i < UL_GC_ENTRIES; i++) {
        if (!c->e[i].used) return &c->e[i];
        if (c->e[i].stamp < v->stamp) v = &c->e[i];
    }
    if (v->exec) ops->destroy(ctx, v->exec);
    memset(v, 0, sizeof *v);
    return v;
}

int ul_gc_run(ul_gc_t *c, ul_gc_key_t key, const ul_gc_ops_t *ops, void *ctx) {
    ul_gc_entry_t *e = find(c, key);
    if (!e) {
        e = take(c, ops, ctx);
        e->used = 1;
        e->key = key;
        c->n_capture++;
        if (ops->capture(ctx, &e->exec)) {
            e->exec = NULL;
            e->failed = 1;
            c->n_capture_failed++;
        }
    }
    e->stamp = ++c->clock;
    if (!e->failed) {
        if (!ops->launch(ctx, e->exec)) {
            c->n_replay++;
            return 0;
        }
        ops->destroy(ctx, e->exec); /* nothing of it ran: run the step eagerly instead */
        e->exec = NULL;
        e->failed = 1;
    }
    c->n_eager++;
    return ops->eager(ctx);
}

void ul_gc_clear(ul_gc_t *c, const ul_gc_ops_t *ops, void *ctx) {
    for (int i = 0; i < UL_GC_ENTRIES; i++)
        if (c->e[i].used && c->e[i].exec) ops->destroy(ctx, c->e[i].exec);
    memset(c, 0, sizeof *c);
}
