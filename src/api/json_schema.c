/* JSON Schema structured output: the compiler (cJSON schema -> node table) and the acceptor
 * that walks the table over json_out.c's syntax acceptor (json_schema.h). */
#include "api/json_schema.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uvllm/err.h"

/* Types (snode_t.types). */
enum { T_OBJ = 1, T_ARR = 2, T_STR = 4, T_NUM = 8, T_INT = 16, T_BOOL = 32, T_NULL = 64 };
#define T_ALL 127
/* First-byte classes (snode_t.classes): which bytes may start a value of the node. */
enum { C_OBJ = 1, C_ARR = 2, C_STR = 4, C_NUM = 8, C_BOOL = 16, C_NULL = 32 };
/* Node kinds. */
enum { K_TYPED, K_ENUM, K_ANYOF };
/* Flags. */
enum { F_FREE_OBJ = 1, F_FREE_ARR = 2 };
#define MD_INF 255
#define MAX_NODES 4096
#define MAX_PROPS 64 /* per object: the seen-bitmask */

typedef struct {
    uint8_t kind, types, classes, flags;
    uint8_t md;             /* levels of nesting the shortest complete value needs */
    uint8_t litmd;          /* enums: the deepest literal's nesting */
    int32_t prop0, n_props; /* objects: sorted by key */
    uint64_t required;      /* bit i: property prop0 + i is required */
    int32_t lit0, n_lits;   /* enums: sorted */
    int32_t br0, n_br;      /* anyOf branches */
    int32_t items;          /* arrays: -1 when free */
    uint32_t min_items, max_items, min_len, max_len;
} snode_t;

typedef struct {
    uint32_t off, len; /* the key's bytes in the blob */
    int32_t node;
} sprop_t;

typedef struct {
    uint32_t off, len;
} slit_t;

struct ul_json_schema_s {
    uint32_t size, root, n_nodes;
    uint32_t props_off, lits_off, br_off, blob_off; /* nodes follow the header */
    uint32_t pad; /* the nodes (uint64_t inside) start 8-byte aligned */
};
_Static_assert(sizeof(struct ul_json_schema_s) % 8 == 0, "nodes must stay aligned");

#define NODES(s) ((const snode_t *)((const char *)(s) + sizeof(ul_json_schema_t)))
#define PROPS(s) ((const sprop_t *)((const char *)(s) + (s)->props_off))
#define LITS(s) ((const slit_t *)((const char *)(s) + (s)->lits_off))
#define BRS(s) ((const int32_t *)((const char *)(s) + (s)->br_off))
#define BLOB(s) ((const char *)(s) + (s)->blob_off)

size_t ul_json_schema_size(const ul_json_schema_t *s) { return s->size; }

/* ---- compiling ------------------------------------------------------------------------ */

typedef struct {
    const cJSON *js;
    int32_t node;
} memo_t;

typedef struct {
    const cJSON *root;
    snode_t *nodes;
    sprop_t *props;
    slit_t *lits;
    int32_t *brs;
    char *blob;
    memo_t *memo;
    size_t n_nodes, n_props, n_lits, n_brs, n_blob, n_memo;
    size_t c_nodes, c_props, c_lits, c_brs, c_blob, c_memo;
    int depth, nomem;
    char *err;
    size_t err_len;
} comp_t;

__attribute__((format(printf, 2, 3))) static int fail(comp_t *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, c->err_len, fmt, ap);
    va_end(ap);
    return UL_EINVAL;
}

