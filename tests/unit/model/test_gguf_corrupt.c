/* The corrupt-file corpus: each case takes the small valid file of the fixture, breaks one
 * field (truncation in every section, huge counts and lengths, overflowing shapes, bad
 * offsets, alignment, types, duplicates, encodings, versions) and checks that the reader
 * refuses it with UL_EFORMAT and a message that names the problem — over an exact-size
 * buffer (so ASan sees any read past the end) and through a real file (the mmap path). */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/gguf.h"
#include "model/model.h"
#include "test_gguf_fixture.h"
#include "uvllm/err.h"

typedef void (*mut_fn)(img_t *);
typedef struct {
    const char *name;
    mut_fn mut;
    const char *want; /* substring of the error message */
} corrupt_case_t;

#define MUT(fn) static void fn(img_t *im)
#define KV "test.u8"

/* header */
MUT(bad_magic) { im->buf[0] = 'X'; }
MUT(version_1) { fx_put_u32(im, 4, 1); }
MUT(version_4) { fx_put_u32(im, 4, 4); }
MUT(version_big_endian) { fx_put_u32(im, 4, 0x03000000); }
MUT(empty) { im->len = 0; }
MUT(trunc_magic) { im->len = 2; }
MUT(trunc_version) { im->len = 6; }
MUT(trunc_n_tensors) { im->len = 12; }
MUT(trunc_n_kv) { im->len = 20; }
MUT(n_kv_2_60) { fx_put_u64(im, 16, 1ull << 60); }
MUT(n_kv_2_62) { fx_put_u64(im, 16, 1ull << 62); }
MUT(n_kv_max) { fx_put_u64(im, 16, UINT64_MAX); }
MUT(n_tensors_2_62) { fx_put_u64(im, 8, 1ull << 62); }
MUT(n_kv_minus_1) { fx_put_u64(im, 16, fx_get_u64(im, 16) - 1); }
MUT(n_tensors_plus_1) { fx_put_u64(im, 8, fx_get_u64(im, 8) + 1); }
/* kv keys */
/* Truncations inside the kv section also lower n_kv so that the cut entry is the last one,
 * and n_tensors to 0: otherwise the cheap up-front count check refuses the file before the
 * cut is reached. */
