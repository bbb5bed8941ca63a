/* GGUF writer: metadata is serialised into one growing buffer as it is added; tensors
 * are described up front so their offsets are known before the header is written, which
 * is what lets data be streamed afterwards without seeking. */
#include <stdlib.h>
#include <string.h>

#include "model/gguf_util.h"
#include "model/gguf_write.h"
#include "uvllm/err.h"

typedef struct {
    char *name;
    uint32_t type, n_dims;
    int64_t ne[4];
    uint64_t nbytes, offset;
    const void *data;
} wtensor_t;

struct ul_gguf_writer_s {
    uint8_t *kv; /* serialised kv entries */
    size_t kv_len, kv_cap;
    uint64_t n_kv;
    char **keys; /* for duplicate checks */
    wtensor_t *t;
    uint64_t n_t, cap_t;
    uint32_t alignment;
    /* streaming state */
    FILE *f;
    int own_f;
    uint64_t cur;      /* tensor being written */
    uint64_t cur_done; /* bytes of it written */
    int failed;
};

static int put(ul_gguf_writer_t *w, const void *p, size_t n) {
    if (w->kv_cap - w->kv_len < n) {
        size_t cap = w->kv_cap ? w->kv_cap : 4096;
        while (cap - w->kv_len < n) cap *= 2;
        uint8_t *np = realloc(w->kv, cap);
        if (!np) return UL_ENOMEM;
        w->kv = np;
        w->kv_cap = cap;
    }
    memcpy(w->kv + w->kv_len, p, n);
    w->kv_len += n;
    return 0;
}

static int put_u32(ul_gguf_writer_t *w, uint32_t v) { return put(w, &v, 4); }
static int put_u64(ul_gguf_writer_t *w, uint64_t v) { return put(w, &v, 8); }
static int put_str(ul_gguf_writer_t *w, const char *s, uint64_t len) {
    int rc = put_u64(w, len);
    return rc ? rc : put(w, s, len);
}

int ul_gguf_writer_new(ul_gguf_writer_t **out, uint32_t alignment) {
    *out = NULL;
    if (alignment & (alignment - 1)) return UL_EINVAL;
    ul_gguf_writer_t *w = calloc(1, sizeof *w);
    if (!w) return UL_ENOMEM;
    w->alignment = alignment ? alignment : 32;
    *out = w;
    if (alignment) {
        int rc = ul_gguf_w_u32(w, "general.alignment", alignment);
        if (rc) {
            ul_gguf_writer_free(w);
            *out = NULL;
            return rc;
        }
    }
    return 0;
}

void ul_gguf_writer_free(ul_gguf_writer_t *w) {
    if (!w) return;
    if (w->f && w->own_f) fclose(w->f);
    for (uint64_t i = 0; i < w->n_kv; i++) free(w->keys[i]);
    for (uint64_t i = 0; i < w->n_t; i++) free(w->t[i].name);
    free(w->keys);
    free(w->t);
    free(w->kv);
    free(w);
}

/* Writes the key and type of a new entry after checking the key is new and valid. */
static int begin_kv(ul_gguf_writer_t *w, const char *key, uint32_t type) {
    size_t len = strlen(key);
    if (!len || !ul_utf8_valid(key, len) || w->f) return UL_EINVAL;
    for (uint64_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->keys[i], key)) return UL_EINVAL;
    char **nk = realloc(w->keys, (w->n_kv + 1) * sizeof *nk);
    if (!nk) return UL_ENOMEM;
    w->keys = nk;
    if (!(nk[w->n_kv] = strdup(key))) return UL_ENOMEM;
    w->n_kv++;
    int rc = put_str(w, key, len);
    return rc ? rc : put_u32(w, type);
}

static int scalar(ul_gguf_writer_t *w, const char *key, uint32_t type, const void *v) {
    int rc = begin_kv(w, key, type);
    return rc ? rc : put(w, v, ul_gguf_scalar_size(type));
}

/* The typed scalar writers of gguf_write.h, one line each: name, C type, GGUF type. */
#define SCALAR_WRITER(name, ctype, gtype)                                                          \
    int ul_gguf_w_##name(ul_gguf_writer_t *w, const char *k, ctype v) {                            \
        return scalar(w, k, gtype, &v);                                                            \
    }
SCALAR_WRITER(u8, uint8_t, UL_GGUF_UINT8)
SCALAR_WRITER(i8, int8_t, UL_GGUF_INT8)
SCALAR_WRITER(u16, uint16_t, UL_GGUF_UINT16)
SCALAR_WRITER(i16, int16_t, UL_GGUF_INT16)
SCALAR_WRITER(u32, uint32_t, UL_GGUF_UINT32)
SCALAR_WRITER(i32, int32_t, UL_GGUF_INT32)
SCALAR_WRITER(f32, float, UL_GGUF_FLOAT32)
SCALAR_WRITER(u64, uint64_t, UL_GGUF_UINT64)
SCALAR_WRITER(i64, int64_t, UL_GGUF_INT64)
SCALAR_WRITER(f64, double, UL_GGUF_FLOAT64)
#undef SCALAR_WRITER

