/* Builds the small GGUF images the model tests corrupt and load (see gguf_fixture.h). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../test_data.h"
#include "test_gguf_fixture.h"
#include "model/gguf_write.h"

#define CHECK(x) cr_assert_eq((x), 0, "%s failed", #x)

img_t fx_valid(void) {
    ul_gguf_writer_t *w;
    CHECK(ul_gguf_writer_new(&w, 32));
    CHECK(ul_gguf_w_str(w, "general.architecture", "llama", 5));
    CHECK(ul_gguf_w_u8(w, "test.u8", 200));
    CHECK(ul_gguf_w_i8(w, "test.i8", -100));
    CHECK(ul_gguf_w_u16(w, "test.u16", 60000));
    CHECK(ul_gguf_w_i16(w, "test.i16", -30000));
    CHECK(ul_gguf_w_u32(w, "test.u32", 4000000000u));
    CHECK(ul_gguf_w_i32(w, "test.i32", -2000000000));
    CHECK(ul_gguf_w_f32(w, "test.f32", 1.5f));
    CHECK(ul_gguf_w_bool(w, "test.bool", 1));
    CHECK(ul_gguf_w_u64(w, "test.u64", 1ull << 40));
    CHECK(ul_gguf_w_i64(w, "test.i64", -(1ll << 40)));
    CHECK(ul_gguf_w_f64(w, "test.f64", 0.25));
    float fa[3] = {1, 2, 3};
    CHECK(ul_gguf_w_arr(w, "test.arr_f32", UL_GGUF_FLOAT32, fa, 3));
    ul_str_t toks[3] = {{"a", 1}, {"bb", 2}, {"\xe2\x96\x81x", 4}};
    CHECK(ul_gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, 3));
    static float f32[16];
    static uint8_t q8[2 * 34];
    static uint16_t f16[4];
    for (int i = 0; i < 16; i++) f32[i] = (float)i;
    for (int i = 0; i < 68; i++) q8[i] = (uint8_t)i;
    for (int i = 0; i < 4; i++) f16[i] = (uint16_t)(0x3c00 + i);
    CHECK(ul_gguf_w_tensor(w, "t.f32", UL_TYPE_F32, 2, (int64_t[]){8, 2}, f32));
    CHECK(ul_gguf_w_tensor(w, "t.q80", UL_TYPE_Q8_0, 2, (int64_t[]){32, 2}, q8));
    CHECK(ul_gguf_w_tensor(w, "t.last", UL_TYPE_F16, 1, (int64_t[]){4}, f16));
    img_t im;
    CHECK(ul_gguf_w_write_mem(w, &im.buf, &im.len));
    ul_gguf_writer_free(w);
    return im;
}

/* Deterministic filler: the values do not matter, only that loading reads the right bytes. */
static void *fill(uint32_t type, int64_t n0, int64_t n1) {
    size_t bytes = ul_type_row_bytes((int)type, n0) * (size_t)n1;
    uint8_t *p = malloc(bytes);
    cr_assert(p);
    for (size_t i = 0; i < bytes; i++) p[i] = (uint8_t)(i * 7);
    if (type == UL_TYPE_F32)
        for (size_t i = 0; i < bytes / 4; i++) ((float *)p)[i] = 1.0f;
    return p;
}

void (*fx_llama_hook)(struct ul_gguf_writer_s *w);

