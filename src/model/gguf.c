/* GGUF reader: maps a file read-only and validates every count, length, type, shape and
 * offset before anything else may look at it (layout in gguf.h). The file is untrusted:
 * no count read from it is used to size an allocation or advance a pointer until it has
 * been checked against the bytes that remain, and every refusal says which field failed
 * and at which file offset, because "malformed input" alone helps nobody fix a converter.
 * Typed getters live in gguf_get.c. */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/gguf.h"
#include "model/gguf_util.h"
#include "uvllm/err.h"

#define GGUF_MAGIC 0x46554747u /* "GGUF" little-endian */
#define DEFAULT_ALIGNMENT 32
#define MAX_NAME_SHOWN 64 /* bytes of a name quoted in an error message */
/* Far above any real file (models have tens of keys and at most a few thousand tensors);
 * bounds the per-entry tables allocated before the entries are parsed, which the
 * file-size check alone would let reach several times the file size. */
#define MAX_KV (1u << 20)
#define MAX_TENSORS (1u << 20)

typedef struct {
    const uint8_t *p;
    size_t size;
    size_t pos;
    ul_gguf_t *g;
} rd_t;

__attribute__((format(printf, 2, 3))) static int fail(ul_gguf_t *g, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->err, sizeof g->err, fmt, ap);
    va_end(ap);
    ul_sanitize_line(g->err);
    return UL_EFORMAT;
}

static uint32_t ld_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static uint64_t ld_u64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static int rd_u32(rd_t *r, uint32_t *out, const char *what) {
    if (r->size - r->pos < 4)
        return fail(r->g, "%s: truncated (file ends at %zu) at offset %zu", what, r->size, r->pos);
    *out = ld_u32(r->p + r->pos);
    r->pos += 4;
    return 0;
}

static int rd_u64(rd_t *r, uint64_t *out, const char *what) {
    if (r->size - r->pos < 8)
        return fail(r->g, "%s: truncated (file ends at %zu) at offset %zu", what, r->size, r->pos);
    *out = ld_u64(r->p + r->pos);
    r->pos += 8;
    return 0;
}

static int rd_str(rd_t *r, ul_str_t *out, const char *what) {
    size_t at = r->pos;
    uint64_t len = 0;
    int rc = rd_u64(r, &len, what);
    if (rc) return rc;
    if (len > r->size - r->pos)
        return fail(r->g, "%s: string length %llu past end of file (size %zu) at offset %zu", what,
                    (unsigned long long)len, r->size, at);
    out->ptr = (const char *)r->p + r->pos;
    out->len = len;
    r->pos += len;
    return 0;
}

/* A name (key or tensor name) must be non-empty UTF-8 without NUL: it is compared with C
 * strings and printed in messages. */
static int check_name(rd_t *r, const ul_str_t *s, size_t at, const char *what) {
    if (s->len == 0) return fail(r->g, "%s: empty name at offset %zu", what, at);
    if (memchr(s->ptr, 0, s->len))
        return fail(r->g, "%s: name contains NUL at offset %zu", what, at);
    if (!ul_utf8_valid(s->ptr, s->len))
        return fail(r->g, "%s: name is not valid UTF-8 at offset %zu", what, at);
    return 0;
}

static int shown(const ul_str_t *s) {
    return s->len > MAX_NAME_SHOWN ? MAX_NAME_SHOWN : (int)s->len;
}

static int parse_array(rd_t *r, ul_gguf_kv_t *kv, const char *what) {
    size_t at = r->pos;
    int rc = rd_u32(r, &kv->arr_type, what);
    if (rc) return rc;
    if (kv->arr_type >= UL_GGUF_NTYPES)
        return fail(r->g, "%s: unknown array element type %u at offset %zu", what, kv->arr_type,
                    at);
    if (kv->arr_type == UL_GGUF_ARRAY)
        return fail(r->g, "%s: nested arrays are not supported at offset %zu", what, at);
    at = r->pos;
    if ((rc = rd_u64(r, &kv->n, what))) return rc;
    kv->val = r->p + r->pos;
    kv->val_off = r->pos;
    size_t left = r->size - r->pos;
    if (kv->arr_type != UL_GGUF_STRING) {
        size_t es = ul_gguf_scalar_size(kv->arr_type);
        if (kv->n > left / es)
            return fail(r->g,
                        "%s: array of %llu elements of %zu bytes past end of file (size %zu) "
                        "at offset %zu",
                        what, (unsigned long long)kv->n, es, r->size, at);
        r->pos += kv->n * es;
        return 0;
    }
    if (kv->n > left / 8)
        return fail(r->g, "%s: array of %llu strings past end of file (size %zu) at offset %zu",
                    what, (unsigned long long)kv->n, r->size, at);
    for (uint64_t i = 0; i < kv->n; i++) {
        ul_str_t s;
        if ((rc = rd_str(r, &s, what))) return rc;
    }
    return 0;
}

