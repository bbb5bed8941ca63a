/* GGUF reader and writer: a written file reads back with every value and tensor intact,
 * the getters convert only where the value fits, and every shipped model and vocabulary
 * file opens. The corrupt-file corpus lives in test_gguf_corrupt.c. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/gguf.h"
#include "model/gguf_write.h"
#include "test_files.h"
#include "test_gguf_fixture.h"
#include "uvllm/err.h"

/* The fixture file (test_gguf_fixture.c), opened from memory for the reading tests. */
static img_t im;
static ul_gguf_t g;

static void open_valid(void) {
    im = fx_valid();
    cr_assert_eq(ul_gguf_open_mem(&g, im.buf, im.len), 0, "%s", g.err);
}

static void close_valid(void) {
    ul_gguf_free(&g);
    free(im.buf);
}

Test(gguf, scalars_read_back, .init = open_valid, .fini = close_valid) {
    cr_assert_eq(g.version, 3);
    cr_assert_eq(g.n_kv, 15);
    cr_assert_eq(g.n_tensors, 3);
    cr_assert_eq(g.alignment, 32);
    uint32_t u32;
    int64_t i64;
    float f;
    int b;
    cr_assert_eq(ul_gguf_get_u32(&g, "test.u32", &u32), 0);
    cr_assert_eq(u32, 4000000000u);
    cr_assert_eq(ul_gguf_get_u32(&g, "test.u8", &u32), 0);
    cr_assert_eq(u32, 200);
    cr_assert_eq(ul_gguf_get_i64(&g, "test.i8", &i64), 0);
    cr_assert_eq(i64, -100);
    cr_assert_eq(ul_gguf_get_i64(&g, "test.u16", &i64), 0);
    cr_assert_eq(i64, 60000);
    cr_assert_eq(ul_gguf_get_i64(&g, "test.i16", &i64), 0);
    cr_assert_eq(i64, -30000);
    cr_assert_eq(ul_gguf_get_i64(&g, "test.i32", &i64), 0);
    cr_assert_eq(i64, -2000000000);
    cr_assert_eq(ul_gguf_get_i64(&g, "test.u64", &i64), 0);
    cr_assert_eq(i64, 1ll << 40);
    cr_assert_eq(ul_gguf_get_i64(&g, "test.i64", &i64), 0);
    cr_assert_eq(i64, -(1ll << 40));
    cr_assert_eq(ul_gguf_get_f32(&g, "test.f32", &f), 0);
    cr_assert_eq(f, 1.5f);
    cr_assert_eq(ul_gguf_get_f32(&g, "test.f64", &f), 0);
    cr_assert_eq(f, 0.25f);
    cr_assert_eq(ul_gguf_get_bool(&g, "test.bool", &b), 0);
    cr_assert_eq(b, 1);
    ul_str_t s;
    cr_assert_eq(ul_gguf_get_str(&g, "general.architecture", &s), 0);
    cr_assert_eq(s.len, 5);
    cr_assert_eq(memcmp(s.ptr, "llama", 5), 0);
}

Test(gguf, getters_refuse_what_does_not_fit, .init = open_valid, .fini = close_valid) {
    uint32_t u32;
    int64_t i64;
    float f;
    int b;
    ul_str_t s;
    cr_expect_eq(ul_gguf_get_u32(&g, "test.i8", &u32), UL_EFORMAT, "negative into u32");
    cr_expect_eq(ul_gguf_get_u32(&g, "test.u64", &u32), UL_EFORMAT, "2^40 into u32");
    cr_expect_eq(ul_gguf_get_u32(&g, "test.f32", &u32), UL_EFORMAT, "float into u32");
    cr_expect_eq(ul_gguf_get_i64(&g, "general.architecture", &i64), UL_EFORMAT);
    cr_expect_eq(ul_gguf_get_f32(&g, "test.u32", &f), UL_EFORMAT);
    cr_expect_eq(ul_gguf_get_bool(&g, "test.u8", &b), UL_EFORMAT);
    cr_expect_eq(ul_gguf_get_str(&g, "test.u8", &s), UL_EFORMAT);
    cr_expect_eq(ul_gguf_get_str(&g, "no.such.key", &s), UL_ENOENT);
    cr_expect_eq(ul_gguf_get_u32(&g, "test", &u32), UL_ENOENT, "prefix of a key is not a key");
}