/* Grows *p (elements of size sz) to hold n + add; 0 or UL_ENOMEM. */
static int grow(comp_t *c, void **p, size_t *cap, size_t n, size_t add, size_t sz) {
    if (n + add <= *cap) return 0;
    size_t nc = (*cap ? *cap * 2 : 16) + add;
    void *np = realloc(*p, nc * sz);
    if (!np) {
        c->nomem = 1;
        return UL_ENOMEM;
    }
    *p = np;
    *cap = nc;
    return 0;
}
#define GROW(c, arr, add)                                                                          \
    grow(c, (void **)&(c)->arr, &(c)->c_##arr, (c)->n_##arr, add, sizeof *(c)->arr)

static int blob_add(comp_t *c, const char *p, size_t n, uint32_t *off) {
    if (GROW(c, blob, n + 1)) return UL_ENOMEM;
    memcpy(c->blob + c->n_blob, p, n);
    *off = (uint32_t)c->n_blob;
    c->n_blob += n;
    return 0;
}

static int is_annotation(const char *k) {
    static const char *const a[] = {"description", "title",    "default", "examples",
                                    "$schema",     "$comment", "$defs",   "definitions"};
    for (size_t i = 0; i < sizeof a / sizeof *a; i++)
        if (!strcmp(k, a[i])) return 1;
    return 0;
}

static const char *const known_kw[] = {
    "type",      "properties", "required", "additionalProperties",
    "items",     "minItems",   "maxItems", "minLength",
    "maxLength", "enum",       "const",    "anyOf",
    "oneOf",     "$ref",       "allOf",    NULL};

static int check_keywords(comp_t *c, const cJSON *js) {
    const cJSON *it;
    cJSON_ArrayForEach(it, js) {
        if (is_annotation(it->string)) continue;
        int ok = 0;
        for (const char *const *k = known_kw; *k && !ok; k++) ok = !strcmp(*k, it->string);
        if (!ok) return fail(c, "keyword '%.60s' is not supported", it->string);
    }
    return 0;
}

/* The first validation keyword of js other than those in allowed (NULL if none). */
static const char *other_keyword(const cJSON *js, const char *const *allowed) {
    const cJSON *it;
    cJSON_ArrayForEach(it, js) {
        if (is_annotation(it->string)) continue;
        int ok = 0;
        for (const char *const *k = allowed; *k && !ok; k++) ok = !strcmp(*k, it->string);
        if (!ok) return it->string;
    }
    return NULL;
}

static int new_node(comp_t *c, int32_t *idx) {
    if (c->n_nodes >= MAX_NODES) return fail(c, "schema has more than %d nodes", MAX_NODES);
    if (GROW(c, nodes, 1)) return UL_ENOMEM;
    *idx = (int32_t)c->n_nodes++;
    snode_t *n = &c->nodes[*idx];
    memset(n, 0, sizeof *n);
    n->items = -1;
    n->max_items = n->max_len = UINT32_MAX;
    n->md = MD_INF;
    return 0;
}

static int compile(comp_t *c, const cJSON *js, int32_t *out);

static int memo_find(comp_t *c, const cJSON *js, int32_t *out) {
    for (size_t i = 0; i < c->n_memo; i++)
        if (c->memo[i].js == js) return *out = c->memo[i].node, 1;
    return 0;
}

static int compile_ref(comp_t *c, const cJSON *js, int32_t *out) {
    const char *bad = other_keyword(js, (const char *const[]){"$ref", NULL});
    if (bad) return fail(c, "'$ref' cannot be combined with '%.60s'", bad);
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(js, "$ref");
    if (!cJSON_IsString(r)) return fail(c, "'$ref' must be a string");
    const char *s = r->valuestring;
    const cJSON *target = NULL;
    if (!strcmp(s, "#"))
        target = c->root;
    else if (!strncmp(s, "#/$defs/", 8))
        target = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(c->root, "$defs"), s + 8);
    else if (!strncmp(s, "#/definitions/", 14))
        target = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(c->root, "definitions"), s + 14);
    else
        return fail(c,
                    "'$ref' '%.80s' is not supported (only \"#\", \"#/$defs/...\" and "
                    "\"#/definitions/...\")",
                    s);
    if (!target) return fail(c, "'$ref' '%.80s' does not resolve", s);
    if (memo_find(c, target, out)) return 0;
    return compile(c, target, out);
}

/* Nesting depth of a JSON value (0 for scalars). */
static int value_depth(const cJSON *v) {
    if (!cJSON_IsObject(v) && !cJSON_IsArray(v)) return 0;
    int d = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, v) {
        int k = value_depth(it);
        if (k > d) d = k;
    }
    return d + 1;
}

static int type_of_value(const cJSON *v) {
    if (cJSON_IsObject(v)) return T_OBJ;
    if (cJSON_IsArray(v)) return T_ARR;
    if (cJSON_IsString(v)) return T_STR;
    if (cJSON_IsBool(v)) return T_BOOL;
    if (cJSON_IsNull(v)) return T_NULL;
    return v->valuedouble == floor(v->valuedouble) ? T_NUM | T_INT : T_NUM;
}

static int class_of_byte(uint8_t b) {
    switch (b) {
    case '{':
        return C_OBJ;
    case '[':
        return C_ARR;
    case '"':
        return C_STR;
    case 't':
    case 'f':
        return C_BOOL;
    case 'n':
        return C_NULL;
    default:
        return (b >= '0' && b <= '9') || b == '-' ? C_NUM : 0;
    }
}

static int classes_of_types(int t) {
    return (t & T_OBJ ? C_OBJ : 0) | (t & T_ARR ? C_ARR : 0) | (t & T_STR ? C_STR : 0) |
           (t & (T_NUM | T_INT) ? C_NUM : 0) | (t & T_BOOL ? C_BOOL : 0) |
           (t & T_NULL ? C_NULL : 0);
}

typedef struct {
    char *s;
    size_t len;
} tlit_t;

static int lit_cmp(const void *x, const void *y) {
    const tlit_t *a = x, *b = y;
    int r = memcmp(a->s, b->s, a->len < b->len ? a->len : b->len);
    return r ? r : (a->len > b->len) - (a->len < b->len);
}

/* The literal must be a document the syntax acceptor takes whole (depth, UTF-8, number
 * length), or a prefix of it could be generated and never finished. */
static int lit_ok(const char *s, size_t n) {
    ul_json_acc_t a;
    ul_json_acc_init_any(&a);
    return ul_json_acc_feed_n(&a, s, n) == 0 && ul_json_acc_done(&a);
}

