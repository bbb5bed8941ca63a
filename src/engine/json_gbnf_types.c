/* JSON Schema -> GBNF for the typed nodes (json_gbnf_impl.h): objects (properties in order,
 * optional ones by a chain of rules so commas stay right), arrays (prefixItems, counts),
 * strings (lengths, pattern, format) and numbers (exact integer ranges, multipleOf). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/json_gbnf.h"
#include "engine/json_gbnf_impl.h"
#include "uvllm/err.h"

#define MAX_MAG 1000000000000000LL /* magnitudes past this are not generated (15 digits) */

static int count_kw(jg_t *j, const cJSON *js, const char *k, long *v) {
    const cJSON *it = ul_jg_get(js, k);
    if (!it) return 0;
    if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble > 1e9 ||
        it->valuedouble != floor(it->valuedouble))
        return ul_jg_fail(j, "'%s' must be a non-negative integer", k);
    *v = (long)it->valuedouble;
    return 0;
}

/* ---- objects ---------------------------------------------------------------------------- */

typedef struct {
    char key[16], val[16];
    int req;
} prop_t;

static int key_literal(jg_t *j, const char *key) {
    cJSON *s = cJSON_CreateString(key);
    char *txt = s ? cJSON_PrintUnformatted(s) : NULL;
    cJSON_Delete(s);
    if (!txt) return UL_ENOMEM;
    int rc = ul_gbnf_literal(&j->rules, txt, strlen(txt));
    cJSON_free(txt);
    return rc;
}

/* Rules head_i / tail_i over props[i..n): the members from i on, before any (head) or
 * after some (tail) has been written; extra: the rule of further keys, or "" for none. */
static int members(jg_t *j, const prop_t *p, int n, const char *extra, char *head0) {
    char(*head)[16] = calloc((size_t)n + 1, sizeof *head), (*tail)[16] = calloc((size_t)n + 1, 16);
    if (!head || !tail) {
        free(head), free(tail);
        return UL_ENOMEM;
    }
    int rc = 0;
    ul_jg_name(j, head[n]);
    ul_jg_name(j, tail[n]);
    if (*extra)
        rc = ul_buf_printf(&j->rules, "%s ::= ( %s ws %s )?\n%s ::= ( \",\" ws %s ws )*\n", head[n],
                           extra, tail[n], tail[n], extra);
    else
        rc = ul_buf_printf(&j->rules, "%s ::= \"\"\n%s ::= \"\"\n", head[n], tail[n]);
    for (int i = n - 1; i >= 0 && !rc; i--) {
        ul_jg_name(j, head[i]);
        ul_jg_name(j, tail[i]);
        if (p[i].req)
            rc = ul_buf_printf(&j->rules, "%s ::= %s ws %s\n%s ::= \",\" ws %s ws %s\n", head[i],
                               p[i].key, tail[i + 1], tail[i], p[i].key, tail[i + 1]);
        else
            rc = ul_buf_printf(&j->rules, "%s ::= %s ws %s | %s\n%s ::= ( \",\" ws %s ws )? %s\n",
                               head[i], p[i].key, tail[i + 1], head[i + 1], tail[i], p[i].key,
                               tail[i + 1]);
    }
    memcpy(head0, head[0], 16);
    free(head);
    free(tail);
    return rc;
}

/* An object without listed properties: keys of rule kv, counted. */
static int map_object(jg_t *j, const char *kv, long mn, long mx, char *name) {
    ul_jg_name(j, name);
    int rc = ul_jg_rule(j, name);
    if (rc) return rc;
    if (mx == 0 || !*kv) return ul_buf_puts(&j->rules, "\"{\" ws \"}\"\n");
    char rep[48];
    if (mx < 0)
        snprintf(rep, sizeof rep, "{%ld,}", mn > 1 ? mn - 1 : 0);
    else
        snprintf(rep, sizeof rep, "{%ld,%ld}", mn > 1 ? mn - 1 : 0, mx - 1);
    return ul_buf_printf(&j->rules, "\"{\" ws ( %s ws ( \",\" ws %s ws )%s )%s \"}\"\n", kv, kv,
                         rep, mn > 0 ? "" : "?");
}