img_t fx_llama(uint32_t mat_type, uint32_t norm_type, const char *arch, int tied) {
    enum { E = 32, FF = 64, V = 8, H = 2, KV = 1, HD = E / H };
    ul_gguf_writer_t *w;
    CHECK(ul_gguf_writer_new(&w, 0));
    char key[64];
    CHECK(ul_gguf_w_str(w, "general.architecture", arch, strlen(arch)));
#define HP(suffix, v)                                                                              \
    snprintf(key, sizeof key, "%s.%s", arch, suffix);                                              \
    CHECK(ul_gguf_w_u32(w, key, v))
    HP("context_length", 64);
    HP("embedding_length", E);
    HP("block_count", 1);
    HP("feed_forward_length", FF);
    HP("attention.head_count", H);
    HP("attention.head_count_kv", KV);
#undef HP
    snprintf(key, sizeof key, "%s.rope.freq_base", arch);
    CHECK(ul_gguf_w_f32(w, key, 5000.0f));
    snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", arch);
    CHECK(ul_gguf_w_f32(w, key, 1e-6f));
    CHECK(ul_gguf_w_str(w, "tokenizer.ggml.model", "llama", 5));
    ul_str_t toks[V] = {{"<unk>", 5}, {"<s>", 3}, {"</s>", 4},         {"a", 1},
                        {"b", 1},     {"c", 1},   {"\xe2\x96\x81", 3}, {"ab", 2}};
    float scores[V] = {0, 0, 0, -1, -2, -3, -4, -5};
    int32_t types[V] = {2, 3, 3, 1, 1, 1, 1, 1};
    CHECK(ul_gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, V));
    CHECK(ul_gguf_w_arr(w, "tokenizer.ggml.scores", UL_GGUF_FLOAT32, scores, V));
    CHECK(ul_gguf_w_arr(w, "tokenizer.ggml.token_type", UL_GGUF_INT32, types, V));
    CHECK(ul_gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 1));
    CHECK(ul_gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 2));
    CHECK(ul_gguf_w_u32(w, "tokenizer.ggml.unknown_token_id", 0));
    if (fx_llama_hook) fx_llama_hook(w);
    const struct {
        const char *name;
        int norm;
        int64_t n0, n1;
    } ts[] = {
        {"token_embd.weight", 0, E, V},
        {"output_norm.weight", 1, E, 1},
        {"output.weight", 0, E, V},
        {"blk.0.attn_norm.weight", 1, E, 1},
        {"blk.0.attn_q.weight", 0, E, H * HD},
        {"blk.0.attn_k.weight", 0, E, KV * HD},
        {"blk.0.attn_v.weight", 0, E, KV * HD},
        {"blk.0.attn_output.weight", 0, H * HD, E},
        {"blk.0.ffn_norm.weight", 1, E, 1},
        {"blk.0.ffn_gate.weight", 0, E, FF},
        {"blk.0.ffn_up.weight", 0, E, FF},
        {"blk.0.ffn_down.weight", 0, FF, E},
    };
    void *bufs[sizeof ts / sizeof ts[0]] = {0};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
        if (tied && !strcmp(ts[i].name, "output.weight")) continue;
        uint32_t type = ts[i].norm ? norm_type : mat_type;
        bufs[i] = fill(type, ts[i].n0, ts[i].n1);
        uint32_t nd = ts[i].n1 == 1 ? 1 : 2;
        CHECK(ul_gguf_w_tensor(w, ts[i].name, type, nd, (int64_t[]){ts[i].n0, ts[i].n1}, bufs[i]));
    }
    img_t im;
    CHECK(ul_gguf_w_write_mem(w, &im.buf, &im.len));
    ul_gguf_writer_free(w);
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) free(bufs[i]);
    return im;
}

static ul_gguf_t parsed(const img_t *im) {
    ul_gguf_t g;
    cr_assert_eq(ul_gguf_open_mem(&g, im->buf, im->len), 0, "fixture does not parse: %s", g.err);
    return g;
}

static size_t kv_field(const img_t *im, const char *key, int which) {
    ul_gguf_t g = parsed(im);
    const ul_gguf_kv_t *kv = ul_gguf_find(&g, key);
    cr_assert(kv, "fixture lacks %s", key);
    size_t key_at = (size_t)((const uint8_t *)kv->key.ptr - im->buf);
    size_t r = which == 0 ? key_at - 8 : which == 1 ? key_at + kv->key.len : kv->val_off;
    ul_gguf_free(&g);
    return r;
}

size_t fx_kv_off(const img_t *im, const char *key) { return kv_field(im, key, 0); }
size_t fx_kv_type_off(const img_t *im, const char *key) { return kv_field(im, key, 1); }
size_t fx_kv_val_off(const img_t *im, const char *key) { return kv_field(im, key, 2); }

static size_t tensor_field(const img_t *im, const char *name, int which) {
    ul_gguf_t g = parsed(im);
    const ul_gguf_tensor_t *t = ul_gguf_find_tensor(&g, name);
    cr_assert(t, "fixture lacks %s", name);
    size_t name_at = (size_t)((const uint8_t *)t->name.ptr - im->buf);
    size_t nd = name_at + t->name.len;
    size_t r = which == 0   ? name_at - 8
               : which == 1 ? nd
               : which == 2 ? nd + 4 + 8 * t->n_dims
                            : nd + 8 + 8 * t->n_dims;
    ul_gguf_free(&g);
    return r;
}

size_t fx_tensor_off(const img_t *im, const char *n) { return tensor_field(im, n, 0); }
size_t fx_tensor_ndims_off(const img_t *im, const char *n) { return tensor_field(im, n, 1); }
size_t fx_tensor_type_off(const img_t *im, const char *n) { return tensor_field(im, n, 2); }
size_t fx_tensor_offset_off(const img_t *im, const char *n) { return tensor_field(im, n, 3); }

size_t fx_data_off(const img_t *im) {
    ul_gguf_t g = parsed(im);
    size_t r = g.data_off;
    ul_gguf_free(&g);
    return r;
}

void fx_put_u32(img_t *im, size_t off, uint32_t v) {
    cr_assert(off + 4 <= im->len);
    memcpy(im->buf + off, &v, 4);
}

void fx_put_u64(img_t *im, size_t off, uint64_t v) {
    cr_assert(off + 8 <= im->len);
    memcpy(im->buf + off, &v, 8);
}

uint64_t fx_get_u64(const img_t *im, size_t off) {
    uint64_t v;
    memcpy(&v, im->buf + off, 8);
    return v;
}

const char *fx_shared(void) { return ut_shared_dir(); }
