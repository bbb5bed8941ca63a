/* The memory limit from fake /proc and /sys/fs/cgroup trees in a temporary directory. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/memlimit.h"

#define GIB ((int64_t)1 << 30)
#define MEMINFO "MemTotal:       25165824 kB\nMemFree:  1000 kB\nMemAvailable:   20971520 kB\n"

static char root[64];

static void setup(void) {
    strcpy(root, "/tmp/ul_memlimit.XXXXXX");
    cr_assert(mkdtemp(root));
}

static void teardown(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    cr_assert_eq(system(cmd), 0);
}

/* Writes root/rel with text, making its directories. */
static void put(const char *rel, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    for (char *p = path + strlen(root) + 1; (p = strchr(p, '/')); p++) {
        *p = '\0';
        mkdir(path, 0755);
        *p = '/';
    }
    FILE *f = fopen(path, "w");
    cr_assert(f, "%s", path);
    fputs(text, f);
    fclose(f);
}

static ul_mem_info_t read_info(void) {
    ul_mem_info_t m;
    ul_mem_info_read(root, &m);
    return m;
}

/* The machine's meminfo, this process in cgroup (/proc/self/cgroup's text) and one limit
 * file rel with text: what ul_mem_info_read makes of the tree. */
static ul_mem_info_t in_cgroup(const char *cgroup, const char *rel, const char *text) {
    put("proc/meminfo", MEMINFO);
    put("proc/self/cgroup", cgroup);
    put(rel, text);
    return read_info();
}

/* The start-up line ul_mem_info_source gives for m (which: 1 limit_available, 0 limit). */
static void assert_source(const ul_mem_info_t *m, int which, const char *want) {
    char b[256];
    cr_assert_str_eq(ul_mem_info_source(m, which, b, sizeof b), want);
}

TestSuite(memlimit, .init = setup, .fini = teardown);

Test(memlimit, no_cgroup_uses_meminfo) {
    put("proc/meminfo", MEMINFO);
    ul_mem_info_t m = read_info();
    cr_assert_eq(m.total, 24 * GIB);
    cr_assert_eq(m.available, 20 * GIB);
    cr_assert_eq(m.cgroup, -1);
    cr_assert_eq(m.limit, 24 * GIB);
    cr_assert_eq(m.limit_available, 20 * GIB);
    assert_source(&m, 1, "MemAvailable 20.0 GiB");
}

Test(memlimit, v2_number_at_the_root) {
    ul_mem_info_t m = in_cgroup("0::/\n", "sys/fs/cgroup/memory.max", "1073741824\n");
    cr_assert_eq(m.cgroup, GIB);
    cr_assert_eq(m.limit, GIB);
    cr_assert_eq(m.limit_available, GIB);
    assert_source(&m, 1, "cgroup v2 /sys/fs/cgroup/memory.max (1.0 GiB)");
}

Test(memlimit, v2_max_is_no_limit) {
    ul_mem_info_t m = in_cgroup("0::/\n", "sys/fs/cgroup/memory.max", "max\n");
    cr_assert_eq(m.cgroup, -1);
    cr_assert_eq(m.limit_available, 20 * GIB);
    cr_assert_str_eq(m.cgroup_source, "");
}

Test(memlimit, v2_nested_path_takes_the_lowest_ancestor) {
    put("sys/fs/cgroup/kubepods/memory.max", "4294967296\n");
    put("sys/fs/cgroup/kubepods/pod1/memory.max", "2147483648\n"); /* the pod's */
    ul_mem_info_t m =
        in_cgroup("0::/kubepods/pod1/ctr\n", "sys/fs/cgroup/kubepods/pod1/ctr/memory.max", "max\n");
    cr_assert_eq(m.cgroup, 2 * GIB);
    cr_assert_str_eq(m.cgroup_source, "cgroup v2 /sys/fs/cgroup/kubepods/pod1/memory.max");
    /* a parent lower than its child is what binds */
    put("sys/fs/cgroup/kubepods/pod1/ctr/memory.max", "3221225472\n");
    put("sys/fs/cgroup/kubepods/memory.max", "1073741824\n");
    m = read_info();
    cr_assert_eq(m.cgroup, GIB);
    cr_assert_str_eq(m.cgroup_source, "cgroup v2 /sys/fs/cgroup/kubepods/memory.max");
}

Test(memlimit, limit_above_the_machine_is_not_the_source) {
    /* 64 GiB on a 24 GiB machine */
    ul_mem_info_t m = in_cgroup("0::/big\n", "sys/fs/cgroup/big/memory.max", "68719476736\n");
    cr_assert_eq(m.cgroup, 64 * GIB);
    cr_assert_eq(m.limit, 24 * GIB);
    cr_assert_eq(m.limit_available, 20 * GIB);
    assert_source(&m, 0, "MemTotal 24.0 GiB");
}

Test(memlimit, v1_memory_controller) {
    put("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n"); /* none */
    put("sys/fs/cgroup/memory.max", "1024\n"); /* v2 on a hybrid host: not the controller */
    ul_mem_info_t m =
        in_cgroup("5:cpu,cpuacct:/x\n4:memory:/docker/abc\n0::/\n",
                  "sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", "536870912\n");
    cr_assert_eq(m.cgroup, GIB / 2);
    cr_assert_str_eq(m.cgroup_source,
                     "cgroup v1 /sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes");
}

Test(memlimit, v1_container_without_cgroup_namespace_reads_its_root) {
    /* docker on v1: /proc/self/cgroup names the host's path, the mount is the container's */
    ul_mem_info_t m = in_cgroup("9:memory,blkio:/docker/0123abcd\n",
                                "sys/fs/cgroup/memory/memory.limit_in_bytes", "1073741824\n");
    cr_assert_eq(m.cgroup, GIB);
    cr_assert_eq(m.limit_available, GIB);
}

Test(memlimit, missing_and_malformed_files_are_unknown) {
    ul_mem_info_t m = read_info(); /* an empty root */
    cr_assert_eq(m.total, -1);
    cr_assert_eq(m.available, -1);
    cr_assert_eq(m.cgroup, -1);
    cr_assert_eq(m.limit, -1);
    assert_source(&m, 1, "unknown");
    put("proc/meminfo", "MemTotal: lots\nMemAvailable: 12 MB\n");
    put("proc/self/cgroup", "garbage without colons\n");
    put("sys/fs/cgroup/memory.max", "-5\n");
    m = read_info();
    cr_assert_eq(m.total, -1);
    cr_assert_eq(m.available, -1);
    cr_assert_eq(m.cgroup, -1);
}

Test(memlimit, cgroup_known_meminfo_missing) {
    put("proc/self/cgroup", "0::/a\n");
    put("sys/fs/cgroup/a/memory.max", "1073741824 trailing\n"); /* junk: ignored */
    put("sys/fs/cgroup/memory.max", "2147483648");              /* no newline */
    ul_mem_info_t m = read_info();
    cr_assert_eq(m.cgroup, 2 * GIB);
    cr_assert_eq(m.limit, 2 * GIB);
    cr_assert_eq(m.limit_available, 2 * GIB);
}
