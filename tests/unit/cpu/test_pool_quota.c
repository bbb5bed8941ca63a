/* The default thread count follows the CPUs a process may use: cgroup v2 cpu.max parsing,
 * and the affinity mask (a process pinned to one CPU gets one thread). */
#include <criterion/criterion.h>
#include <sched.h>
#include <string.h>

#include "cpu/pool.h"

Test(pool_quota, cpu_max) {
    cr_expect_float_eq(ul_pool_parse_cpu_max("max 100000\n"), 0.0, 1e-9);
    cr_expect_float_eq(ul_pool_parse_cpu_max("200000 100000\n"), 2.0, 1e-9);
    cr_expect_float_eq(ul_pool_parse_cpu_max("150000 100000"), 1.5, 1e-9);
    cr_expect_float_eq(ul_pool_parse_cpu_max("50000 100000"), 0.5, 1e-9);
    cr_expect_float_eq(ul_pool_parse_cpu_max(""), 0.0, 1e-9);
    cr_expect_float_eq(ul_pool_parse_cpu_max("junk 100000"), 0.0, 1e-9);
    cr_expect_float_eq(ul_pool_parse_cpu_max("100000 0"), 0.0, 1e-9);
}

Test(pool_quota, affinity_mask_bounds_the_default) {
    cpu_set_t old, one;
    cr_assert_eq(sched_getaffinity(0, sizeof old, &old), 0);
    int first = -1;
    for (int i = 0; i < CPU_SETSIZE && first < 0; i++)
        if (CPU_ISSET(i, &old)) first = i;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    cr_assert_eq(sched_setaffinity(0, sizeof one, &one), 0);
    char why[160];
    int n = ul_pool_default_threads(why, sizeof why);
    sched_setaffinity(0, sizeof old, &old);
    cr_expect_eq(n, 1, "%s", why);
    cr_expect(strstr(why, "1 CPUs in the affinity mask") != NULL, "%s", why);
    n = ul_pool_default_threads(why, sizeof why);
    cr_expect(n >= 1 && n <= CPU_COUNT(&old), "%d: %s", n, why);
}