int ul_jg_object(jg_t *j, const cJSON *js, char *name) {
    const cJSON *ps = ul_jg_get(js, "properties"), *req = ul_jg_get(js, "required");
    const cJSON *ap = cJSON_GetObjectItemCaseSensitive(js, "additionalProperties");
    long mn = 0, mx = -1;
    int rc = count_kw(j, js, "minProperties", &mn);
    if (!rc) rc = count_kw(j, js, "maxProperties", &mx);
    if (rc) return rc;
    if (ps && !cJSON_IsObject(ps)) return ul_jg_fail(j, "'properties' must be an object");
    if (req && !cJSON_IsArray(req)) return ul_jg_fail(j, "'required' must be an array");
    const cJSON *it;
    cJSON_ArrayForEach(it, req) {
        if (!cJSON_IsString(it)) return ul_jg_fail(j, "'required' must list property names");
        if (!cJSON_GetObjectItemCaseSensitive(ps, it->valuestring))
            return ul_jg_fail(j, "required property '%.60s' is not in 'properties'",
                              it->valuestring);
    }
    /* further keys: with listed properties only when additionalProperties says so */
    char extra[16] = "", xval[16];
    int free_keys = ap ? !cJSON_IsFalse(ap) : !ps;
    if (free_keys) {
        if (!ap || cJSON_IsTrue(ap))
            snprintf(xval, sizeof xval, "value");
        else if ((rc = ul_jg_gen(j, ap, xval)))
            return rc;
        ul_jg_name(j, extra);
        if ((rc = ul_buf_printf(&j->rules, "%s ::= string ws \":\" ws %s\n", extra, xval)))
            return rc;
    }
    int n = ps ? cJSON_GetArraySize(ps) : 0;
    if (!n) return map_object(j, extra, mn, mx, name);
    prop_t *p = calloc((size_t)n, sizeof *p);
    if (!p) return UL_ENOMEM;
    int i = 0, n_req = 0;
    cJSON_ArrayForEach(it, ps) {
        prop_t *q = &p[i++];
        for (const cJSON *r = req ? req->child : NULL; r; r = r->next)
            if (cJSON_IsString(r) && !strcmp(r->valuestring, it->string)) q->req = 1;
        n_req += q->req;
        if ((rc = ul_jg_gen(j, it, q->val))) break;
        ul_jg_name(j, q->key);
        if ((rc = ul_jg_rule(j, q->key)) || (rc = key_literal(j, it->string)) ||
            (rc = ul_buf_printf(&j->rules, " ws \":\" ws %s\n", q->val)))
            break;
    }
    if (!rc && !(mn <= n_req && (mx < 0 || (mx >= n && !*extra))))
        rc = ul_jg_fail(j, "'minProperties'/'maxProperties' are only supported when the "
                           "listed properties satisfy them");
    char head[16];
    if (!rc) rc = members(j, p, n, extra, head);
    free(p);
    if (rc) return rc;
    ul_jg_name(j, name);
    return ul_buf_printf(&j->rules, "%s ::= \"{\" ws %s \"}\"\n", name, head);
}

/* ---- arrays ----------------------------------------------------------------------------- */

