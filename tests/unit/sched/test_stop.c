/* Stop strings: text before a match is emitted once, nothing of the stop string leaks even
 * when it arrives split over many pieces, and a false start is released later. */
#include <criterion/criterion.h>
#include <string.h>

#include "sched/stop.h"

/* Feeds pieces, collecting emitted text; returns 1 if a stop matched. */
static int feed(ul_stop_t *s, const char *const *pieces, int n, char *out) {
    out[0] = 0;
    for (int i = 0; i < n; i++) {
        const char *e;
        size_t len;
        int rc = ul_stop_push(s, pieces[i], strlen(pieces[i]), &e, &len);
        cr_assert_geq(rc, 0);
        strncat(out, e, len);
        if (rc == 1) return 1;
    }
    const char *e;
    size_t len;
    ul_stop_flush(s, &e, &len);
    strncat(out, e, len);
    return 0;
}

Test(stop, split_over_pieces) {
    const char *stops[] = {"\n\nUser:"};
    ul_stop_t s;
    ul_stop_init(&s, stops, 1);
    const char *p[] = {"Hello", " world", "\n", "\nUs", "er", ":", " more"};
    char out[128];
    cr_assert_eq(feed(&s, p, 7, out), 1);
    cr_assert_str_eq(out, "Hello world");
    ul_stop_free(&s);
}

Test(stop, false_start_is_released) {
    const char *stops[] = {"END", "xyz"};
    ul_stop_t s;
    ul_stop_init(&s, stops, 2);
    const char *p[] = {"a E", "N", "D? no: EN", "a x", "y"};
    char out[128];
    /* "END" matches in the third piece */
    cr_assert_eq(feed(&s, p, 5, out), 1);
    cr_assert_str_eq(out, "a ");
    ul_stop_free(&s);

    ul_stop_init(&s, stops, 2);
    const char *q[] = {"E", "N", "d", " x", "y", "!"};
    cr_assert_eq(feed(&s, q, 6, out), 0);
    cr_assert_str_eq(out, "ENd xy!", "held-back text must come out unchanged");
    ul_stop_free(&s);
}

Test(stop, held_text_waits_for_decision) {
    const char *stops[] = {"###"};
    ul_stop_t s;
    ul_stop_init(&s, stops, 1);
    const char *e;
    size_t len;
    cr_assert_eq(ul_stop_push(&s, "ab#", 3, &e, &len), 0);
    cr_assert_eq(len, 2, "the '#' could start the stop string");
    cr_assert_eq(ul_stop_push(&s, "#", 1, &e, &len), 0);
    cr_assert_eq(len, 0);
    cr_assert_eq(ul_stop_push(&s, "c", 1, &e, &len), 0);
    cr_assert_eq(len, 3);
    cr_assert(!memcmp(e, "##c", 3));
    ul_stop_free(&s);
}

Test(stop, earliest_match_wins) {
    const char *stops[] = {"lo", "he"};
    ul_stop_t s;
    ul_stop_init(&s, stops, 2);
    const char *p[] = {"say hello"};
    char out[64];
    cr_assert_eq(feed(&s, p, 1, out), 1);
    cr_assert_str_eq(out, "say ");
    cr_assert_eq(s.matched, 1, "the earliest match names its string (Anthropic's stop_sequence)");
    ul_stop_free(&s);
}

Test(stop, no_match_names_none) {
    const char *stops[] = {"zz"};
    ul_stop_t s;
    ul_stop_init(&s, stops, 1);
    const char *p[] = {"abc"};
    char out[64];
    cr_assert_eq(feed(&s, p, 1, out), 0);
    cr_assert_eq(s.matched, -1);
    ul_stop_free(&s);
}
