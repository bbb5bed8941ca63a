/* JSON Schema, JSON mode and regular expressions as grammars: documents that validate are
 * sentences, documents that do not are not even prefixes where the schema decides early,
 * and what cannot be enforced is refused by name. */
#include <cjson/cJSON.h>
#include <stdio.h>

#include "base/buf.h"
#include "uvllm/err.h"
#include "engine/json_gbnf.h"
#include "grammar_testutil.h"

static ul_grammar_t *schema_grammar(const char *schema) {
    cJSON *js = cJSON_Parse(schema);
    cr_assert(js, "bad test schema %s", schema);
    ul_buf_t b = {0};
    char err[256];
    int rc = ul_json_schema_gbnf(js, &b, err, sizeof err);
    cr_assert_eq(rc, 0, "%s: %s", schema, err);
    ul_grammar_t *g = NULL;
    rc = ul_grammar_compile(NULL, b.p, b.len, &g, err, sizeof err);
    cr_assert_eq(rc, 0, "%s\n%.*s", err, (int)b.len, b.p);
    ul_buf_free(&b);
    cJSON_Delete(js);
    return g;
}

static const char *schema_error(const char *schema) {
    static char err[256];
    cJSON *js = cJSON_Parse(schema);
    cr_assert(js);
    ul_buf_t b = {0};
    int rc = ul_json_schema_gbnf(js, &b, err, sizeof err);
    ul_buf_free(&b);
    cJSON_Delete(js);
    cr_assert_eq(rc, UL_EINVAL, "accepted: %s", schema);
    return err;
}

Test(json_gbnf, objects_required_optional_and_order) {
    ul_grammar_t *g = schema_grammar(
        "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":"
        "\"string\"},\"c\":{\"type\":\"boolean\"}},\"required\":[\"b\"],"
        "\"additionalProperties\":false}");
    expect_lang(g,
                YES("{\"b\":\"x\"}", "{\"a\": 1, \"b\": \"x\", \"c\": true}",
                    "{\"a\":1,\"b\":\"\"}", "{\n  \"b\": \"x\",\n  \"c\": false\n}"),
                NO("{\"a\":1}"), DEAD("{\"a\":1,\"c\"", "{\"d\"", "{\"a\":1.5"));
    ul_grammar_unref(g);
}

Test(json_gbnf, integer_bounds_are_exact) {
    ul_grammar_t *g =
        schema_grammar("{\"type\":\"integer\",\"minimum\":-15,\"exclusiveMaximum\":120}");
    char buf[16];
    for (int v = -40; v <= 200; v++) {
        snprintf(buf, sizeof buf, "%d", v);
        cr_assert_eq(sentence(g, buf), v >= -15 && v < 120, "%d", v);
    }
    cr_assert(!sentence(g, "-0"));
    ul_grammar_unref(g);
    g = schema_grammar("{\"type\":\"integer\",\"minimum\":-9007199254740991,\"maximum\":"
                       "9007199254740991}");
    expect_lang(g, YES("-123456789012345", "0"), NULL, NULL);
    ul_grammar_unref(g);
    g = schema_grammar("{\"type\":\"integer\",\"exclusiveMinimum\":0}");
    expect_lang(g, YES("7"), NO("0"), DEAD("-"));
    ul_grammar_unref(g);
}

Test(json_gbnf, number_bounds_and_multiple_of) {
    ul_grammar_t *g = schema_grammar("{\"type\":\"number\",\"minimum\":0,\"maximum\":1}");
    expect_lang(g, YES("0.25", "1", "0"), NO("1.5"), DEAD("-", "2"));
    ul_grammar_unref(g);
    g = schema_grammar("{\"type\":\"integer\",\"multipleOf\":7,\"minimum\":-9007199254740991,"
                       "\"maximum\":9007199254740991}");
    expect_lang(g, YES("0", "49", "-700000000000007"), NO("50"), NULL);
    ul_grammar_unref(g);
    g = schema_grammar("{\"type\":\"integer\",\"multipleOf\":5,\"minimum\":3,\"maximum\":21}");
    expect_lang(g, YES("20"), NO("0", "25"), NULL);
    ul_grammar_unref(g);
}

