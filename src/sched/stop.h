/* Stop strings over streamed text: text that might be the beginning of a stop string is
 * held back until it is decided, so a client never sees part of a stop string, and the
 * text before a match is emitted exactly once. Byte-based; callers feed complete UTF-8
 * (the streaming detokenizer does that), so held-back text never splits a character
 * except inside a stop string's own bytes. */
#ifndef UL_SCHED_STOP_H
#define UL_SCHED_STOP_H

#include <stddef.h>

#define UL_STOP_MAX 4

typedef struct ul_stop_s {
    const char *strs[UL_STOP_MAX]; /* borrowed; must outlive the matcher */
    size_t lens[UL_STOP_MAX];
    int n;
    char *buf; /* held-back text, then (after a push) the text to emit */
    size_t len, cap, n_emit;
    int matched; /* the index in strs of the stop string that matched, or -1 */
} ul_stop_t;

/* strs[i] must be non-empty; n <= UL_STOP_MAX. */
void ul_stop_init(ul_stop_t *s, const char *const *strs, int n);
void ul_stop_free(ul_stop_t *s);
/* Feeds text. Sets *emit and *emit_len to the text that is now decided (valid until the next
 * call). Returns 1 when a stop string matched (emit is everything before it; the stream
 * ends; s->matched says which), 0 otherwise, or UL_ENOMEM. */
int ul_stop_push(ul_stop_t *s, const char *text, size_t len, const char **emit, size_t *emit_len);
/* End of stream without a match: everything held back is emitted. */
void ul_stop_flush(ul_stop_t *s, const char **emit, size_t *emit_len);

#endif
