/* Geometric array growth (grow.h). */
#include <stdint.h>
#include <stdlib.h>

#include "base/grow.h"

void *ul_grow_to(void *p, size_t *cap, size_t need, size_t size, size_t min) {
    if (need <= *cap) return p;
    size_t nc = *cap ? *cap : min ? min : 1;
    while (nc < need) {
        if (nc > SIZE_MAX / 2) return NULL;
        nc *= 2;
    }
    if (size && nc > SIZE_MAX / size) return NULL;
    void *np = realloc(p, nc * size);
    if (np) *cap = nc;
    return np;
}
