/* The ggml tensor type table: block geometry and names of the types uvllm knows.
 * Every size computed from a file goes through ul_type_row_bytes so that an unknown type
 * or a row length that is not a whole number of blocks is caught in one place. */
#include <stdint.h>

#include "model/gguf.h"

typedef struct {
    int elems; /* elements per block */
    int bytes; /* bytes per block */
    const char *name;
} type_info_t;

static const type_info_t g_types[UL_TYPE_COUNT] = {
    [UL_TYPE_F32] = {1, 4, "f32"},           [UL_TYPE_F16] = {1, 2, "f16"},
    [UL_TYPE_BF16] = {1, 2, "bf16"},         [UL_TYPE_Q4_0] = {32, 18, "q4_0"},
    [UL_TYPE_Q4_1] = {32, 20, "q4_1"},       [UL_TYPE_Q5_0] = {32, 22, "q5_0"},
    [UL_TYPE_Q5_1] = {32, 24, "q5_1"},       [UL_TYPE_Q8_0] = {32, 34, "q8_0"},
    [UL_TYPE_Q8_1] = {32, 36, "q8_1"},       [UL_TYPE_Q2_K] = {256, 84, "q2_k"},
    [UL_TYPE_Q3_K] = {256, 110, "q3_k"},     [UL_TYPE_Q4_K] = {256, 144, "q4_k"},
    [UL_TYPE_Q5_K] = {256, 176, "q5_k"},     [UL_TYPE_Q6_K] = {256, 210, "q6_k"},
    [UL_TYPE_Q8_K] = {256, 292, "q8_k"},     [UL_TYPE_IQ4_NL] = {32, 18, "iq4_nl"},
    [UL_TYPE_IQ4_XS] = {256, 136, "iq4_xs"},
};

static const type_info_t *info(int type) {
    if (type < 0 || type >= UL_TYPE_COUNT || !g_types[type].elems) return NULL;
    return &g_types[type];
}

int ul_type_block_elems(int type) {
    const type_info_t *t = info(type);
    return t ? t->elems : 0;
}

int ul_type_block_bytes(int type) {
    const type_info_t *t = info(type);
    return t ? t->bytes : 0;
}

const char *ul_type_name(int type) {
    const type_info_t *t = info(type);
    return t ? t->name : "unknown";
}

size_t ul_type_row_bytes(int type, int64_t n) {
    const type_info_t *t = info(type);
    if (!t || n < 0 || n % t->elems) return 0;
    uint64_t blocks = (uint64_t)n / (uint64_t)t->elems;
    if (blocks > SIZE_MAX / (uint64_t)t->bytes) return 0; /* a row larger than memory */
    return (size_t)blocks * (size_t)t->bytes;
}
