/* Structured output (api/json_schema.h): the compiler refuses what it does not support by
 * name; the acceptor takes the documents that validate, refuses a byte as soon as no valid
 * document can follow, and is never stuck: a random walk over acceptable bytes always ends
 * in a document that cJSON parses and an independent validator (below) accepts. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/json_schema.h"
#include "uvllm/err.h"

static ul_json_schema_t *compile_ok(const char *src) {
    cJSON *j = cJSON_Parse(src);
    cr_assert(j, "bad test schema %s", src);
    char err[160];
    ul_json_schema_t *s = NULL;
    int rc = ul_json_schema_compile(j, &s, err, sizeof err);
    cr_assert_eq(rc, 0, "%s: %s", src, err);
    cJSON_Delete(j);
    return s;
}

static void compile_fails(const char *src, const char *msg_part) {
    cJSON *j = cJSON_Parse(src);
    cr_assert(j, "bad test schema %s", src);
    char err[160];
    ul_json_schema_t *s = NULL;
    int rc = ul_json_schema_compile(j, &s, err, sizeof err);
    cr_assert_eq(rc, UL_EINVAL, "%s compiled", src);
    cr_assert_null(s);
    cr_assert(strstr(err, msg_part), "%s: message '%s' lacks '%s'", src, err, msg_part);
    cJSON_Delete(j);
}

/* Bytes of doc accepted before the first refusal; *done: all taken and complete. */
static size_t accepted(const ul_json_schema_t *s, const char *doc, int *done) {
    ul_json_sacc_t a;
    ul_json_sacc_init(&a, s);
    size_t i = 0, n = strlen(doc);
    while (i < n && ul_json_sacc_feed(&a, (uint8_t)doc[i]) == 0) i++;
    *done = i == n && ul_json_sacc_done(&a);
    return i;
}

static void valid(const ul_json_schema_t *s, const char *doc) {
    int done;
    size_t n = accepted(s, doc, &done);
    cr_assert_eq(n, strlen(doc), "refused byte %zu of %s", n, doc);
    cr_assert(done, "%s accepted but not complete", doc);
}

/* prefix + rest is refused at the first byte of rest. */
static void refused(const ul_json_schema_t *s, const char *prefix, const char *rest) {
    char doc[512];
    snprintf(doc, sizeof doc, "%s%s", prefix, rest);
    int done;
    size_t n = accepted(s, doc, &done);
    cr_assert_eq(n, strlen(prefix), "%s: refused at byte %zu, expected %zu", doc, n,
                 strlen(prefix));
}

/* A prefix that is not complete yet (the end of generation is not allowed). */
static void incomplete(const ul_json_schema_t *s, const char *doc) {
    int done;
    size_t n = accepted(s, doc, &done);
    cr_assert_eq(n, strlen(doc), "refused byte %zu of %s", n, doc);
    cr_assert(!done, "%s is complete", doc);
}

Test(json_schema_compile, refuses_unsupported_keywords_by_name) {
    compile_fails("{\"type\":\"string\",\"pattern\":\"^a\"}", "keyword 'pattern'");
    compile_fails("{\"type\":\"string\",\"format\":\"date\"}", "keyword 'format'");
    compile_fails("{\"type\":\"integer\",\"minimum\":3}", "keyword 'minimum'");
    compile_fails("{\"type\":\"object\",\"properties\":{\"a\":{\"allOf\":[{},{}]}}}",
                  "'allOf' is only supported with exactly one schema");
    compile_fails("{\"allOf\":[{}],\"type\":\"string\"}", "'allOf' cannot be combined");
    compile_fails("{\"patternProperties\":{}}", "keyword 'patternProperties'");
    compile_fails("{\"if\":{},\"then\":{}}", "keyword 'if'");
    compile_fails("{\"not\":{}}", "keyword 'not'");
}

