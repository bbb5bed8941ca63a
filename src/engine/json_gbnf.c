/* JSON Schema -> GBNF (json_gbnf.h). Each schema node becomes a rule (or a shared base rule:
 * string, number, ...); $ref targets are memoised so recursive schemas give recursive
 * rules. String values are JSON string bodies with the escapes spelled out; the lexical
 * rules are written so that the grammar engine inlines the small ones and keeps a string's
 * characters in one shared rule. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/json_gbnf.h"
#include "engine/json_gbnf_impl.h"
#include "uvllm/err.h"

const char *const ul_json_gbnf_object = "root ::= object\n" UL_JSON_GBNF_BASE;

int ul_gbnf_literal(ul_buf_t *out, const char *s, size_t n) {
    int rc = ul_buf_append(out, "\"", 1);
    for (size_t i = 0; i < n && !rc; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            rc = ul_buf_append(out, e, 2);
        } else if (c < 0x20 || c == 0x7f) {
            char e[8];
            snprintf(e, sizeof e, "\\x%02X", c);
            rc = ul_buf_append(out, e, 4);
        } else {
            rc = ul_buf_append(out, (const char *)&c, 1);
        }
    }
    return rc ? rc : ul_buf_append(out, "\"", 1);
}

/* A new rule name "rN" into name (16 bytes). */
void ul_jg_name(jg_t *j, char *name) { snprintf(name, 16, "r%d", j->n_rules++); }

/* Starts rule name: "name ::= " */
int ul_jg_rule(jg_t *j, const char *name) { return ul_buf_printf(&j->rules, "%s ::= ", name); }

static int is_annotation(const char *k) {
    static const char *const a[] = {"description",
                                    "title",
                                    "default",
                                    "examples",
                                    "$schema",
                                    "$comment",
                                    "$defs",
                                    "definitions",
                                    "$id",
                                    "deprecated",
                                    "readOnly",
                                    "writeOnly",
                                    "discriminator",
                                    "contentMediaType",
                                    "contentEncoding",
                                    "strict"};
    for (size_t i = 0; i < sizeof a / sizeof *a; i++)
        if (!strcmp(k, a[i])) return 1;
    return 0;
}

static const char *const known_kw[] = {"type",
                                       "properties",
                                       "required",
                                       "additionalProperties",
                                       "items",
                                       "prefixItems",
                                       "minItems",
                                       "maxItems",
                                       "minLength",
                                       "maxLength",
                                       "enum",
                                       "const",
                                       "anyOf",
                                       "oneOf",
                                       "$ref",
                                       "allOf",
                                       "pattern",
                                       "format",
                                       "minimum",
                                       "maximum",
                                       "exclusiveMinimum",
                                       "exclusiveMaximum",
                                       "multipleOf",
                                       "nullable",
                                       "minProperties",
                                       "maxProperties",
                                       "uniqueItems",
                                       "additionalItems",
                                       NULL};

static int check_keywords(jg_t *j, const cJSON *js) {
    const cJSON *it;
    cJSON_ArrayForEach(it, js) {
        if (is_annotation(it->string)) continue;
        int ok = 0;
        for (const char *const *k = known_kw; *k && !ok; k++) ok = !strcmp(*k, it->string);
        if (!ok) return ul_jg_fail(j, "keyword '%.60s' is not supported", it->string);
        if (!strcmp(it->string, "uniqueItems") && cJSON_IsTrue(it))
            return ul_jg_fail(j, "keyword 'uniqueItems' is not supported");
    }
    return 0;
}

const cJSON *ul_jg_get(const cJSON *js, const char *k) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(js, k);
    return it && !cJSON_IsNull(it) ? it : NULL;
}

/* ---- enum / const ---------------------------------------------------------------------- */

static int gen_enum(jg_t *j, const cJSON *js, char *name) {
    const cJSON *e = ul_jg_get(js, "enum"), *k = cJSON_GetObjectItemCaseSensitive(js, "const");
    if (e && k) { /* pydantic writes a Literal as both: the const, if the enum has it */
        int in = 0;
        const cJSON *it;
        cJSON_ArrayForEach(it, e) in |= cJSON_Compare(it, k, 1);
        if (!in) return ul_jg_fail(j, "'const' is not one of 'enum'");
        e = NULL;
    }
    if (e && (!cJSON_IsArray(e) || !cJSON_GetArraySize(e)))
        return ul_jg_fail(j, "'enum' must be a non-empty array");
    ul_jg_name(j, name);
    int rc = ul_jg_rule(j, name), first = 1;
    for (const cJSON *it = e ? e->child : k; it && !rc; it = e ? it->next : NULL) {
        char *txt = cJSON_PrintUnformatted(it);
        if (!txt) return UL_ENOMEM;
        rc = first ? 0 : ul_buf_puts(&j->rules, " | ");
        if (!rc) rc = ul_gbnf_literal(&j->rules, txt, strlen(txt));
        cJSON_free(txt);
        first = 0;
    }
    return rc ? rc : ul_buf_puts(&j->rules, "\n");
}