int ul_jg_array(jg_t *j, const cJSON *js, char *name) {
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(js, "items"),
                *pre = ul_jg_get(js, "prefixItems");
    if (cJSON_IsArray(items) && !pre) { /* draft 7's tuple: items [...], additionalItems */
        pre = items;
        items = cJSON_GetObjectItemCaseSensitive(js, "additionalItems");
    }
    long mn = 0, mx = -1;
    int rc = count_kw(j, js, "minItems", &mn);
    if (!rc) rc = count_kw(j, js, "maxItems", &mx);
    if (rc) return rc;
    if (mx >= 0 && mx < mn) return ul_jg_fail(j, "'maxItems' is below 'minItems'");
    if (pre && !cJSON_IsArray(pre)) return ul_jg_fail(j, "'prefixItems' must be an array");
    int k = pre ? cJSON_GetArraySize(pre) : 0, closed = items && cJSON_IsFalse(items);
    if (closed && mn > k) return ul_jg_fail(j, "'minItems' exceeds the 'prefixItems' allowed");
    if (closed && (mx < 0 || mx > k)) mx = k;
    if (k > 64) return ul_jg_fail(j, "more than 64 'prefixItems'");
    char item[16] = "value", pv[64][16];
    if (items && !closed && (rc = ul_jg_gen(j, items, item))) return rc;
    int i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, pre) if (!rc) rc = ul_jg_gen(j, it, pv[i++]);
    if (rc) return rc;
    /* rest: what may follow the prefix (the first element has no comma without one) */
    char rest[16];
    long lo = mn > k ? mn - k : 0, hi = mx < 0 ? -1 : mx - k;
    ul_jg_name(j, rest);
    if ((rc = ul_jg_rule(j, rest))) return rc;
    if (closed || hi == 0)
        rc = ul_buf_puts(&j->rules, "\"\"\n");
    else if (k && hi < 0)
        rc = ul_buf_printf(&j->rules, "( \",\" ws %s ws ){%ld,}\n", item, lo);
    else if (k)
        rc = ul_buf_printf(&j->rules, "( \",\" ws %s ws ){%ld,%ld}\n", item, lo, hi);
    else if (hi < 0)
        rc = ul_buf_printf(&j->rules, "( %s ws ( \",\" ws %s ws ){%ld,} )%s\n", item, item,
                           lo > 1 ? lo - 1 : 0, lo ? "" : "?");
    else
        rc = ul_buf_printf(&j->rules, "( %s ws ( \",\" ws %s ws ){%ld,%ld} )%s\n", item, item,
                           lo > 1 ? lo - 1 : 0, hi - 1, lo ? "" : "?");
    for (i = k - 1; i >= 0 && !rc; i--) {
        char r[16];
        ul_jg_name(j, r);
        int need = i < mn;
        int allowed = mx < 0 || i < mx;
        if (!allowed)
            rc = ul_buf_printf(&j->rules, "%s ::= \"\"\n", r);
        else
            rc = ul_buf_printf(&j->rules, "%s ::= ( %s%s ws %s )%s\n", r, i ? "\",\" ws " : "",
                               pv[i], rest, need ? "" : "?");
        memcpy(rest, r, 16);
    }
    if (rc) return rc;
    ul_jg_name(j, name);
    return ul_buf_printf(&j->rules, "%s ::= \"[\" ws %s \"]\"\n", name, rest);
}

/* ---- strings ---------------------------------------------------------------------------- */

/* Each format's grammar and the lengths (code points) of what it writes, so a format may
 * come with minLength/maxLength that these satisfy (pydantic's AnyUrl: 1..2083). */
static const struct {
    const char *name, *body;
    long min, max;
} g_formats[] = {
    {"date",
     "[0-9]{4} \"-\" ( ( \"0\" [13578] | \"1\" [02] ) \"-\" ( \"0\" [1-9] | [12] [0-9] | "
     "\"3\" [01] ) | ( \"0\" [469] | \"11\" ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"30\" ) | "
     "\"02-\" ( \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8] ) )",
     10, 10},
    {"time",
     "( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{1,6} "
     ")? ( \"Z\" | [+-] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )",
     9, 21},
    {"date-time",
     "DATE \"T\" ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( "
     "\".\" [0-9]{1,3} )? \"Z\"",
     20, 24},
    {"uuid",
     "[0-9a-f]{8} \"-\" [0-9a-f]{4} \"-\" [1-8] [0-9a-f]{3} \"-\" [89ab] [0-9a-f]{3} \"-\" "
     "[0-9a-f]{12}",
     36, 36},
    {"email", "[a-z0-9]{1,24} \"@\" [a-z0-9]{1,20} ( \".\" [a-z0-9]{1,20} )? \".\" [a-z]{2,6}", 6,
     73},
    {"uri",
     "\"http\" \"s\"? \"://\" [a-z0-9]{1,20} ( \".\" [a-z0-9]{1,20} )? \".\" [a-z]{2,6} ( "
     "\"/\" [a-zA-Z0-9._~-]{1,20} ){0,8}",
     11, 224},
    {"ipv4", "OCT \".\" OCT \".\" OCT \".\" OCT", 7, 15},
    {"ipv6", "[0-9a-f]{1,4} ( \":\" [0-9a-f]{1,4} ){7}", 15, 39},
    {"hostname",
     "[a-z0-9] ( [a-z0-9-]{0,20} [a-z0-9] )? ( \".\" [a-z0-9] ( [a-z0-9-]{0,20} "
     "[a-z0-9] )? ){0,3}",
     1, 95},
};

/* Writes a format's body, expanding DATE and OCT. */
static int format_body(jg_t *j, const char *body) {
    static const char oct[] = "( \"25\" [0-5] | \"2\" [0-4] [0-9] | \"1\" [0-9] [0-9] | [1-9] "
                              "[0-9] | [0-9] )";
    for (const char *s = body; *s;) {
        if (!strncmp(s, "DATE", 4)) {
            if (ul_buf_printf(&j->rules, "( %s )", g_formats[0].body)) return UL_ENOMEM;
            s += 4;
        } else if (!strncmp(s, "OCT", 3)) {
            if (ul_buf_puts(&j->rules, oct)) return UL_ENOMEM;
            s += 3;
        } else if (ul_buf_append(&j->rules, s++, 1)) {
            return UL_ENOMEM;
        }
    }
    return 0;
}