Test(json_schema_compile, refuses_malformed_schemas) {
    compile_fails("{\"type\":\"strin\"}", "'type' 'strin' is unknown");
    compile_fails("{\"type\":[]}", "'type' must not be empty");
    compile_fails("{\"type\":3}", "'type' must be");
    compile_fails("{\"enum\":[]}", "'enum' must be a non-empty array");
    compile_fails("{\"type\":\"string\",\"enum\":[1]}", "does not match");
    compile_fails("{\"type\":\"integer\",\"enum\":[1.5]}", "does not match");
    compile_fails("{\"properties\":{\"a\":{}},\"required\":[\"b\"]}", "'b' is not in");
    compile_fails("{\"type\":\"array\",\"minItems\":3,\"maxItems\":2}", "greater than");
    compile_fails("{\"type\":\"array\",\"minItems\":-1}", "non-negative integer");
    compile_fails("{\"type\":\"string\",\"minLength\":3,\"maxLength\":2}", "greater than");
    compile_fails("{\"type\":\"object\",\"additionalProperties\":true}", "additionalProperties");
    compile_fails("{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"number\"}]}", "differ by type");
    compile_fails("{\"anyOf\":[]}", "non-empty array");
    compile_fails("{\"$ref\":\"#/$defs/nope\"}", "does not resolve");
    compile_fails("{\"$ref\":\"other.json\"}", "not supported");
    compile_fails("{\"type\":\"integer\",\"maxLength\":3}", "non-string");
    compile_fails("{\"properties\":{\"a\\\"b\":{}}}", "property name");
    compile_fails("3", "must be an object");
    /* A required self-reference: no finite document. */
    compile_fails(
        "{\"type\":\"object\",\"properties\":{\"c\":{\"$ref\":\"#\"}},\"required\":[\"c\"]}",
        "levels of nesting");
}

Test(json_schema_compile, pydantic_style_schemas) {
    /* Optional[int] with a default, an Enum behind $ref, a nested model wrapped in a
     * one-schema allOf with a description (pydantic v1) */
    ul_json_schema_t *s =
        compile_ok("{\"title\":\"M\",\"type\":\"object\",\"properties\":{"
                   "\"x\":{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"null\"}],\"default\":null,"
                   "\"title\":\"X\"},"
                   "\"c\":{\"$ref\":\"#/$defs/Color\"},"
                   "\"s\":{\"allOf\":[{\"$ref\":\"#/definitions/Sub\"}],\"description\":\"d\"}},"
                   "\"required\":[\"c\",\"s\"],"
                   "\"$defs\":{\"Color\":{\"enum\":[\"red\",\"green\"],\"title\":\"Color\","
                   "\"type\":\"string\"}},"
                   "\"definitions\":{\"Sub\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":"
                   "\"boolean\"}},\"required\":[\"v\"]}}}");
    valid(s, "{\"x\":null,\"c\":\"red\",\"s\":{\"v\":true}}");
    valid(s, "{\"s\":{\"v\":false},\"c\":\"green\",\"x\":-3}");
    refused(s, "{\"c\":\"", "blue\"");
    refused(s, "{\"s\":{", "}");
    free(s);
}

Test(json_schema_compile, annotations_are_ignored) {
    ul_json_schema_t *s =
        compile_ok("{\"$schema\":\"x\",\"title\":\"T\",\"description\":\"d\",\"type\":\"object\","
                   "\"properties\":{\"a\":{\"type\":\"integer\",\"default\":1,\"examples\":[2]}},"
                   "\"required\":[\"a\"],\"additionalProperties\":false}");
    valid(s, "{\"a\":5}");
    free(s);
}

static const char *const person =
    "{\"type\":\"object\",\"properties\":{"
    "\"name\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":5},"
    "\"age\":{\"type\":\"integer\"},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"b\",\"ab\"]},\"minItems\":1,"
    "\"maxItems\":3},"
    "\"kind\":{\"const\":\"x\"},"
    "\"score\":{\"type\":[\"number\",\"null\"]},"
    "\"addr\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"},"
    "\"zip\":{\"type\":\"string\"}},\"required\":[\"city\"],\"additionalProperties\":false}},"
    "\"required\":[\"name\",\"age\",\"tags\"],\"additionalProperties\":false}";

