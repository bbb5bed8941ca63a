/* Structured output on the wire: the request fields that constrain the output to a grammar
 * (engine/grammar.h), each compiled or answered with a 400 naming what did not compile.
 *
 *   response_format  OpenAI: {"type":"text"}, {"type":"json_object"} (one JSON object; with
 *                    a "schema" member, as llama-server takes it, that schema), or
 *                    {"type":"json_schema","json_schema":{"name","schema","strict"}}.
 *   grammar          llama-server: GBNF text.
 *   json_schema      llama-server: a JSON Schema.
 *   structured_outputs  vLLM: {"json": schema (or its text)} | {"regex": R} |
 *                    {"choice": [strings]} | {"grammar": GBNF} | {"json_object": true}.
 *   guided_json, guided_regex, guided_choice, guided_grammar: vLLM's older names.
 * At most one of them. Compiled grammars are cached per server by their GBNF text (the
 * SDKs send the same schema request after request), so the per-state token caches the
 * grammar fills on the backend threads (engine/grammar.h) serve later requests too. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/gen.h"
#include "engine/grammar.h"
#include "engine/json_gbnf.h"
#include "uvllm/err.h"

#define CACHE_SLOTS 16

typedef struct {
    char *text;
    size_t len;
    uint64_t hash, used;
    ul_grammar_t *g;
} gslot_t;

struct ul_api_gcache_s {
    gslot_t slot[CACHE_SLOTS];
    uint64_t clock;
};

static int codec_piece(void *ctx, int32_t id, char *out, int cap) {
    const ul_codec_t *c = ctx;
    return c->token_piece ? c->token_piece(c, id, 0, 0, out, cap) : 0;
}

static int codec_eog(void *ctx, int32_t id) {
    const ul_codec_t *c = ctx;
    return id == c->eos_id || (c->is_eog && c->vocab && c->is_eog((void *)c->vocab, id));
}

void ul_api_structured_free(ul_api_t *a) {
    if (a->gcache)
        for (int i = 0; i < CACHE_SLOTS; i++) {
            free(a->gcache->slot[i].text);
            ul_grammar_unref(a->gcache->slot[i].g);
        }
    free(a->gcache);
    a->gcache = NULL;
    ul_gvocab_free(a->gvocab);
    a->gvocab = NULL;
}

static uint64_t fnv(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

void ul_api_params_release(ul_api_params_t *p) {
    if (p->grammar_ref && p->grammar) ul_grammar_unref(p->grammar);
    p->grammar = NULL;
    p->grammar_ref = 0;
}

/* Requests parsed on jobs' threads (job.c) and on the loop share the cache. */
static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;

/* The cached grammar of src, or NULL; the cache (and gvocab) made on first use. Locked. */
static int lookup(ul_api_t *a, const char *src, size_t len, uint64_t h, ul_grammar_t **out) {
    if (!a->gvocab &&
        !(a->gvocab = ul_gvocab_new(a->codec.n_vocab, &a->codec, codec_piece, codec_eog)))
        return UL_ENOMEM;
    if (!a->gcache && !(a->gcache = calloc(1, sizeof *a->gcache))) return UL_ENOMEM;
    struct ul_api_gcache_s *c = a->gcache;
    *out = NULL;
    for (int i = 0; i < CACHE_SLOTS; i++) {
        gslot_t *s = &c->slot[i];
        if (s->g && s->hash == h && s->len == len && !memcmp(s->text, src, len)) {
            s->used = ++c->clock;
            *out = s->g;
            break;
        }
    }
    return 0;
}