int ul_jg_string(jg_t *j, const cJSON *js, char *name) {
    long mn = 0, mx = -1;
    int rc = count_kw(j, js, "minLength", &mn);
    if (!rc) rc = count_kw(j, js, "maxLength", &mx);
    if (rc) return rc;
    if (mx >= 0 && mx < mn) return ul_jg_fail(j, "'maxLength' is below 'minLength'");
    if (mx > 10000 || mn > 10000) return ul_jg_fail(j, "'minLength'/'maxLength' above 10000");
    const cJSON *pat = ul_jg_get(js, "pattern"), *fmt = ul_jg_get(js, "format");
    if (pat && !cJSON_IsString(pat)) return ul_jg_fail(j, "'pattern' must be a string");
    if (fmt && !cJSON_IsString(fmt)) return ul_jg_fail(j, "'format' must be a string");
    int f = -1;
    if (fmt) {
        for (size_t i = 0; i < sizeof g_formats / sizeof *g_formats; i++)
            if (!strcmp(fmt->valuestring, g_formats[i].name)) f = (int)i;
        if (f < 0) return ul_jg_fail(j, "'format' '%.40s' is not supported", fmt->valuestring);
    }
    if ((mn || mx >= 0) &&
        (pat || f < 0 ? pat != NULL : mn > g_formats[f].min || (mx >= 0 && mx < g_formats[f].max)))
        return ul_jg_fail(j, "'%s' cannot be combined with 'minLength'/'maxLength'",
                          pat ? "pattern" : "format");
    ul_jg_name(j, name);
    if ((rc = ul_jg_rule(j, name)) || (rc = ul_buf_puts(&j->rules, "\"\\\"\" "))) return rc;
    if (pat) {
        size_t mark = j->rules.len;
        char err[160];
        rc = ul_regex_gbnf(pat->valuestring, strlen(pat->valuestring), 1, &j->rules, err,
                           sizeof err);
        if (rc == UL_EINVAL && f >= 0 && strstr(err, "lookaround")) {
            j->rules.len = mark; /* the format's grammar is written to satisfy such patterns */
            rc = format_body(j, g_formats[f].body);
        } else if (rc == UL_EINVAL) {
            return ul_jg_fail(j, "'pattern' %s", err);
        }
    } else if (f >= 0) {
        rc = format_body(j, g_formats[f].body);
    } else if (mx < 0) {
        rc = ul_buf_printf(&j->rules, "jchar{%ld,}", mn);
    } else {
        rc = ul_buf_printf(&j->rules, "jchar{%ld,%ld}", mn, mx);
    }
    return rc ? rc : ul_buf_puts(&j->rules, " \"\\\"\"\n");
}

/* ---- numbers ---------------------------------------------------------------------------- */

/* Digit strings x, y of the same length k, x <= y: the numbers between, as GBNF. */
static int same_len(ul_buf_t *o, const char *x, const char *y, int k) {
    if (!k) return ul_buf_puts(o, "\"\"");
    if (x[0] == y[0]) {
        int rc = ul_buf_printf(o, "\"%c\" ", x[0]);
        return rc ? rc : same_len(o, x + 1, y + 1, k - 1);
    }
    int x0 = 1, y9 = 1, rc = 0, alts = 0;
    for (int i = 1; i < k; i++) x0 &= x[i] == '0', y9 &= y[i] == '9';
    char lo = x0 ? x[0] : (char)(x[0] + 1), hi = y9 ? y[0] : (char)(y[0] - 1);
    rc = ul_buf_puts(o, "( ");
    if (!rc && !x0) {
        char nines[20];
        memset(nines, '9', sizeof nines);
        if (!(rc = ul_buf_printf(o, "\"%c\" ( ", x[0]))) rc = same_len(o, x + 1, nines, k - 1);
        if (!rc) rc = ul_buf_puts(o, " )");
        alts++;
    }
    if (!rc && lo <= hi) {
        rc = ul_buf_printf(o, "%s[%c-%c] [0-9]{%d}", alts++ ? " | " : "", lo, hi, k - 1);
    }
    if (!rc && !y9) {
        char zeros[20];
        memset(zeros, '0', sizeof zeros);
        if (!(rc = ul_buf_printf(o, "%s\"%c\" ( ", alts++ ? " | " : "", y[0])))
            rc = same_len(o, zeros, y + 1, k - 1);
        if (!rc) rc = ul_buf_puts(o, " )");
    }
    return rc ? rc : ul_buf_puts(o, " )");
}