Test(json_schema_acc, objects_properties_and_required) {
    ul_json_schema_t *s = compile_ok(person);
    valid(s, "{\"name\":\"Ann\",\"age\":3,\"tags\":[\"a\"]}");
    valid(s, "{\"tags\":[\"ab\",\"b\"], \"age\":-12,\n  \"name\":\"\\u00e9\\\"\",\"kind\":\"x\","
             "\"score\":null,\"addr\":{\"zip\":\"1\",\"city\":\"P\"}}");
    valid(s, "{\"name\":\"A\",\"age\":0,\"tags\":[\"a\"],\"score\":-1.5e3}");
    /* missing required key: '}' refused until they are all there */
    refused(s, "{\"name\":\"Ann\",\"age\":3", "}");
    refused(s, "{\"name\":\"A\",\"age\":1,\"tags\":[\"a\"],\"addr\":{\"zip\":\"1\"", "}");
    /* unknown key, refused at the first byte no listed key has */
    refused(s, "{\"na", "x");
    refused(s, "{\"", "zzz");
    refused(s, "{\"name", "s\"");
    /* duplicate key */
    refused(s, "{\"age\":1,\"a", "ge\""); /* only \"addr\" is left */
    /* wrong types */
    refused(s, "{\"age\":", "\"1\"");
    refused(s, "{\"name\":", "1");
    refused(s, "{\"score\":", "true");
    /* integer: no fraction, no exponent */
    refused(s, "{\"age\":1", ".5");
    refused(s, "{\"age\":1", "e3");
    /* enum and const */
    refused(s, "{\"tags\":[\"a", "c\"");
    refused(s, "{\"tags\":[\"", "c\"");
    refused(s, "{\"kind\":\"", "y\"");
    /* array bounds */
    refused(s, "{\"tags\":[", "]");
    refused(s, "{\"tags\":[\"a\",\"b\",\"a\"", ",");
    /* string length in code points */
    refused(s, "{\"name\":\"", "\"");
    valid(s, "{\"name\":\"\xc3\xa9\xc3\xa9\\n\\uD83D\\uDE00\xf0\x9f\x98\x80\",\"age\":1,"
             "\"tags\":[\"a\"]}");
    refused(s, "{\"name\":\"abcde", "f");
    /* the syntax rules of JSON mode still hold: whitespace limits, no backslash in keys */
    refused(s, "{\"name\":\"a\" ", " ");
    refused(s, "{\"", "\\u006eame\"");
    refused(s, "", " {");
    /* after every key is given, no ',' */
    refused(s,
            "{\"name\":\"A\",\"age\":1,\"tags\":[\"a\"],\"kind\":\"x\",\"score\":1,"
            "\"addr\":{\"city\":\"c\"}",
            ",");
    incomplete(s, "{\"name\":\"A\",\"age\":1");
    free(s);
}

Test(json_schema_acc, anyof_refs_enums_and_top_level_values) {
    ul_json_schema_t *s = compile_ok(
        "{\"$defs\":{\"P\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"integer\"},"
        "\"xy\":{\"type\":\"boolean\"}},\"required\":[\"x\"]}},\"type\":\"object\","
        "\"properties\":{\"p\":{\"anyOf\":[{\"$ref\":\"#/$defs/P\"},{\"type\":\"null\"},"
        "{\"type\":\"string\",\"maxLength\":2}]},"
        "\"e\":{\"enum\":[1,12,\"q\",true,null,[1,2],{\"k\":\"v\"}]}},"
        "\"required\":[\"p\",\"e\"]}");
    valid(s, "{\"p\":{\"xy\":false,\"x\":7},\"e\":12}");
    valid(s, "{\"p\":null,\"e\":1}");
    valid(s, "{\"p\":\"ab\",\"e\":[1,2]}");
    valid(s, "{\"e\":{\"k\":\"v\"},\"p\":\"\"}");
    valid(s, "{\"e\":true,\"p\":null}");
    refused(s, "{\"p\":", "1");
    refused(s, "{\"p\":", "true");
    refused(s, "{\"p\":{\"xy\":true", "}");
    refused(s, "{\"p\":\"ab", "c");
    refused(s, "{\"e\":1", "3");
    refused(s, "{\"e\":", "2");
    refused(s, "{\"e\":[1,", "3");
    refused(s, "{\"e\":[1,", " 2]"); /* literals match their compact form */
    refused(s, "{\"e\":", "false");
    free(s);

    s = compile_ok("{\"enum\":[1,12,-3.5]}"); /* a top-level number */
    valid(s, "1");
    valid(s, "12");
    valid(s, "-3.5");
    refused(s, "1", " ");
    refused(s, "-3", "}");
    incomplete(s, "-3.");
    free(s);

    s = compile_ok("{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"maxItems\":2}");
    valid(s, "[]");
    valid(s, "[1, 2]");
    refused(s, "[1,2", ",");
    refused(s, "[1,1", ".0");
    free(s);

    s = compile_ok("{\"type\":\"array\",\"items\":{},\"maxItems\":0}");
    valid(s, "[]");
    refused(s, "[", "1");
    free(s);

    s = compile_ok("{}"); /* any value */
    valid(s, "{\"a\":[1,{\"b\":null}]}");
    valid(s, "\"x\"");
    valid(s, "-0.5e3");
    valid(s, "[]");
    free(s);

    s = compile_ok("{\"type\":\"object\",\"additionalProperties\":false}"); /* only {} */
    valid(s, "{}");
    refused(s, "{", "\"");
    free(s);

    s = compile_ok("{\"type\":\"object\"}"); /* any object */
    valid(s, "{\"a\":[1,{\"b\":null}],\"a\":2}");
    refused(s, "", "[");
    free(s);
}

