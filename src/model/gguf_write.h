/* GGUF writer (v3, little-endian): collects metadata and tensor descriptions, then writes
 * header, kv, tensor infos, padding and data in one pass. Tensor data is either given with
 * the tensor (small files, tests) or streamed afterwards in declaration order, so multi-GB
 * files (`uvllm synth`, `quantize`) never sit in memory.
 *
 *   ul_gguf_writer_t *w; ul_gguf_writer_new(&w, 0);
 *   ul_gguf_w_str(w, "general.architecture", "llama", 5);
 *   ul_gguf_w_tensor(w, "token_embd.weight", UL_TYPE_F32, 2, ne, data);
 *   ul_gguf_w_write(w, "out.gguf");     -- or _begin / _data... / _end
 *   ul_gguf_writer_free(w);
 *
 * Every call returns 0 or a negative UL_E*: UL_EINVAL for a duplicate key or tensor name,
 * an unknown type or a shape that is not whole blocks; UL_EIO for write errors. */
#ifndef UL_MODEL_GGUF_WRITE_H
#define UL_MODEL_GGUF_WRITE_H

#include <stdint.h>
#include <stdio.h>

#include "model/gguf.h"

typedef struct ul_gguf_writer_s ul_gguf_writer_t;

/* alignment 0 means the GGUF default (32); otherwise a power of two, recorded as
 * general.alignment. */
int ul_gguf_writer_new(ul_gguf_writer_t **out, uint32_t alignment);
void ul_gguf_writer_free(ul_gguf_writer_t *w);

/* Metadata, in the order written. key is a NUL-terminated UTF-8 string. */
int ul_gguf_w_u8(ul_gguf_writer_t *w, const char *key, uint8_t v);
int ul_gguf_w_i8(ul_gguf_writer_t *w, const char *key, int8_t v);
int ul_gguf_w_u16(ul_gguf_writer_t *w, const char *key, uint16_t v);
int ul_gguf_w_i16(ul_gguf_writer_t *w, const char *key, int16_t v);
int ul_gguf_w_u32(ul_gguf_writer_t *w, const char *key, uint32_t v);
int ul_gguf_w_i32(ul_gguf_writer_t *w, const char *key, int32_t v);
int ul_gguf_w_f32(ul_gguf_writer_t *w, const char *key, float v);
int ul_gguf_w_bool(ul_gguf_writer_t *w, const char *key, int v);
int ul_gguf_w_u64(ul_gguf_writer_t *w, const char *key, uint64_t v);
int ul_gguf_w_i64(ul_gguf_writer_t *w, const char *key, int64_t v);
int ul_gguf_w_f64(ul_gguf_writer_t *w, const char *key, double v);
int ul_gguf_w_str(ul_gguf_writer_t *w, const char *key, const char *s, size_t len);
/* Array of n scalars of elem_type (any type but STRING and ARRAY), packed little-endian. */
int ul_gguf_w_arr(ul_gguf_writer_t *w, const char *key, uint32_t elem_type, const void *elems,
                  uint64_t n);
int ul_gguf_w_arr_str(ul_gguf_writer_t *w, const char *key, const ul_str_t *strs, uint64_t n);
/* Copies one entry of an opened (validated) file verbatim, e.g. a whole vocabulary. */
int ul_gguf_w_copy_kv(ul_gguf_writer_t *w, const ul_gguf_kv_t *kv);

/* Declares a tensor (ne[0] is the row length; n_dims 1..4). data, when not NULL, must
 * stay valid until the file is written; when NULL the bytes come from ul_gguf_w_data. */
int ul_gguf_w_tensor(ul_gguf_writer_t *w, const char *name, uint32_t type, uint32_t n_dims,
                     const int64_t *ne, const void *data);
/* Bytes of the i-th declared tensor (after ul_gguf_w_tensor accepted it). */
uint64_t ul_gguf_w_tensor_nbytes(const ul_gguf_writer_t *w, uint64_t i);

/* Whole file at once; every tensor must have been given its data. */
int ul_gguf_w_write(ul_gguf_writer_t *w, const char *path);
/* Same into a malloc'ed buffer the caller frees (tests, fuzz seeds). */
int ul_gguf_w_write_mem(ul_gguf_writer_t *w, uint8_t **out, size_t *len);

/* Streaming: _begin writes everything before the data section (and the data of tensors
 * declared with data, in order, up to the first one without); _data appends n bytes of
 * tensor data, in declaration order, in pieces of any size (padding between tensors is
 * inserted by the writer); _end checks that every tensor got all its bytes and closes. */
int ul_gguf_w_begin(ul_gguf_writer_t *w, const char *path);
int ul_gguf_w_data(ul_gguf_writer_t *w, const void *p, size_t n);
int ul_gguf_w_end(ul_gguf_writer_t *w);

#endif