static void cut_kv(img_t *im, size_t len, uint64_t n_kv) {
    fx_put_u64(im, 8, 0);
    fx_put_u64(im, 16, n_kv);
    im->len = len;
}
MUT(trunc_key_len) { cut_kv(im, fx_kv_off(im, KV) + 4, 3); }
MUT(trunc_key_bytes) { cut_kv(im, fx_kv_off(im, KV) + 8 + 3, 3); }
MUT(key_len_2_62) { fx_put_u64(im, fx_kv_off(im, KV), 1ull << 62); }
MUT(key_len_past_end) { fx_put_u64(im, fx_kv_off(im, KV), im->len); }
MUT(key_empty) { fx_put_u64(im, fx_kv_off(im, KV), 0); }
MUT(key_bad_utf8) { im->buf[fx_kv_off(im, KV) + 8] = 0xff; }
MUT(key_overlong_utf8) {
    size_t o = fx_kv_off(im, KV) + 8;
    im->buf[o] = 0xc0, im->buf[o + 1] = 0xaf; /* overlong '/' */
}
MUT(key_surrogate_utf8) {
    size_t o = fx_kv_off(im, KV) + 8; /* "tes" -> U+D800 */
    im->buf[o] = 0xed, im->buf[o + 1] = 0xa0, im->buf[o + 2] = 0x80;
}
MUT(key_cut_utf8) { im->buf[fx_kv_off(im, KV) + 8 + 6] = 0xe2; /* last byte starts a 3-byte seq */ }
MUT(key_nul) { im->buf[fx_kv_off(im, KV) + 9] = 0; }
MUT(dup_key) { im->buf[fx_kv_off(im, "test.i8") + 8 + 5] = 'u'; /* test.i8 -> test.u8 */ }
/* kv values */
MUT(trunc_value_type) { cut_kv(im, fx_kv_type_off(im, KV) + 2, 3); }
MUT(unknown_value_type) { fx_put_u32(im, fx_kv_type_off(im, KV), 13); }
MUT(value_type_max) { fx_put_u32(im, fx_kv_type_off(im, KV), UINT32_MAX); }
MUT(trunc_value) { im->len = fx_kv_val_off(im, "test.u64") + 3; }
MUT(str_len_2_62) { fx_put_u64(im, fx_kv_val_off(im, "general.architecture"), 1ull << 62); }
MUT(str_len_past_end) { fx_put_u64(im, fx_kv_val_off(im, "general.architecture"), im->len); }
MUT(trunc_str_value) { cut_kv(im, fx_kv_val_off(im, "general.architecture") + 8 + 2, 2); }
MUT(bool_2) { im->buf[fx_kv_val_off(im, "test.bool")] = 2; }
/* arrays */
MUT(arr_unknown_elem) { fx_put_u32(im, fx_kv_val_off(im, "test.arr_f32") - 12, 77); }
MUT(arr_nested) { fx_put_u32(im, fx_kv_val_off(im, "test.arr_f32") - 12, 9); }
MUT(arr_n_2_62) { fx_put_u64(im, fx_kv_val_off(im, "test.arr_f32") - 8, 1ull << 62); }
MUT(arr_n_max) { fx_put_u64(im, fx_kv_val_off(im, "test.arr_f32") - 8, UINT64_MAX); }
MUT(arr_str_n_2_62) { fx_put_u64(im, fx_kv_val_off(im, "tokenizer.ggml.tokens") - 8, 1ull << 62); }
MUT(arr_str_n_plus) {
    size_t o = fx_kv_val_off(im, "tokenizer.ggml.tokens") - 8;
    fx_put_u64(im, o, fx_get_u64(im, o) + 100000);
}
MUT(arr_str_elem_len_2_62) {
    fx_put_u64(im, fx_kv_val_off(im, "tokenizer.ggml.tokens"), 1ull << 62);
}
MUT(trunc_arr_header) { im->len = fx_kv_val_off(im, "test.arr_f32") - 6; }
MUT(trunc_arr_elems) { im->len = fx_kv_val_off(im, "test.arr_f32") + 5; }
MUT(trunc_arr_strings) { /* inside the third string ("\xe2\x96\x81x", 4 bytes) */
    im->len = fx_kv_val_off(im, "tokenizer.ggml.tokens") + 8 + 1 + 8 + 2 + 8 + 1;
}
/* tensor infos */
MUT(trunc_tensor_name) { im->len = fx_tensor_off(im, "t.q80") + 4; }
MUT(tensor_name_len_2_62) { fx_put_u64(im, fx_tensor_off(im, "t.q80"), 1ull << 62); }
MUT(tensor_name_empty) { fx_put_u64(im, fx_tensor_off(im, "t.q80"), 0); }
MUT(tensor_name_bad_utf8) { im->buf[fx_tensor_off(im, "t.q80") + 8] = 0x80; }
MUT(dup_tensor) { memcpy(im->buf + fx_tensor_off(im, "t.q80") + 8, "t.f32", 5); }
MUT(trunc_n_dims) { im->len = fx_tensor_ndims_off(im, "t.q80") + 2; }
MUT(n_dims_0) { fx_put_u32(im, fx_tensor_ndims_off(im, "t.q80"), 0); }
MUT(n_dims_5) { fx_put_u32(im, fx_tensor_ndims_off(im, "t.q80"), 5); }
MUT(n_dims_max) { fx_put_u32(im, fx_tensor_ndims_off(im, "t.q80"), UINT32_MAX); }
MUT(trunc_dims) { im->len = fx_tensor_ndims_off(im, "t.q80") + 4 + 11; }
MUT(dim_zero) { fx_put_u64(im, fx_tensor_ndims_off(im, "t.q80") + 4 + 8, 0); }
MUT(dim_negative) { fx_put_u64(im, fx_tensor_ndims_off(im, "t.q80") + 4, 1ull << 63); }
MUT(dims_count_overflow) {
    size_t o = fx_tensor_ndims_off(im, "t.f32") + 4;
    fx_put_u64(im, o, 1ull << 32), fx_put_u64(im, o + 8, 1ull << 32);
}
MUT(dims_bytes_overflow) {
    size_t o = fx_tensor_ndims_off(im, "t.f32") + 4; /* 2^61 f32 x 2 rows = 2^64 bytes */
    fx_put_u64(im, o, 1ull << 61), fx_put_u64(im, o + 8, 2);
}
MUT(dims_huge_row) { fx_put_u64(im, fx_tensor_ndims_off(im, "t.last") + 4, 1ull << 62); }
MUT(trunc_tensor_type) { im->len = fx_tensor_type_off(im, "t.q80") + 1; }
MUT(unknown_tensor_type) { fx_put_u32(im, fx_tensor_type_off(im, "t.q80"), 99); }
MUT(removed_tensor_type_4) { fx_put_u32(im, fx_tensor_type_off(im, "t.q80"), 4); }
MUT(partial_block) { fx_put_u32(im, fx_tensor_type_off(im, "t.last"), UL_TYPE_Q4_0); }
MUT(trunc_tensor_offset) { im->len = fx_tensor_offset_off(im, "t.last") + 7; }
MUT(misaligned_offset) {
    size_t o = fx_tensor_offset_off(im, "t.q80");
    fx_put_u64(im, o, fx_get_u64(im, o) + 1);
}
MUT(offset_past_end) { fx_put_u64(im, fx_tensor_offset_off(im, "t.last"), 1u << 20); }
MUT(offset_2_63) { fx_put_u64(im, fx_tensor_offset_off(im, "t.last"), 1ull << 63); }
MUT(offset_wraps) { fx_put_u64(im, fx_tensor_offset_off(im, "t.last"), UINT64_MAX - 31); }
/* alignment, padding, data */
MUT(alignment_48) { fx_put_u32(im, fx_kv_val_off(im, "general.alignment"), 48); }
MUT(alignment_0) { fx_put_u32(im, fx_kv_val_off(im, "general.alignment"), 0); }
MUT(alignment_int32) { fx_put_u32(im, fx_kv_type_off(im, "general.alignment"), UL_GGUF_INT32); }
MUT(alignment_1024) { fx_put_u32(im, fx_kv_val_off(im, "general.alignment"), 1024); }
MUT(trunc_padding) {
    size_t info_end = fx_tensor_offset_off(im, "t.last") + 8, data = fx_data_off(im);
    cr_assert_gt(data, info_end, "fixture has no padding before its data section");
    im->len = info_end + (data - info_end) / 2;
}
MUT(trunc_data_start) { im->len = fx_data_off(im) + 10; }
MUT(trunc_data_last) {
    size_t o = fx_tensor_offset_off(im, "t.last");
    im->len = fx_data_off(im) + fx_get_u64(im, o) + 4; /* half of its 8 bytes */
}

