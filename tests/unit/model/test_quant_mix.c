/* The recipes' per-tensor types against llama-quantize's: the files in tests/data/quant_mix hold
 * what `llama-quantize --dry-run` picked for every tensor of the shared tiny models and of
 * TinyLlama-shaped (22 layers, GQA 8) and "small" qwen2-shaped (12 layers, biases) synth
 * files, for Q4_K_M, Q5_K_M, Q6_K, IQ4_NL and IQ4_XS (scripts/quant_mix_expect.sh wrote
 * them). ul_qmix_types must give the same type for every tensor, from the names, shapes
 * and hyperparameters alone. The files cover the "more bits" layers, tied output
 * embeddings, GQA >= 4 and rows that are not whole blocks (fallback types and f16). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf.h"
#include "model/quant_mix.h"

#define MAX_T 512
#define N_REC 5

static const char *const k_files[] = {"mini-f16",       "aidreams260K-f16", "tiny-bpe-f16",
                                      "qwen2-tiny-f16", "qwen3-tiny-f16",   "tinyllama-f16",
                                      "small-qwen2-f16"};

typedef struct {
    int n;
    char names[MAX_T][64];
    ul_qmix_tensor_t t[MAX_T];
    char in[MAX_T][16], want[N_REC][MAX_T][16];
    char recipes[N_REC][16];
    ul_qmix_model_t m;
} expect_t;

static void load(const char *base, expect_t *e) {
    char path[1024], line[512];
    const char *src = getenv("UVLLM_SOURCE_DIR");
    snprintf(path, sizeof path, "%s/tests/data/quant_mix/%s.tsv", src ? src : ".", base);
    FILE *f = fopen(path, "r");
    cr_assert(f, "cannot open %s", path);
    memset(e, 0, sizeof *e);
    while (fgets(line, sizeof line, f)) {
        char k[64], v[64];
        if (line[0] == '#') {
            if (sscanf(line, "# %63s %63s", k, v) != 2) continue;
            if (!strcmp(k, "block_count")) e->m.n_layer = atoi(v);
            if (!strcmp(k, "expert_count")) e->m.n_expert = atoi(v);
            if (!strcmp(k, "attention.head_count")) e->m.n_head = atoi(v);
            if (!strcmp(k, "attention.head_count_kv")) e->m.n_head_kv = atoi(v);
            if (!strcmp(k, "name"))
                sscanf(line, "# name n_dims ne0 input %15s %15s %15s %15s %15s", e->recipes[0],
                       e->recipes[1], e->recipes[2], e->recipes[3], e->recipes[4]);
            continue;
        }
        cr_assert(e->n < MAX_T);
        int i = e->n++;
        long long ne0;
        int nd;
        cr_assert_eq(sscanf(line, "%63s %d %lld %15s %15s %15s %15s %15s %15s", e->names[i], &nd,
                            &ne0, e->in[i], e->want[0][i], e->want[1][i], e->want[2][i],
                            e->want[3][i], e->want[4][i]),
                     9, "bad line in %s: %s", path, line);
        e->t[i] = (ul_qmix_tensor_t){e->names[i], nd, (int64_t)ne0};
    }
    fclose(f);
    cr_assert(e->n > 0 && e->m.n_layer > 0, "%s: no tensors or no block_count", path);
}

static expect_t g_e;

Test(quant_mix, matches_llama_quantize) {
    int got[MAX_T], checked = 0, raised = 0;
    for (size_t fi = 0; fi < sizeof k_files / sizeof k_files[0]; fi++) {
        load(k_files[fi], &g_e);
        for (int ri = 0; ri < N_REC; ri++) {
            const ul_qmix_recipe_t *r = ul_qmix_find(g_e.recipes[ri]);
            cr_assert(r, "%s: no recipe '%s'", k_files[fi], g_e.recipes[ri]);
            cr_assert_eq(ul_qmix_types(r, &g_e.m, g_e.t, g_e.n, got), 0);
            for (int i = 0; i < g_e.n; i++) {
                const char *name = got[i] < 0 ? g_e.in[i] : ul_type_name(got[i]);
                cr_expect_str_eq(name, g_e.want[ri][i], "%s %s %s: ours %s, llama-quantize %s",
                                 k_files[fi], r->name, g_e.names[i], name, g_e.want[ri][i]);
                checked++;
                raised += got[i] >= 0 && got[i] != r->base && strcmp(name, g_e.in[i]);
            }
        }
    }
    /* the expectations are not all "the base type": the rules are exercised */
    cr_expect_gt(raised, 100, "only %d tensors off the base type", raised);
    cr_log_info("%d tensor types checked, %d not the recipe's base type", checked, raised);
}

/* The order tensors come in does not matter: the layer rules count in llama.cpp's order. */
Test(quant_mix, order_independent) {
    load("tinyllama-f16", &g_e);
    const ul_qmix_recipe_t *r = ul_qmix_find("q4_k_m");
    int a[MAX_T], b[MAX_T];
    ul_qmix_tensor_t rev[MAX_T];
    for (int i = 0; i < g_e.n; i++) rev[i] = g_e.t[g_e.n - 1 - i];
    cr_assert_eq(ul_qmix_types(r, &g_e.m, g_e.t, g_e.n, a), 0);
    cr_assert_eq(ul_qmix_types(r, &g_e.m, rev, g_e.n, b), 0);
    for (int i = 0; i < g_e.n; i++) cr_expect_eq(a[i], b[g_e.n - 1 - i], "%s", g_e.names[i]);
    cr_expect_null(ul_qmix_find("q4_k_s"));
}
