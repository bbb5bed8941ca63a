/* The order of a step's input path on two streams, as data, so the host can test it with a
 * simulated device (tests/unit/gpu/test_overlap.c) and backend_gpu.c executes the same plan
 * with CUDA calls. Plain C, no CUDA header.
 *
 * Step n uses input slot n % 2: pinned host inputs and their device copy. Its inputs are
 * filled on the host and copied on the copy stream while step n - 1 may still compute on
 * the compute stream; events order the two:
 *   IN_READY(slot): recorded on the copy stream after the slot's H2D copy;
 *   IN_FREE(slot):  recorded on the compute stream after the last kernel reading the slot.
 * Step n:  host waits IN_READY(slot) of step n - 2 (its copy out of the pinned slot is
 *          done) -> host fills the pinned slot -> copy stream waits IN_FREE(slot) of step
 *          n - 2 (no kernel reads the device slot any more) -> H2D copy -> record IN_READY
 *          -> compute stream waits IN_READY -> the step's kernels and its D2H copies of
 *          results -> record IN_FREE -> host function (completion).
 * Outputs need no event: the worker runs at most two steps at once, and step n + 2 is
 * handed over only after step n's results were read (engine/worker.h max_in_flight).
 *
 * A chained step (gpu/chain.h) also reads step n - 1's device outputs in the other slot:
 * after its compute wait, the compute stream gathers them into step n's device inputs,
 * then records IN_FREE of the other slot again, so that step n + 1's copy into that slot
 * (which waits IN_FREE) cannot overwrite what the gather still reads. */
#ifndef UL_GPU_OVERLAP_H
#define UL_GPU_OVERLAP_H

#include <stdint.h>

#define UL_OV_SLOTS 2
#define UL_OV_IN_READY(slot) (2 * (slot))
#define UL_OV_IN_FREE(slot) (2 * (slot) + 1)
#define UL_OV_N_EVENTS (2 * UL_OV_SLOTS)
#define UL_OV_MAX_OPS 12

typedef enum {
    UL_OV_HOST_WAIT,      /* the host blocks until event is complete (cudaEventSynchronize) */
    UL_OV_HOST_FILL,      /* the host writes the pinned inputs of slot */
    UL_OV_COPY_WAIT,      /* copy stream waits for event (cudaStreamWaitEvent) */
    UL_OV_COPY_H2D,       /* copy stream: pinned slot -> device slot */
    UL_OV_COPY_RECORD,    /* cudaEventRecord(event, copy stream) */
    UL_OV_COMPUTE_WAIT,   /* compute stream waits for event */
    UL_OV_COMPUTE_GATHER, /* compute stream: chained entries from the other slot's outputs */
    UL_OV_COMPUTE,        /* compute stream: the step's kernels (they read the device slot) */
    UL_OV_COMPUTE_RECORD, /* cudaEventRecord(event, compute stream) */
    UL_OV_COMPLETE        /* cudaLaunchHostFunc on the compute stream */
} ul_ov_kind_t;

typedef struct {
    ul_ov_kind_t kind;
    int32_t slot;  /* the input slot the op touches (the gather's record: the other one) */
    int32_t event; /* UL_OV_IN_READY/IN_FREE(slot) for the waits and records, else -1 */
} ul_ov_op_t;

/* The ops of step n (0, 1, ...) in issue order into ops[UL_OV_MAX_OPS]; returns how many.
 * The first use of a slot waits for nothing (its events were never recorded). chained:
 * step n gathers from step n - 1's outputs (ignored for step 0). */
int ul_ov_plan(int64_t n, int chained, ul_ov_op_t *ops);

#endif