/* ---- composition ----------------------------------------------------------------------- */

static int gen_branches(jg_t *j, const cJSON *arr, const char *kw, int add_null, char *name) {
    if (!cJSON_IsArray(arr) || !cJSON_GetArraySize(arr))
        return ul_jg_fail(j, "'%s' must be a non-empty array of schemas", kw);
    int n = cJSON_GetArraySize(arr), i = 0, rc = 0;
    char(*br)[16] = calloc((size_t)n, sizeof *br);
    if (!br) return UL_ENOMEM;
    const cJSON *it;
    cJSON_ArrayForEach(it, arr) if (!rc) rc = ul_jg_gen(j, it, br[i++]);
    if (!rc) {
        ul_jg_name(j, name);
        rc = ul_jg_rule(j, name);
        for (i = 0; i < n && !rc; i++) rc = ul_buf_printf(&j->rules, "%s%s", i ? " | " : "", br[i]);
        if (!rc && add_null) rc = ul_buf_puts(&j->rules, " | null");
        if (!rc) rc = ul_buf_puts(&j->rules, "\n");
        j->used |= add_null ? JG_NULL : 0;
    }
    free(br);
    return rc;
}

static int gen_ref(jg_t *j, const cJSON *js, char *name) {
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(js, "$ref");
    if (!cJSON_IsString(r)) return ul_jg_fail(j, "'$ref' must be a string");
    const char *s = r->valuestring;
    const cJSON *target = NULL;
    if (!strcmp(s, "#"))
        target = j->root;
    else if (!strncmp(s, "#/$defs/", 8))
        target = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(j->root, "$defs"), s + 8);
    else if (!strncmp(s, "#/definitions/", 14))
        target = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(j->root, "definitions"), s + 14);
    else
        return ul_jg_fail(j,
                          "'$ref' '%.80s' is not supported (only \"#\", \"#/$defs/...\" and "
                          "\"#/definitions/...\")",
                          s);
    if (!target) return ul_jg_fail(j, "'$ref' '%.80s' does not resolve", s);
    return ul_jg_gen(j, target, name);
}

/* allOf: one schema, or objects merged (properties and required united). */
static int gen_allof(jg_t *j, const cJSON *js, char *name) {
    const cJSON *a = ul_jg_get(js, "allOf");
    if (!cJSON_IsArray(a) || !cJSON_GetArraySize(a))
        return ul_jg_fail(j, "'allOf' must be a non-empty array of schemas");
    if (cJSON_GetArraySize(a) == 1 && cJSON_GetArraySize((cJSON *)js) == 1)
        return ul_jg_gen(j, a->child, name);
    cJSON *m = cJSON_CreateObject(), *props = cJSON_CreateObject(), *req = cJSON_CreateArray();
    if (!m || !props || !req) {
        cJSON_Delete(m), cJSON_Delete(props), cJSON_Delete(req);
        return UL_ENOMEM;
    }
    cJSON_AddItemToObject(m, "properties", props);
    cJSON_AddItemToObject(m, "required", req);
    int rc = 0;
    const cJSON *parts[64];
    int np = 0;
    parts[np++] = js;
    const cJSON *it;
    cJSON_ArrayForEach(it, a) if (np < 64) parts[np++] = it;
    for (int p = 0; p < np && !rc; p++) {
        const cJSON *s = parts[p];
        for (int hops = 0; hops < 16 && ul_jg_get(s, "$ref"); hops++) { /* resolve plain refs */
            const char *ref = ul_jg_get(s, "$ref")->valuestring;
            const cJSON *defs = cJSON_GetObjectItemCaseSensitive(j->root, "$defs");
            if (!ref || strncmp(ref, "#/$defs/", 8)) break;
            s = cJSON_GetObjectItemCaseSensitive(defs, ref + 8);
            if (!s) break;
        }
        const cJSON *kv;
        cJSON_ArrayForEach(kv, s) {
            if (p == 0 && !strcmp(kv->string, "allOf")) continue;
            if (is_annotation(kv->string)) continue;
            if (!strcmp(kv->string, "properties")) {
                const cJSON *pp;
                cJSON_ArrayForEach(pp, kv) if (!cJSON_GetObjectItemCaseSensitive(props, pp->string))
                    cJSON_AddItemReferenceToObject(props, pp->string, (cJSON *)pp);
            } else if (!strcmp(kv->string, "required")) {
                const cJSON *rq;
                cJSON_ArrayForEach(rq, kv) if (cJSON_IsString(rq))
                    cJSON_AddItemToArray(req, cJSON_CreateString(rq->valuestring));
            } else if (!strcmp(kv->string, "type") && cJSON_IsString(kv) &&
                       !strcmp(kv->valuestring, "object")) {
            } else if (!strcmp(kv->string, "additionalProperties") && cJSON_IsFalse(kv)) {
                if (!cJSON_GetObjectItemCaseSensitive(m, "additionalProperties"))
                    cJSON_AddFalseToObject(m, "additionalProperties");
            } else {
                rc = ul_jg_fail(j,
                                "'allOf' is only supported with one schema or with objects "
                                "(found '%.40s')",
                                kv->string);
                break;
            }
        }
    }
    if (!rc) {
        /* the merged schema lives as long as the conversion (memoised by pointer) */
        cJSON_AddItemToObject(m, "type", cJSON_CreateString("object"));
        if (j->n_keep < JG_MAX_KEEP)
            j->keep[j->n_keep++] = m, m = NULL;
        else
            rc = ul_jg_fail(j, "too many 'allOf' merges");
        if (!rc) rc = ul_jg_gen(j, j->keep[j->n_keep - 1], name);
    }
    cJSON_Delete(m);
    return rc;
}