/* g into the least recently used slot (its text copied). Locked. */
static int insert(struct ul_api_gcache_s *c, const char *src, size_t len, uint64_t h,
                  ul_grammar_t *g) {
    char *copy = malloc(len + 1);
    if (!copy) return UL_ENOMEM;
    memcpy(copy, src, len);
    gslot_t *lru = &c->slot[0];
    for (int i = 1; i < CACHE_SLOTS; i++)
        if (c->slot[i].used < lru->used) lru = &c->slot[i];
    free(lru->text);
    ul_grammar_unref(lru->g); /* generations using it hold their own reference */
    *lru = (gslot_t){.text = copy, .len = len, .hash = h, .used = ++c->clock, .g = g};
    return 0;
}

/* The lookup and the insertion hold the lock; the compilation (which grows with the
 * client's schema) does not, so the loop never waits for a job's compilation. Two
 * threads compiling the same text both insert it: harmless. */
int ul_api_grammar_get(ul_api_t *a, const char *src, size_t len, ul_grammar_t **out, char *err,
                       size_t err_len) {
    uint64_t h = fnv(src, len);
    int own = ul_api_job_thread(); /* the caller gets a reference of its own */
    pthread_mutex_lock(&cache_mu);
    int rc = lookup(a, src, len, h, out);
    if (!rc && *out && own) ul_grammar_ref(*out);
    const ul_gvocab_t *v = a->gvocab;
    pthread_mutex_unlock(&cache_mu);
    if (rc || *out) return rc;
    ul_grammar_t *g = NULL;
    if ((rc = ul_grammar_compile(v, src, len, &g, err, err_len))) return rc;
    pthread_mutex_lock(&cache_mu);
    rc = insert(a->gcache, src, len, h, g);
    if (!rc && own) ul_grammar_ref(g);
    pthread_mutex_unlock(&cache_mu);
    if (rc) {
        ul_grammar_unref(g);
        return rc;
    }
    *out = g;
    return 0;
}

int ul_api_body_may_constrain(const char *body, size_t len) {
    static const char *const keys[] = {"\"response_format\"",
                                       "\"grammar\"",
                                       "\"json_schema\"",
                                       "\"structured_outputs\"",
                                       "\"guided_",
                                       "\"tools\"",
                                       "\\u"}; /* a key may be spelled with escapes */
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        if (memmem(body, len, keys[i], strlen(keys[i]))) return 1;
    return 0;
}

static const cJSON *field(const cJSON *root, const char *name) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, name);
    return it && !cJSON_IsNull(it) ? it : NULL;
}

static int oom(ul_api_bad_t *bad, const char *param) {
    bad->status = 503;
    bad->type = "server_error";
    return ul_api_bad(bad, param, "out of memory");
}

/* Compiles GBNF text into p->grammar; errors name param and what (e.g. "'grammar'"). */
static int use_gbnf(ul_api_t *a, const char *src, size_t len, const char *param, const char *what,
                    ul_api_params_t *p, ul_api_bad_t *bad) {
    char err[200];
    int rc = ul_api_grammar_get(a, src, len, &p->grammar, err, sizeof err);
    if (rc == UL_EINVAL) return ul_api_bad(bad, param, "%s does not compile: %s", what, err);
    return rc ? oom(bad, param) : 0;
}

static int use_schema(ul_api_t *a, const cJSON *schema, const char *param, const char *what,
                      ul_api_params_t *p, ul_api_bad_t *bad) {
    cJSON *parsed = NULL;
    if (cJSON_IsString(schema)) /* vLLM takes the schema's text too */
        schema = parsed = cJSON_Parse(schema->valuestring);
    if (!cJSON_IsObject(schema) && !cJSON_IsTrue(schema)) {
        cJSON_Delete(parsed);
        return ul_api_bad(bad, param, "%s must be a JSON Schema object", what);
    }
    ul_buf_t b = {0};
    char err[200];
    int rc = ul_json_schema_gbnf(schema, &b, err, sizeof err);
    cJSON_Delete(parsed);
    if (rc == UL_EINVAL)
        rc = ul_api_bad(bad, param, "%s %s", what, err);
    else if (rc)
        rc = oom(bad, param);
    else
        rc = use_gbnf(a, b.p, b.len, param, what, p, bad);
    ul_buf_free(&b);
    if (!rc) p->json_object = 1;
    return rc;
}

