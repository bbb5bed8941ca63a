/* Small text files read whole (small_file.h). */
#include "base/small_file.h"

#include <stdio.h>

int ul_small_file_read(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = '\0';
    return (int)n;
}
