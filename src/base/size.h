/* Memory sizes as operators write them ("512M", "4G", "1073741824") and the memory the
 * system says is available, for flags such as `serve --kv-mem`. */
#ifndef UL_BASE_SIZE_H
#define UL_BASE_SIZE_H

#include <stddef.h>
#include <stdint.h>

/* Parses a byte count: a decimal number (fraction allowed with a suffix: "1.5G"), then an
 * optional binary suffix K, M, G or T (powers of 1024; case-insensitive; "KB", "KiB",
 * "B" spellings accepted). Whitespace, signs and anything else are refused.
 * Returns 0 or UL_EINVAL (malformed) / UL_E2BIG (over INT64_MAX). */
int ul_size_parse(const char *s, int64_t *out);

/* The memory this process may use: MemTotal, or the lowest cgroup limit on the process's
 * cgroup path when it is lower (containers; base/memlimit.h); -1 when neither can be read.
 * Reads files: call at start-up, off the loop. */
int64_t ul_size_mem_limit(void);

/* "512.0 MiB" style for log lines; returns buf. */
const char *ul_size_format(int64_t bytes, char *buf, size_t cap);

#endif
