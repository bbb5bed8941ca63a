/* Test fixture for the GGUF tests: a small valid file built with the writer, locations of
 * its fields for targeted corruption, and the shared-data directory. */
#ifndef UL_TEST_GGUF_FIXTURE_H
#define UL_TEST_GGUF_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "model/gguf.h"

typedef struct {
    uint8_t *buf;
    size_t len;
} img_t;

/* A file with one kv of every scalar type, a string, numeric and string arrays,
 * general.alignment, and three tensors (f32 [8,2], q8_0 [32,2] named t.q80, f16 [4]). */
img_t fx_valid(void);
/* A complete small llama model (n_embd 32, 1 layer, 2 heads, 1 kv head, n_ff 64, 8 tokens)
 * with the weight types given (matrices, norms), e.g. UL_TYPE_F16, UL_TYPE_F32. */
img_t fx_llama(uint32_t mat_type, uint32_t norm_type, const char *arch, int tied);
/* When set, fx_llama calls it after the standard metadata (to add or change keys). */
struct ul_gguf_writer_s;
extern void (*fx_llama_hook)(struct ul_gguf_writer_s *w);

/* Field locations in a valid image (parsed with ul_gguf_open_mem). */
size_t fx_kv_off(const img_t *im, const char *key);      /* start of the key's length */
size_t fx_kv_type_off(const img_t *im, const char *key); /* the u32 value type */
size_t fx_kv_val_off(const img_t *im, const char *key);  /* value (arrays: first element) */
size_t fx_tensor_off(const img_t *im, const char *name); /* start of the tensor info */
size_t fx_tensor_ndims_off(const img_t *im, const char *name);
size_t fx_tensor_type_off(const img_t *im, const char *name);
size_t fx_tensor_offset_off(const img_t *im, const char *name);
size_t fx_data_off(const img_t *im);

void fx_put_u32(img_t *im, size_t off, uint32_t v);
void fx_put_u64(img_t *im, size_t off, uint64_t v);
uint64_t fx_get_u64(const img_t *im, size_t off);

/* $UVLLM_SHARED, else $UVLLM_SOURCE_DIR/../shared; fails the test if missing. */
const char *fx_shared(void);

#endif
