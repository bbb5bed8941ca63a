/* qwen3moe loading: tests/models/qwen3moe-tiny-f16.gguf loads with its expert
 * hyper-parameters and per-layer router and expert stacks (no dense FFN), and a copy with
 * one name or value changed in place (a tensor or key renamed, a count out of range, an
 * expert stack of the wrong depth) is refused with a message naming what is wrong. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "uvllm/err.h"

typedef struct {
    uint8_t *buf;
    size_t len;
} file_t;

static file_t read_model(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/models/qwen3moe-tiny-f16.gguf", UVLLM_SOURCE_DIR);
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    file_t r = {.len = (size_t)ftell(f)};
    fseek(f, 0, SEEK_SET);
    r.buf = malloc(r.len);
    cr_assert(r.buf && fread(r.buf, 1, r.len, f) == r.len);
    fclose(f);
    return r;
}

/* The header (keys and tensor infos) lies before the first tensor's data: names are found
 * there by their bytes. */
static uint8_t *find(file_t *f, const char *s) {
    const size_t n = strlen(s);
    for (size_t i = 0; i + n <= f->len && i < 65536; i++)
        if (!memcmp(f->buf + i, s, n)) return f->buf + i;
    cr_assert_fail("'%s' not in the file header", s);
    return NULL;
}

static void expect_refused(file_t f, const char *want) {
    ul_model_t *m = NULL;
    char err[256] = "";
    int rc = ul_model_load_mem(f.buf, f.len, 0, &m, err, sizeof err);
    cr_expect_lt(rc, 0, "loaded, expected '%s'", want);
    cr_expect_null(m);
    cr_expect(strstr(err, want), "message '%s' lacks '%s'", err, want);
    if (!rc) ul_model_free(m);
    free(f.buf);
}

Test(model_moe, tiny_loads_experts) {
    file_t f = read_model();
    ul_model_t *m = NULL;
    char err[256] = "";
    cr_assert_eq(ul_model_load_mem(f.buf, f.len, 0, &m, err, sizeof err), 0, "%s", err);
    const ul_hparams_t *hp = &m->hp;
    cr_expect_str_eq(hp->arch, "qwen3moe");
    cr_expect_eq(hp->rope_neox, 1);
    cr_expect_eq(hp->n_expert, 16);
    cr_expect_eq(hp->n_expert_used, 4);
    cr_expect_eq(hp->n_ff_exp, 64);
    for (int i = 0; i < hp->n_layer; i++) {
        const ul_layer_t *L = &m->layers[i];
        cr_expect(!L->ffn_gate && !L->ffn_up && !L->ffn_down, "layer %d: dense FFN", i);
        cr_expect(L->q_norm && L->k_norm, "layer %d: q/k norms", i);
        cr_assert(L->ffn_gate_inp && L->ffn_gate_exps && L->ffn_up_exps && L->ffn_down_exps);
        cr_expect_eq(L->ffn_gate_inp->ne[1], 16);
        cr_expect_eq(L->ffn_gate_exps->ne[2], 16);
        cr_expect_eq(L->ffn_down_exps->ne[0], 64);
        cr_expect_eq(L->ffn_down_exps->ne[1], 64);
    }
    ul_model_free(m);
    free(f.buf);
}

/* A key or tensor renamed (its name's first bytes overwritten by as), so that the loader
 * misses it: refused, naming it. */
typedef struct {
    const char *name, *as, *want;
} renamed_t;

static const renamed_t k_renamed[] = {
    {"blk.1.ffn_up_exps.weight", "blk.1.ffn_up_expX", "missing tensor 'blk.1.ffn_up_exps.weight'"},
    {"blk.0.ffn_gate_inp.weight", "blk.0.ffn_gate_inX",
     "missing tensor 'blk.0.ffn_gate_inp.weight'"},
    {"qwen3moe.expert_count", "qwen3moe.expert_counX", "missing key 'qwen3moe.expert_count'"},
    {"qwen3moe.expert_used_count", "qwen3moe.expert_used_counX",
     "missing key 'qwen3moe.expert_used_count'"},
};
#define N_RENAMED (sizeof k_renamed / sizeof *k_renamed)

ParameterizedTestParameters(model_moe, refuses_missing) {
    static int idx[N_RENAMED];
    for (size_t i = 0; i < N_RENAMED; i++) idx[i] = (int)i;
    return cr_make_param_array(int, idx, N_RENAMED);
}

ParameterizedTest(int *ip, model_moe, refuses_missing) {
    const renamed_t *c = &k_renamed[*ip];
    file_t f = read_model();
    memcpy(find(&f, c->name), c->as, strlen(c->as));
    expect_refused(f, c->want);
}

/* the u32 value after the key's name and its type */
static void put_key_u32(file_t *f, const char *key, uint32_t v) {
    uint8_t *p = find(f, key) + strlen(key);
    uint32_t type;
    memcpy(&type, p, 4);
    cr_assert_eq(type, 4u, "%s: not a u32", key); /* GGUF_TYPE_UINT32 */
    memcpy(p + 4, &v, 4);
}

Test(model_moe, refuses_more_used_than_experts) {
    file_t f = read_model();
    put_key_u32(&f, "qwen3moe.expert_used_count", 17);
    expect_refused(f, "key 'qwen3moe.expert_used_count' = 17 outside [1, 16]");
}

/* 8 experts declared, stacks of 16: the first stack is refused with both shapes */
Test(model_moe, refuses_stack_of_other_depth) {
    file_t f = read_model();
    put_key_u32(&f, "qwen3moe.expert_count", 8);
    expect_refused(f, "tensor 'blk.0.ffn_gate_inp.weight': shape [64, 16, 1, 1], expected [64, 8]");
}

Test(model_moe, refuses_other_expert_width) {
    file_t f = read_model();
    put_key_u32(&f, "qwen3moe.expert_feed_forward_length", 32);
    expect_refused(f, "tensor 'blk.0.ffn_gate_exps.weight': shape [64, 64, 16, 1], expected "
                      "[64, 32, 16]");
}
