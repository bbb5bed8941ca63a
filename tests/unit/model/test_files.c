/* Walking a shared-data folder for the model tests (test_files.h). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "test_files.h"

int tf_each(const char *dir, const char *suffix,
            int (*fn)(const char *path, const char *name, void *ctx), void *ctx) {
    DIR *d = opendir(dir);
    cr_assert(d, "cannot list %s", dir);
    size_t ls = strlen(suffix);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l <= ls || strcmp(e->d_name + l - ls, suffix)) continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        n += fn(path, e->d_name, ctx);
    }
    closedir(d);
    return n;
}