static int compile_enum(comp_t *c, const cJSON *js, int32_t idx, int types) {
    const char *bad = other_keyword(js, (const char *const[]){"enum", "const", "type", NULL});
    if (bad) return fail(c, "'enum'/'const' cannot be combined with '%.60s'", bad);
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(js, "enum");
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(js, "const");
    if (e && k) return fail(c, "'enum' and 'const' cannot be combined");
    if (e && (!cJSON_IsArray(e) || !cJSON_GetArraySize(e)))
        return fail(c, "'enum' must be a non-empty array");
    int n = e ? cJSON_GetArraySize(e) : 1;
    tlit_t *t = calloc((size_t)n, sizeof *t);
    if (!t) return c->nomem = 1, UL_ENOMEM;
    int rc = 0, i = 0, md = 0, classes = 0;
    const cJSON *v = k;
    for (const cJSON *it = e ? e->child : k; it && !rc; it = e ? it->next : NULL, i++) {
        v = it;
        if (types && !(type_of_value(v) & types)) {
            rc = fail(c, "an 'enum'/'const' value does not match the node's 'type'");
            break;
        }
        if (!(t[i].s = cJSON_PrintUnformatted(v))) {
            rc = UL_ENOMEM, c->nomem = 1;
            break;
        }
        t[i].len = strlen(t[i].s);
        if (!lit_ok(t[i].s, t[i].len)) rc = fail(c, "an 'enum'/'const' value cannot be output");
        int d = value_depth(v);
        if (d > md) md = d;
        classes |= class_of_byte((uint8_t)t[i].s[0]);
    }
    if (!rc) {
        qsort(t, (size_t)n, sizeof *t, lit_cmp);
        rc = GROW(c, lits, (size_t)n);
    }
    if (!rc) {
        c->nodes[idx].lit0 = (int32_t)c->n_lits;
        c->nodes[idx].n_lits = n;
        for (i = 0; i < n && !rc; i++) {
            slit_t *l = &c->lits[c->n_lits++];
            l->len = (uint32_t)t[i].len;
            rc = blob_add(c, t[i].s, t[i].len, &l->off);
        }
    }
    for (i = 0; i < n; i++) cJSON_free(t[i].s);
    free(t);
    snode_t *nd = &c->nodes[idx];
    nd->kind = K_ENUM;
    nd->classes = (uint8_t)classes;
    nd->litmd = (uint8_t)md;
    return rc;
}

static int compile_anyof(comp_t *c, const cJSON *js, int32_t idx) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(js, "anyOf");
    const char *name = "anyOf";
    if (!a) a = cJSON_GetObjectItemCaseSensitive(js, "oneOf"), name = "oneOf";
    const char *bad = other_keyword(js, (const char *const[]){name, NULL});
    if (bad) return fail(c, "'%s' cannot be combined with '%.60s'", name, bad);
    if (!cJSON_IsArray(a) || !cJSON_GetArraySize(a))
        return fail(c, "'%s' must be a non-empty array of schemas", name);
    int n = cJSON_GetArraySize(a), i = 0, classes = 0, rc = 0;
    int32_t *br = malloc((size_t)n * sizeof *br);
    if (!br) return c->nomem = 1, UL_ENOMEM;
    const cJSON *it;
    cJSON_ArrayForEach(it, a) {
        if ((rc = compile(c, it, &br[i]))) break;
        int bc = c->nodes[br[i]].classes;
        if (!bc) {
            rc = fail(c, "'%s' branches that refer back to the '%s' are not supported", name, name);
            break;
        }
        if (bc & classes) {
            rc = fail(c,
                      "'%s' branches must differ by type (object, array, string, "
                      "number/integer, boolean, null)",
                      name);
            break;
        }
        classes |= bc;
        i++;
    }
    if (!rc && !(rc = GROW(c, brs, (size_t)n))) {
        snode_t *nd = &c->nodes[idx];
        nd->kind = K_ANYOF;
        nd->br0 = (int32_t)c->n_brs;
        nd->n_br = n;
        nd->classes = (uint8_t)classes;
        memcpy(c->brs + c->n_brs, br, (size_t)n * sizeof *br);
        c->n_brs += (size_t)n;
    }
    free(br);
    return rc;
}

static int parse_types(comp_t *c, const cJSON *t, int *types) {
    static const char *const names[] = {"object",  "array",   "string", "number",
                                        "integer", "boolean", "null"};
    *types = 0;
    if (!cJSON_IsString(t) && !cJSON_IsArray(t))
        return fail(c, "'type' must be a type name or an array of them");
    if (cJSON_IsArray(t) && !cJSON_GetArraySize(t)) return fail(c, "'type' must not be empty");
    const cJSON *it = cJSON_IsString(t) ? t : t->child;
    for (; it; it = cJSON_IsString(t) ? NULL : it->next) {
        int k = 0;
        while (k < 7 && !(cJSON_IsString(it) && !strcmp(it->valuestring, names[k]))) k++;
        if (k == 7)
            return fail(c, "'type' '%.40s' is unknown",
                        cJSON_IsString(it) ? it->valuestring : "(not a string)");
        *types |= 1 << k;
    }
    return 0;
}

/* A non-negative integer keyword into *v (left alone when absent). */
static int count_kw(comp_t *c, const cJSON *js, const char *name, uint32_t *v) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(js, name);
    if (!it) return 0;
    if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble > 1e9 ||
        it->valuedouble != floor(it->valuedouble))
        return fail(c, "'%s' must be a non-negative integer", name);
    *v = (uint32_t)it->valuedouble;
    return 0;
}

typedef struct {
    const char *key;
    size_t len;
    int32_t node;
    int required;
} tprop_t;

static int prop_cmp(const void *x, const void *y) {
    const tprop_t *a = x, *b = y;
    int r = memcmp(a->key, b->key, a->len < b->len ? a->len : b->len);
    return r ? r : (a->len > b->len) - (a->len < b->len);
}

