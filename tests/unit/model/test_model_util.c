/* See test_model_util.h. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/gguf_util.h"
#include "model/gguf_write.h"
#include "test_model_util.h"

static void model_path(char *buf, size_t n, const char *name) {
    snprintf(buf, n, "%s/tests/models/%s.gguf", UVLLM_SOURCE_DIR, name);
}

ul_model_t *tm_load_ok(const char *name) {
    char path[1200], err[256];
    model_path(path, sizeof path, name);
    ul_model_t *m = NULL;
    int rc = ul_model_load(path, 0, &m, err, sizeof err);
    cr_assert_eq(rc, 0, "cannot load %s: %s", path, err);
    return m;
}

/* The copy as a writer: every key and tensor of g but v->drop, then v's additions. */
static ul_gguf_writer_t *copy_of(const ul_gguf_t *g, const tm_variant_t *v, const float *zeros) {
    ul_gguf_writer_t *w;
    cr_assert_eq(ul_gguf_writer_new(&w, 0), 0);
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (!v->drop || !ul_str_eq(g->kv[i].key, v->drop))
            cr_assert_eq(ul_gguf_w_copy_kv(w, &g->kv[i]), 0);
    if (v->key) cr_assert_eq(ul_gguf_w_u32(w, v->key, v->val), 0);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const ul_gguf_tensor_t *t = &g->tensors[i];
        char nm[64]; /* the writer keeps a copy */
        snprintf(nm, sizeof nm, "%.*s", (int)t->name.len, t->name.ptr);
        if (v->drop && !strcmp(nm, v->drop)) continue;
        cr_assert_eq(ul_gguf_w_tensor(w, nm, t->type, t->n_dims, t->ne, t->data), 0);
    }
    if (v->add) cr_assert_eq(ul_gguf_w_tensor(w, v->add, UL_TYPE_F32, 1, &v->n_add, zeros), 0);
    return w;
}

int tm_load_variant(const char *name, const tm_variant_t *v, char *err, size_t errlen) {
    char path[1200], out[] = "/tmp/uvllm-model-XXXXXX";
    model_path(path, sizeof path, name);
    ul_gguf_t g;
    cr_assert_eq(ul_gguf_open(&g, path), 0);
    float *zeros = calloc((size_t)(v->n_add > 0 ? v->n_add : 1), sizeof *zeros);
    ul_gguf_writer_t *w = copy_of(&g, v, zeros);
    int fd = mkstemp(out);
    cr_assert_geq(fd, 0);
    close(fd);
    cr_assert_eq(ul_gguf_w_write(w, out), 0);
    ul_gguf_writer_free(w);
    ul_gguf_free(&g);
    ul_model_t *m = NULL;
    int rc = ul_model_load(out, 0, &m, err, errlen);
    ul_model_free(m);
    unlink(out);
    free(zeros);
    return rc;
}
