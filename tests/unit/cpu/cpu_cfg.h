/* The CPU forward configuration the unit tests share. */
#ifndef UL_TEST_CPU_CFG_H
#define UL_TEST_CPU_CFG_H

#include "cpu/kv.h"
#include "model/model.h"
#include "uvllm/backend.h"

/* 2 threads, a 64-token context, batches of up to max_batch tokens and a KV pool of
 * n_pages pages of page_size tokens of kv_type sized for model m. */
static inline ul_cpu_config_t tc_cpu_cfg(const ul_model_t *m, int kv_type, int page_size,
                                         int n_pages, int max_batch) {
    ul_cpu_config_t cfg = {.n_threads = 2,
                           .kv_type = kv_type,
                           .page_size = page_size,
                           .max_batch_tokens = max_batch,
                           .n_ctx = 64};
    cfg.kv_bytes = n_pages * (int64_t)ul_kv_page_bytes(kv_type, m->hp.n_layer, m->hp.n_head_kv,
                                                       m->hp.head_dim, page_size);
    return cfg;
}

#endif