/* Keys are matched as raw bytes: no escapes, and UTF-8 the syntax acceptor takes. */
static int key_ok(const char *k) {
    ul_json_acc_t a;
    ul_json_acc_init(&a);
    if (strchr(k, '\\') || strchr(k, '"')) return 0;
    return ul_json_acc_feed_n(&a, "{\"", 2) == 0 && ul_json_acc_feed_n(&a, k, strlen(k)) == 0 &&
           ul_json_acc_feed(&a, '"') == 0;
}

static int compile_object(comp_t *c, const cJSON *js, int32_t idx) {
    const cJSON *ps = cJSON_GetObjectItemCaseSensitive(js, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(js, "required");
    const cJSON *ap = cJSON_GetObjectItemCaseSensitive(js, "additionalProperties");
    if (ap && !cJSON_IsFalse(ap))
        return fail(c, "'additionalProperties' other than false is not supported");
    if (req && (!cJSON_IsArray(req)))
        return fail(c, "'required' must be an array of property names");
    if (!ps && req && cJSON_GetArraySize(req))
        return fail(c, "'required' needs 'properties' listing those names");
    if (!ps && !ap) { /* any object */
        c->nodes[idx].flags |= F_FREE_OBJ;
        return 0;
    }
    if (ps && !cJSON_IsObject(ps)) return fail(c, "'properties' must be an object of schemas");
    int n = cJSON_GetArraySize(ps), i = 0, rc = 0;
    if (n > MAX_PROPS) return fail(c, "an object with more than %d properties", MAX_PROPS);
    tprop_t *t = calloc((size_t)(n ? n : 1), sizeof *t);
    if (!t) return c->nomem = 1, UL_ENOMEM;
    const cJSON *it;
    cJSON_ArrayForEach(it, ps) {
        t[i].key = it->string;
        t[i].len = strlen(it->string);
        if (!key_ok(it->string)) {
            rc = fail(c,
                      "property name '%.60s' is not supported (no quotes, backslashes or "
                      "control characters)",
                      it->string);
            break;
        }
        if ((rc = compile(c, it, &t[i].node))) break;
        i++;
    }
    if (!rc) qsort(t, (size_t)n, sizeof *t, prop_cmp);
    for (i = 1; !rc && i < n; i++)
        if (!prop_cmp(&t[i - 1], &t[i])) rc = fail(c, "property '%.60s' is listed twice", t[i].key);
    cJSON_ArrayForEach(it, req) {
        if (rc) break;
        if (!cJSON_IsString(it)) {
            rc = fail(c, "'required' must be an array of property names");
            break;
        }
        tprop_t key = {.key = it->valuestring, .len = strlen(it->valuestring)};
        tprop_t *p = bsearch(&key, t, (size_t)n, sizeof *t, prop_cmp);
        if (!p)
            rc = fail(c, "required property '%.60s' is not in 'properties'", it->valuestring);
        else
            p->required = 1;
    }
    if (!rc) rc = GROW(c, props, (size_t)n);
    if (!rc) {
        c->nodes[idx].prop0 = (int32_t)c->n_props;
        c->nodes[idx].n_props = n;
        for (i = 0; i < n && !rc; i++) {
            sprop_t *p = &c->props[c->n_props++];
            p->node = t[i].node;
            p->len = (uint32_t)t[i].len;
            rc = blob_add(c, t[i].key, t[i].len, &p->off);
            if (t[i].required) c->nodes[idx].required |= 1ULL << i;
        }
    }
    free(t);
    return rc;
}

static int compile_array(comp_t *c, const cJSON *js, int32_t idx) {
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(js, "items");
    int rc = count_kw(c, js, "minItems", &c->nodes[idx].min_items);
    if (!rc) rc = count_kw(c, js, "maxItems", &c->nodes[idx].max_items);
    if (rc) return rc;
    if (c->nodes[idx].min_items > c->nodes[idx].max_items)
        return fail(c, "'minItems' is greater than 'maxItems'");
    if (!items) {
        c->nodes[idx].flags |= F_FREE_ARR;
        return 0;
    }
    if (!cJSON_IsObject(items)) return fail(c, "'items' must be a schema (an object)");
    int32_t it;
    if ((rc = compile(c, items, &it))) return rc;
    c->nodes[idx].items = it;
    return 0;
}

static int compile_typed(comp_t *c, const cJSON *js, int32_t idx) {
    static const char *const obj_kw[] = {"properties", "required", "additionalProperties"};
    static const char *const arr_kw[] = {"items", "minItems", "maxItems"};
    static const char *const str_kw[] = {"minLength", "maxLength"};
    int has_obj = 0, has_arr = 0, has_str = 0, types = 0, rc;
    for (int i = 0; i < 3; i++) has_obj |= !!cJSON_GetObjectItemCaseSensitive(js, obj_kw[i]);
    for (int i = 0; i < 3; i++) has_arr |= !!cJSON_GetObjectItemCaseSensitive(js, arr_kw[i]);
    for (int i = 0; i < 2; i++) has_str |= !!cJSON_GetObjectItemCaseSensitive(js, str_kw[i]);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(js, "type");
    if (t && (rc = parse_types(c, t, &types))) return rc;
    if (!t)
        types = has_obj || has_arr || has_str
                    ? (has_obj ? T_OBJ : 0) | (has_arr ? T_ARR : 0) | (has_str ? T_STR : 0)
                    : T_ALL;
    if (has_obj && !(types & T_OBJ)) return fail(c, "object keywords on a non-object type");
    if (has_arr && !(types & T_ARR)) return fail(c, "array keywords on a non-array type");
    if (has_str && !(types & T_STR)) return fail(c, "'minLength'/'maxLength' on a non-string type");
    if (types & T_NUM) types &= ~T_INT; /* number includes integer */
    snode_t *n = &c->nodes[idx];
    n->kind = K_TYPED;
    n->types = (uint8_t)types;
    n->classes = (uint8_t)classes_of_types(types);
    if ((rc = count_kw(c, js, "minLength", &c->nodes[idx].min_len))) return rc;
    if ((rc = count_kw(c, js, "maxLength", &c->nodes[idx].max_len))) return rc;
    if (c->nodes[idx].min_len > c->nodes[idx].max_len)
        return fail(c, "'minLength' is greater than 'maxLength'");
    if ((types & T_OBJ) && (rc = compile_object(c, js, idx))) return rc;
    if ((types & T_ARR) && (rc = compile_array(c, js, idx))) return rc;
    return 0;
}

static int compile(comp_t *c, const cJSON *js, int32_t *out) {
    if (cJSON_IsTrue(js)) return fail(c, "a schema 'true' is not supported; use {}");
    if (!cJSON_IsObject(js)) return fail(c, "a schema must be an object");
    if (c->depth >= 64) return fail(c, "the schema nests too deeply");
    int rc = check_keywords(c, js);
    if (rc) return rc;
    const cJSON *all = cJSON_GetObjectItemCaseSensitive(js, "allOf");
    if (all) { /* one schema only: pydantic wraps a $ref with a description so */
        const char *bad = other_keyword(js, (const char *const[]){"allOf", NULL});
        if (bad) return fail(c, "'allOf' cannot be combined with '%.60s'", bad);
        if (!cJSON_IsArray(all) || cJSON_GetArraySize(all) != 1)
            return fail(c, "'allOf' is only supported with exactly one schema");
        c->depth++;
        rc = compile(c, all->child, out);
        c->depth--;
        return rc;
    }
    if (cJSON_GetObjectItemCaseSensitive(js, "$ref")) {
        c->depth++;
        rc = compile_ref(c, js, out);
        c->depth--;
        return rc;
    }
    if ((rc = new_node(c, out))) return rc;
    if (GROW(c, memo, 1)) return UL_ENOMEM;
    c->memo[c->n_memo++] = (memo_t){js, *out};
    c->depth++;
    int types = 0;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(js, "type");
    if (cJSON_GetObjectItemCaseSensitive(js, "anyOf") ||
        cJSON_GetObjectItemCaseSensitive(js, "oneOf"))
        rc = compile_anyof(c, js, *out);
    else if (cJSON_GetObjectItemCaseSensitive(js, "enum") ||
             cJSON_GetObjectItemCaseSensitive(js, "const")) {
        if (t && !(rc = parse_types(c, t, &types)) && (types & T_NUM)) types |= T_INT;
        if (!rc) rc = compile_enum(c, js, *out, types);
    } else
        rc = compile_typed(c, js, *out);
    c->depth--;
    return rc;
}

static uint8_t md_add1(uint8_t v) { return v >= MD_INF - 1 ? MD_INF : (uint8_t)(v + 1); }

/* Levels of nesting the shortest complete value of node n with first-byte class cl needs. */
static uint8_t md_class(const snode_t *nodes, const sprop_t *props, const int32_t *brs,
                        const snode_t *n, int cl) {
    if (n->kind == K_ENUM) return n->litmd;
    if (n->kind == K_ANYOF) {
        uint8_t m = MD_INF;
        for (int32_t i = 0; i < n->n_br; i++) {
            const snode_t *b = &nodes[brs[n->br0 + i]];
            if (b->classes & cl) {
                uint8_t v = md_class(nodes, props, brs, b, cl);
                if (v < m) m = v;
            }
        }
        return m;
    }
    if (cl == C_OBJ) {
        if (n->flags & F_FREE_OBJ) return 1;
        uint8_t m = 0;
        for (int32_t i = 0; i < n->n_props; i++)
            if ((n->required >> i) & 1 && nodes[props[n->prop0 + i].node].md > m)
                m = nodes[props[n->prop0 + i].node].md;
        return md_add1(m);
    }
    if (cl == C_ARR)
        return n->flags & F_FREE_ARR || !n->min_items ? 1 : md_add1(nodes[n->items].md);
    return 0;
}

/* md of every node: a fixpoint (recursion through $ref), from "unreachable" down. */
static void compute_md(comp_t *c) {
    for (int changed = 1; changed;) {
        changed = 0;
        for (size_t i = 0; i < c->n_nodes; i++) {
            snode_t *n = &c->nodes[i];
            uint8_t m = MD_INF;
            for (int cl = 1; cl <= C_NULL; cl <<= 1)
                if (n->classes & cl) {
                    uint8_t v = md_class(c->nodes, c->props, c->brs, n, cl);
                    if (v < m) m = v;
                }
            if (m < n->md) n->md = m, changed = 1;
        }
    }
}

static int pack(comp_t *c, int32_t root, ul_json_schema_t **out) {
    size_t hdr = sizeof(ul_json_schema_t), nodes = c->n_nodes * sizeof(snode_t);
    size_t props = c->n_props * sizeof(sprop_t), lits = c->n_lits * sizeof(slit_t);
    size_t brs = c->n_brs * sizeof(int32_t);
    size_t size = hdr + nodes + props + lits + brs + c->n_blob;
    if (size > UINT32_MAX) return fail(c, "the schema is too large");
    ul_json_schema_t *s = malloc(size);
    if (!s) return c->nomem = 1, UL_ENOMEM;
    s->size = (uint32_t)size;
    s->root = (uint32_t)root;
    s->n_nodes = (uint32_t)c->n_nodes;
    s->props_off = (uint32_t)(hdr + nodes);
    s->lits_off = s->props_off + (uint32_t)props;
    s->br_off = s->lits_off + (uint32_t)lits;
    s->blob_off = s->br_off + (uint32_t)brs;
    char *b = (char *)s;
    if (nodes) memcpy(b + hdr, c->nodes, nodes);
    if (props) memcpy(b + s->props_off, c->props, props);
    if (lits) memcpy(b + s->lits_off, c->lits, lits);
    if (brs) memcpy(b + s->br_off, c->brs, brs);
    if (c->n_blob) memcpy(b + s->blob_off, c->blob, c->n_blob);
    *out = s;
    return 0;
}

int ul_json_schema_compile(const cJSON *schema, ul_json_schema_t **out, char *err, size_t err_len) {
    comp_t c = {.root = schema, .err = err, .err_len = err_len};
    int32_t root = -1;
    *out = NULL;
    if (err_len) err[0] = 0;
    int rc = compile(&c, schema, &root);
    if (!rc) {
        compute_md(&c);
        if (c.nodes[root].md > UL_JSON_MAX_DEPTH)
            rc = fail(&c, "no document of this schema fits in %d levels of nesting",
                      UL_JSON_MAX_DEPTH);
    }
    if (!rc) rc = pack(&c, root, out);
    if (c.nomem) rc = UL_ENOMEM;
    free(c.nodes);
    free(c.props);
    free(c.lits);
    free(c.brs);
    free(c.blob);
    free(c.memo);
    return rc;
}

/* ---- the acceptor --------------------------------------------------------------------- */

/* What is in progress (ul_json_sacc_t.scalar). */
enum { S_NONE, S_KEY, S_STRING, S_NUMBER, S_LIT, S_ENUM, S_FREE };

static const snode_t *node_at(const ul_json_sacc_t *a, int32_t i) { return &NODES(a->s)[i]; }

void ul_json_sacc_init(ul_json_sacc_t *a, const ul_json_schema_t *s) {
    memset(a, 0, offsetof(ul_json_sacc_t, frames));
    a->s = s;
    ul_json_acc_init_any(&a->lex);
}

void ul_json_sacc_copy(ul_json_sacc_t *dst, const ul_json_sacc_t *src) {
    memcpy(dst, src, offsetof(ul_json_sacc_t, frames) + src->n_frames * sizeof *src->frames);
}

static ul_json_sframe_t *top(ul_json_sacc_t *a) {
    return a->n_frames ? &a->frames[a->n_frames - 1] : NULL;
}

/* Property i of the top object may still be given: not yet, and its value fits. */
static int prop_ok(ul_json_sacc_t *a, int32_t i) {
    ul_json_sframe_t *f = top(a);
    const snode_t *o = node_at(a, f->node);
    if ((f->seen >> (i - o->prop0)) & 1) return 0;
    return a->lex.depth + node_at(a, PROPS(a->s)[i].node)->md <= UL_JSON_MAX_DEPTH;
}

static int some_prop_ok(ul_json_sacc_t *a, uint32_t lo, uint32_t hi) {
    for (uint32_t i = lo; i < hi; i++)
        if (prop_ok(a, (int32_t)i)) return 1;
    return 0;
}

/* Narrows [lo, hi) of a sorted table (key/literal i at blob + off[i], len[i]) to those whose
 * byte at pos is c; -1 when none. */
static int narrow(ul_json_sacc_t *a, const char *blob, const void *tab, size_t stride, uint8_t c) {
    uint32_t lo = a->hi, hi = a->lo;
    for (uint32_t i = a->lo; i < a->hi; i++) {
        const slit_t *l = (const slit_t *)((const char *)tab + i * stride);
        if (l->len > a->pos && (uint8_t)blob[l->off + a->pos] == c) {
            if (i < lo) lo = i;
            hi = i + 1;
        }
    }
    if (lo >= hi) return -1;
    a->lo = lo;
    a->hi = hi;
    a->pos++;
    return 0;
}

static int lit_complete(const ul_json_sacc_t *a) { return LITS(a->s)[a->lo].len == a->pos; }

/* A value of node n starts with byte c at depth d (the depth before c). */
static int value_start(ul_json_sacc_t *a, int32_t n, uint8_t c, uint8_t d) {
    int cl = class_of_byte(c);
    const snode_t *nd = node_at(a, n);
    while (nd->kind == K_ANYOF) {
        int32_t i = 0;
        while (i < nd->n_br && !(node_at(a, BRS(a->s)[nd->br0 + i])->classes & cl)) i++;
        if (i == nd->n_br) return -1;
        n = BRS(a->s)[nd->br0 + i];
        nd = node_at(a, n);
    }
    if (!(nd->classes & cl)) return -1;
    a->node = n;
    a->d0 = d;
    if (nd->kind == K_ENUM) {
        if (d + nd->litmd > UL_JSON_MAX_DEPTH) return -1;
        a->scalar = S_ENUM;
        a->lo = (uint32_t)nd->lit0;
        a->hi = (uint32_t)(nd->lit0 + nd->n_lits);
        a->pos = 0;
        return narrow(a, BLOB(a->s), LITS(a->s), sizeof(slit_t), c);
    }
    if (d + md_class(NODES(a->s), PROPS(a->s), BRS(a->s), nd, cl) > UL_JSON_MAX_DEPTH) return -1;
    switch (cl) {
    case C_OBJ:
    case C_ARR:
        if (nd->flags & (cl == C_OBJ ? F_FREE_OBJ : F_FREE_ARR)) {
            a->scalar = S_FREE;
            return 0;
        }
        a->frames[a->n_frames++] = (ul_json_sframe_t){.node = n, .prop = cl == C_OBJ ? -2 : -1};
        a->scalar = S_NONE;
        return 0;
    case C_STR:
        a->scalar = S_STRING;
        a->count = 0;
        return 0;
    case C_NUM:
        a->scalar = S_NUMBER;
        a->integer = !(nd->types & T_NUM);
        return 0;
    default:
        a->scalar = S_LIT;
        return 0;
    }
}

static int close_container(ul_json_sacc_t *a, uint8_t c) {
    ul_json_sframe_t *f = top(a);
    const snode_t *n = node_at(a, f->node);
    if (c == ']' && f->count < n->min_items) return -1;
    if (c == '}' && (n->required & ~f->seen)) return -1;
    a->n_frames--;
    return 0;
}

/* The value of the top array (or the current property of the top object) starts. */
static int member_start(ul_json_sacc_t *a, uint8_t c) {
    ul_json_sframe_t *f = top(a);
    const snode_t *n = node_at(a, f->node);
    if (f->prop == -1) { /* an array */
        if (f->count >= n->max_items) return -1;
        f->count++;
        return value_start(a, n->items, c, (uint8_t)a->n_frames);
    }
    /* in frames mode every open container has a frame: n_frames is the depth before c */
    return value_start(a, PROPS(a->s)[f->prop].node, c, (uint8_t)a->n_frames);
}

/* A byte of structure (b: the syntax acceptor's mode before it); frames mode. */
static int structural(ul_json_sacc_t *a, int b, uint8_t c) {
    if (c == ' ' || c == '\n' || c == '\t' || c == '\r') return 0;
    ul_json_sframe_t *f = top(a);
    const snode_t *n = f ? node_at(a, f->node) : NULL;
    switch (b) {
    case UL_JSON_M_TOP:
        return value_start(a, (int32_t)a->s->root, c, 0);
    case UL_JSON_M_VALUE_OR_CLOSE:
        if (c == ']') return close_container(a, c);
        /* fall through */
    case UL_JSON_M_VALUE:
        return member_start(a, c);
    case UL_JSON_M_KEY_OR_CLOSE:
        if (c == '}') return close_container(a, c);
        /* fall through */
    case UL_JSON_M_KEY:
        a->scalar = S_KEY;
        a->lo = (uint32_t)n->prop0;
        a->hi = (uint32_t)(n->prop0 + n->n_props);
        a->pos = 0;
        return some_prop_ok(a, a->lo, a->hi) ? 0 : -1;
    case UL_JSON_M_COLON:
        return 0;
    case UL_JSON_M_AFTER:
        if (c == ']' || c == '}') return close_container(a, c);
        if (f->prop == -1) /* ',' in an array */
            return f->count < n->max_items ? 0 : -1;
        return some_prop_ok(a, (uint32_t)n->prop0, (uint32_t)(n->prop0 + n->n_props)) ? 0 : -1;
    default:
        return -1;
    }
}

/* A byte of a key string (before: the syntax state before it). */
static int key_byte(ul_json_sacc_t *a, uint8_t c) {
    if (a->lex.mode == UL_JSON_M_COLON) { /* the closing quote */
        const sprop_t *p = &PROPS(a->s)[a->lo];
        if (p->len != a->pos || !prop_ok(a, (int32_t)a->lo)) return -1;
        ul_json_sframe_t *f = top(a);
        f->seen |= 1ULL << (a->lo - (uint32_t)node_at(a, f->node)->prop0);
        f->prop = (int32_t)a->lo;
        a->scalar = S_NONE;
        return 0;
    }
    if (c == '\\') return -1;
    if (narrow(a, BLOB(a->s), PROPS(a->s), sizeof(sprop_t), c)) return -1;
    return some_prop_ok(a, a->lo, a->hi) ? 0 : -1;
}

/* A byte inside a string value: code points counted against min/maxLength. */
static int string_byte(ul_json_sacc_t *a, const ul_json_acc_t *before, uint8_t c) {
    const snode_t *n = node_at(a, a->node);
    if (before->sub || before->utf8 || before->surr) return 0; /* inside an escape or char */
    if (c == '"') return a->count >= n->min_len ? 0 : -1;
    if (a->count >= n->max_len) return -1;
    a->count++;
    return 0;
}

/* Did the value in progress (started at depth d0) just end? */
static int ended(const ul_json_sacc_t *a) {
    return a->lex.depth == a->d0 &&
           (a->lex.mode == UL_JSON_M_AFTER || a->lex.mode == UL_JSON_M_DONE);
}

int ul_json_sacc_feed(ul_json_sacc_t *a, uint8_t c) {
    ul_json_acc_t before = a->lex;
    if (ul_json_acc_feed(&a->lex, c)) return -1;
    int b = before.mode;
    if (a->scalar != S_NONE && a->scalar != S_KEY && b == UL_JSON_M_NUMBER &&
        before.depth == a->d0 && a->lex.mode != UL_JSON_M_NUMBER) {
        /* The number value ended before c; c is structure (the syntax took it so). */
        if (a->scalar == S_ENUM && !lit_complete(a)) return -1;
        a->scalar = S_NONE;
        b = UL_JSON_M_AFTER;
    }
    int rc = 0;
    switch (a->scalar) {
    case S_NONE:
        rc = structural(a, b, c);
        if (rc || a->scalar == S_NONE || a->scalar == S_KEY) return rc;
        break; /* a scalar started: a one-byte value cannot have ended yet */
    case S_KEY:
        return key_byte(a, c);
    case S_ENUM:
        rc = narrow(a, BLOB(a->s), LITS(a->s), sizeof(slit_t), c);
        break;
    case S_STRING:
        rc = string_byte(a, &before, c);
        break;
    case S_NUMBER:
        if (a->integer && (c == '.' || c == 'e' || c == 'E')) return -1;
        break;
    default: /* S_LIT, S_FREE: the syntax acceptor decides */
        break;
    }
    if (rc) return rc;
    if (a->scalar != S_NONE && ended(a)) {
        if (a->scalar == S_ENUM && !lit_complete(a)) return -1;
        a->scalar = S_NONE;
    }
    return 0;
}

int ul_json_sacc_feed_n(ul_json_sacc_t *a, const char *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (ul_json_sacc_feed(a, (uint8_t)p[i])) return -1;
    return 0;
}

int ul_json_sacc_done(const ul_json_sacc_t *a) {
    if (!ul_json_acc_done(&a->lex)) return 0;
    return a->scalar != S_ENUM || lit_complete(a);
}

/* ---- the filter ----------------------------------------------------------------------- */

static int bit(const uint32_t *set, uint8_t c) { return set[c >> 5] >> (c & 31) & 1; }

/* The bytes that may come next after acc (fed prefix first, if any), as a bitmap. */
static void next_bytes(const ul_json_sacc_t *acc, int prefix, uint32_t *set) {
    ul_json_sacc_t t, p;
    memset(set, 0, 8 * sizeof *set);
    ul_json_sacc_copy(&p, acc);
    if (prefix >= 0 && ul_json_sacc_feed(&p, (uint8_t)prefix)) return;
    for (int c = 0; c < 256; c++) {
        ul_json_sacc_copy(&t, &p);
        if (ul_json_sacc_feed(&t, (uint8_t)c) == 0) set[c >> 5] |= 1u << (c & 31);
    }
}

static int sfilter_allows(const ul_token_filter_t *base, int32_t id) {
    /* The filter is never const where it lives (ul_json_schema_filter_init's caller owns it
     * and only the sampling thread calls this): the byte tables are a cache of acc. */
    ul_json_schema_filter_t *f = (ul_json_schema_filter_t *)(uintptr_t)base;
    if (id < 0 || id >= ul_json_vocab_size(f->vocab)) return 0;
    if (ul_json_vocab_is_eog(f->vocab, id)) return ul_json_sacc_done(&f->acc);
    uint32_t n;
    const uint8_t *p = (const uint8_t *)ul_json_vocab_piece(f->vocab, id, &n);
    if (!n) return 0;
    if (f->calls < 3 && ++f->calls == 2) { /* a mask: worth the tables */
        next_bytes(&f->acc, -1, f->first_ok);
        next_bytes(&f->acc, ' ', f->after_ws[0]);
        next_bytes(&f->acc, '\n', f->after_ws[1]);
        f->calls = 3;
    }
    if (f->calls == 3) {
        if (!bit(f->first_ok, p[0])) return 0;
        if (n == 1) return 1;
        if ((p[0] == ' ' || p[0] == '\n') && !bit(f->after_ws[p[0] == '\n'], p[1])) return 0;
        if (n == 2 && (p[0] == ' ' || p[0] == '\n')) return 1;
    }
    ul_json_sacc_t a;
    ul_json_sacc_copy(&a, &f->acc);
    return ul_json_sacc_feed_n(&a, (const char *)p, n) == 0;
}

static void sfilter_accept(ul_token_filter_t *base, int32_t id) {
    ul_json_schema_filter_t *f = (ul_json_schema_filter_t *)base;
    f->calls = 0;
    if (id < 0 || id >= ul_json_vocab_size(f->vocab) || ul_json_vocab_is_eog(f->vocab, id)) return;
    uint32_t n;
    const char *p = ul_json_vocab_piece(f->vocab, id, &n);
    (void)ul_json_sacc_feed_n(&f->acc, p, n);
}

void ul_json_schema_filter_init(ul_json_schema_filter_t *f, const ul_json_vocab_t *v,
                                const ul_json_schema_t *s) {
    f->base.allows = sfilter_allows;
    f->base.accept = sfilter_accept;
    f->vocab = v;
    f->calls = 0;
    ul_json_sacc_init(&f->acc, s);
}
