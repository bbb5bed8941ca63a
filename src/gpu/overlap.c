/* The input path's plan (overlap.h). */
#include "gpu/overlap.h"

int ul_ov_plan(int64_t n, int chained, ul_ov_op_t *ops) {
    const int32_t slot = (int32_t)(n % UL_OV_SLOTS);
    const int reused = n >= UL_OV_SLOTS; /* the slot's events were recorded by step n - 2 */
    int k = 0;
#define OP(kind_, ev_)                                                                             \
    ops[k++] = (ul_ov_op_t) { (kind_), slot, (ev_) }
    if (reused) OP(UL_OV_HOST_WAIT, UL_OV_IN_READY(slot));
    OP(UL_OV_HOST_FILL, -1);
    if (reused) OP(UL_OV_COPY_WAIT, UL_OV_IN_FREE(slot));
    OP(UL_OV_COPY_H2D, -1);
    OP(UL_OV_COPY_RECORD, UL_OV_IN_READY(slot));
    OP(UL_OV_COMPUTE_WAIT, UL_OV_IN_READY(slot));
    if (chained && n >= 1) {
        const int32_t other = (int32_t)((n - 1) % UL_OV_SLOTS);
        OP(UL_OV_COMPUTE_GATHER, -1);
        ops[k++] = (ul_ov_op_t){UL_OV_COMPUTE_RECORD, other, UL_OV_IN_FREE(other)};
    }
    OP(UL_OV_COMPUTE, -1);
    OP(UL_OV_COMPUTE_RECORD, UL_OV_IN_FREE(slot));
    OP(UL_OV_COMPLETE, -1);
#undef OP
    return k;
}