/* ---- types ----------------------------------------------------------------------------- */

static int parse_types(jg_t *j, const cJSON *t, int *types) {
    static const char *const names[] = {"object",  "array",   "string", "number",
                                        "integer", "boolean", "null"};
    *types = 0;
    if (!cJSON_IsString(t) && !cJSON_IsArray(t))
        return ul_jg_fail(j, "'type' must be a type name or an array of them");
    if (cJSON_IsArray(t) && !cJSON_GetArraySize(t))
        return ul_jg_fail(j, "'type' must not be empty");
    const cJSON *it = cJSON_IsString(t) ? t : t->child;
    for (; it; it = cJSON_IsString(t) ? NULL : it->next) {
        int k = 0;
        while (k < 7 && !(cJSON_IsString(it) && !strcmp(it->valuestring, names[k]))) k++;
        if (k == 7)
            return ul_jg_fail(j, "'type' '%.40s' is unknown",
                              cJSON_IsString(it) ? it->valuestring : "(not a string)");
        *types |= 1 << k;
    }
    return 0;
}

static int has_any(const cJSON *js, const char *const *kw) {
    for (; *kw; kw++)
        if (ul_jg_get(js, *kw)) return 1;
    return 0;
}

/* The types a schema without "type" implies by its keywords (0: any value). */
static int implied_types(const cJSON *js) {
    static const char *const obj[] = {"properties",    "required",      "additionalProperties",
                                      "minProperties", "maxProperties", NULL};
    static const char *const arr[] = {"items", "prefixItems", "minItems", "maxItems", NULL};
    static const char *const str[] = {"minLength", "maxLength", "pattern", "format", NULL};
    static const char *const num[] = {"minimum",          "maximum",    "exclusiveMinimum",
                                      "exclusiveMaximum", "multipleOf", NULL};
    int t = 0;
    if (has_any(js, obj)) t |= T_OBJ;
    if (has_any(js, arr)) t |= T_ARR;
    if (has_any(js, str)) t |= T_STR;
    if (has_any(js, num)) t |= T_NUM;
    return t;
}

static int gen_type(jg_t *j, const cJSON *js, int type, char *name) {
    switch (type) {
    case T_OBJ:
        return ul_jg_object(j, js, name);
    case T_ARR:
        return ul_jg_array(j, js, name);
    case T_STR:
        return ul_jg_string(j, js, name);
    case T_NUM:
    case T_INT:
        return ul_jg_number(j, js, type == T_INT, name);
    case T_BOOL:
        j->used |= JG_BOOL;
        snprintf(name, 16, "boolean");
        return 0;
    default:
        j->used |= JG_NULL;
        snprintf(name, 16, "null");
        return 0;
    }
}

static int gen_typed(jg_t *j, const cJSON *js, char *name) {
    int types = 0, rc;
    const cJSON *t = ul_jg_get(js, "type");
    if (t && (rc = parse_types(j, t, &types))) return rc;
    if (!t) types = implied_types(js);
    const cJSON *nl = ul_jg_get(js, "nullable");
    if (nl && !cJSON_IsBool(nl)) return ul_jg_fail(j, "'nullable' must be a boolean");
    if (cJSON_IsTrue(nl) && types) types |= T_NULL;
    if (!types) {
        j->used |= JG_VALUE;
        snprintf(name, 16, "value");
        return 0;
    }
    if ((types & T_INT) && (types & T_NUM)) types &= ~T_INT; /* integers are numbers */
    char br[8][16];
    int n = 0;
    for (int k = 1; k <= T_NULL && !(rc = 0); k <<= 1)
        if ((types & k) && (rc = gen_type(j, js, k, br[n++]))) return rc;
    if (n == 1) {
        memcpy(name, br[0], 16);
        return 0;
    }
    ul_jg_name(j, name);
    rc = ul_jg_rule(j, name);
    for (int i = 0; i < n && !rc; i++) rc = ul_buf_printf(&j->rules, "%s%s", i ? " | " : "", br[i]);
    return rc ? rc : ul_buf_puts(&j->rules, "\n");
}