static int parse_value(rd_t *r, ul_gguf_kv_t *kv, const char *what) {
    size_t at = r->pos;
    int rc = rd_u32(r, &kv->type, what);
    if (rc) return rc;
    if (kv->type >= UL_GGUF_NTYPES)
        return fail(r->g, "%s: unknown value type %u at offset %zu", what, kv->type, at);
    kv->arr_type = 0;
    kv->n = 1;
    if (kv->type == UL_GGUF_ARRAY) return parse_array(r, kv, what);
    kv->val = r->p + r->pos;
    kv->val_off = r->pos;
    if (kv->type == UL_GGUF_STRING) {
        ul_str_t s;
        return rd_str(r, &s, what);
    }
    size_t es = ul_gguf_scalar_size(kv->type);
    if (r->size - r->pos < es)
        return fail(r->g, "%s: truncated value (file ends at %zu) at offset %zu", what, r->size,
                    r->pos);
    if (kv->type == UL_GGUF_BOOL && r->p[r->pos] > 1)
        return fail(r->g, "%s: bool value %u is neither 0 nor 1 at offset %zu", what, r->p[r->pos],
                    r->pos);
    r->pos += es;
    return 0;
}

/* Reads the name of the i-th kv or tensor (`kind`) and checks it; then `what` names the
 * item for later errors ("kv 3 'general.name'"). Until the name is read it says
 * "kv 3 key" / "tensor 3 name" (`field`). */
static int rd_name(rd_t *r, const char *kind, const char *field, uint64_t i, ul_str_t *name,
                   char *what, size_t cap) {
    size_t at = r->pos;
    snprintf(what, cap, "%s %llu %s", kind, (unsigned long long)i, field);
    int rc = rd_str(r, name, what);
    if (rc || (rc = check_name(r, name, at, what))) return rc;
    snprintf(what, cap, "%s %llu '%.*s'", kind, (unsigned long long)i, shown(name), name->ptr);
    return 0;
}

static int parse_kvs(rd_t *r) {
    ul_gguf_t *g = r->g;
    char what[MAX_NAME_SHOWN + 40];
    for (uint64_t i = 0; i < g->n_kv; i++) {
        ul_gguf_kv_t *kv = &g->kv[i];
        int rc = rd_name(r, "kv", "key", i, &kv->key, what, sizeof what);
        if (rc || (rc = parse_value(r, kv, what))) return rc;
    }
    return 0;
}

/* Reads one tensor info; returns the file offset of its offset field through off_at. */
static int parse_tensor_info(rd_t *r, uint64_t i, ul_gguf_tensor_t *t, size_t *off_at) {
    char what[MAX_NAME_SHOWN + 40];
    int rc = rd_name(r, "tensor", "name", i, &t->name, what, sizeof what);
    if (rc) return rc;
    size_t at = r->pos;
    if ((rc = rd_u32(r, &t->n_dims, what))) return rc;
    if (t->n_dims < 1 || t->n_dims > 4)
        return fail(r->g, "%s: n_dims %u outside 1..4 at offset %zu", what, t->n_dims, at);
    int64_t count = 1;
    for (int d = 0; d < 4; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        uint64_t ne = 0;
        at = r->pos;
        if ((rc = rd_u64(r, &ne, what))) return rc;
        if (ne == 0 || ne > (uint64_t)INT64_MAX)
            return fail(r->g, "%s: dimension %u = %llu is not positive at offset %zu", what, d,
                        (unsigned long long)ne, at);
        if ((int64_t)ne > INT64_MAX / count)
            return fail(r->g, "%s: element count overflows at dimension %u at offset %zu", what, d,
                        at);
        t->ne[d] = (int64_t)ne;
        count *= (int64_t)ne;
    }
    at = r->pos;
    if ((rc = rd_u32(r, &t->type, what))) return rc;
    int be = ul_type_block_elems((int)t->type);
    if (!be) return fail(r->g, "%s: unknown tensor type %u at offset %zu", what, t->type, at);
    if (t->ne[0] % be)
        return fail(r->g,
                    "%s: ne[0] = %lld is not a multiple of the %s block size %d at offset %zu",
                    what, (long long)t->ne[0], ul_type_name((int)t->type), be, at);
    uint64_t row = ul_type_row_bytes((int)t->type, t->ne[0]);
    uint64_t rows = (uint64_t)(count / t->ne[0]);
    if (!row || rows > UINT64_MAX / row)
        return fail(r->g, "%s: byte size overflows at offset %zu", what, at);
    t->nbytes = row * rows;
    *off_at = r->pos;
    return rd_u64(r, &t->offset, what);
}

