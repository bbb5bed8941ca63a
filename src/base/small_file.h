/* Small text files read whole into a caller's buffer: /proc and cgroup files (memlimit.c,
 * the cpu pool's default thread count). Synchronous: start-up only, never on the loop. */
#ifndef UL_BASE_SMALL_FILE_H
#define UL_BASE_SMALL_FILE_H

#include <stddef.h>

/* Reads at most cap - 1 bytes of path into buf and NUL-terminates them (cap >= 1); returns
 * the bytes read (0: empty), or -1 when the file cannot be opened. */
int ul_small_file_read(const char *path, char *buf, size_t cap);

#endif
