/* UL_SKIP_UNDER_TSAN(): for a test that runs one thread through a large workload (linear-time
 * and resource-limit checks: millions of parser or interpreter steps). ThreadSanitizer has
 * nothing to check in it and runs it 10-50x slower, past the test's hang guard on a busy
 * host; the Release and ASan builds still run it. Reported as skipped, with the reason. */
#ifndef UL_TESTS_TSAN_SKIP_H
#define UL_TESTS_TSAN_SKIP_H

#include <criterion/criterion.h>

#if defined(__SANITIZE_THREAD__)
#define UL_SKIP_UNDER_TSAN()                                                                       \
    cr_skip_test(                                                                                  \
        "one thread, a large workload: nothing for TSan to check (Release and ASan run it)")
#else
#define UL_SKIP_UNDER_TSAN() ((void)0)
#endif

#endif