/* Places each tensor in the data section once the alignment is known. */
static int place_tensors(ul_gguf_t *g, const size_t *off_at) {
    uint64_t avail = g->size - g->data_off;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        ul_gguf_tensor_t *t = &g->tensors[i];
        if (t->offset % g->alignment)
            return fail(g,
                        "tensor %llu '%.*s': data offset %llu is not a multiple of the alignment "
                        "%llu at offset %zu",
                        (unsigned long long)i, shown(&t->name), t->name.ptr,
                        (unsigned long long)t->offset, (unsigned long long)g->alignment, off_at[i]);
        if (t->offset > avail || t->nbytes > avail - t->offset) {
            uint64_t start = g->data_off + t->offset, end = start + t->nbytes;
            if (start < t->offset) start = UINT64_MAX;
            if (end < start) end = UINT64_MAX;
            return fail(g,
                        "tensor %llu '%.*s': data [%llu, %llu) past end of file (size %zu) at "
                        "offset %zu",
                        (unsigned long long)i, shown(&t->name), t->name.ptr,
                        (unsigned long long)start, (unsigned long long)end, g->size, off_at[i]);
        }
        t->data = g->base + g->data_off + t->offset;
    }
    return 0;
}

static int read_alignment(ul_gguf_t *g) {
    g->alignment = DEFAULT_ALIGNMENT;
    const ul_gguf_kv_t *kv = ul_gguf_find(g, "general.alignment");
    if (!kv) return 0;
    if (kv->type != UL_GGUF_UINT32)
        return fail(g, "general.alignment: type %u, expected uint32 at offset %llu", kv->type,
                    (unsigned long long)kv->val_off);
    uint32_t a = ld_u32(kv->val);
    if (a == 0 || (a & (a - 1)))
        return fail(g, "general.alignment: %u is not a power of two at offset %llu", a,
                    (unsigned long long)kv->val_off);
    g->alignment = a;
    return 0;
}

static int check_duplicates(ul_gguf_t *g, const size_t *off_at) {
    uint64_t n = g->n_kv > g->n_tensors ? g->n_kv : g->n_tensors;
    ul_str_t *names = malloc((n ? n : 1) * sizeof *names);
    if (!names) {
        snprintf(g->err, sizeof g->err, "out of memory checking %llu names", (unsigned long long)n);
        return UL_ENOMEM;
    }
    for (uint64_t i = 0; i < g->n_kv; i++) names[i] = g->kv[i].key;
    int64_t a, b;
    int rc = ul_find_duplicate(names, g->n_kv, &a, &b);
    if (rc == 1) {
        const ul_gguf_kv_t *kv = &g->kv[b];
        rc = fail(g, "kv %lld '%.*s': duplicate key (first at kv %lld) at offset %llu",
                  (long long)b, shown(&kv->key), kv->key.ptr, (long long)a,
                  (unsigned long long)((const uint8_t *)kv->key.ptr - g->base - 8));
    }
    if (rc == 0) {
        for (uint64_t i = 0; i < g->n_tensors; i++) names[i] = g->tensors[i].name;
        rc = ul_find_duplicate(names, g->n_tensors, &a, &b);
        if (rc == 1) {
            const ul_gguf_tensor_t *t = &g->tensors[b];
            rc = fail(g, "tensor %lld '%.*s': duplicate name (first at tensor %lld) at offset %zu",
                      (long long)b, shown(&t->name), t->name.ptr, (long long)a, off_at[b]);
        }
    }
    if (rc == UL_ENOMEM) snprintf(g->err, sizeof g->err, "out of memory checking names");
    free(names);
    return rc;
}