int ul_gguf_w_bool(ul_gguf_writer_t *w, const char *k, int v) {
    uint8_t b = v != 0;
    return scalar(w, k, UL_GGUF_BOOL, &b);
}

int ul_gguf_w_str(ul_gguf_writer_t *w, const char *key, const char *s, size_t len) {
    int rc = begin_kv(w, key, UL_GGUF_STRING);
    return rc ? rc : put_str(w, s, len);
}

int ul_gguf_w_arr(ul_gguf_writer_t *w, const char *key, uint32_t elem_type, const void *elems,
                  uint64_t n) {
    size_t es = ul_gguf_scalar_size(elem_type);
    if (!es || n > SIZE_MAX / es) return UL_EINVAL;
    int rc = begin_kv(w, key, UL_GGUF_ARRAY);
    if (!rc) rc = put_u32(w, elem_type);
    if (!rc) rc = put_u64(w, n);
    return rc ? rc : put(w, elems, (size_t)(n * es));
}

int ul_gguf_w_arr_str(ul_gguf_writer_t *w, const char *key, const ul_str_t *strs, uint64_t n) {
    int rc = begin_kv(w, key, UL_GGUF_ARRAY);
    if (!rc) rc = put_u32(w, UL_GGUF_STRING);
    if (!rc) rc = put_u64(w, n);
    for (uint64_t i = 0; !rc && i < n; i++) rc = put_str(w, strs[i].ptr, strs[i].len);
    return rc;
}

int ul_gguf_w_copy_kv(ul_gguf_writer_t *w, const ul_gguf_kv_t *kv) {
    char key[512];
    if (kv->key.len >= sizeof key) return UL_EINVAL;
    memcpy(key, kv->key.ptr, kv->key.len);
    key[kv->key.len] = 0;
    int rc = begin_kv(w, key, kv->type);
    if (rc) return rc;
    if (kv->type == UL_GGUF_ARRAY) {
        if ((rc = put_u32(w, kv->arr_type)) || (rc = put_u64(w, kv->n))) return rc;
    }
    /* The value's extent: scalars and numeric arrays by size, strings by walking them
     * (the reader has already checked every length). */
    uint32_t et = kv->type == UL_GGUF_ARRAY ? kv->arr_type : kv->type;
    size_t len;
    if (et == UL_GGUF_STRING) {
        const uint8_t *p = kv->val;
        for (uint64_t i = 0; i < kv->n; i++) {
            uint64_t l;
            memcpy(&l, p, 8);
            p += 8 + l;
        }
        len = (size_t)(p - kv->val);
    } else {
        len = (size_t)kv->n * ul_gguf_scalar_size(et);
    }
    return put(w, kv->val, len);
}

int ul_gguf_w_tensor(ul_gguf_writer_t *w, const char *name, uint32_t type, uint32_t n_dims,
                     const int64_t *ne, const void *data) {
    size_t len = strlen(name);
    if (w->f || !len || !ul_utf8_valid(name, len) || n_dims < 1 || n_dims > 4) return UL_EINVAL;
    for (uint64_t i = 0; i < w->n_t; i++)
        if (!strcmp(w->t[i].name, name)) return UL_EINVAL;
    wtensor_t t = {.type = type, .n_dims = n_dims, .ne = {1, 1, 1, 1}, .data = data};
    uint64_t rows = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        if (ne[d] < 1) return UL_EINVAL;
        t.ne[d] = ne[d];
        if (d && (uint64_t)ne[d] > UINT64_MAX / rows) return UL_EINVAL;
        if (d) rows *= (uint64_t)ne[d];
    }
    uint64_t row = ul_type_row_bytes((int)type, ne[0]);
    if (!row || rows > UINT64_MAX / row) return UL_EINVAL;
    t.nbytes = row * rows;
    uint64_t end = 0;
    if (w->n_t) {
        const wtensor_t *p = &w->t[w->n_t - 1];
        end = (p->offset + p->nbytes + w->alignment - 1) / w->alignment * w->alignment;
    }
    t.offset = end;
    if (w->n_t == w->cap_t) {
        uint64_t cap = w->cap_t ? 2 * w->cap_t : 16;
        wtensor_t *nt = realloc(w->t, cap * sizeof *nt);
        if (!nt) return UL_ENOMEM;
        w->t = nt;
        w->cap_t = cap;
    }
    if (!(t.name = strdup(name))) return UL_ENOMEM;
    w->t[w->n_t++] = t;
    return 0;
}

uint64_t ul_gguf_w_tensor_nbytes(const ul_gguf_writer_t *w, uint64_t i) {
    return i < w->n_t ? w->t[i].nbytes : 0;
}