Test(json_gbnf, strings_lengths_patterns_formats) {
    ul_grammar_t *g = schema_grammar("{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}");
    expect_lang(g, YES("\"ab\"", "\"\xc3\xa9\\n\\u00e9\""), NO("\"a\""), DEAD("\"abcd"));
    ul_grammar_unref(g);
    g = schema_grammar("{\"type\":\"string\",\"pattern\":\"^[A-Z]{2}-\\\\d+(\\\\.[a\\\"]|x)?$\"}");
    expect_lang(g, YES("\"AB-12\"", "\"AB-1.\\\"\"", "\"AB-1x\""), NO("\"A-1\"", "\"AB-1.b\""),
                NULL);
    ul_grammar_unref(g);
    g = schema_grammar("{\"type\":\"string\",\"pattern\":\"ab\"}"); /* unanchored */
    expect_lang(g, YES("\"xxabyy\""), NO("\"xxa\""), NULL);
    ul_grammar_unref(g);
    static const char *const fmt[][2] = {{"date", "\"2024-02-28\""},
                                         {"time", "\"12:30:59Z\""},
                                         {"date-time", "\"2024-12-31T23:59:59.5Z\""},
                                         {"uuid", "\"123e4567-e89b-42d3-a456-426614174000\""},
                                         {"email", "\"a1@example.com\""},
                                         {"ipv4", "\"192.168.0.255\""},
                                         {"ipv6", "\"2001:db8:0:0:0:0:2:1\""},
                                         {"hostname", "\"a-b.example\""},
                                         {"uri", "\"https://example.org/x\""}};
    for (size_t i = 0; i < sizeof fmt / sizeof *fmt; i++) {
        char s[128];
        snprintf(s, sizeof s, "{\"type\":\"string\",\"format\":\"%s\"}", fmt[i][0]);
        g = schema_grammar(s);
        cr_assert(sentence(g, fmt[i][1]), "%s %s", fmt[i][0], fmt[i][1]);
        cr_assert(!sentence(g, "\"-x\""), "%s", fmt[i][0]);
        ul_grammar_unref(g);
    }
    g = schema_grammar("{\"type\":\"string\",\"format\":\"date\"}");
    expect_lang(g, NULL, NO("\"2024-02-30\"", "\"2024-13-01\""), NULL);
    ul_grammar_unref(g);
}

Test(json_gbnf, unions_nullable_refs_arrays) {
    ul_grammar_t *g = schema_grammar(
        "{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"kids\":{\"type\":\"array\","
        "\"items\":{\"$ref\":\"#/$defs/node\"}}},\"required\":[\"kids\"]}},"
        "\"anyOf\":[{\"type\":\"object\",\"properties\":{\"kind\":{\"const\":\"a\"},\"n\":{"
        "\"$ref\":\"#/$defs/node\"}},\"required\":[\"kind\",\"n\"]},{\"type\":\"object\","
        "\"properties\":{\"kind\":{\"type\":\"string\",\"enum\":[\"b\"]},\"v\":{\"type\":"
        "\"string\",\"nullable\":true}},\"required\":[\"kind\",\"v\"]}]}");
    expect_lang(
        g, YES("{\"kind\":\"a\",\"n\":{\"kids\":[{\"kids\":[]}]}}", "{\"kind\":\"b\",\"v\":null}"),
        NO("{\"kind\":\"b\",\"n\":{\"kids\":[]}}"), NULL);
    ul_grammar_unref(g);
    g = schema_grammar("{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"},{\"type\":"
                       "\"string\"}],\"items\":false,\"minItems\":1}");
    expect_lang(g, YES("[1]", "[1, \"a\"]"), NO("[]"), DEAD("[1, \"a\", "));
    ul_grammar_unref(g);
    g = schema_grammar("{\"type\":\"array\",\"items\":{\"type\":\"null\"},\"minItems\":2,"
                       "\"maxItems\":3}");
    expect_lang(g, YES("[null,null]"), NO("[null]"), DEAD("[null,null,null,"));
    ul_grammar_unref(g);
    g = schema_grammar("{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"},"
                       "\"minProperties\":1}");
    expect_lang(g, YES("{\"x\":1,\"y\":2}"), NO("{}"), DEAD("{\"x\":\"s"));
    ul_grammar_unref(g);
}

Test(json_gbnf, refusals_name_the_keyword) {
    cr_assert(strstr(schema_error("{\"not\":{}}"), "keyword 'not' is not supported"));
    cr_assert(strstr(schema_error("{\"type\":\"string\",\"format\":\"ipv9\"}"), "'ipv9'"));
    cr_assert(strstr(schema_error("{\"type\":\"string\",\"pattern\":\"(?=a)b\"}"), "lookaround"));
    cr_assert(
        strstr(schema_error("{\"type\":\"string\",\"pattern\":\"(a)\\\\1\"}"), "backreference"));
    cr_assert(strstr(schema_error("{\"type\":\"strin\"}"), "'strin' is unknown"));
    cr_assert(strstr(schema_error("{\"$ref\":\"#/$defs/x\"}"), "does not resolve"));
    cr_assert(strstr(schema_error("{\"type\":\"array\",\"uniqueItems\":true}"), "uniqueItems"));
    cr_assert(
        strstr(schema_error("{\"type\":\"integer\",\"minimum\":5,\"maximum\":1}"), "no integer"));
}

Test(json_gbnf, json_mode_is_one_object) {
    ul_grammar_t *g = gr(NULL, ul_json_gbnf_object);
    expect_lang(g, YES("{\"a\": [1, {\"b\": null}], \"c\": \"\\u00e9\"}"), NULL,
                DEAD(" {", "[", "{} x"));
    ul_grammar_unref(g);
}

Test(json_gbnf, raw_regex) {
    ul_buf_t b = {0};
    char err[160];
    ul_buf_puts(&b, "root ::= ");
    cr_assert_eq(ul_regex_gbnf("^(yes|no)\\.$", 11, 0, &b, err, sizeof err), 0, "%s", err);
    ul_buf_puts(&b, "\n");
    ul_grammar_t *g = NULL;
    cr_assert_eq(ul_grammar_compile(NULL, b.p, b.len, &g, err, sizeof err), 0, "%s", err);
    expect_lang(g, YES("yes."), NO("yes"), DEAD("maybe"));
    ul_grammar_unref(g);
    ul_buf_free(&b);
}
