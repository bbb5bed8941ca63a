/* Stop-string matcher: keeps the shortest tail that could still grow into a stop string,
 * emits the rest. Stop strings are few (<= 4) and short, so plain memmem/memcmp scans
 * are cheaper than building an automaton per request. */
#include <stdlib.h>
#include <string.h>

#include "sched/stop.h"
#include "uvllm/err.h"

void ul_stop_init(ul_stop_t *s, const char *const *strs, int n) {
    memset(s, 0, sizeof *s);
    s->matched = -1;
    for (int i = 0; i < n && i < UL_STOP_MAX; i++) {
        s->strs[s->n] = strs[i];
        s->lens[s->n] = strlen(strs[i]);
        if (s->lens[s->n] > 0) s->n++;
    }
}

void ul_stop_free(ul_stop_t *s) {
    free(s->buf);
    s->buf = NULL;
    s->len = s->cap = s->n_emit = 0;
}

/* Length of the longest suffix of buf[0..len) that is a proper prefix of a stop string. */
static size_t held_tail(const ul_stop_t *s) {
    size_t best = 0;
    for (int i = 0; i < s->n; i++) {
        size_t max = s->lens[i] - 1 < s->len ? s->lens[i] - 1 : s->len;
        for (size_t k = max; k > best; k--)
            if (!memcmp(s->buf + s->len - k, s->strs[i], k)) {
                best = k;
                break;
            }
    }
    return best;
}

int ul_stop_push(ul_stop_t *s, const char *text, size_t len, const char **emit, size_t *emit_len) {
    /* Drop what the previous call emitted. */
    if (s->n_emit) memmove(s->buf, s->buf + s->n_emit, s->len - s->n_emit);
    s->len -= s->n_emit;
    s->n_emit = 0;
    if (s->len + len + 1 > s->cap) {
        size_t cap = (s->len + len + 1) * 2;
        char *nb = realloc(s->buf, cap);
        if (!nb) return UL_ENOMEM;
        s->buf = nb;
        s->cap = cap;
    }
    if (len) memcpy(s->buf + s->len, text, len);
    s->len += len;
    *emit = s->buf;
    /* Earliest match wins: the text before it is all the client gets. */
    size_t first = s->len;
    for (int i = 0; i < s->n; i++) {
        s->buf[s->len] = 0;
        const char *m = memmem(s->buf, s->len, s->strs[i], s->lens[i]);
        if (m && (size_t)(m - s->buf) < first) first = (size_t)(m - s->buf), s->matched = i;
    }
    if (first < s->len) {
        *emit_len = first;
        s->n_emit = s->len; /* nothing is held after a match */
        return 1;
    }
    *emit_len = s->len - held_tail(s);
    s->n_emit = *emit_len;
    return 0;
}

void ul_stop_flush(ul_stop_t *s, const char **emit, size_t *emit_len) {
    *emit = s->buf ? s->buf + s->n_emit : "";
    *emit_len = s->len - s->n_emit;
    s->n_emit = s->len;
}