static int out(ul_gguf_writer_t *w, const void *p, size_t n) {
    if (n && fwrite(p, 1, n, w->f) != n) {
        w->failed = 1;
        return UL_EIO;
    }
    return 0;
}

static int pad(ul_gguf_writer_t *w, uint64_t pos) {
    static const uint8_t zeros[256];
    uint64_t n = (w->alignment - pos % w->alignment) % w->alignment;
    while (n) {
        size_t k = n > sizeof zeros ? sizeof zeros : (size_t)n;
        int rc = out(w, zeros, k);
        if (rc) return rc;
        n -= k;
    }
    return 0;
}

static int write_head(ul_gguf_writer_t *w) {
    uint32_t hdr32[2] = {0x46554747u, 3};
    uint64_t hdr64[2] = {w->n_t, w->n_kv};
    int rc = out(w, hdr32, 8);
    if (!rc) rc = out(w, hdr64, 16);
    if (!rc) rc = out(w, w->kv, w->kv_len);
    uint64_t pos = 24 + w->kv_len;
    for (uint64_t i = 0; !rc && i < w->n_t; i++) {
        const wtensor_t *t = &w->t[i];
        uint64_t len = strlen(t->name);
        rc = out(w, &len, 8);
        if (!rc) rc = out(w, t->name, len);
        if (!rc) rc = out(w, &t->n_dims, 4);
        if (!rc) rc = out(w, t->ne, 8 * t->n_dims);
        if (!rc) rc = out(w, &t->type, 4);
        if (!rc) rc = out(w, &t->offset, 8);
        pos += 8 + len + 4 + 8 * t->n_dims + 4 + 8;
    }
    return rc ? rc : pad(w, pos);
}

/* Writes the data of given-data tensors from the current one on, stopping at the first
 * tensor whose bytes must be streamed. */
static int advance(ul_gguf_writer_t *w) {
    while (w->cur < w->n_t && w->t[w->cur].data) {
        const wtensor_t *t = &w->t[w->cur];
        int rc = out(w, t->data, (size_t)t->nbytes);
        if (!rc) rc = pad(w, t->nbytes);
        if (rc) return rc;
        w->cur++;
    }
    return 0;
}

static int start(ul_gguf_writer_t *w, FILE *f, int own) {
    if (w->f) return UL_EINVAL;
    w->f = f;
    w->own_f = own;
    w->cur = w->cur_done = 0;
    w->failed = 0;
    int rc = write_head(w);
    return rc ? rc : advance(w);
}

int ul_gguf_w_begin(ul_gguf_writer_t *w, const char *path) {
    FILE *f = fopen(path, "wb");
    if (!f) return UL_EIO;
    return start(w, f, 1);
}

int ul_gguf_w_data(ul_gguf_writer_t *w, const void *p, size_t n) {
    const uint8_t *b = p;
    while (n) {
        if (!w->f || w->cur >= w->n_t) return UL_EINVAL; /* more bytes than tensors */
        const wtensor_t *t = &w->t[w->cur];
        uint64_t k = t->nbytes - w->cur_done;
        if (k > n) k = n;
        int rc = out(w, b, (size_t)k);
        if (rc) return rc;
        b += k;
        n -= (size_t)k;
        w->cur_done += k;
        if (w->cur_done == t->nbytes) {
            if ((rc = pad(w, t->nbytes))) return rc;
            w->cur++;
            w->cur_done = 0;
            if ((rc = advance(w))) return rc;
        }
    }
    return 0;
}

static int finish(ul_gguf_writer_t *w) {
    int rc = w->f ? advance(w) : UL_EINVAL;
    if (!rc && w->cur != w->n_t) rc = UL_EINVAL; /* tensors still missing data */
    if (w->f && fflush(w->f)) rc = rc ? rc : UL_EIO;
    if (w->failed && !rc) rc = UL_EIO;
    return rc;
}

int ul_gguf_w_end(ul_gguf_writer_t *w) {
    int rc = finish(w);
    if (w->f && w->own_f && fclose(w->f) && !rc) rc = UL_EIO;
    w->f = NULL;
    return rc;
}

int ul_gguf_w_write(ul_gguf_writer_t *w, const char *path) {
    int rc = ul_gguf_w_begin(w, path);
    int rc2 = ul_gguf_w_end(w);
    return rc ? rc : rc2;
}

int ul_gguf_w_write_mem(ul_gguf_writer_t *w, uint8_t **outp, size_t *len) {
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f) return UL_ENOMEM;
    int rc = start(w, f, 0);
    int rc2 = finish(w);
    w->f = NULL;
    if (fclose(f) && !rc && !rc2) rc = UL_EIO;
    if (rc || rc2) {
        free(buf);
        return rc ? rc : rc2;
    }
    *outp = (uint8_t *)buf;
    *len = n;
    return 0;
}