/* ---- a validator for the subset, independent of the acceptor -------------------------- */

static const cJSON *resolve(const cJSON *root, const cJSON *sch) {
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(sch, "$ref");
    if (!r) return sch;
    const char *p = r->valuestring;
    if (!strcmp(p, "#")) return root;
    if (!strncmp(p, "#/$defs/", 8))
        return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "$defs"),
                                                p + 8);
    return NULL;
}

static size_t code_points(const char *s) {
    size_t n = 0;
    for (; *s; s++) n += ((uint8_t)*s & 0xc0) != 0x80;
    return n;
}

static int check_type(const char *t, const cJSON *v) {
    if (!strcmp(t, "object")) return cJSON_IsObject(v);
    if (!strcmp(t, "array")) return cJSON_IsArray(v);
    if (!strcmp(t, "string")) return cJSON_IsString(v);
    if (!strcmp(t, "number")) return cJSON_IsNumber(v);
    if (!strcmp(t, "integer")) return cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble);
    if (!strcmp(t, "boolean")) return cJSON_IsBool(v);
    return cJSON_IsNull(v);
}

static int validate(const cJSON *root, const cJSON *sch, const cJSON *v) {
    sch = resolve(root, sch);
    if (!sch) return 0;
    const cJSON *k, *it;
    if ((k = cJSON_GetObjectItemCaseSensitive(sch, "anyOf"))) {
        cJSON_ArrayForEach(it, k) if (validate(root, it, v)) return 1;
        return 0;
    }
    if ((k = cJSON_GetObjectItemCaseSensitive(sch, "const"))) return cJSON_Compare(k, v, 1);
    if ((k = cJSON_GetObjectItemCaseSensitive(sch, "enum"))) {
        cJSON_ArrayForEach(it, k) if (cJSON_Compare(it, v, 1)) return 1;
        return 0;
    }
    if ((k = cJSON_GetObjectItemCaseSensitive(sch, "type"))) {
        int ok = 0;
        if (cJSON_IsString(k)) ok = check_type(k->valuestring, v);
        cJSON_ArrayForEach(it, k) ok |= check_type(it->valuestring, v);
        if (!ok) return 0;
    }
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(sch, "properties");
    if (cJSON_IsObject(v) && props) {
        cJSON_ArrayForEach(it, v) {
            const cJSON *ps = cJSON_GetObjectItemCaseSensitive(props, it->string);
            if (!ps || !validate(root, ps, it)) return 0;
            for (const cJSON *o = it->next; o; o = o->next)
                if (!strcmp(o->string, it->string)) return 0; /* duplicate */
        }
        cJSON_ArrayForEach(
            it,
            cJSON_GetObjectItemCaseSensitive(
                sch, "required")) if (!cJSON_GetObjectItemCaseSensitive(v,
                                                                        it->valuestring)) return 0;
    }
    if (cJSON_IsArray(v)) {
        int n = cJSON_GetArraySize(v);
        const cJSON *mn = cJSON_GetObjectItemCaseSensitive(sch, "minItems");
        const cJSON *mx = cJSON_GetObjectItemCaseSensitive(sch, "maxItems");
        const cJSON *items = cJSON_GetObjectItemCaseSensitive(sch, "items");
        if ((mn && n < mn->valueint) || (mx && n > mx->valueint)) return 0;
        if (items) cJSON_ArrayForEach(it, v) if (!validate(root, items, it)) return 0;
    }
    if (cJSON_IsString(v)) {
        size_t n = code_points(v->valuestring);
        const cJSON *mn = cJSON_GetObjectItemCaseSensitive(sch, "minLength");
        const cJSON *mx = cJSON_GetObjectItemCaseSensitive(sch, "maxLength");
        if ((mn && n < (size_t)mn->valueint) || (mx && n > (size_t)mx->valueint)) return 0;
    }
    return 1;
}

