/* The process's memory limit from /proc/meminfo and its cgroup (v2 memory.max, v1
 * memory.limit_in_bytes). Everything below a root directory, so the unit tests build fake
 * /proc and /sys/fs/cgroup trees. */
#include "base/memlimit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/size.h"
#include "base/small_file.h"

/* A cgroup limit above this is "no limit": v1 writes it as the largest page-aligned int64. */
#define NO_LIMIT ((int64_t)1 << 62)

/* root + rel into buf ("/" + "proc/meminfo"); 0, or -1 when it does not fit. */
static int join(char *buf, size_t cap, const char *root, const char *rel) {
    size_t rl = strlen(root);
    const char *sep = rl && root[rl - 1] == '/' ? "" : "/";
    int n = snprintf(buf, cap, "%s%s%s", root, sep, rel[0] == '/' ? rel + 1 : rel);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

/* "Key:   N kB" of a /proc/meminfo text, in bytes, or -1. */
static int64_t meminfo_value(const char *text, const char *key) {
    size_t kl = strlen(key);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, key, kl) || p[kl] != ':') continue;
        char *end;
        unsigned long long kib = strtoull(p + kl + 1, &end, 10);
        if (end == p + kl + 1 || strncmp(end, " kB", 3) ||
            kib > (unsigned long long)INT64_MAX / 1024)
            return -1;
        return (int64_t)kib * 1024;
    }
    return -1;
}

/* A memory.max / memory.limit_in_bytes text: bytes, or -1 for "max", no limit or junk. */
static int64_t limit_value(const char *text) {
    char *end;
    if (text[0] < '0' || text[0] > '9') return -1; /* "max", signs, blanks */
    unsigned long long v = strtoull(text, &end, 10);
    if (*end && *end != '\n') return -1;
    return v >= (unsigned long long)NO_LIMIT ? -1 : (int64_t)v;
}

/* The /proc/self/cgroup path of the memory controller: v1's `N:...memory...:PATH` when there
 * is one (the controller lives there, also on hybrid hosts), else v2's `0::PATH`.
 * Returns 1 (v1), 2 (v2) or 0 (none); path into buf. */
static int cgroup_path(const char *text, char *buf, size_t cap) {
    int version = 0;
    for (const char *line = text; line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        const char *c1 = memchr(line, ':', len);
        const char *c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - line)) : NULL;
        if (c2 && (size_t)(line + len - (c2 + 1)) < cap) {
            size_t cl = (size_t)(c2 - c1 - 1);
            int v1mem = 0;
            for (const char *c = c1 + 1; c < c2;) { /* controllers, comma-separated */
                const char *e = memchr(c, ',', (size_t)(c2 - c));
                if (!e) e = c2;
                v1mem |= e - c == 6 && !strncmp(c, "memory", 6);
                c = e + 1;
            }
            if (v1mem || (cl == 0 && !version && line[0] == '0' && c1 == line + 1)) {
                memcpy(buf, c2 + 1, (size_t)(line + len - (c2 + 1)));
                buf[line + len - (c2 + 1)] = '\0';
                version = v1mem ? 1 : 2;
                if (v1mem) return 1;
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    return version;
}

/* The lowest limit file on the way from PATH up to the mount's root; fills source. */
static int64_t walk_limits(const char *root, int version, char *path, char *source, size_t scap) {
    const char *mount = version == 2 ? "sys/fs/cgroup" : "sys/fs/cgroup/memory";
    const char *file = version == 2 ? "memory.max" : "memory.limit_in_bytes";
    int64_t best = -1;
    char rel[512], full[1024], text[64];
    for (;;) {
        if (snprintf(rel, sizeof rel, "%s%s/%s", mount, strcmp(path, "/") ? path : "", file) <
                (int)sizeof rel &&
            !join(full, sizeof full, root, rel) &&
            ul_small_file_read(full, text, sizeof text) > 0) {
            int64_t v = limit_value(text);
            if (v >= 0 && (best < 0 || v < best)) {
                best = v;
                snprintf(source, scap, "cgroup v%d /%s", version, rel);
            }
        }
        char *slash = strrchr(path, '/');
        if (!slash || !strcmp(path, "/")) return best;
        if (slash == path)
            path[1] = '\0';
        else
            *slash = '\0';
    }
}

void ul_mem_info_read(const char *root, ul_mem_info_t *out) {
    char text[8192], path[4096], file[1024];
    memset(out, 0, sizeof *out);
    out->total = out->available = out->cgroup = -1;
    if (!join(file, sizeof file, root, "proc/meminfo") &&
        ul_small_file_read(file, text, sizeof text) > 0) {
        out->total = meminfo_value(text, "MemTotal");
        out->available = meminfo_value(text, "MemAvailable");
    }
    int version = 0;
    if (!join(file, sizeof file, root, "proc/self/cgroup") &&
        ul_small_file_read(file, text, sizeof text) > 0)
        version = cgroup_path(text, path, sizeof path);
    if (version)
        out->cgroup =
            walk_limits(root, version, path, out->cgroup_source, sizeof out->cgroup_source);
    out->limit = out->total;
    out->limit_available = out->available;
    if (out->cgroup >= 0) {
        if (out->limit < 0 || out->cgroup < out->limit) out->limit = out->cgroup;
        if (out->limit_available < 0 || out->cgroup < out->limit_available)
            out->limit_available = out->cgroup;
    }
    if (!(out->cgroup >= 0 && (out->cgroup == out->limit || out->cgroup == out->limit_available)))
        out->cgroup_source[0] = '\0';
}

const char *ul_mem_info_source(const ul_mem_info_t *m, int which, char *buf, int cap) {
    int64_t v = which ? m->limit_available : m->limit;
    char b[32];
    if (v < 0)
        snprintf(buf, (size_t)cap, "unknown");
    else if (m->cgroup_source[0] && v == m->cgroup)
        snprintf(buf, (size_t)cap, "%s (%s)", m->cgroup_source, ul_size_format(v, b, sizeof b));
    else
        snprintf(buf, (size_t)cap, "%s %s", which ? "MemAvailable" : "MemTotal",
                 ul_size_format(v, b, sizeof b));
    return buf;
}
