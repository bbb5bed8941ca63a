/* Byte counts from flags and /proc/meminfo. Binary suffixes only: memory budgets are
 * compared against page sizes and MemAvailable (KiB), where "4G" meaning 4 * 2^30 is what
 * operators of llama.cpp and vLLM expect. */
#include "base/size.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

/* The value of a "Key:   N kB" line of /proc/meminfo, in bytes. */
static int meminfo_value(const char *text, const char *key, int64_t *out) {
    size_t klen = strlen(key);
    const char *p = text;
    while (p && (p = strstr(p, key)) && p != text && p[-1] != '\n') p += klen;
    if (!p) return UL_ENOENT;
    unsigned long long kib;
    char unit[8] = "";
    if (sscanf(p + klen, " %llu %7s", &kib, unit) < 1 || (unit[0] && strcmp(unit, "kB")))
        return UL_ENOENT;
    if (kib > (unsigned long long)(INT64_MAX / 1024)) return UL_ENOENT;
    *out = (int64_t)kib * 1024;
    return 0;
}

int ul_size_meminfo_available(const char *text, int64_t *out) {
    return text ? meminfo_value(text, "MemAvailable:", out) : UL_ENOENT;
}

int ul_size_meminfo_total(const char *text, int64_t *out) {
    return text ? meminfo_value(text, "MemTotal:", out) : UL_ENOENT;
}

int ul_size_cgroup_limit(const char *text, int64_t *out) {
    if (!text) return UL_ENOENT;
    while (*text == ' ' || *text == '\t') text++;
    if (!strncmp(text, "max", 3)) return UL_ENOENT; /* cgroup v2: no limit */
    char *end;
    unsigned long long v = strtoull(text, &end, 10);
    if (end == text || (*end && *end != '\n' && *end != ' ')) return UL_ENOENT;
    /* cgroup v1 writes "no limit" as the largest page-aligned value (about 2^63) */
    if (v >= (unsigned long long)INT64_MAX / 2) return UL_ENOENT;
    *out = (int64_t)v;
    return 0;
}

/* Reads a small text file into buf (NUL-terminated); 0 or UL_ENOENT. */
static int read_small(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "r");
    if (!f) return UL_ENOENT;
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = '\0';
    return n ? 0 : UL_ENOENT;
}

int64_t ul_size_mem_limit(void) {
    char text[4096];
    int64_t total = -1, v;
    if (!read_small("/proc/meminfo", text, sizeof text) && !ul_size_meminfo_total(text, &v))
        total = v;
    static const char *const cg[] = {"/sys/fs/cgroup/memory.max",
                                     "/sys/fs/cgroup/memory/memory.limit_in_bytes"};
    for (size_t i = 0; i < sizeof cg / sizeof cg[0]; i++)
        if (!read_small(cg[i], text, sizeof text) && !ul_size_cgroup_limit(text, &v) && v > 0 &&
            (total < 0 || v < total))
            total = v;
    return total;
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