/* From the start, repeatedly takes a random acceptable byte (leaning towards the bytes that
 * close things, or strings would run for thousands of bytes) until the document is complete
 * and the walk chooses to stop, or max bytes. At every step some byte must be acceptable
 * (or the document complete). Returns the number of complete documents validated. */
static int random_walk(const char *schema_src, uint64_t seed, int rounds) {
    ul_json_schema_t *s = compile_ok(schema_src);
    cJSON *root = cJSON_Parse(schema_src);
    int complete = 0;
    for (int r = 0; r < rounds; r++) {
        ul_json_sacc_t a, t;
        ul_json_sacc_init(&a, s);
        char doc[2001];
        size_t len = 0;
        while (len < 2000) {
            uint8_t ok[256], closers[256];
            int n_ok = 0, n_cl = 0;
            for (int c = 0; c < 256; c++) {
                ul_json_sacc_copy(&t, &a);
                if (ul_json_sacc_feed(&t, (uint8_t)c) == 0) {
                    ok[n_ok++] = (uint8_t)c;
                    if (strchr("\"]}", c) && c) closers[n_cl++] = (uint8_t)c;
                }
            }
            int done = ul_json_sacc_done(&a);
            cr_assert(n_ok || done, "stuck after %zu bytes: %.*s", len, (int)len, doc);
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            uint32_t rnd = (uint32_t)(seed >> 33);
            if (!n_ok || (done && rnd % 3 == 0)) break;
            uint8_t c = n_cl && rnd % 100 < 35 ? closers[(rnd >> 8) % (uint32_t)n_cl]
                                               : ok[(rnd >> 8) % (uint32_t)n_ok];
            cr_assert_eq(ul_json_sacc_feed(&a, c), 0);
            doc[len++] = (char)c;
        }
        doc[len] = 0;
        if (!ul_json_sacc_done(&a)) continue; /* ran out of bytes */
        const char *end = NULL;
        cJSON *v = cJSON_ParseWithOpts(doc, &end, 1);
        cr_assert(v, "cJSON refuses a complete document: %s", doc);
        cr_assert(validate(root, root, v), "invalid document: %s", doc);
        cJSON_Delete(v);
        complete++;
    }
    cJSON_Delete(root);
    free(s);
    return complete;
}

Test(json_schema_acc, random_walks_end_in_valid_documents) {
    static const char *const schemas[] = {
        NULL, /* person */
        "{\"$defs\":{\"P\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"integer\"},"
        "\"xy\":{\"type\":\"boolean\"}},\"required\":[\"x\"]}},\"type\":\"object\","
        "\"properties\":{\"p\":{\"anyOf\":[{\"$ref\":\"#/$defs/P\"},{\"type\":\"null\"},"
        "{\"type\":\"string\",\"maxLength\":2}]},"
        "\"e\":{\"enum\":[1,12,\"q\",true,null,[1,2],{\"k\":\"v\"}]}},"
        "\"required\":[\"p\",\"e\"]}",
        /* recursive: the depth limit must never leave the walk stuck */
        "{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},\"kids\":{\"type\":"
        "\"array\",\"items\":{\"$ref\":\"#\"},\"maxItems\":2}},\"required\":[\"v\",\"kids\"]}",
        "{\"type\":\"object\",\"properties\":{\"n\":{\"anyOf\":[{\"$ref\":\"#\"},{\"type\":"
        "\"null\"}]}},\"required\":[\"n\"]}",
        "{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":2,\"maxItems\":4}",
        "{\"enum\":[1,12,-3.5,\"s\"]}",
        "{\"type\":[\"string\",\"number\"],\"maxLength\":3}",
        "{}",
    };
    for (size_t i = 0; i < sizeof schemas / sizeof *schemas; i++) {
        int total = 0;
        for (uint64_t seed = 1; seed <= 4; seed++)
            total += random_walk(schemas[i] ? schemas[i] : person, seed * 7919 + i, 25);
        /* most walks finish well within 2000 bytes */
        cr_assert_gt(total, 50, "schema %zu: only %d of 100 walks completed", i, total);
    }
}

