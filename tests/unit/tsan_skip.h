/* Tests that a sanitizer build skips, each with the reason printed (skip_report.c).
 *
 * UL_SKIP_UNDER_TSAN(): for a test that runs one thread through a large workload (linear-time
 * and resource-limit checks: millions of parser or interpreter steps). ThreadSanitizer has
 * nothing to check in it and runs it 10-50x slower, past the test's hang guard on a busy
 * host; the Release and ASan builds still run it.
 *
 * UL_SKIP_UNDER_SANITIZERS(): for a test that only re-checks arithmetic, in registers, over a
 * large input space (every float bit pattern through a vector kernel). Neither ASan/UBSan nor
 * TSan has memory or threads to check there, and the build's smaller tests of the same code
 * (partial vectors, tails, special values) still run under them; the Release build runs it. */
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

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define UL_SKIP_UNDER_SANITIZERS()                                                                 \
    cr_skip_test("arithmetic in registers over a large input space: nothing for a sanitizer "      \
                 "to check (its smaller tests run here; Release runs it)")
#else
#define UL_SKIP_UNDER_SANITIZERS() ((void)0)
#endif

#endif
