/* Byte counts from flags and /proc/meminfo. Binary suffixes only: memory budgets are
 * compared against page sizes and MemAvailable (KiB), where "4G" meaning 4 * 2^30 is what
 * operators of llama.cpp and vLLM expect. */
#include "base/size.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/memlimit.h"
#include "uvllm/err.h"

/* "", "B", or K/M/G/T followed by nothing, "B" or "iB" (any case). */
static int suffix_shift(const char *s, int *shift) {
    static const char units[] = "KMGT";
    *shift = 0;
    if (!strcasecmp(s, "") || !strcasecmp(s, "b")) return 0;
    int c = toupper((unsigned char)s[0]);
    const char *u = c ? strchr(units, c) : NULL;
    if (!u) return UL_EINVAL;
    *shift = 10 * (int)(u - units + 1);
    s++;
    return !*s || !strcasecmp(s, "b") || !strcasecmp(s, "ib") ? 0 : UL_EINVAL;
}

int ul_size_parse(const char *s, int64_t *out) {
    if (!s || !(*s >= '0' && *s <= '9')) return UL_EINVAL;
    uint64_t whole = 0, frac = 0, scale = 1;
    const char *p = s;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (whole > (UINT64_MAX - 9) / 10) return UL_E2BIG;
        whole = whole * 10 + (uint64_t)(*p - '0');
    }
    int has_frac = *p == '.';
    if (has_frac) {
        p++;
        if (!(*p >= '0' && *p <= '9')) return UL_EINVAL;
        for (; *p >= '0' && *p <= '9'; p++)
            if (scale < 1000000000ull) {
                frac = frac * 10 + (uint64_t)(*p - '0');
                scale *= 10;
            }
    }
    int shift, rc = suffix_shift(p, &shift);
    if (rc) return rc;
    if (has_frac && !shift) return UL_EINVAL; /* "1.5" bytes means nothing */
    if (shift && whole > ((uint64_t)INT64_MAX >> shift)) return UL_E2BIG;
    uint64_t part =
        (uint64_t)((long double)frac / (long double)scale * (long double)(1ull << shift));
    uint64_t v = (whole << shift) + part;
    if (v > (uint64_t)INT64_MAX) return UL_E2BIG;
    *out = (int64_t)v;
    return 0;
}

int64_t ul_size_mem_limit(void) {
    ul_mem_info_t m;
    ul_mem_info_read("/", &m);
    return m.limit;
}

const char *ul_size_format(int64_t bytes, char *buf, size_t cap) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 4) v /= 1024, u++;
    if (u == 0)
        snprintf(buf, cap, "%lld B", (long long)bytes);
    else
        snprintf(buf, cap, "%.1f %s", v, units[u]);
    return buf;
}