/* Parameters cross a process boundary (criterion re-executes the binary), so the test
 * receives an index into this table, not pointers. */
static const corrupt_case_t g_cases[] = {
    {"bad_magic", bad_magic, "bad magic"},
    {"version_1", version_1, "version 1 "},
    {"version_4", version_4, "version 4 "},
    {"version_big_endian", version_big_endian, "big-endian"},
    {"empty", empty, "header magic: truncated"},
    {"trunc_magic", trunc_magic, "header magic: truncated"},
    {"trunc_version", trunc_version, "header version: truncated"},
    {"trunc_n_tensors", trunc_n_tensors, "header n_tensors: truncated"},
    {"trunc_n_kv", trunc_n_kv, "header n_kv: truncated"},
    {"n_kv_2_60", n_kv_2_60, "n_kv: 1152921504606846976 entries cannot fit"},
    {"n_kv_2_62", n_kv_2_62, "n_kv: 4611686018427387904 entries cannot fit"},
    {"n_kv_max", n_kv_max, "entries cannot fit"},
    {"n_tensors_2_62", n_tensors_2_62, "n_tensors: 4611686018427387904 tensors cannot fit"},
    {"n_kv_minus_1", n_kv_minus_1, "tensor 0 'tokenizer.ggml.tokens': n_dims 9 outside"},
    {"n_tensors_plus_1", n_tensors_plus_1, "tensor 3"},
    {"trunc_key_len", trunc_key_len, "kv 2 key: truncated"},
    {"trunc_key_bytes", trunc_key_bytes, "kv 2 key: string length 7 past end of file"},
    {"key_len_2_62", key_len_2_62, "kv 2 key: string length 4611686018427387904 past end"},
    {"key_len_past_end", key_len_past_end, "kv 2 key: string length"},
    {"key_empty", key_empty, "kv 2 key: empty name"},
    {"key_bad_utf8", key_bad_utf8, "kv 2 key: name is not valid UTF-8"},
    {"key_overlong_utf8", key_overlong_utf8, "kv 2 key: name is not valid UTF-8"},
    {"key_surrogate_utf8", key_surrogate_utf8, "kv 2 key: name is not valid UTF-8"},
    {"key_cut_utf8", key_cut_utf8, "kv 2 key: name is not valid UTF-8"},
    {"key_nul", key_nul, "kv 2 key: name contains NUL"},
    {"dup_key", dup_key, "kv 3 'test.u8': duplicate key (first at kv 2)"},
    {"trunc_value_type", trunc_value_type, "kv 2 'test.u8': truncated"},
    {"unknown_value_type", unknown_value_type, "kv 2 'test.u8': unknown value type 13"},
    {"value_type_max", value_type_max, "unknown value type 4294967295"},
    {"trunc_value", trunc_value, "'test.u64': truncated value"},
    {"str_len_2_62", str_len_2_62, "'general.architecture': string length 4611686018427387904"},
    {"str_len_past_end", str_len_past_end, "'general.architecture': string length"},
    {"trunc_str_value", trunc_str_value, "'general.architecture': string length 5 past end"},
    {"bool_2", bool_2, "'test.bool': bool value 2"},
    {"arr_unknown_elem", arr_unknown_elem, "'test.arr_f32': unknown array element type 77"},
    {"arr_nested", arr_nested, "'test.arr_f32': nested arrays"},
    {"arr_n_2_62", arr_n_2_62, "'test.arr_f32': array of 4611686018427387904 elements"},
    {"arr_n_max", arr_n_max, "'test.arr_f32': array of 18446744073709551615 elements"},
    {"arr_str_n_2_62", arr_str_n_2_62,
     "'tokenizer.ggml.tokens': array of 4611686018427387904 strings"},
    {"arr_str_n_plus", arr_str_n_plus, "'tokenizer.ggml.tokens'"},
    {"arr_str_elem_len_2_62", arr_str_elem_len_2_62,
     "'tokenizer.ggml.tokens': string length 4611686018427387904"},
    {"trunc_arr_header", trunc_arr_header, "'test.arr_f32': truncated"},
    {"trunc_arr_elems", trunc_arr_elems, "'test.arr_f32': array of 3 elements of 4 bytes past end"},
    {"trunc_arr_strings", trunc_arr_strings, "'tokenizer.ggml.tokens': string length 4 past end"},
    {"trunc_tensor_name", trunc_tensor_name, "tensor 1 name: truncated"},
    {"tensor_name_len_2_62", tensor_name_len_2_62,
     "tensor 1 name: string length 4611686018427387904"},
    {"tensor_name_empty", tensor_name_empty, "tensor 1 name: empty name"},
    {"tensor_name_bad_utf8", tensor_name_bad_utf8, "tensor 1 name: name is not valid UTF-8"},
    {"dup_tensor", dup_tensor, "tensor 1 't.f32': duplicate name (first at tensor 0)"},
    {"trunc_n_dims", trunc_n_dims, "tensor 1 't.q80': truncated"},
    {"n_dims_0", n_dims_0, "tensor 1 't.q80': n_dims 0 outside 1..4"},
    {"n_dims_5", n_dims_5, "tensor 1 't.q80': n_dims 5 outside 1..4"},
    {"n_dims_max", n_dims_max, "n_dims 4294967295 outside 1..4"},
    {"trunc_dims", trunc_dims, "tensor 1 't.q80': truncated"},
    {"dim_zero", dim_zero, "tensor 1 't.q80': dimension 1 = 0 is not positive"},
    {"dim_negative", dim_negative, "dimension 0 = 9223372036854775808 is not positive"},
    {"dims_count_overflow", dims_count_overflow, "tensor 0 't.f32': element count overflows"},
    {"dims_bytes_overflow", dims_bytes_overflow, "tensor 0 't.f32': byte size overflows"},
    {"dims_huge_row", dims_huge_row, "tensor 2 't.last': data ["},
    {"trunc_tensor_type", trunc_tensor_type, "tensor 1 't.q80': truncated"},
    {"unknown_tensor_type", unknown_tensor_type, "tensor 1 't.q80': unknown tensor type 99"},
    {"removed_tensor_type_4", removed_tensor_type_4, "unknown tensor type 4 "},
    {"partial_block", partial_block, "ne[0] = 4 is not a multiple of the q4_0 block size 32"},
    {"trunc_tensor_offset", trunc_tensor_offset, "tensor 2 't.last': truncated"},
    {"misaligned_offset", misaligned_offset,
     "tensor 1 't.q80': data offset 65 is not a multiple of the alignment 32"},
    {"offset_past_end", offset_past_end, "tensor 2 't.last': data ["},
    {"offset_2_63", offset_2_63, "past end of file"},
    {"offset_wraps", offset_wraps, "past end of file"},
    {"alignment_48", alignment_48, "general.alignment: 48 is not a power of two"},
    {"alignment_0", alignment_0, "general.alignment: 0 is not a power of two"},
    {"alignment_int32", alignment_int32, "general.alignment: type 5, expected uint32"},
    {"alignment_1024", alignment_1024, "past end of file"},
    {"trunc_padding", trunc_padding, "padding: data section at"},
    {"trunc_data_start", trunc_data_start, "past end of file"},
    {"trunc_data_last", trunc_data_last, "tensor 2 't.last': data ["},
};
#define N_CASES (sizeof g_cases / sizeof g_cases[0])

