/* Linked into every criterion binary: after the run, names each skipped test with its
 * reason and counts them, so a summary read on a CPU that lacks an ISA says what was not
 * tested there (criterion's own synthesis line counts skipped tests as passing). */
#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <stdio.h>

ReportHook(POST_ALL)(struct criterion_global_stats *stats) {
    if (!stats->tests_skipped) return;
    for (struct criterion_suite_stats *ss = stats->suites; ss; ss = ss->next)
        for (struct criterion_test_stats *ts = ss->tests; ts; ts = ts->next)
            if (ts->test_status == CR_STATUS_SKIPPED)
                fprintf(stderr, "[SKIP] %s::%s: %s\n", ts->test->category, ts->test->name,
                        ts->message ? ts->message : "(no reason given)");
    fprintf(stderr, "[====] Skipped: %zu of %zu tests\n", stats->tests_skipped, stats->nb_tests);
}
