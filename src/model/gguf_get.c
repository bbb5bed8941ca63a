/* Lookups and typed getters over a validated GGUF. Everything here runs after
 * ul_gguf_open accepted the file, so lengths and counts are already known to be inside
 * the mapping; the getters only check that a value's type fits what the caller asks. */
#include <math.h>
#include <string.h>

#include "model/gguf.h"
#include "model/gguf_util.h"
#include "uvllm/err.h"

const ul_gguf_kv_t *ul_gguf_find(const ul_gguf_t *g, const char *key) {
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (ul_str_eq(g->kv[i].key, key)) return &g->kv[i];
    return NULL;
}

const ul_gguf_tensor_t *ul_gguf_find_tensor(const ul_gguf_t *g, const char *name) {
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (ul_str_eq(g->tensors[i].name, name)) return &g->tensors[i];
    return NULL;
}

/* Reads an integer element; *neg tells whether it is below zero (then *v holds it as
 * int64 bits). Returns UL_EFORMAT for non-integer types. GGUF is little-endian, as are the
 * hosts uvllm builds for, so the value's bytes are the low bytes of *v. */
static int load_int(uint32_t type, const uint8_t *p, uint64_t *v, int *neg) {
    int is_signed = type == UL_GGUF_INT8 || type == UL_GGUF_INT16 || type == UL_GGUF_INT32 ||
                    type == UL_GGUF_INT64;
    if (!is_signed && type != UL_GGUF_UINT8 && type != UL_GGUF_UINT16 && type != UL_GGUF_UINT32 &&
        type != UL_GGUF_UINT64)
        return UL_EFORMAT;
    size_t n = ul_gguf_scalar_size(type);
    uint64_t x = 0;
    memcpy(&x, p, n);
    int top = (int)(x >> (8 * n - 1)) & 1;
    if (is_signed && top && n < 8) x |= ~(uint64_t)0 << (8 * n); /* sign-extend */
    *v = x;
    *neg = is_signed && top;
    return 0;
}

static int to_i64(uint32_t type, const uint8_t *p, int64_t *out) {
    uint64_t v;
    int neg;
    if (load_int(type, p, &v, &neg)) return UL_EFORMAT;
    if (!neg && v > (uint64_t)INT64_MAX) return UL_EFORMAT;
    *out = (int64_t)v;
    return 0;
}

static int to_f32(uint32_t type, const uint8_t *p, float *out) {
    if (type == UL_GGUF_FLOAT32) {
        memcpy(out, p, 4);
        return 0;
    }
    if (type == UL_GGUF_FLOAT64) {
        double d;
        memcpy(&d, p, 8);
        *out = (float)d;
        return 0;
    }
    return UL_EFORMAT;
}

int ul_gguf_get_u32(const ul_gguf_t *g, const char *key, uint32_t *out) {
    const ul_gguf_kv_t *kv = ul_gguf_find(g, key);
    if (!kv) return UL_ENOENT;
    uint64_t v;
    int neg;
    if (load_int(kv->type, kv->val, &v, &neg) || neg || v > UINT32_MAX) return UL_EFORMAT;
    *out = (uint32_t)v;
    return 0;
}

int ul_gguf_get_i64(const ul_gguf_t *g, const char *key, int64_t *out) {
    const ul_gguf_kv_t *kv = ul_gguf_find(g, key);
    if (!kv) return UL_ENOENT;
    return to_i64(kv->type, kv->val, out);
}

int ul_gguf_get_f32(const ul_gguf_t *g, const char *key, float *out) {
    const ul_gguf_kv_t *kv = ul_gguf_find(g, key);
    if (!kv) return UL_ENOENT;
    return to_f32(kv->type, kv->val, out);
}

int ul_gguf_get_bool(const ul_gguf_t *g, const char *key, int *out) {
    const ul_gguf_kv_t *kv = ul_gguf_find(g, key);
    if (!kv) return UL_ENOENT;
    if (kv->type != UL_GGUF_BOOL) return UL_EFORMAT;
    *out = kv->val[0] != 0;
    return 0;
}

int ul_gguf_get_str(const ul_gguf_t *g, const char *key, ul_str_t *out) {
    const ul_gguf_kv_t *kv = ul_gguf_find(g, key);
    if (!kv) return UL_ENOENT;
    if (kv->type != UL_GGUF_STRING) return UL_EFORMAT;
    /* For strings, val points at the u64 length prefix. */
    memcpy(&out->len, kv->val, 8);
    out->ptr = (const char *)kv->val + 8;
    return 0;
}

int ul_gguf_arr_iter(const ul_gguf_kv_t *kv, ul_gguf_iter_t *it) {
    if (kv->type != UL_GGUF_ARRAY || kv->arr_type != UL_GGUF_STRING) return UL_EFORMAT;
    it->p = kv->val;
    it->i = 0;
    it->n = kv->n;
    return 0;
}

int ul_gguf_iter_next_str(ul_gguf_iter_t *it, ul_str_t *out) {
    if (it->i >= it->n) return 0;
    memcpy(&out->len, it->p, 8);
    out->ptr = (const char *)it->p + 8;
    it->p += 8 + out->len;
    it->i++;
    return 1;
}

int ul_gguf_arr_i64(const ul_gguf_kv_t *kv, uint64_t i, int64_t *out) {
    if (kv->type != UL_GGUF_ARRAY || i >= kv->n) return UL_EFORMAT;
    size_t es = ul_gguf_scalar_size(kv->arr_type);
    if (!es || kv->arr_type == UL_GGUF_BOOL) return UL_EFORMAT;
    return to_i64(kv->arr_type, kv->val + i * es, out);
}

int ul_gguf_arr_f32(const ul_gguf_kv_t *kv, uint64_t i, float *out) {
    if (kv->type != UL_GGUF_ARRAY || i >= kv->n) return UL_EFORMAT;
    size_t es = ul_gguf_scalar_size(kv->arr_type);
    if (!es) return UL_EFORMAT;
    return to_f32(kv->arr_type, kv->val + i * es, out);
}
