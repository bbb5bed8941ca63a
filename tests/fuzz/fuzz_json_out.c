/* libFuzzer harness for JSON mode's acceptor (src/api/json_out.c): whatever bytes come, a
 * text the acceptor takes whole and calls complete must be exactly one JSON object to a
 * real parser (cJSON, nothing after it), and a prefix it takes must never be refused later
 * for a byte it took before (feeding byte by byte and all at once agree). */
#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/json_out.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ul_json_acc_t a;
    ul_json_acc_init(&a);
    size_t n = 0;
    while (n < size && ul_json_acc_feed(&a, data[n]) == 0) n++;
    ul_json_acc_t b;
    ul_json_acc_init(&b);
    if (ul_json_acc_feed_n(&b, (const char *)data, n) != 0) abort();
    if (n < size || !ul_json_acc_done(&a)) return 0;
    char *s = malloc(size + 1);
    if (!s) return 0;
    memcpy(s, data, size);
    s[size] = 0;
    if (memchr(s, 0, size)) abort(); /* a NUL byte is a control character: never taken */
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithOpts(s, &end, 1);
    if (!j || !cJSON_IsObject(j)) abort();
    cJSON_Delete(j);
    free(s);
    return 0;
}