Test(json_schema_acc, deep_recursion_closes_before_the_depth_limit) {
    /* Walk straight down: at the limit, the acceptor must refuse opening another level and
     * still let the document finish. */
    ul_json_schema_t *s =
        compile_ok("{\"type\":\"object\",\"properties\":{\"n\":{\"anyOf\":[{\"$ref\":\"#\"},"
                   "{\"type\":\"null\"}]}},\"required\":[\"n\"]}");
    ul_json_sacc_t a;
    ul_json_sacc_init(&a, s);
    int depth = 0;
    while (ul_json_sacc_feed_n(&a, "{\"n\":", 5) == 0) depth++;
    cr_assert_eq(depth, UL_JSON_MAX_DEPTH);
    ul_json_sacc_init(&a, s);
    for (int i = 0; i < depth; i++) ul_json_sacc_feed_n(&a, "{\"n\":", 5);
    ul_json_sacc_t t;
    ul_json_sacc_copy(&t, &a);
    cr_assert_neq(ul_json_sacc_feed(&t, '{'), 0);
    cr_assert_eq(ul_json_sacc_feed_n(&a, "null", 4), 0);
    for (int i = 0; i < depth; i++) cr_assert_eq(ul_json_sacc_feed(&a, '}'), 0);
    cr_assert(ul_json_sacc_done(&a));
    free(s);
}

/* ---- the token filter over a small codec ---------------------------------------------- */

static const char *const pieces[] = {
    "{",     "}",   "\"",  "a",      "\"a\"",   ":",    " \"", "\n\"", " ",  "\n",
    "1",     " 1",  "\n}", " }",     ",",       " ,",   "[",   "]",    "x",  "ab",
    "\"b\"", "\"a", "",    "\"k\":", "\"",      "true", " [",  "\n\t", "2.", "\"c",
    "\":",   " {",  "]}",  "b",      "\"a\":1", "\n ",  "k"};
#define N_PIECES ((int32_t)(sizeof pieces / sizeof *pieces))
#define T_EOS 22

static int piece(const ul_codec_t *c, int32_t id, int special, int lstrip, char *out, int cap) {
    (void)c, (void)special, (void)lstrip;
    if (id < 0 || id >= N_PIECES) return UL_EINVAL;
    int n = (int)strlen(pieces[id]);
    if (n > cap) return -n;
    memcpy(out, pieces[id], (size_t)n);
    return n;
}

/* The filter answers (with its byte tables, built from the second question of a step on)
 * exactly as feeding each token's bytes to a copy of the acceptor would; a walk over
 * allowed tokens ends in a valid document. */
Test(json_schema_filter, agrees_with_the_acceptor_token_by_token) {
    const char *src = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},"
                      "\"b\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\",true]},"
                      "\"maxItems\":3},\"k\":{\"type\":\"string\",\"maxLength\":2}},"
                      "\"required\":[\"a\",\"b\"]}";
    ul_codec_t c = {.n_vocab = N_PIECES, .eos_id = T_EOS, .token_piece = piece};
    ul_json_vocab_t *v = ul_json_vocab_new(&c);
    cr_assert_not_null(v);
    ul_json_schema_t *s = compile_ok(src);
    cJSON *root = cJSON_Parse(src);
    int finished = 0;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        ul_json_schema_filter_t f;
        ul_json_schema_filter_init(&f, v, s);
        uint64_t rng = seed;
        char doc[1024];
        size_t len = 0;
        for (int step = 0; step < 100; step++) {
            int32_t ok[N_PIECES], n_ok = 0;
            for (int32_t id = 0; id < N_PIECES; id++) {
                int want;
                if (id == T_EOS)
                    want = ul_json_sacc_done(&f.acc);
                else {
                    ul_json_sacc_t a;
                    ul_json_sacc_copy(&a, &f.acc);
                    want = ul_json_sacc_feed_n(&a, pieces[id], strlen(pieces[id])) == 0;
                }
                cr_assert_eq(f.base.allows(&f.base, id), want, "token '%s' after '%.*s'",
                             pieces[id], (int)len, doc);
                if (want) ok[n_ok++] = id;
            }
            cr_assert_gt(n_ok, 0, "no token allowed after '%.*s'", (int)len, doc);
            rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
            int32_t id = ok[(rng >> 33) % (uint64_t)n_ok];
            if (id == T_EOS) {
                doc[len] = 0;
                cJSON *j = cJSON_ParseWithOpts(doc, NULL, 1);
                cr_assert(j && validate(root, root, j), "invalid: %s", doc);
                cJSON_Delete(j);
                finished++;
                break;
            }
            f.base.accept(&f.base, id);
            memcpy(doc + len, pieces[id], strlen(pieces[id]));
            len += strlen(pieces[id]);
        }
    }
    cr_assert_gt(finished, 10, "%d walks finished", finished);
    cJSON_Delete(root);
    free(s);
    ul_json_vocab_free(v);
}
