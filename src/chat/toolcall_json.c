/* JSON side of the tool-call parser: validating and minifying argument text, building
 * argument objects from key/value pairs, and the body parsers of the formats whose calls
 * are JSON ({"name", "arguments"} objects or lists of them, Mistral's NAME[ARGS]{...},
 * functionary's NAME>{...}, Apertus' [{"NAME": {...}}]). cJSON validates; argument text
 * that was JSON in the output is passed on minified rather than re-printed, so numbers keep
 * their exact spelling. */
#include <cjson/cJSON.h>
#include <string.h>

#include "chat/toolcall_impl.h"
#include "uvllm/err.h"

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

void ul_tc_trim(const char **s, size_t *n) {
    while (*n && is_ws((*s)[0])) (*s)++, (*n)--;
    while (*n && is_ws((*s)[*n - 1])) (*n)--;
}

const char *ul_tc_find(const char *s, size_t n, const char *needle) {
    size_t m = strlen(needle);
    if (!m || m > n) return NULL;
    return memmem(s, n, needle, m);
}

int ul_tc_calls_add(ul_tc_calls_t *c, const char *name, size_t nlen, const char *args,
                    size_t alen) {
    ul_tc_trim(&name, &nlen);
    if (!nlen || nlen > 256) return UL_EFORMAT;
    for (size_t i = 0; i < nlen; i++)
        if (!name[i] || is_ws(name[i]) || name[i] == '<' || name[i] == '>') return UL_EFORMAT;
    int rc = ul_buf_reserve(&c->b, nlen + alen + 2);
    if (rc) return rc;
    ul_buf_append(&c->b, name, nlen);
    ul_buf_append(&c->b, "", 1);
    ul_buf_append(&c->b, args, alen);
    ul_buf_append(&c->b, "", 1);
    c->n++;
    return 0;
}

/* Parses exactly one value from s[0..n); NULL when invalid or followed by non-space. */
static cJSON *parse_exact(const char *s, size_t n) {
    ul_tc_trim(&s, &n);
    if (!n) return NULL;
    const char *end = NULL;
    cJSON *v = cJSON_ParseWithLengthOpts(s, n, &end, 0);
    if (!v) return NULL;
    size_t used = (size_t)(end - s);
    if (used > n) used = n; /* cJSON's end may point one past a NUL it assumed */
    const char *rest = s + used;
    size_t rn = n - used;
    ul_tc_trim(&rest, &rn);
    if (rn) {
        cJSON_Delete(v);
        return NULL;
    }
    return v;
}

int ul_tc_json_valid(const char *s, size_t n) {
    cJSON *v = parse_exact(s, n);
    cJSON_Delete(v);
    return v != NULL;
}

/* Copies valid JSON without the whitespace between tokens; raw control bytes inside strings
 * (cJSON accepts them, strict parsers do not) become \u00XX escapes. */
static int minify_valid(const char *s, size_t n, ul_buf_t *out) {
    static const char hex[] = "0123456789abcdef";
    int in_str = 0, esc = 0, rc = ul_buf_reserve(out, n);
    for (size_t i = 0; i < n && !rc; i++) {
        unsigned char c = (unsigned char)s[i];
        if (in_str && c < 0x20) {
            char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            esc = 0;
            if (!(rc = ul_buf_append(out, e, 6))) rc = ul_buf_reserve(out, n - i);
            continue;
        }
        if (in_str) {
            if (esc)
                esc = 0;
            else if (c == '\\')
                esc = 1;
            else if (c == '"')
                in_str = 0;
        } else if (c == '"') {
            in_str = 1;
        } else if (c <= 0x20) { /* cJSON skips every control byte as whitespace */
            continue;
        }
        out->p[out->len++] = (char)c;
    }
    return rc;
}

int ul_tc_json_minify(const char *s, size_t n, ul_buf_t *out) {
    if (!ul_tc_json_valid(s, n)) return UL_EFORMAT;
    return minify_valid(s, n, out);
}

int ul_tc_args_member(ul_buf_t *obj, int first, const char *k, size_t kn, const char *v, size_t vn,
                      int as_string) {
    int rc = first ? 0 : ul_buf_append(obj, ",", 1);
    if (!rc) rc = ul_buf_append(obj, "\"", 1);
    if (!rc) rc = ul_buf_append_json_str(obj, k, kn);
    if (!rc) rc = ul_buf_append(obj, "\":", 2);
    if (rc) return rc;
    if (!as_string && ul_tc_json_valid(v, vn)) return minify_valid(v, vn, obj);
    rc = ul_buf_append(obj, "\"", 1);
    if (!rc) rc = ul_buf_append_json_str(obj, v, vn);
    if (!rc) rc = ul_buf_append(obj, "\"", 1);
    return rc;
}

int ul_tc_calls_add_json(ul_tc_calls_t *c, const char *name, size_t nlen, const char *args,
                         size_t alen) {
    ul_tc_trim(&args, &alen);
    if (!alen || args[0] != '{') return UL_EFORMAT;
    ul_buf_t tmp = {0};
    int rc = ul_tc_json_minify(args, alen, &tmp);
    if (!rc) rc = ul_tc_calls_add(c, name, nlen, tmp.p, tmp.len);
    ul_buf_free(&tmp);
    return rc;
}

