/* libFuzzer harness for structured output's schema translation (src/engine/json_gbnf*.c,
 * regex_gbnf.c). The input is a schema (JSON text), a NUL byte, then document bytes.
 * Whatever the schema, translating must not crash or leak, and a refusal must say why; a
 * translation must always compile; the document is fed until a byte is refused, and a
 * document taken whole and called complete must be exactly one JSON value to cJSON. */
#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "engine/grammar.h"
#include "engine/json_gbnf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t slen = nul ? (size_t)(nul - data) : size;
    const char *doc = nul ? (const char *)nul + 1 : "";
    size_t dlen = nul ? size - slen - 1 : 0;
    cJSON *js = cJSON_ParseWithLength((const char *)data, slen);
    if (!js) return 0;
    char err[200] = "";
    ul_buf_t b = {0};
    int rc = ul_json_schema_gbnf(js, &b, err, sizeof err);
    cJSON_Delete(js);
    if (rc) {
        if (!err[0] && rc != -12 /* ENOMEM */) abort(); /* a refusal always says why */
        ul_buf_free(&b);
        return 0;
    }
    ul_grammar_t *g = NULL;
    rc = ul_grammar_compile(NULL, b.p, b.len, &g, err, sizeof err);
    ul_buf_free(&b);
    if (rc) {
        if (strstr(err, "too large")) return 0; /* a legal refusal of a huge schema */
        abort();                                /* a translation that does not compile */
    }
    ul_gmatch_t *m = ul_gmatch_new(g);
    if (!m) abort();
    size_t n = 0;
    while (n < dlen && ul_gmatch_feed(m, doc + n, 1) == 0) n++;
    if (n == dlen && ul_gmatch_done(m)) {
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
    ul_gmatch_free(m);
    ul_grammar_unref(g);
    return 0;
}