Test(gguf, arrays_read_back, .init = open_valid, .fini = close_valid) {
    const ul_gguf_kv_t *kv = ul_gguf_find(&g, "test.arr_f32");
    cr_assert(kv);
    cr_assert_eq(kv->n, 3);
    float f;
    int64_t i64;
    for (uint64_t i = 0; i < 3; i++) {
        cr_assert_eq(ul_gguf_arr_f32(kv, i, &f), 0);
        cr_expect_eq(f, (float)(i + 1));
    }
    cr_expect_eq(ul_gguf_arr_f32(kv, 3, &f), UL_EFORMAT, "index past the end");
    cr_expect_eq(ul_gguf_arr_i64(kv, 0, &i64), UL_EFORMAT, "floats are not integers");
    ul_gguf_iter_t it;
    cr_expect_eq(ul_gguf_arr_iter(kv, &it), UL_EFORMAT, "not a string array");
    kv = ul_gguf_find(&g, "tokenizer.ggml.tokens");
    cr_assert_eq(ul_gguf_arr_iter(kv, &it), 0);
    const char *want[] = {"a", "bb", "\xe2\x96\x81x"};
    ul_str_t s;
    int n = 0;
    while (ul_gguf_iter_next_str(&it, &s)) {
        cr_assert_lt(n, 3);
        cr_expect_eq(s.len, strlen(want[n]));
        cr_expect_eq(memcmp(s.ptr, want[n], s.len), 0, "token %d", n);
        n++;
    }
    cr_expect_eq(n, 3);
}

Test(gguf, tensors_read_back_aligned, .init = open_valid, .fini = close_valid) {
    const ul_gguf_tensor_t *t = ul_gguf_find_tensor(&g, "t.f32");
    cr_assert(t);
    cr_expect_eq(t->n_dims, 2);
    cr_expect_eq(t->ne[0], 8);
    cr_expect_eq(t->ne[1], 2);
    cr_expect_eq(t->ne[2], 1);
    cr_expect_eq(t->nbytes, 64);
    const float *f = t->data;
    for (int i = 0; i < 16; i++) cr_expect_eq(f[i], (float)i);
    t = ul_gguf_find_tensor(&g, "t.q80");
    cr_assert(t);
    cr_expect_eq(t->type, UL_TYPE_Q8_0);
    cr_expect_eq(t->nbytes, 68);
    cr_expect_eq(((const uint8_t *)t->data)[67], 67);
    t = ul_gguf_find_tensor(&g, "t.last");
    cr_assert(t);
    cr_expect_eq(((const uint16_t *)t->data)[3], 0x3c03);
    for (uint64_t i = 0; i < g.n_tensors; i++)
        cr_expect_eq((uintptr_t)((const uint8_t *)g.tensors[i].data - im.buf) % 32, 0);
    cr_expect_null(ul_gguf_find_tensor(&g, "t"));
}

Test(gguf, type_table) {
    cr_expect_eq(ul_type_row_bytes(UL_TYPE_Q4_K, 512), 288);
    cr_expect_eq(ul_type_row_bytes(UL_TYPE_Q6_K, 256), 210);
    cr_expect_eq(ul_type_row_bytes(UL_TYPE_BF16, 3), 6);
    cr_expect_eq(ul_type_row_bytes(UL_TYPE_Q4_0, 33), 0, "partial block");
    cr_expect_eq(ul_type_row_bytes(4, 32), 0, "removed type 4");
    cr_expect_eq(ul_type_row_bytes(UL_TYPE_F32, INT64_MAX), 0, "row larger than memory");
    cr_expect_str_eq(ul_type_name(UL_TYPE_Q8_0), "q8_0");
    cr_expect_str_eq(ul_type_name(99), "unknown");
}

Test(gguf, writer_refuses_bad_input) {
    ul_gguf_writer_t *w;
    cr_assert_eq(ul_gguf_writer_new(&w, 0), 0);
    cr_expect_eq(ul_gguf_w_u32(w, "a", 1), 0);
    cr_expect_eq(ul_gguf_w_u32(w, "a", 2), UL_EINVAL, "duplicate key");
    cr_expect_eq(ul_gguf_w_u32(w, "", 2), UL_EINVAL, "empty key");
    cr_expect_eq(ul_gguf_w_u32(w, "\xff", 2), UL_EINVAL, "invalid UTF-8");
    cr_expect_eq(ul_gguf_w_arr(w, "b", UL_GGUF_STRING, NULL, 0), UL_EINVAL);
    cr_expect_eq(ul_gguf_w_tensor(w, "t", UL_TYPE_Q4_0, 1, (int64_t[]){33}, NULL), UL_EINVAL);
    cr_expect_eq(ul_gguf_w_tensor(w, "t", 4, 1, (int64_t[]){32}, NULL), UL_EINVAL);
    cr_expect_eq(ul_gguf_w_tensor(w, "t", UL_TYPE_F32, 5, (int64_t[]){1, 1, 1, 1, 1}, NULL),
                 UL_EINVAL);
    cr_expect_eq(ul_gguf_w_tensor(w, "t", UL_TYPE_F32, 1, (int64_t[]){4}, NULL), 0);
    cr_expect_eq(ul_gguf_w_tensor(w, "t", UL_TYPE_F32, 1, (int64_t[]){4}, NULL), UL_EINVAL);
    uint8_t *buf;
    size_t len;
    cr_expect_eq(ul_gguf_w_write_mem(w, &buf, &len), UL_EINVAL, "tensor without data");
    ul_gguf_writer_free(w);
    cr_expect_eq(ul_gguf_writer_new(&w, 48), UL_EINVAL, "alignment not a power of two");
}

