/* The CPU backend for the scheduler's tests: a shared model loaded once per test (free it
 * with `.fini = free_model`) and backends with f32 KV pages over it, so that tokens
 * with a scheduler feature (prefix cache, shared pages, drafts) can be compared with those
 * without, on real logits. */
#ifndef UL_TEST_CPU_FIXTURE_H
#define UL_TEST_CPU_FIXTURE_H

#include <criterion/criterion.h>

#include "cpu/kv.h"
#include "model/model.h"
#include "sched/sched.h"

#include "../shared_model.h"

static ul_model_t *g_model;

static inline void load_model(const char *name) { g_model = shared_model(name); }

static inline void free_model(void) {
    if (g_model) ul_model_free(g_model);
    g_model = NULL;
}

/* aidreams260K (loaded on first use) with n_pages f32 KV pages of page_size tokens. */
static inline ul_backend_t *aidreams_backend(int32_t n_pages, int32_t page_size, int32_t n_ctx) {
    if (!g_model) load_model("aidreams260K");
    const ul_hparams_t *hp = &g_model->hp;
    ul_cpu_config_t cfg = {.n_threads = 2,
                           .kv_type = UL_TYPE_F32,
                           .page_size = page_size,
                           .max_batch_tokens = 64,
                           .n_ctx = n_ctx};
    cfg.kv_bytes = n_pages * (int64_t)ul_kv_page_bytes(UL_TYPE_F32, hp->n_layer, hp->n_head_kv,
                                                       hp->head_dim, page_size);
    ul_backend_t *b;
    cr_assert_eq(ul_cpu_backend_create(g_model, &cfg, &b), 0);
    cr_assert_eq(b->n_pages, n_pages);
    return b;
}

#endif
