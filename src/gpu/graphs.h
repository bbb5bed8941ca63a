/* Which decode steps replay a captured CUDA graph: a small cache keyed by the step's shape,
 * with the policy (capture once, replay after, run eagerly when capture or replay fails)
 * written against callbacks so the host tests it without a device
 * (tests/unit/gpu/test_graphs.c); backend_gpu.c passes the CUDA calls. Plain C. */
#ifndef UL_GPU_GRAPHS_H
#define UL_GPU_GRAPHS_H

#include <stdint.h>

#define UL_GC_ENTRIES 32

/* A step's shape: everything a captured graph's launches and copies depend on (the data
 * they read, token ids, positions, page tables, sampling rows, lives in fixed buffers). */
typedef struct {
    int32_t slot, n_tokens, n_out, n_dev;
} ul_gc_key_t;

typedef struct {
    ul_gc_key_t key;
    void *exec;     /* the instantiated graph; NULL with failed */
    int failed;     /* capture or replay failed once: this shape runs eagerly from now on */
    uint64_t stamp; /* last use, for eviction */
    int used;
} ul_gc_entry_t;

typedef struct {
    ul_gc_entry_t e[UL_GC_ENTRIES];
    uint64_t clock;
    int64_t n_capture, n_replay, n_eager, n_capture_failed;
} ul_gc_t;

typedef struct {
    /* Enqueues the step's compute eagerly on the stream; 0 or an error. */
    int (*eager)(void *ctx);
    /* Captures the same enqueue into an instantiated graph (*exec); 0, or an error after
     * ending the capture and leaving the stream usable. */
    int (*capture)(void *ctx, void **exec);
    /* Launches exec on the stream; 0 or an error. */
    int (*launch)(void *ctx, void *exec);
    /* Frees exec (eviction, a failed replay, the cache's end). */
    void (*destroy)(void *ctx, void *exec);
} ul_gc_ops_t;

/* Runs one step of shape key: replays its graph, or captures one (evicting the least
 * recently used shape when full) and launches it, or runs eagerly for a shape whose
 * capture or replay failed before (once failed, never captured again). A failed replay
 * destroys the graph and runs the step eagerly. Returns the eager run's or launch's rc. */
int ul_gc_run(ul_gc_t *c, ul_gc_key_t key, const ul_gc_ops_t *ops, void *ctx);
/* Destroys every graph. */
void ul_gc_clear(ul_gc_t *c, const ul_gc_ops_t *ops, void *ctx);

#endif
