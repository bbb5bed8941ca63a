/* `--backend cuda` refuses, before touching any device, a model whose architecture or
 * weight types the CUDA kernels do not implement, with a message naming it; and accepts
 * every architecture and type it does run (src/gpu/support.c). Runs without a GPU. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/support.h"
#include "uvllm/err.h"

static ul_model_t *load(const char *rel) {
    char path[1200], err[256];
    const char *e = getenv("UVLLM_SHARED");
    if (!strncmp(rel, "shared/", 7))
        snprintf(path, sizeof path, "%s/%s", e ? e : UVLLM_SOURCE_DIR "/../shared", rel + 7);
    else
        snprintf(path, sizeof path, "%s/%s", UVLLM_SOURCE_DIR, rel);
    ul_model_t *m = NULL;
    cr_assert_eq(ul_model_load(path, 0, &m, err, sizeof err), 0, "cannot load %s: %s", path, err);
    return m;
}

static void refused(const char *rel, const char *needle) {
    ul_model_t *m = load(rel);
    char err[256] = "";
    int rc = ul_gpu_check_model(m, err, sizeof err);
    printf("%s: %s\n", rel, err);
    cr_assert_eq(rc, UL_ENOTSUP, "%s: rc %d", rel, rc);
    cr_assert(strstr(err, needle), "%s: \"%s\" does not name %s", rel, err, needle);
    ul_model_free(m);
}

static void accepted(const char *rel) {
    ul_model_t *m = load(rel);
    char err[256] = "";
    cr_assert_eq(ul_gpu_check_model(m, err, sizeof err), 0, "%s refused: %s", rel, err);
    ul_model_free(m);
}

Test(gpu_support, refuses_architectures_without_kernels_by_name) {
    refused("tests/models/gemma3-tiny-f16.gguf", "architecture gemma3");
    refused("tests/models/phi3-tiny-f16.gguf", "architecture phi3");
    refused("tests/models/qwen3moe-tiny-f16.gguf", "architecture qwen3moe");
}

/* Every type the CPU path reads has a twin.h dequantisation, so these load on the GPU. */
Test(gpu_support, accepts_every_weight_type_the_cpu_reads) {
    static const char *const ok[] = {
        "tests/models/tiny-q4_1.gguf",       "tests/models/tiny-q5_0.gguf",
        "tests/models/tiny-q5_1.gguf",       "tests/models/tiny-q6_k.gguf",
        "tests/models/tiny-iq4_nl.gguf",     "tests/models/tiny-iq4_xs.gguf",
        "shared/models/mini-q5_k_m.gguf",    "shared/models/mini-q4_k_m.gguf",
        "shared/models/mini-q8_0.gguf",      "shared/models/mini-bf16.gguf",
        "shared/models/qwen2-tiny-f16.gguf", "shared/models/qwen3-tiny-f16.gguf"};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) accepted(ok[i]);
}

/* A type the kernels cannot dequantise is refused with the tensor and the type named. */
Test(gpu_support, refuses_an_unknown_weight_type_naming_the_tensor) {
    ul_model_t *m = load("shared/models/mini-q8_0.gguf");
    ul_gguf_tensor_t t = *m->layers[0].ffn_up;
    t.type = 10; /* Q2_K: read by neither backend */
    const ul_gguf_tensor_t *saved = m->layers[0].ffn_up;
    m->layers[0].ffn_up = &t;
    char err[256] = "";
    int rc = ul_gpu_check_model(m, err, sizeof err);
    m->layers[0].ffn_up = saved;
    printf("%s\n", err);
    cr_assert_eq(rc, UL_ENOTSUP);
    cr_assert(strstr(err, "ffn_up") && strstr(err, "q2_k"), "%s", err);
    ul_model_free(m);
}