static int ndig(long long v) {
    int n = 1;
    while (v >= 10) v /= 10, n++;
    return n;
}

/* Non-negative integers in [a, b] (b < 0: unbounded, up to 16 digits), as GBNF. */
static int range(ul_buf_t *o, long long a, long long b) {
    int rc = ul_buf_puts(o, "( "), alts = 0;
    int kmax = b < 0 ? 16 : ndig(b);
    for (int k = ndig(a); k <= kmax && !rc; k++) {
        long long p = 1;
        for (int i = 1; i < k; i++) p *= 10;
        long long lo = k == 1 ? 0 : p, hi = p * 10 - 1;
        if (lo < a) lo = a;
        if (b >= 0 && hi > b) hi = b;
        if (lo > hi) continue;
        char x[24], y[24];
        snprintf(x, sizeof x, "%lld", lo);
        snprintf(y, sizeof y, "%lld", hi);
        if (alts++) rc = ul_buf_puts(o, " | ");
        if (!rc) rc = same_len(o, x, y, k);
    }
    if (!alts) return UL_EINVAL;
    return rc ? rc : ul_buf_puts(o, " )");
}

typedef struct {
    double lo, hi;  /* -inf / inf when absent */
    int lo_x, hi_x; /* exclusive */
} bounds_t;

static int read_bounds(jg_t *j, const cJSON *js, bounds_t *b) {
    *b = (bounds_t){-INFINITY, INFINITY, 0, 0};
    static const char *const kw[] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
    for (int i = 0; i < 4; i++) {
        const cJSON *it = ul_jg_get(js, kw[i]);
        if (!it) continue;
        if (cJSON_IsBool(it))
            return ul_jg_fail(j, "boolean '%s' (draft 4) is not supported", kw[i]);
        if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble))
            return ul_jg_fail(j, "'%s' must be a number", kw[i]);
        double v = it->valuedouble;
        if (i < 2 && (v > b->lo || (v == b->lo && i == 1))) b->lo = v, b->lo_x = i == 1;
        if (i >= 2 && (v < b->hi || (v == b->hi && i == 3))) b->hi = v, b->hi_x = i == 3;
    }
    return 0;
}

/* Magnitudes m of one sign side: m in [a, b] (a_x/b_x exclusive; b inf), integer values
 * and values with a non-zero fraction, clamped to MAX_MAG. 0 when the side is empty. */
static int side(ul_buf_t *o, double a, int a_x, double b, int b_x, int integer, int *any) {
    if (b > (double)MAX_MAG) b = (double)MAX_MAG, b_x = 0;
    long long ia = (long long)(a_x ? floor(a) + 1 : ceil(a)),
              ib = (long long)(b_x ? ceil(b) - 1 : floor(b));
    long long fa = (long long)ceil(a), fb = (long long)floor(b) - 1;
    int rc = 0;
    if (ia <= ib) {
        rc = ul_buf_puts(o, *any ? " | " : "");
        if (!rc) rc = range(o, ia, ib);
        *any = 1;
    }
    if (!integer && fa <= fb && !rc) {
        rc = ul_buf_puts(o, *any ? " | " : "");
        if (!rc) rc = range(o, fa, fb);
        if (!rc) rc = ul_buf_puts(o, " \".\" [0-9]{0,15} [1-9]");
        *any = 1;
    }
    return rc;
}