static int use_regex(ul_api_t *a, const char *re, const char *param, ul_api_params_t *p,
                     ul_api_bad_t *bad) {
    ul_buf_t b = {0};
    char err[200];
    int rc = ul_buf_puts(&b, "root ::= ") ? UL_ENOMEM : 0;
    if (!rc) rc = ul_regex_gbnf(re, strlen(re), 0, &b, err, sizeof err);
    if (!rc) rc = ul_buf_puts(&b, "\n") ? UL_ENOMEM : 0;
    if (rc == UL_EINVAL)
        rc = ul_api_bad(bad, param, "'%s' regex: %s", param, err);
    else if (rc)
        rc = oom(bad, param);
    else
        rc = use_gbnf(a, b.p, b.len, param, "the regex", p, bad);
    ul_buf_free(&b);
    return rc;
}

static int use_choice(ul_api_t *a, const cJSON *ch, const char *param, ul_api_params_t *p,
                      ul_api_bad_t *bad) {
    if (!cJSON_IsArray(ch) || !cJSON_GetArraySize(ch))
        return ul_api_bad(bad, param, "'choice' must be a non-empty array of strings");
    ul_buf_t b = {0};
    int rc = ul_buf_puts(&b, "root ::= ") ? UL_ENOMEM : 0, i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, ch) {
        if (rc) break;
        if (!cJSON_IsString(it) || !it->valuestring[0]) {
            rc = ul_api_bad(bad, param, "'choice' must be a non-empty array of non-empty strings");
            break;
        }
        if (i++ && ul_buf_puts(&b, " | ")) rc = UL_ENOMEM;
        if (!rc) rc = ul_gbnf_literal(&b, it->valuestring, strlen(it->valuestring));
    }
    if (!rc) rc = ul_buf_puts(&b, "\n") ? UL_ENOMEM : 0;
    if (rc == UL_ENOMEM) rc = oom(bad, param);
    if (!rc) rc = use_gbnf(a, b.p, b.len, param, "the choice", p, bad);
    ul_buf_free(&b);
    return rc;
}

static int parse_response_format(ul_api_t *a, const cJSON *rf, ul_api_params_t *p,
                                 ul_api_bad_t *bad) {
    const char *P = "response_format";
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(rf, "type");
    if (!cJSON_IsObject(rf) || !cJSON_IsString(t))
        return ul_api_bad(bad, P, "'response_format' must be an object with a type");
    if (!strcmp(t->valuestring, "text")) return 0;
    if (!strcmp(t->valuestring, "json_object")) {
        if (field(rf, "schema"))
            return use_schema(a, field(rf, "schema"), P, "'response_format' schema", p, bad);
        int rc =
            use_gbnf(a, ul_json_gbnf_object, strlen(ul_json_gbnf_object), P, "JSON mode", p, bad);
        if (!rc) p->json_object = 1;
        return rc;
    }
    if (strcmp(t->valuestring, "json_schema"))
        return ul_api_bad(bad, P,
                          "'response_format' type '%.40s' is not supported; use \"text\", "
                          "\"json_object\" or \"json_schema\"",
                          t->valuestring);
    const cJSON *js = cJSON_GetObjectItemCaseSensitive(rf, "json_schema");
    if (!cJSON_IsObject(js))
        return ul_api_bad(bad, P,
                          "'response_format' type json_schema needs a 'json_schema' object");
    const cJSON *name = field(js, "name"), *strict = field(js, "strict");
    const cJSON *desc = field(js, "description"), *schema = field(js, "schema");
    if ((name && !cJSON_IsString(name)) || (desc && !cJSON_IsString(desc)) ||
        (strict && !cJSON_IsBool(strict)))
        return ul_api_bad(bad, P,
                          "'response_format' json_schema: 'name' and 'description' must be "
                          "strings, 'strict' a boolean");
    if (!schema) return ul_api_bad(bad, P, "'response_format' json_schema needs a 'schema' object");
    if (!cJSON_IsObject(schema))
        return ul_api_bad(bad, P, "'response_format' json_schema 'schema' must be an object");
    return use_schema(a, schema, P, "'response_format' json_schema", p, bad);
}