ParameterizedTestParameters(gguf_corrupt, refused) {
    static int idx[N_CASES];
    for (size_t i = 0; i < N_CASES; i++) idx[i] = (int)i;
    return cr_make_param_array(int, idx, N_CASES);
}

Test(gguf_corrupt, corpus_is_large) { cr_expect_geq(N_CASES, 40); }

/* Applies the case to a fresh valid image and returns it in an exact-size buffer. */
static img_t corrupted(const corrupt_case_t *c) {
    img_t im = fx_valid();
    c->mut(&im);
    img_t out = {malloc(im.len ? im.len : 1), im.len};
    cr_assert(out.buf);
    memcpy(out.buf, im.buf, im.len);
    free(im.buf);
    return out;
}

ParameterizedTest(int *ip, gguf_corrupt, refused) {
    const corrupt_case_t *c = &g_cases[*ip];
    img_t im = corrupted(c);
    ul_gguf_t g;
    int rc = ul_gguf_open_mem(&g, im.buf, im.len);
    cr_expect_eq(rc, UL_EFORMAT, "%s: rc %d (%s)", c->name, rc, g.err);
    cr_expect(strstr(g.err, c->want), "%s: message '%s' lacks '%s'", c->name, g.err, c->want);
    cr_expect_null(g.kv, "%s: kv left allocated", c->name);
    cr_expect_null(g.tensors, "%s: tensors left allocated", c->name);
    /* The model loader passes the reader's verdict on. */
    ul_model_t *m = NULL;
    char err[256] = "";
    rc = ul_model_load_mem(im.buf, im.len, 0, &m, err, sizeof err);
    cr_expect_eq(rc, UL_EFORMAT, "%s (model): rc %d (%s)", c->name, rc, err);
    cr_expect_null(m);
    cr_expect(strstr(err, c->want), "%s (model): message '%s'", c->name, err);
    /* Same refusal through the mmap path. */
    char path[] = "/tmp/ul_gguf_corrupt_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, im.buf, im.len), (ssize_t)im.len);
    close(fd);
    rc = ul_gguf_open(&g, path);
    cr_expect_eq(rc, UL_EFORMAT, "%s (file): rc %d (%s)", c->name, rc, g.err);
    cr_expect(im.len == 0 || strstr(g.err, c->want), "%s (file): message '%s'", c->name, g.err);
    cr_expect(im.len != 0 || strstr(g.err, "empty file"), "%s (file): message '%s'", c->name,
              g.err);
    unlink(path);
    free(im.buf);
}

