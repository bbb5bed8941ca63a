/* The model tests that walk a shared-data folder (every model, vocabulary, golden file). */
#ifndef UL_TEST_FILES_H
#define UL_TEST_FILES_H

/* Calls fn(path, name, ctx) for each entry of dir whose name ends in suffix (and is longer
 * than it), path being "dir/name"; returns the sum of what fn returned (the files it
 * counted). Fails the test when dir cannot be listed. */
int tf_each(const char *dir, const char *suffix,
            int (*fn)(const char *path, const char *name, void *ctx), void *ctx);

#endif