/* vLLM's structured_outputs object (or one guided_* field, given as key/value). */
static int parse_vllm(ul_api_t *a, const char *param, const char *kind, const cJSON *v,
                      ul_api_params_t *p, ul_api_bad_t *bad) {
    if (!strcmp(kind, "json")) return use_schema(a, v, param, "'json'", p, bad);
    if (!strcmp(kind, "regex")) {
        if (!cJSON_IsString(v)) return ul_api_bad(bad, param, "'regex' must be a string");
        return use_regex(a, v->valuestring, param, p, bad);
    }
    if (!strcmp(kind, "choice")) return use_choice(a, v, param, p, bad);
    if (!strcmp(kind, "grammar")) {
        if (!cJSON_IsString(v)) return ul_api_bad(bad, param, "'grammar' must be GBNF text");
        return use_gbnf(a, v->valuestring, strlen(v->valuestring), param, "the grammar", p, bad);
    }
    if (!strcmp(kind, "json_object")) {
        if (!cJSON_IsTrue(v)) return 0;
        int rc = use_gbnf(a, ul_json_gbnf_object, strlen(ul_json_gbnf_object), param, "JSON mode",
                          p, bad);
        if (!rc) p->json_object = 1;
        return rc;
    }
    return ul_api_bad(bad, param, "'%.40s' is not supported in '%s' (json, regex, choice, grammar)",
                      kind, param);
}

int ul_api_structured_parse(ul_api_t *a, const cJSON *root, ul_api_params_t *p, ul_api_bad_t *bad) {
    static const char *const names[] = {"response_format",    "grammar",       "json_schema",
                                        "structured_outputs", "guided_json",   "guided_regex",
                                        "guided_choice",      "guided_grammar"};
    const char *given = NULL;
    const cJSON *rf = field(root, "response_format");
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        const cJSON *it = field(root, names[i]);
        if (!it || (i == 0 && cJSON_IsObject(it) &&
                    cJSON_IsString(cJSON_GetObjectItemCaseSensitive(it, "type")) &&
                    !strcmp(cJSON_GetObjectItemCaseSensitive(it, "type")->valuestring, "text")))
            continue;
        if (given)
            return ul_api_bad(bad, names[i], "'%s' cannot be combined with '%s'", names[i], given);
        given = names[i];
    }
    (void)rf;
    if (!given) return 0;
    if (!a->codec.vocab || !a->codec.token_piece)
        return ul_api_bad(bad, given,
                          "'%s' needs a model vocabulary (this server runs without one)", given);
    const cJSON *v = field(root, given);
    if (!strcmp(given, "response_format")) return parse_response_format(a, v, p, bad);
    if (!strcmp(given, "grammar")) {
        if (!cJSON_IsString(v)) return ul_api_bad(bad, given, "'grammar' must be GBNF text");
        return use_gbnf(a, v->valuestring, strlen(v->valuestring), given, "'grammar'", p, bad);
    }
    if (!strcmp(given, "json_schema")) return use_schema(a, v, given, "'json_schema'", p, bad);
    if (!strcmp(given, "structured_outputs")) {
        if (!cJSON_IsObject(v) || cJSON_GetArraySize(v) != 1)
            return ul_api_bad(bad, given,
                              "'structured_outputs' must be an object with one of json, regex, "
                              "choice, grammar");
        return parse_vllm(a, given, v->child->string, v->child, p, bad);
    }
    return parse_vllm(a, given, given + 7, v, p, bad); /* guided_X */
}