int ul_jg_gen(jg_t *j, const cJSON *js, char *name) {
    for (size_t i = 0; i < j->n_memo; i++)
        if (j->memo[i].js == js) return memcpy(name, j->memo[i].name, 16), 0;
    if (cJSON_IsTrue(js)) {
        j->used |= JG_VALUE;
        snprintf(name, 16, "value");
        return 0;
    }
    if (!cJSON_IsObject(js)) return ul_jg_fail(j, "a schema must be an object");
    if (++j->depth > 64) return ul_jg_fail(j, "the schema nests too deeply");
    int rc = check_keywords(j, js);
    if (rc) return rc;
    /* a $ref target gets its rule name before its body, so recursion finds it */
    char own[16];
    ul_jg_name(j, own);
    if (j->n_memo == j->c_memo) {
        size_t nc = j->c_memo * 2 + 16;
        jg_memo_t *nm = realloc(j->memo, nc * sizeof *nm);
        if (!nm) return UL_ENOMEM;
        j->memo = nm;
        j->c_memo = nc;
    }
    size_t mi = j->n_memo++;
    j->memo[mi].js = js;
    memcpy(j->memo[mi].name, own, 16);
    char body[16];
    const cJSON *nl = ul_jg_get(js, "nullable");
    if (ul_jg_get(js, "$ref")) {
        const char *bad = NULL;
        const cJSON *it;
        cJSON_ArrayForEach(it, js) if (strcmp(it->string, "$ref") && !is_annotation(it->string))
            bad = it->string;
        rc = bad ? ul_jg_fail(j, "'$ref' cannot be combined with '%.60s'", bad)
                 : gen_ref(j, js, body);
    } else if (ul_jg_get(js, "allOf")) {
        rc = gen_allof(j, js, body);
    } else if (ul_jg_get(js, "anyOf") || ul_jg_get(js, "oneOf")) {
        const char *kw = ul_jg_get(js, "anyOf") ? "anyOf" : "oneOf";
        rc = gen_branches(j, ul_jg_get(js, kw), kw, cJSON_IsTrue(nl), body);
    } else if (cJSON_GetObjectItemCaseSensitive(js, "enum") ||
               cJSON_GetObjectItemCaseSensitive(js, "const")) {
        rc = gen_enum(j, js, body);
    } else {
        rc = gen_typed(j, js, body);
    }
    if (!rc) rc = ul_buf_printf(&j->rules, "%s ::= %s\n", own, body);
    memcpy(name, own, 16);
    j->depth--;
    return rc;
}

ul_json_gbnf_t *ul_json_gbnf_new(char *err, size_t err_len) {
    jg_t *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->err = err;
    j->err_len = err_len;
    if (err_len) err[0] = 0;
    return j;
}

void ul_json_gbnf_free(ul_json_gbnf_t *j) {
    if (!j) return;
    ul_buf_free(&j->rules);
    free(j->memo);
    for (int i = 0; i < j->n_keep; i++) cJSON_Delete(j->keep[i]);
    free(j);
}

int ul_json_gbnf_add(ul_json_gbnf_t *j, const cJSON *schema, const cJSON *root, const char *name) {
    j->root = root ? root : schema;
    j->n_memo = 0; /* memoised names are per schema (their $refs resolve in their root) */
    j->depth = 0;
    char r[16];
    int rc = ul_jg_gen(j, schema, r);
    if (!rc) rc = ul_buf_printf(&j->rules, "%s ::= %s\n", name, r);
    return rc == UL_EINVAL || rc == UL_ENOMEM ? rc : rc ? UL_ENOMEM : 0;
}

int ul_json_gbnf_finish(ul_json_gbnf_t *j, ul_buf_t *out) {
    int rc = ul_buf_append(out, j->rules.p, j->rules.len);
    if (!rc) rc = ul_buf_puts(out, UL_JSON_GBNF_BASE);
    ul_json_gbnf_free(j);
    return rc;
}

int ul_json_schema_gbnf(const cJSON *schema, ul_buf_t *out, char *err, size_t err_len) {
    jg_t *j = ul_json_gbnf_new(err, err_len);
    if (!j) return UL_ENOMEM;
    int rc = ul_json_gbnf_add(j, schema, schema, "root");
    if (rc) {
        ul_json_gbnf_free(j);
        return rc;
    }
    return ul_json_gbnf_finish(j, out);
}
