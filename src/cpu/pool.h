/* How many compute threads a process should run by default: the CPUs it may use, which
 * in a container is less than the machine's cores. A pool with more threads than that
 * waits on threads that are off-CPU at every barrier. */
#ifndef UL_CPU_POOL_H
#define UL_CPU_POOL_H

#include <stddef.h>

/* min(CPUs in the affinity mask, the cgroup CPU quota rounded down, at least 1): cgroup v2
 * cpu.max or v1 cpu.cfs_quota_us / cpu.cfs_period_us, the smallest along the process's
 * cgroup path. Writes how it was decided into why (e.g. "2 CPUs in the affinity mask,
 * cgroup quota 1.5 CPUs"). Reads /proc and /sys: call at start-up, not from the loop. */
int ul_pool_default_threads(char *why, size_t cap);

/* Parses a cgroup v2 cpu.max ("max 100000", "150000 100000"): the quota in CPUs, or 0
 * when there is none (or the text is not understood). */
double ul_pool_parse_cpu_max(const char *text);

#endif
