/* A model from the shared test data: models/NAME.gguf under $UVLLM_SHARED, else
 * $UVLLM_SOURCE_DIR/../shared. A model that does not load fails the test, naming the path. */
#ifndef UL_TEST_SHARED_MODEL_H
#define UL_TEST_SHARED_MODEL_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "model/model.h"

static inline ul_model_t *shared_model(const char *name) {
    char path[1200], err[256];
    const char *e = getenv("UVLLM_SHARED");
    if (e && *e)
        snprintf(path, sizeof path, "%s/models/%s.gguf", e, name);
    else
        snprintf(path, sizeof path, "%s/../shared/models/%s.gguf", UVLLM_SOURCE_DIR, name);
    ul_model_t *m = NULL;
    int rc = ul_model_load(path, 0, &m, err, sizeof err);
    cr_assert_eq(rc, 0, "cannot load %s: %s (set UVLLM_SHARED to the shared test data)", path, err);
    return m;
}

#endif
