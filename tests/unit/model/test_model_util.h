/* Helpers of the loader tests (test_model_arch.c, test_model_bert.c): loading a model of
 * tests/models by name, and loading a copy of one with a key or tensor left out or added, to
 * see what the loader refuses and how it names it. */
#ifndef UL_TEST_MODEL_UTIL_H
#define UL_TEST_MODEL_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"

/* tests/models/NAME.gguf; fails the test with the loader's message when it does not load. */
ul_model_t *tm_load_ok(const char *name);

/* What a copy changes: the key or tensor drop left out, a 1-d f32 tensor add of n_add zeros
 * and a u32 key key = val added (each NULL: none). */
typedef struct tm_variant_s {
    const char *drop;
    const char *add;
    int64_t n_add;
    const char *key;
    uint32_t val;
} tm_variant_t;

/* Writes the copy of tests/models/NAME.gguf to a temporary file and loads it; the rc of the
 * load, its error text in err. */
int tm_load_variant(const char *name, const tm_variant_t *v, char *err, size_t errlen);

#endif
