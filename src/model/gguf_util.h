/* Helpers shared by the GGUF reader, its getters and the writer (internal to src/model). */
#ifndef UL_MODEL_GGUF_UTIL_H
#define UL_MODEL_GGUF_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "model/gguf.h"

/* Bytes of one scalar of a metadata type; 0 for STRING, ARRAY and unknown types. */
size_t ul_gguf_scalar_size(uint32_t type);
/* Strict UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF. */
int ul_utf8_valid(const char *s, size_t len);
/* Finds two equal strings among n: returns 1 with *first < *second their indices, 0 if all
 * differ, UL_ENOMEM. Linear time (hashing), so hostile files cannot make it quadratic. */
int ul_find_duplicate(const ul_str_t *s, uint64_t n, int64_t *first, int64_t *second);
/* Replaces control bytes with '?' so a message quoting names from a file stays one line. */
void ul_sanitize_line(char *s);
/* 1 if s equals the C string z. */
int ul_str_eq(ul_str_t s, const char *z);

#endif
