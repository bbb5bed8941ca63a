/* Run-time choice of the kernel path: detected once from the CPU's features, overridable
 * with UVLLM_ISA=scalar|avx2|avx512 for A/B timing, and forced by tests through
 * ul_cpu_set_isa. An ISA table may leave a type out; the scalar kernel fills the gap. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/kernels_impl.h"
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

/* F16C from CPUID leaf 1 (ECX bit 29): clang's __builtin_cpu_supports has no "f16c" */
static int has_f16c(void) {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}
#endif

/* bits 0-7: the best ISA; bit 8: avx512f alone (enough for the sampler's reductions) */
static int detect(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    int f512 = __builtin_cpu_supports("avx512f") ? 1 << 8 : 0;
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
    int avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                 __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                 __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bf16");
    return (avx512 ? UL_ISA_AVX512 : avx2 ? UL_ISA_AVX2 : UL_ISA_SCALAR) | f512;
#else
    return UL_ISA_SCALAR;
#endif
}

static atomic_int g_detected = -1; /* detect()'s bits: hardware, before the env override */
static atomic_int g_active = -1;

static int hw_bits(void) {
    int d = atomic_load(&g_detected);
    if (d < 0) {
        d = detect();
        atomic_store(&g_detected, d);
    }
    return d;
}

static ul_isa_t hw_isa(void) { return (ul_isa_t)(hw_bits() & 0xff); }

int ul_cpu_has_avx512f(void) { return (hw_bits() >> 8) & 1; }

ul_isa_t ul_cpu_isa(void) {
    int a = atomic_load(&g_active);
    if (a >= 0) return (ul_isa_t)a;
    ul_isa_t isa = hw_isa();
    const char *env = getenv("UVLLM_ISA");
    if (env && *env) {
        ul_isa_t want = isa;
        if (!strcmp(env, "scalar"))
            want = UL_ISA_SCALAR;
        else if (!strcmp(env, "avx2"))
            want = UL_ISA_AVX2;
        else if (!strcmp(env, "avx512"))
            want = UL_ISA_AVX512;
        else
            UL_LOG_WARN("UVLLM_ISA=%s not one of scalar|avx2|avx512; using %s", env,
                        ul_cpu_isa_name(isa));
        if (want > isa)
            UL_LOG_WARN("UVLLM_ISA=%s not supported by this CPU; using %s", env,
                        ul_cpu_isa_name(isa));
        else
            isa = want;
    }
    atomic_store(&g_active, (int)isa);
    return isa;
}

void ul_cpu_set_isa(ul_isa_t isa) {
    UL_ASSERT(isa <= hw_isa());
    atomic_store(&g_active, (int)isa);
}

const char *ul_cpu_isa_name(ul_isa_t isa) {
    switch (isa) {
    case UL_ISA_SCALAR:
        return "scalar";
    case UL_ISA_AVX2:
        return "avx2";
    case UL_ISA_AVX512:
        return "avx512";
    }
    return "unknown";
}

int ul_cpu_type_supported(int type) {
    return type >= 0 && type < UL_TYPE_COUNT && ul_cpu_kern_scalar.mm[type] != NULL;
}

ul_mm_fn ul_cpu_mm_fn(int type, ul_isa_t isa) {
    const ul_cpu_kern_t *k = isa == UL_ISA_AVX512 ? &ul_cpu_kern_avx512
                             : isa == UL_ISA_AVX2 ? &ul_cpu_kern_avx2
                                                  : &ul_cpu_kern_scalar;
    if (k->mm[type]) return k->mm[type];
    /* AVX-512 inherits what only AVX2 implements before falling back to scalar */
    if (isa == UL_ISA_AVX512 && ul_cpu_kern_avx2.mm[type]) return ul_cpu_kern_avx2.mm[type];
    return ul_cpu_kern_scalar.mm[type];
}
