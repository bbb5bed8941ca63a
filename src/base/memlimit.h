/* The memory this process may use: the machine's (/proc/meminfo) or, in a container, its
 * cgroup's limit when that is lower. Defaults that size memory (the KV pool) start from it,
 * so a replica started with `docker run --memory 1g` sizes itself from 1 GiB, not from the
 * host's 24 GiB and an OOM kill. */
#ifndef UL_BASE_MEMLIMIT_H
#define UL_BASE_MEMLIMIT_H

#include <stdint.h>

typedef struct {
    int64_t total;     /* MemTotal, -1 unknown */
    int64_t available; /* MemAvailable, -1 unknown */
    int64_t cgroup;    /* the lowest memory limit on the path of the process's cgroup, -1 none */
    /* The lower of total and cgroup (-1 when neither is known), and of available and cgroup:
     * what a default may size from. */
    int64_t limit;
    int64_t limit_available;
    /* Which file set the cgroup limit ("cgroup v2 /sys/fs/cgroup/memory.max"), or "" */
    char cgroup_source[544];
} ul_mem_info_t;

/* Reads /proc/meminfo and the process's cgroup limit below root ("/" for the real system;
 * tests pass a directory holding proc/self/cgroup, proc/meminfo and sys/fs/cgroup/...).
 * cgroup v2: the `0::PATH` line of proc/self/cgroup, memory.max of PATH and of each of its
 * ancestors under sys/fs/cgroup (the effective limit is the lowest; "max" is none). v1: the
 * `memory` controller's line, memory.limit_in_bytes under sys/fs/cgroup/memory likewise
 * (v1's "no limit", about 2^63, is none). A container without its own cgroup namespace sees
 * the host's PATH but has its own cgroup mounted at the root: a PATH whose directory is
 * missing is walked up to the root too. Missing or malformed files mean "unknown", never an
 * error. Synchronous file reads: call at start-up, before the loop runs. */
void ul_mem_info_read(const char *root, ul_mem_info_t *out);

/* One line for the start-up log: "cgroup v2 /sys/fs/cgroup/memory.max (1.0 GiB)" when the
 * cgroup set the limit, else "MemAvailable 20.1 GiB" / "MemTotal ..." / "unknown".
 * which: 1 for limit_available, 0 for limit. Returns buf. */
const char *ul_mem_info_source(const ul_mem_info_t *m, int which, char *buf, int cap);

#endif
