/* Run-time choice of the kernel path: detected once from the CPU's features, overridable
 * with UVLLM_ISA=scalar|avx2|avx512 (x86) or scalar|neon|dotprod|i8mm (AArch64) for A/B
 * timing, and forced by tests through ul_cpu_set_isa. An ISA table may leave a type out;
 * its parent's (a lower ISA of the family, then scalar) fills the gap. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/kernels_impl.h"
#if defined(__aarch64__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#ifndef HWCAP2_I8MM
#define HWCAP2_I8MM (1 << 13)
#endif
#endif
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
#elif defined(__aarch64__)
    /* NEON (ASIMD) is part of every AArch64 CPU; sdot and smmla are optional (Linux HWCAPs;
     * i8mm implies dotprod on every core that has it, the kernels assume so) */
    const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    if (!(hw & HWCAP_ASIMDDP)) return UL_ISA_NEON;
    return (hw2 & HWCAP2_I8MM) ? UL_ISA_I8MM : UL_ISA_DOTPROD;
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
        int known = 0;
        for (int i = UL_ISA_SCALAR; i <= UL_ISA_I8MM; i++)
            if (!strcmp(env, ul_cpu_isa_name((ul_isa_t)i))) {
                want = (ul_isa_t)i;
                known = 1;
            }
        if (!known)
            UL_LOG_WARN("UVLLM_ISA=%s not one of scalar|avx2|avx512|neon|dotprod|i8mm; using %s",
                        env, ul_cpu_isa_name(isa));
        if (!ul_cpu_isa_within(want, isa))
            UL_LOG_WARN("UVLLM_ISA=%s not supported by this CPU; using %s", env,
                        ul_cpu_isa_name(isa));
        else
            isa = want;
    }
    atomic_store(&g_active, (int)isa);
    return isa;
}

void ul_cpu_set_isa(ul_isa_t isa) {
    UL_ASSERT(ul_cpu_isa_within(isa, hw_isa()));
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
    case UL_ISA_NEON:
        return "neon";
    case UL_ISA_DOTPROD:
        return "dotprod";
    case UL_ISA_I8MM:
        return "i8mm";
    }
    return "unknown";
}

int ul_cpu_type_supported(int type) {
    return type >= 0 && type < UL_TYPE_COUNT && ul_cpu_kern_scalar.mm[type] != NULL;
}

static int family(ul_isa_t isa) { return isa == UL_ISA_SCALAR ? 0 : isa <= UL_ISA_AVX512 ? 1 : 2; }

int ul_cpu_isa_within(ul_isa_t need, ul_isa_t have) {
    return need == UL_ISA_SCALAR || (family(need) == family(have) && need <= have);
}

ul_isa_t ul_cpu_isa_parent(ul_isa_t isa) {
    return isa == UL_ISA_AVX2 || isa == UL_ISA_NEON ? UL_ISA_SCALAR
           : isa == UL_ISA_SCALAR                   ? UL_ISA_SCALAR
                                                    : (ul_isa_t)(isa - 1);
}

/* Only the target's tables are linked (src/cpu/cpu.cmake); another family's ISA cannot be
 * active (ul_cpu_isa_within), so it maps to scalar. */
const ul_cpu_kern_t *ul_cpu_kern(ul_isa_t isa) {
    switch (isa) {
#if defined(__x86_64__) || defined(__i386__)
    case UL_ISA_AVX2:
        return &ul_cpu_kern_avx2;
    case UL_ISA_AVX512:
        return &ul_cpu_kern_avx512;
#elif defined(__aarch64__)
    case UL_ISA_NEON:
        return &ul_cpu_kern_neon;
    case UL_ISA_DOTPROD:
        return &ul_cpu_kern_dotprod;
    case UL_ISA_I8MM:
        return &ul_cpu_kern_i8mm;
#endif
    default:
        return &ul_cpu_kern_scalar;
    }
}

/* e.g. AVX-512 inherits what only AVX2 implements before falling back to scalar */
ul_mm_fn ul_cpu_mm_fn(int type, ul_isa_t isa) {
    for (;; isa = ul_cpu_isa_parent(isa)) {
        const ul_cpu_kern_t *k = ul_cpu_kern(isa);
        if (k->mm[type] || isa == UL_ISA_SCALAR) return k->mm[type];
    }
}
