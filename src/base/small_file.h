/* Small files read whole: /proc and cgroup files into a caller's buffer (memlimit.c, the cpu
 * pool's default thread count), tokenizer and template files into a malloc'd one (the
 * convert command, the chat fuzzer, the grammar bench). Synchronous: start-up only, never
 * on the loop. */
#ifndef UL_BASE_SMALL_FILE_H
#define UL_BASE_SMALL_FILE_H

#include <stddef.h>

/* Reads at most cap - 1 bytes of path into buf and NUL-terminates them (cap >= 1); returns
 * the bytes read (0: empty), or -1 when the file cannot be opened. */
int ul_small_file_read(const char *path, char *buf, size_t cap);

/* The whole of path, malloc'd and NUL-terminated (the caller frees it), its size in *len;
 * NULL when it cannot be opened, sized or read, or memory runs out. */
char *ul_small_file_dup(const char *path, size_t *len);

#endif
