/* Small text files read whole (small_file.h). */
#include "base/small_file.h"

#include <stdio.h>
#include <stdlib.h>

int ul_small_file_read(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = '\0';
    return (int)n;
}

char *ul_small_file_dup(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *b = NULL;
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (b = malloc((size_t)n + 1))) {
        if (fread(b, 1, (size_t)n, f) != (size_t)n) {
            free(b);
            b = NULL;
        } else {
            b[n] = 0;
            *len = (size_t)n;
        }
    }
    fclose(f);
    return b;
}