/* Streamed data lands at the same offsets as data given up front, and a non-default
 * alignment is honoured. */
Test(gguf, writer_streams_to_file) {
    char path[] = "/tmp/ul_gguf_stream_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    ul_gguf_writer_t *w;
    cr_assert_eq(ul_gguf_writer_new(&w, 64), 0);
    float given[3] = {7, 8, 9};
    cr_assert_eq(ul_gguf_w_tensor(w, "a", UL_TYPE_F32, 1, (int64_t[]){100}, NULL), 0);
    cr_assert_eq(ul_gguf_w_tensor(w, "b", UL_TYPE_F32, 1, (int64_t[]){3}, given), 0);
    cr_assert_eq(ul_gguf_w_tensor(w, "c", UL_TYPE_F32, 2, (int64_t[]){5, 2}, NULL), 0);
    cr_assert_eq(ul_gguf_w_begin(w, path), 0);
    float v[110];
    for (int i = 0; i < 110; i++) v[i] = (float)i;
    cr_assert_eq(ul_gguf_w_data(w, v, 30 * 4), 0);      /* part of a */
    cr_assert_eq(ul_gguf_w_data(w, v + 30, 80 * 4), 0); /* rest of a, b, all of c */
    cr_expect_eq(ul_gguf_w_data(w, v, 4), UL_EINVAL, "more bytes than tensors");
    cr_assert_eq(ul_gguf_w_end(w), 0);
    ul_gguf_writer_free(w);
    ul_gguf_t g;
    cr_assert_eq(ul_gguf_open(&g, path), 0, "%s", g.err);
    cr_expect_eq(g.alignment, 64);
    const float *a = ul_gguf_find_tensor(&g, "a")->data;
    const float *b = ul_gguf_find_tensor(&g, "b")->data;
    const float *c = ul_gguf_find_tensor(&g, "c")->data;
    cr_expect_eq(a[99], 99.0f);
    cr_expect_eq(b[2], 9.0f);
    cr_expect_eq(c[0], 100.0f);
    cr_expect_eq(c[9], 109.0f);
    for (uint64_t i = 0; i < g.n_tensors; i++)
        cr_expect_eq(((const uint8_t *)g.tensors[i].data - g.base) % 64, 0);
    ul_gguf_free(&g);
    unlink(path);
}

/* A whole vocabulary copied kv by kv reads back identical. */
Test(gguf, copy_kv_round_trip) {
    char src[4096];
    snprintf(src, sizeof src, "%s/models/aidreams260K.gguf", fx_shared());
    ul_gguf_t g;
    cr_assert_eq(ul_gguf_open(&g, src), 0, "%s: %s", src, g.err);
    ul_gguf_writer_t *w;
    cr_assert_eq(ul_gguf_writer_new(&w, 0), 0);
    for (uint64_t i = 0; i < g.n_kv; i++) cr_assert_eq(ul_gguf_w_copy_kv(w, &g.kv[i]), 0);
    uint8_t *buf;
    size_t len;
    cr_assert_eq(ul_gguf_w_write_mem(w, &buf, &len), 0);
    ul_gguf_t c;
    cr_assert_eq(ul_gguf_open_mem(&c, buf, len), 0, "%s", c.err);
    cr_assert_eq(c.n_kv, g.n_kv);
    /* Metadata bytes are identical: the copy starts at the same offset (24) in both. */
    size_t kv_end = (size_t)(g.tensors[0].name.ptr - (const char *)g.base) - 8;
    cr_expect_eq(memcmp(c.base + 24, g.base + 24, kv_end - 24), 0);
    ul_gguf_free(&c);
    free(buf);
    ul_gguf_writer_free(w);
    ul_gguf_free(&g);
}

/* 1 when path opens (counted), 0 when it does not (a failed expectation). */
static int opens(const char *path, const char *name, void *ctx) {
    ul_gguf_t g;
    int rc = ul_gguf_open(&g, path);
    cr_expect_eq(rc, 0, "%s: %s", path, g.err);
    if (rc) return 0;
    ul_gguf_free(&g);
    return 1;
}

Test(gguf, every_shared_file_opens) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/models", fx_shared());
    int n = tf_each(dir, ".gguf", opens, NULL);
    cr_expect_geq(n, 8, "expected the 8 shipped models in %s, opened %d", dir, n);
    snprintf(dir, sizeof dir, "%s/tokenizer", fx_shared());
    int m = tf_each(dir, ".gguf", opens, NULL);
    cr_expect_geq(m, 9, "expected the vocabulary files in %s, opened %d", dir, m);
}

Test(gguf, missing_file_is_enoent) {
    ul_gguf_t g;
    cr_expect_eq(ul_gguf_open(&g, "/nonexistent/x.gguf"), UL_ENOENT);
    cr_expect_neq(g.err[0], 0);
    cr_expect_eq(ul_gguf_open(&g, "/tmp"), UL_EIO, "a directory");
}