/* Arguments given as an object, or as a string holding an object's JSON text. */
static int add_cjson_args(ul_tc_calls_t *c, const char *name, const cJSON *args) {
    if (!args) return ul_tc_calls_add(c, name, strlen(name), "{}", 2);
    if (cJSON_IsString(args))
        return ul_tc_calls_add_json(c, name, strlen(name), args->valuestring,
                                    strlen(args->valuestring));
    if (!cJSON_IsObject(args)) return UL_EFORMAT;
    char *txt = cJSON_PrintUnformatted(args);
    if (!txt) return UL_ENOMEM;
    int rc = ul_tc_calls_add(c, name, strlen(name), txt, strlen(txt));
    cJSON_free(txt);
    return rc;
}

static const cJSON *get(const cJSON *o, const char *k) {
    return cJSON_GetObjectItemCaseSensitive(o, k);
}

/* {"name", "arguments"|"parameters"}, {"tool_name", "parameters"} (Command R) or
 * {"function": {"name", "arguments"}}. */
static int add_call_obj(ul_tc_calls_t *c, const cJSON *o) {
    if (!cJSON_IsObject(o)) return UL_EFORMAT;
    const cJSON *fn = get(o, "function");
    if (cJSON_IsObject(fn)) o = fn;
    const cJSON *name = get(o, "name");
    if (!name) name = get(o, "tool_name");
    if (!cJSON_IsString(name)) return UL_EFORMAT;
    const cJSON *args = get(o, "arguments");
    if (!args) args = get(o, "parameters");
    return add_cjson_args(c, name->valuestring, args);
}

static int add_calls_value(ul_tc_calls_t *c, const cJSON *v) {
    if (!cJSON_IsArray(v)) return add_call_obj(c, v);
    if (!cJSON_GetArraySize(v)) return UL_EFORMAT;
    const cJSON *it;
    cJSON_ArrayForEach(it, v) {
        int rc = add_call_obj(c, it);
        if (rc) return rc;
    }
    return 0;
}

int ul_tc_parse_json_calls(const char *body, size_t n, ul_tc_calls_t *out) {
    cJSON *v = parse_exact(body, n);
    if (!v) return UL_EFORMAT;
    int rc = add_calls_value(out, v);
    cJSON_Delete(v);
    return rc;
}

int ul_tc_parse_hermes(const char *body, size_t n, ul_tc_calls_t *out) {
    const char *s = body;
    size_t m = n;
    ul_tc_trim(&s, &m);
    if (m && s[0] == '<') return ul_tc_parse_xml_function(s, m, out); /* Qwen3-Coder style */
    if (m && s[0] == '{') return ul_tc_parse_json_calls(s, m, out);
    return UL_EFORMAT;
}

/* <|python_tag|>: a JSON call (Llama 3.1: {"name", "parameters"}, several separated by ';')
 * or, failing that, code for the built-in "python" tool. */
int ul_tc_parse_python_tag(const char *body, size_t n, ul_tc_calls_t *out) {
    const char *s = body;
    size_t m = n;
    ul_tc_trim(&s, &m);
    if (!m) return UL_EFORMAT;
    if (s[0] == '{') {
        int rc = ul_tc_parse_json_calls(s, m, out);
        if (rc != UL_EFORMAT) return rc;
    }
    ul_buf_t a = {0};
    int rc = ul_buf_append(&a, "{", 1);
    if (!rc) rc = ul_tc_args_member(&a, 1, "code", 4, s, m, 1);
    if (!rc) rc = ul_buf_append(&a, "}", 1);
    if (!rc) rc = ul_tc_calls_add(out, "python", 6, a.p, a.len);
    ul_buf_free(&a);
    return rc;
}

/* NAME[ARGS]{...} (Mistral-Small-3.2, Devstral), or the older [{"name", "arguments"}]. */
int ul_tc_parse_mistral_args(const char *body, size_t n, ul_tc_calls_t *out) {
    const char *s = body;
    size_t m = n;
    ul_tc_trim(&s, &m);
    if (m && (s[0] == '[' || s[0] == '{')) return ul_tc_parse_json_calls(s, m, out);
    const char *a = ul_tc_find(s, m, "[ARGS]");
    if (!a) return UL_EFORMAT;
    size_t off = (size_t)(a - s) + 6;
    return ul_tc_calls_add_json(out, s, (size_t)(a - s), s + off, m - off);
}

/* Body of <function=NAME>{...}</function>: "NAME>{...}". */
int ul_tc_parse_functionary(const char *body, size_t n, ul_tc_calls_t *out) {
    const char *gt = memchr(body, '>', n);
    if (!gt) return UL_EFORMAT;
    size_t off = (size_t)(gt - body) + 1;
    return ul_tc_calls_add_json(out, body, (size_t)(gt - body), body + off, n - off);
}

/* [{"NAME": {...}}, ...] (Apertus). */
int ul_tc_parse_apertus(const char *body, size_t n, ul_tc_calls_t *out) {
    cJSON *v = parse_exact(body, n);
    if (!cJSON_IsArray(v) || !cJSON_GetArraySize(v)) {
        cJSON_Delete(v);
        return UL_EFORMAT;
    }
    int rc = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, v) {
        if (!cJSON_IsObject(it) || cJSON_GetArraySize(it) != 1) rc = UL_EFORMAT;
        if (!rc) rc = add_cjson_args(out, it->child->string, it->child);
        if (rc) break;
    }
    cJSON_Delete(v);
    return rc;
}
