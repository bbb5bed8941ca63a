/* GGUF reader: the file is mmap'ed read-only and validated completely before any field
 * is used; every pointer below points into the mapping.
 *
 * Byte layout (little-endian), v2 and v3:
 *   u32 magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv
 *   n_kv x { str key | u32 type | value }
 *       str   = u64 len | len bytes (UTF-8, not NUL-terminated)
 *       value = scalar of the type | str | array: u32 elem_type, u64 n, n x elem
 *   n_tensors x { str name | u32 n_dims | n_dims x u64 ne | u32 ggml_type | u64 offset }
 *   padding to general.alignment (default 32)
 *   data section: tensor offsets are relative to its start, each aligned.
 * (v1 used u32 counts and is refused.) */
#ifndef UL_MODEL_GGUF_H
#define UL_MODEL_GGUF_H

#include <stddef.h>
#include <stdint.h>

/* Metadata value types. */
typedef enum {
    UL_GGUF_UINT8 = 0,
    UL_GGUF_INT8 = 1,
    UL_GGUF_UINT16 = 2,
    UL_GGUF_INT16 = 3,
    UL_GGUF_UINT32 = 4,
    UL_GGUF_INT32 = 5,
    UL_GGUF_FLOAT32 = 6,
    UL_GGUF_BOOL = 7,
    UL_GGUF_STRING = 8,
    UL_GGUF_ARRAY = 9,
    UL_GGUF_UINT64 = 10,
    UL_GGUF_INT64 = 11,
    UL_GGUF_FLOAT64 = 12,
    UL_GGUF_NTYPES
} ul_gguf_type_t;

/* Tensor element types (ggml numbering). */
typedef enum {
    UL_TYPE_F32 = 0,
    UL_TYPE_F16 = 1,
    UL_TYPE_Q4_0 = 2,
    UL_TYPE_Q4_1 = 3,
    UL_TYPE_Q5_0 = 6,
    UL_TYPE_Q5_1 = 7,
    UL_TYPE_Q8_0 = 8,
    UL_TYPE_Q8_1 = 9,
    UL_TYPE_Q2_K = 10,
    UL_TYPE_Q3_K = 11,
    UL_TYPE_Q4_K = 12,
    UL_TYPE_Q5_K = 13,
    UL_TYPE_Q6_K = 14,
    UL_TYPE_Q8_K = 15,
    UL_TYPE_IQ4_NL = 20,
    UL_TYPE_IQ4_XS = 23,
    UL_TYPE_BF16 = 30,
    UL_TYPE_COUNT = 40
} ul_ggml_type_t;

/* Elements per block and bytes per block of a type; 0 for types uvllm does not know. */
int ul_type_block_elems(int type);
int ul_type_block_bytes(int type);
const char *ul_type_name(int type); /* "q4_0"...; "unknown" */
/* Bytes of a row of n elements; 0 if n is not a multiple of the block or type unknown. */
size_t ul_type_row_bytes(int type, int64_t n);

typedef struct ul_str_s {
    const char *ptr; /* into the mapping, not NUL-terminated */
    uint64_t len;
} ul_str_t;

typedef struct ul_gguf_kv_s {
    ul_str_t key;
    uint32_t type;      /* ul_gguf_type_t */
    uint32_t arr_type;  /* element type when type == ARRAY */
    uint64_t n;         /* element count for arrays, 1 otherwise */
    const uint8_t *val; /* raw value bytes (arrays: first element; strings: the u64 length) */
    uint64_t val_off;   /* file offset of val, for messages */
} ul_gguf_kv_t;

typedef struct ul_gguf_tensor_s {
    ul_str_t name;
    uint32_t n_dims;
    int64_t ne[4];   /* ne[0] is the contiguous (row) dimension; unused dims are 1 */
    uint32_t type;   /* ul_ggml_type_t */
    uint64_t offset; /* relative to the data section */
    uint64_t nbytes;
    const void *data; /* into the mapping, aligned */
} ul_gguf_tensor_t;

typedef struct ul_gguf_s {
    const uint8_t *base; /* mapping (or caller's buffer for ul_gguf_open_mem) */
    size_t size;
    int mapped; /* 1 if base must be munmap'ed */
    uint32_t version;
    uint64_t n_kv, n_tensors;
    ul_gguf_kv_t *kv;          /* [n_kv], malloc'ed */
    ul_gguf_tensor_t *tensors; /* [n_tensors], malloc'ed */
    uint64_t alignment;
    uint64_t data_off; /* file offset of the data section */
    char err[256];     /* why open failed: names the field and the offset */
} ul_gguf_t;

/* Maps and validates a file. On error returns UL_EFORMAT/UL_EIO/UL_ENOMEM/UL_ENOENT with
 * g->err set, and leaves nothing allocated. */
int ul_gguf_open(ul_gguf_t *g, const char *path);
/* Same over a caller-owned buffer that must outlive g (tests, fuzzing). */
int ul_gguf_open_mem(ul_gguf_t *g, const void *data, size_t size);
void ul_gguf_free(ul_gguf_t *g);
/* The caller no longer needs [p, p + n) of a mapped file (a copy was made): the pages
 * inside it leave the process's resident memory (they stay in the page cache and are
 * read back on a later access, so this never changes what the mapping reads). No-op for
 * ul_gguf_open_mem buffers. */
void ul_gguf_release(const ul_gguf_t *g, const void *p, size_t n);

const ul_gguf_kv_t *ul_gguf_find(const ul_gguf_t *g, const char *key);
const ul_gguf_tensor_t *ul_gguf_find_tensor(const ul_gguf_t *g, const char *name);
/* Typed getters: 0, UL_ENOENT if absent, UL_EFORMAT if the type does not fit.
 * Integer getters accept any integer type whose value fits. */
int ul_gguf_get_u32(const ul_gguf_t *g, const char *key, uint32_t *out);
int ul_gguf_get_i64(const ul_gguf_t *g, const char *key, int64_t *out);
int ul_gguf_get_f32(const ul_gguf_t *g, const char *key, float *out);
int ul_gguf_get_bool(const ul_gguf_t *g, const char *key, int *out);
int ul_gguf_get_str(const ul_gguf_t *g, const char *key, ul_str_t *out);
/* Array access. String arrays are walked in order with an iterator (elements have
 * variable length); numeric elements are read by index. */
typedef struct ul_gguf_iter_s {
    const uint8_t *p;
    uint64_t i, n;
} ul_gguf_iter_t;
int ul_gguf_arr_iter(const ul_gguf_kv_t *kv, ul_gguf_iter_t *it); /* kv must be a string array */
int ul_gguf_iter_next_str(ul_gguf_iter_t *it, ul_str_t *out);     /* 1 while elements remain */
int ul_gguf_arr_i64(const ul_gguf_kv_t *kv, uint64_t i, int64_t *out);
int ul_gguf_arr_f32(const ul_gguf_kv_t *kv, uint64_t i, float *out);

#endif
