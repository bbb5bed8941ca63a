/* Releasing a struct of arrays in one statement: UL_FREE_ALL(v->a, v->b, v->c) frees each
 * pointer listed (NULL ones too, as free does), so a destructor lists what it owns
 * instead of repeating free() a line each. */
#ifndef UL_BASE_FREE_ALL_H
#define UL_BASE_FREE_ALL_H

#include <stddef.h>
#include <stdlib.h>

static inline void ul_free_n(void *const *p, size_t n) {
    for (size_t i = 0; i < n; i++) free(p[i]);
}

#define UL_FREE_ALL(...)                                                                           \
    ul_free_n((void *const[]){__VA_ARGS__}, sizeof((void *const[]){__VA_ARGS__}) / sizeof(void *))

#endif