/* Every error message carries the file offset of the failing field. */
Test(gguf_corrupt, message_names_offset) {
    img_t im = fx_valid();
    size_t o = fx_tensor_offset_off(&im, "t.last");
    fx_put_u64(&im, o, 1u << 20);
    ul_gguf_t g;
    cr_assert_eq(ul_gguf_open_mem(&g, im.buf, im.len), UL_EFORMAT);
    char want[64];
    snprintf(want, sizeof want, "at offset %zu", o);
    cr_expect(strstr(g.err, want), "'%s' lacks '%s'", g.err, want);
    snprintf(want, sizeof want, "(size %zu)", im.len);
    cr_expect(strstr(g.err, want), "'%s' lacks '%s'", g.err, want);
    free(im.buf);
}

/* Every prefix of a valid file is refused cleanly (or, past the last tensor byte, accepted):
 * catches any field whose bounds check was forgotten. */
Test(gguf_corrupt, every_truncation) {
    img_t im = fx_valid();
    size_t need = fx_data_off(&im) + fx_get_u64(&im, fx_tensor_offset_off(&im, "t.last")) + 8;
    for (size_t len = 0; len < im.len; len++) {
        uint8_t *b = malloc(len ? len : 1);
        memcpy(b, im.buf, len);
        ul_gguf_t g;
        int rc = ul_gguf_open_mem(&g, b, len);
        if (len < need) {
            cr_expect_eq(rc, UL_EFORMAT, "prefix %zu accepted", len);
            cr_expect_neq(g.err[0], 0, "prefix %zu: empty message", len);
        } else {
            cr_expect_eq(rc, 0, "prefix %zu holding every tensor refused: %s", len, g.err);
            ul_gguf_free(&g);
        }
        free(b);
    }
    free(im.buf);
}

/* Counts that would fit a large file are still capped before any table is allocated. */
Test(gguf_corrupt, counts_capped_in_large_files) {
    img_t im = fx_valid();
    size_t big = 40u << 20; /* room for 2^20 + 1 minimal tensor infos */
    uint8_t *b = calloc(1, big);
    cr_assert(b);
    memcpy(b, im.buf, im.len);
    img_t large = {b, big};
    fx_put_u64(&large, 16, (1u << 20) + 1);
    ul_gguf_t g;
    cr_expect_eq(ul_gguf_open_mem(&g, b, big), UL_EFORMAT);
    cr_expect(strstr(g.err, "n_kv: 1048577 entries exceed the limit"), "%s", g.err);
    fx_put_u64(&large, 16, 15);
    fx_put_u64(&large, 8, (1u << 20) + 1);
    cr_expect_eq(ul_gguf_open_mem(&g, b, big), UL_EFORMAT);
    cr_expect(strstr(g.err, "n_tensors: 1048577 tensors exceed the limit"), "%s", g.err);
    free(b);
    free(im.buf);
}