static int multiple_of(jg_t *j, long long m, const bounds_t *b, int integer, char *name) {
    if (!integer) return ul_jg_fail(j, "'multipleOf' is only supported on integers");
    if (m < 1 || m > 1000) return ul_jg_fail(j, "'multipleOf' must be an integer from 1 to 1000");
    double lo = b->lo_x ? floor(b->lo) + 1 : ceil(b->lo),
           hi = b->hi_x ? ceil(b->hi) - 1 : floor(b->hi);
    ul_jg_name(j, name);
    if (isfinite(lo) && isfinite(hi) && hi - lo <= 100000) { /* narrow: one by one */
        int rc = ul_jg_rule(j, name), n = 0;
        long long first = (long long)ceil(lo / (double)m) * m;
        for (long long v = first; v <= (long long)hi && !rc && n < 2000; v += m, n++)
            rc = ul_buf_printf(&j->rules, "%s\"%lld\"", n ? " | " : "", v);
        if (!n) return ul_jg_fail(j, "no integer satisfies the bounds and 'multipleOf'");
        if (n >= 2000) return ul_jg_fail(j, "'multipleOf' leaves more than 2000 values");
        return rc ? rc : ul_buf_puts(&j->rules, "\n");
    }
    /* wide: every multiple of up to 15 digits, which the bounds must allow */
    int neg = lo <= -(double)MAX_MAG, zero = lo <= 0 && hi >= 0;
    if ((!neg && lo < 0) || lo > (double)m || hi < (double)MAX_MAG)
        return ul_jg_fail(j, "'multipleOf' is only supported with bounds narrower than 100000 "
                             "or wider than 15 digits");
    int rc = ul_buf_printf(&j->rules, "%s ::= %s( %s%s_s )\n", name, neg ? "\"-\"? " : "",
                           zero ? "\"0\" | " : "", name);
    if (rc) return rc;
    /* remainder automaton over up to 15 digits: rule dN_r_c, c digits read, remainder r */
    rc = ul_buf_printf(&j->rules, "%s_s ::= ", name);
    for (int d = 1; d <= 9 && !rc; d++)
        rc = ul_buf_printf(&j->rules, "%s\"%d\" %s_%lld_1", d > 1 ? " | " : "", d, name, d % m);
    if (!rc) rc = ul_buf_puts(&j->rules, "\n");
    for (int c = 1; c <= 15 && !rc; c++)
        for (long long r = 0; r < m && !rc; r++) {
            rc = ul_buf_printf(&j->rules, "%s_%lld_%d ::= %s", name, r, c, r == 0 ? "\"\"" : "");
            for (int d = 0; d <= 9 && c < 15 && !rc; d++)
                rc = ul_buf_printf(&j->rules, "%s\"%d\" %s_%lld_%d", r == 0 || d ? " | " : "", d,
                                   name, (r * 10 + d) % m, c + 1);
            if (!rc && r != 0 && c == 15) rc = ul_buf_puts(&j->rules, "[^\\x00-\\U0010FFFF]");
            if (!rc) rc = ul_buf_puts(&j->rules, "\n");
        }
    return rc;
}

int ul_jg_number(jg_t *j, const cJSON *js, int integer, char *name) {
    bounds_t b;
    int rc = read_bounds(j, js, &b);
    if (rc) return rc;
    const cJSON *mo = ul_jg_get(js, "multipleOf");
    if (mo) {
        if (!cJSON_IsNumber(mo) || mo->valuedouble != floor(mo->valuedouble))
            return ul_jg_fail(j, "'multipleOf' must be an integer");
        return multiple_of(j, (long long)mo->valuedouble, &b, integer, name);
    }
    if (b.lo == -INFINITY && b.hi == INFINITY) {
        snprintf(name, 16, integer ? "integer" : "number");
        return 0;
    }
    ul_buf_t o = {0};
    int any = 0;
    /* x >= 0: magnitudes [max(lo, 0), hi]; x < 0: magnitudes (max(-hi, 0), -lo] */
    if (b.hi >= 0 && !(b.hi == 0 && b.hi_x))
        rc = side(&o, b.lo >= 0 ? b.lo : 0, b.lo >= 0 ? b.lo_x : 0, b.hi, b.hi_x, integer, &any);
    if (!rc && b.lo < 0) {
        ul_buf_t neg = {0};
        int nany = 0;
        double a = b.hi < 0 ? -b.hi : 0;
        int a_x = b.hi < 0 ? b.hi_x : 1;
        rc = side(&neg, a, a_x, -b.lo, b.lo_x, integer, &nany);
        if (!rc && nany) {
            rc = ul_buf_printf(&o, "%s\"-\" ( ", any ? " | " : "");
            if (!rc) rc = ul_buf_append(&o, neg.p, neg.len);
            if (!rc) rc = ul_buf_puts(&o, " )");
            any = 1;
        }
        ul_buf_free(&neg);
    }
    if (!rc && !any)
        rc = ul_jg_fail(j, "no %s satisfies the bounds", integer ? "integer" : "number");
    if (!rc) {
        ul_jg_name(j, name);
        rc = ul_jg_rule(j, name);
        if (!rc) rc = ul_buf_append(&j->rules, o.p, o.len);
        if (!rc) rc = ul_buf_puts(&j->rules, "\n");
    }
    ul_buf_free(&o);
    return rc;
}
