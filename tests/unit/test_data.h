/* The shared test data directory and whole files of it, for the unit tests: $UVLLM_SHARED,
 * else $UVLLM_SOURCE_DIR/../shared, else ../../shared (a git worktree one level further
 * down, /work/wt/NAME). Missing data fails the test, naming the path and UVLLM_SHARED. */
#ifndef UL_TEST_DATA_H
#define UL_TEST_DATA_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

static inline const char *ut_shared_dir(void) {
    static char path[1024];
    const char *e = getenv("UVLLM_SHARED");
    struct stat st;
    if (e && *e) {
        snprintf(path, sizeof path, "%s", e);
    } else {
        snprintf(path, sizeof path, "%s/../shared", UVLLM_SOURCE_DIR);
        if (stat(path, &st) || !S_ISDIR(st.st_mode))
            snprintf(path, sizeof path, "%s/../../shared", UVLLM_SOURCE_DIR);
    }
    cr_assert(stat(path, &st) == 0 && S_ISDIR(st.st_mode),
              "shared test data not found at %s (set UVLLM_SHARED)", path);
    return path;
}

/* The whole file, NUL-terminated, malloc'ed; *len (when len) its size. */
static inline char *ut_slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s (shared data: set UVLLM_SHARED to its directory)", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    cr_assert(s && fread(s, 1, (size_t)n, f) == (size_t)n, "cannot read %s", path);
    s[n] = 0;
    fclose(f);
    if (len) *len = (size_t)n;
    return s;
}

#endif
