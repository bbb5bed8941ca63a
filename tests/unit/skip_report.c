/* Linked into every criterion binary: after the run, names each skipped test with its
 * reason and counts them, so a summary read on a CPU that lacks an ISA says what was not
 * tested there (criterion's own synthesis line counts skipped tests as passing). */
#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <stdio.h>

ReportHook(POST_ALL)(struct criterion_global_stats *stats) {
    size_t n = 0; /* tests left out by --filter are "skipped" too, without a message */
    for (struct criterion_suite_stats *ss = stats->suites; ss; ss = ss->next)
        for (struct criterion_test_stats *ts = ss->tests; ts; ts = ts->next)
            if (ts->test_status == CR_STATUS_SKIPPED && ts->message) {
                fprintf(stderr, "[SKIP] %s::%s: %s\n", ts->test->category, ts->test->name,
                        ts->message);
                n++;
            }
    if (n) fprintf(stderr, "[====] Skipped: %zu of %zu tests\n", n, stats->nb_tests);
}
