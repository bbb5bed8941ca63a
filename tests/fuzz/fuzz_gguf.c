/* libFuzzer harness for the GGUF reader: any byte string must either be refused with a
 * message or yield a file whose every kv, array element and tensor can be read back
 * without leaving the buffer. libFuzzer hands us an exact-size heap copy, so ASan flags
 * any read past the end.
 *
 * Under UVLLM_FUZZ every library is built with -fsanitize=fuzzer-no-link, so the reader,
 * the model loader and the vocabulary all give libFuzzer coverage feedback. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "model/model.h"
#include "uvllm/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Loader warnings about odd but acceptable inputs would flood the run's output. */
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    ul_log_set_level(UL_LOG_LEVEL_OFF);
    return 0;
}

static volatile uint64_t g_sink; /* keeps the reads below from being optimised away */

static void touch_kv(const ul_gguf_t *g, const ul_gguf_kv_t *kv) {
    char key[128];
    snprintf(key, sizeof key, "%.*s", (int)(kv->key.len < 127 ? kv->key.len : 127), kv->key.ptr);
    uint32_t u;
    int64_t i;
    float f;
    int b;
    ul_str_t s;
    if (!ul_gguf_get_u32(g, key, &u)) g_sink += u;
    if (!ul_gguf_get_i64(g, key, &i)) g_sink += (uint64_t)i;
    if (!ul_gguf_get_f32(g, key, &f)) g_sink += (uint64_t)(f == f);
    if (!ul_gguf_get_bool(g, key, &b)) g_sink += (uint64_t)b;
    if (!ul_gguf_get_str(g, key, &s) && s.len) g_sink += (unsigned char)s.ptr[s.len - 1];
    if (kv->type != UL_GGUF_ARRAY) return;
    ul_gguf_iter_t it;
    if (!ul_gguf_arr_iter(kv, &it))
        while (ul_gguf_iter_next_str(&it, &s))
            if (s.len) g_sink += (unsigned char)s.ptr[s.len - 1];
    if (kv->n) {
        if (!ul_gguf_arr_i64(kv, kv->n - 1, &i)) g_sink += (uint64_t)i;
        if (!ul_gguf_arr_f32(kv, kv->n - 1, &f)) g_sink += (uint64_t)(f == f);
    }
}

/* The loader on top: hyper-parameter and weight checks, then the vocabulary. */
static void load_model(const uint8_t *data, size_t size, int vocab_only) {
    ul_model_t *m = NULL;
    char err[256] = "";
    if (ul_model_load_mem(data, size, vocab_only, &m, err, sizeof err)) {
        if (!err[0] || m) __builtin_trap();
        return;
    }
    if (m->layers) /* every weight the table hands out is inside the buffer */
        for (int l = 0; l < m->hp.n_layer; l++)
            g_sink +=
                ((const uint8_t *)m->layers[l].ffn_down->data)[m->layers[l].ffn_down->nbytes - 1];
    ul_model_free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ul_gguf_t g;
    if (ul_gguf_open_mem(&g, data, size)) {
        if (!g.err[0]) __builtin_trap(); /* a refusal must say why */
        return 0;
    }
    load_model(data, size, 0);
    load_model(data, size, 1);
    for (uint64_t k = 0; k < g.n_kv; k++) touch_kv(&g, &g.kv[k]);
    for (uint64_t t = 0; t < g.n_tensors; t++) {
        const ul_gguf_tensor_t *ti = &g.tensors[t];
        if (ti->nbytes) /* first and last byte of the data must be inside the buffer */
            g_sink += ((const uint8_t *)ti->data)[0] + ((const uint8_t *)ti->data)[ti->nbytes - 1];
    }
    ul_gguf_free(&g);
    return 0;
}
