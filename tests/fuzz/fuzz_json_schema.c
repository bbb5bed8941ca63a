/* libFuzzer harness for structured output (src/api/json_schema.c). The input is a schema
 * (JSON text), a NUL byte, then document bytes. Whatever the schema, compiling must not
 * crash or leak; when it compiles, the acceptor is fed the document bytes until it refuses
 * one, and: at every accepted prefix (of the first 64) some byte must be acceptable or the
 * document complete (never stuck); feeding byte by byte and all at once agree; a document
 * taken whole and called complete must be exactly one JSON value to cJSON. */
#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/json_schema.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int some_byte_fits(const ul_json_sacc_t *a) {
    ul_json_sacc_t t;
    for (int c = 0; c < 256; c++) {
        ul_json_sacc_copy(&t, a);
        if (ul_json_sacc_feed(&t, (uint8_t)c) == 0) return 1;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t slen = nul ? (size_t)(nul - data) : size;
    const char *doc = nul ? (const char *)nul + 1 : "";
    size_t dlen = nul ? size - slen - 1 : 0;
    cJSON *js = cJSON_ParseWithLength((const char *)data, slen);
    if (!js) return 0;
    char err[160];
    ul_json_schema_t *s = NULL;
    int rc = ul_json_schema_compile(js, &s, err, sizeof err);
    cJSON_Delete(js);
    if (rc) {
        if (s || !err[0]) abort(); /* a refusal always says why */
        return 0;
    }
    ul_json_sacc_t a, b;
    ul_json_sacc_init(&a, s);
    size_t n = 0;
    for (;;) {
        if (n < 64 && !ul_json_sacc_done(&a) && !some_byte_fits(&a)) abort(); /* stuck */
        if (n == dlen || ul_json_sacc_feed(&a, (uint8_t)doc[n])) break;
        n++;
    }
    ul_json_sacc_init(&b, s);
    if (ul_json_sacc_feed_n(&b, doc, n) != 0) abort();
    if (n == dlen && ul_json_sacc_done(&a)) {
        char *t = malloc(dlen + 1);
        if (!t) abort();
        memcpy(t, doc, dlen);
        t[dlen] = 0;
        const char *end = NULL;
        cJSON *v = cJSON_ParseWithOpts(t, &end, 1);
        if (!v || memchr(t, 0, dlen)) abort();
        cJSON_Delete(v);
        free(t);
    }
    free(s);
    return 0;
}