static int parse_header(rd_t *r) {
    ul_gguf_t *g = r->g;
    uint32_t magic = 0;
    int rc = rd_u32(r, &magic, "header magic");
    if (rc) return rc;
    if (magic != GGUF_MAGIC)
        return fail(g, "bad magic 0x%08x (not a GGUF file) at offset 0", magic);
    if ((rc = rd_u32(r, &g->version, "header version"))) return rc;
    if (g->version != 2 && g->version != 3)
        return fail(g, "unsupported GGUF version %u (only 2 and 3%s) at offset 4", g->version,
                    g->version > 0xffff ? "; big-endian file?" : "");
    if ((rc = rd_u64(r, &g->n_tensors, "header n_tensors"))) return rc;
    if ((rc = rd_u64(r, &g->n_kv, "header n_kv"))) return rc;
    /* Smallest possible kv: 8-byte length, 1-byte key, 4-byte type, 1-byte value. Smallest
     * tensor info: 8 + 1 name, 4 n_dims, 8 ne, 4 type, 8 offset. */
    size_t left = r->size - r->pos;
    if (g->n_kv > left / 14)
        return fail(g, "header n_kv: %llu entries cannot fit in a file of %zu bytes at offset 16",
                    (unsigned long long)g->n_kv, r->size);
    if (g->n_tensors > left / 33)
        return fail(g,
                    "header n_tensors: %llu tensors cannot fit in a file of %zu bytes at offset 8",
                    (unsigned long long)g->n_tensors, r->size);
    if (g->n_kv > MAX_KV)
        return fail(g, "header n_kv: %llu entries exceed the limit of %u at offset 16",
                    (unsigned long long)g->n_kv, MAX_KV);
    if (g->n_tensors > MAX_TENSORS)
        return fail(g, "header n_tensors: %llu tensors exceed the limit of %u at offset 8",
                    (unsigned long long)g->n_tensors, MAX_TENSORS);
    return 0;
}

static int parse(ul_gguf_t *g) {
    rd_t r = {g->base, g->size, 0, g};
    int rc = parse_header(&r);
    if (rc) return rc;
    g->kv = calloc(g->n_kv ? g->n_kv : 1, sizeof *g->kv);
    g->tensors = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *g->tensors);
    size_t *off_at = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *off_at);
    if (!g->kv || !g->tensors || !off_at) {
        free(off_at);
        snprintf(g->err, sizeof g->err, "out of memory for %llu kv and %llu tensors",
                 (unsigned long long)g->n_kv, (unsigned long long)g->n_tensors);
        return UL_ENOMEM;
    }
    rc = parse_kvs(&r);
    for (uint64_t i = 0; !rc && i < g->n_tensors; i++)
        rc = parse_tensor_info(&r, i, &g->tensors[i], &off_at[i]);
    if (!rc) rc = read_alignment(g);
    if (!rc) {
        uint64_t data_off = (r.pos + g->alignment - 1) / g->alignment * g->alignment;
        if (data_off > g->size && g->n_tensors)
            rc = fail(g,
                      "padding: data section at %llu starts past end of file (size %zu) at "
                      "offset %zu",
                      (unsigned long long)data_off, g->size, r.pos);
        g->data_off = data_off > g->size ? g->size : data_off;
    }
    if (!rc) rc = place_tensors(g, off_at);
    if (!rc) rc = check_duplicates(g, off_at);
    free(off_at);
    return rc;
}

static void release(ul_gguf_t *g) {
    free(g->kv);
    free(g->tensors);
    if (g->mapped && g->base) munmap((void *)g->base, g->size);
    g->kv = NULL;
    g->tensors = NULL;
    g->base = NULL;
    g->mapped = 0;
    g->n_kv = g->n_tensors = 0;
}

int ul_gguf_open_mem(ul_gguf_t *g, const void *data, size_t size) {
    memset(g, 0, sizeof *g);
    g->base = data;
    g->size = size;
    int rc = parse(g);
    if (rc) release(g);
    return rc;
}

int ul_gguf_open(ul_gguf_t *g, const char *path) {
    memset(g, 0, sizeof *g);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        snprintf(g->err, sizeof g->err, "cannot open: %s", strerror(e));
        return e == ENOENT ? UL_ENOENT : UL_EIO;
    }
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        close(fd);
        snprintf(g->err, sizeof g->err, "not a regular file");
        return UL_EIO;
    }
    if (st.st_size == 0) {
        close(fd);
        return fail(g, "empty file (0 bytes) at offset 0");
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) {
        snprintf(g->err, sizeof g->err, "mmap of %lld bytes failed: %s", (long long)st.st_size,
                 strerror(e));
        return e == ENOMEM ? UL_ENOMEM : UL_EIO;
    }
    g->base = p;
    g->size = (size_t)st.st_size;
    g->mapped = 1;
    int rc = parse(g);
    if (rc) release(g);
    return rc;
}

void ul_gguf_release(const ul_gguf_t *g, const void *p, size_t n) {
    const uint8_t *a = p, *b = a + n;
    if (!g->mapped || a < g->base || b > g->base + g->size) return;
    const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = ((uintptr_t)a + pg - 1) & ~(pg - 1), hi = (uintptr_t)b & ~(pg - 1);
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED); /* advisory: errors are harmless */
}

void ul_gguf_free(ul_gguf_t *g) {
    if (g) release(g);
}
