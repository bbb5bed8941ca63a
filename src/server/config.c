/* Loading a configuration from the option table (options.c): one setter that checks a
 * value against its row's type and bounds, and the three sources that feed it (a config
 * file, the environment, the command line) applied in the order of their precedence. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/size.h"
#include "server/config.h"
#include "uvllm/err.h"

#define FILE_MAX (1 << 20)

static void *field(ul_server_config_t *c, const ul_opt_t *o) { return (char *)c + o->off; }

void ul_server_config_default(ul_server_config_t *c) {
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < g_ul_server_n_opts; i++) {
        const ul_opt_t *o = &g_ul_server_opts[i];
        void *p = field(c, o);
        switch (o->type) {
        case UL_OPT_STR:
            *(const char **)p = o->sdef;
            break;
        case UL_OPT_INT:
        case UL_OPT_FLAG:
            *(int *)p = (int)o->def;
            break;
        case UL_OPT_I64:
        case UL_OPT_SIZE:
            *(int64_t *)p = (int64_t)o->def;
            break;
        case UL_OPT_DOUBLE:
            *(double *)p = o->def;
            break;
        case UL_OPT_LIST:
            break;
        }
    }
}

void ul_server_config_free(ul_server_config_t *c) {
    free(c->file_text);
    c->file_text = NULL;
}

const ul_opt_t *ul_server_opt_find(const char *name, size_t len) {
    for (size_t i = 0; i < g_ul_server_n_opts; i++)
        if (strlen(g_ul_server_opts[i].name) == len && !memcmp(g_ul_server_opts[i].name, name, len))
            return &g_ul_server_opts[i];
    return NULL;
}

/* What a value must be, for the error message: "an integer in 1..1048576". */
static void describe(const ul_opt_t *o, char *out, size_t cap) {
    const char *gt = o->flags & UL_OPT_LO_OPEN ? "over" : "at least";
    switch (o->type) {
    case UL_OPT_INT:
    case UL_OPT_I64:
        snprintf(out, cap, "an integer in %.0f..%.0f", o->lo, o->hi);
        break;
    case UL_OPT_DOUBLE:
        if (o->flags & UL_OPT_LO_OPEN)
            snprintf(out, cap, "a number over %g, at most %g", o->lo, o->hi);
        else
            snprintf(out, cap, "a number in %g..%g", o->lo, o->hi);
        break;
    case UL_OPT_SIZE:
        if (o->hi > 0)
            snprintf(out, cap, "a size (bytes, or 512K, 64M, 4G) in %.0f..%.0f bytes", o->lo,
                     o->hi);
        else
            snprintf(out, cap, "a size (bytes, or 512K, 64M, 4G) %s %.0f bytes", gt, o->lo);
        break;
    case UL_OPT_FLAG:
        snprintf(out, cap, "1/0, true/false, yes/no or on/off");
        break;
    case UL_OPT_STR:
        if (o->choices)
            snprintf(out, cap, "one of %s", o->choices);
        else
            snprintf(out, cap, "a text%s", o->lo > 0 ? ", not empty" : "");
        break;
    case UL_OPT_LIST:
        snprintf(out, cap, "a text, not empty%s, given at most %.0f times",
                 o->flags & UL_OPT_NO_SPACE ? ", without spaces" : "", o->hi);
        break;
    }
}

static int in_bounds(const ul_opt_t *o, double v) {
    if (o->flags & UL_OPT_LO_OPEN ? !(v > o->lo) : !(v >= o->lo)) return 0;
    return o->hi <= 0 && o->type == UL_OPT_SIZE ? 1 : v <= o->hi;
}

static int parse_i64(const char *s, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end) return -1;
    *out = v;
    return 0;
}

static int parse_double(const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || v != v) return -1;
    *out = v;
    return 0;
}

static int parse_flag(const char *s, int *out) {
    static const char *const yes[] = {"1", "true", "yes", "on"}, *const no[] = {"0", "false", "no",
                                                                                "off"};
    for (int i = 0; i < 4; i++) {
        if (!strcasecmp(s, yes[i])) return *out = 1, 0;
        if (!strcasecmp(s, no[i])) return *out = 0, 0;
    }
    return -1;
}

/* 1 when s is one of the '|'-separated choices. */
static int is_choice(const char *choices, const char *s) {
    size_t n = strlen(s);
    for (const char *p = choices; *p;) {
        size_t k = strcspn(p, "|");
        if (k == n && !memcmp(p, s, n)) return 1;
        p += k + (p[k] == '|');
    }
    return 0;
}

static int set_text(ul_server_config_t *c, const ul_opt_t *o, const char *v) {
    if (o->choices && !is_choice(o->choices, v)) return -1;
    if (o->lo > 0 && !*v) return -1;
    if (o->type == UL_OPT_STR) {
        *(const char **)field(c, o) = v;
        return 0;
    }
    ul_server_list_t *l = field(c, o);
    if (!*v || l->n >= (int)o->hi || l->n >= UL_SERVER_LIST_MAX) return -1;
    if (o->flags & UL_OPT_NO_SPACE && strpbrk(v, " \t\r\n")) return -1;
    l->v[l->n++] = v;
    return 0;
}

/* Parses v into o's field; -1 when it is malformed or out of bounds. */
static int set_value(ul_server_config_t *c, const ul_opt_t *o, const char *v) {
    void *p = field(c, o);
    int64_t i;
    double d;
    switch (o->type) {
    case UL_OPT_STR:
    case UL_OPT_LIST:
        return set_text(c, o, v);
    case UL_OPT_FLAG:
        return parse_flag(v, (int *)p);
    case UL_OPT_INT:
    case UL_OPT_I64:
        if (parse_i64(v, &i) || !in_bounds(o, (double)i)) return -1;
        if (o->type == UL_OPT_INT)
            *(int *)p = (int)i;
        else
            *(int64_t *)p = i;
        return 0;
    case UL_OPT_SIZE:
        if (ul_size_parse(v, &i) || !in_bounds(o, (double)i)) return -1;
        *(int64_t *)p = i;
        return 0;
    case UL_OPT_DOUBLE:
        if (parse_double(v, &d) || !in_bounds(o, d)) return -1;
        *(double *)p = d;
        return 0;
    }
    return -1;
}

int ul_server_opt_set(ul_server_config_t *c, const ul_opt_t *o, const char *value, const char *from,
                      char *err, size_t cap) {
    if (!set_value(c, o, value)) return 0;
    char want[128];
    describe(o, want, sizeof want);
    if (o->flags & UL_OPT_SECRET) value = "(not shown)";
    snprintf(err, cap, "bad value '%s' for %s: %s (see 'uvllm serve --help')", value, from, want);
    return UL_EINVAL;
}

static char *trim(char *s, char *end) {
    while (s < end && strchr(" \t\r", *s)) s++;
    while (end > s && strchr(" \t\r", end[-1])) end--;
    *end = '\0';
    return s;
}

/* One "name value" / "name = value" / "flag" line. */
static int file_line(ul_server_config_t *c, char *line, const char *where, char *err, size_t cap) {
    size_t n = strcspn(line, " \t=");
    char *value = line + n;
    value += strspn(value, " \t");
    if (*value == '=') value = trim(value + 1, value + strlen(value));
    const char *name = line + (strncmp(line, "--", 2) ? 0 : 2);
    size_t name_len = n - (size_t)(name - line);
    const ul_opt_t *o = ul_server_opt_find(name, name_len);
    if (!o) {
        snprintf(err, cap, "%s: unknown option '%.*s' (see 'uvllm serve --help')", where,
                 (int)name_len, name);
        return UL_EINVAL;
    }
    if (o->type == UL_OPT_FLAG && !*value) value = "1";
    char from[300];
    snprintf(from, sizeof from, "%s: %.*s", where, (int)name_len, name);
    return ul_server_opt_set(c, o, value, from, err, cap);
}

int ul_server_config_parse_file(ul_server_config_t *c, char *text, const char *path, char *err,
                                size_t cap) {
    int lineno = 0;
    for (char *line = text, *next; line; line = next) {
        next = strchr(line, '\n');
        char *end = next ? next : line + strlen(line);
        if (next) next++;
        lineno++;
        char *s = trim(line, end);
        if (!*s || *s == '#') continue;
        char where[256];
        snprintf(where, sizeof where, "%s:%d", path, lineno);
        int rc = file_line(c, s, where, err, cap);
        if (rc) return rc;
    }
    return 0;
}

int ul_server_config_parse_env(ul_server_config_t *c, const char *(*get)(const char *name),
                               char *err, size_t cap) {
    for (size_t i = 0; i < g_ul_server_n_opts; i++) {
        const ul_opt_t *o = &g_ul_server_opts[i];
        char env[64];
        ul_server_opt_env_name(o, env, sizeof env);
        const char *v = get(env);
        if (!v || !*v) continue; /* empty counts as unset, as compose files write it */
        char from[96];
        snprintf(from, sizeof from, "%s (--%s)", env, o->name);
        int rc = ul_server_opt_set(c, o, v, from, err, cap);
        if (rc) return rc;
    }
    return 0;
}

int ul_server_config_parse_argv(ul_server_config_t *c, int argc, char **argv, int *help, char *err,
                                size_t cap) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return *help = 1, 0;
        size_t n = strcspn(a, "=");
        const char *eq = a[n] ? a + n + 1 : NULL;
        if (!strncmp(a, "--config", n) && n == 8) { /* read by ul_server_config_load */
            i += !eq;
            continue;
        }
        /* the name only in messages: a secret may follow the '=' */
        const ul_opt_t *o = strncmp(a, "--", 2) ? NULL : ul_server_opt_find(a + 2, n - 2);
        if (!o) {
            snprintf(err, cap, "unknown option '%.*s' (see 'uvllm serve --help')", (int)n, a);
            return UL_EINVAL;
        }
        const char *v = eq;
        if (o->type == UL_OPT_FLAG && !v) v = "1";
        if (!v && (v = i + 1 < argc ? argv[++i] : NULL) == NULL) {
            snprintf(err, cap, "option '%s' needs a value", a);
            return UL_EINVAL;
        }
        char from[80];
        snprintf(from, sizeof from, "--%s", o->name);
        int rc = ul_server_opt_set(c, o, v, from, err, cap);
        if (rc) return rc;
    }
    return 0;
}

/* --config's value in argv (the last one), else NULL; UL_EINVAL when it has none. */
static int config_path(int argc, char **argv, const char **path, char *err, size_t cap) {
    for (int i = 1; i < argc; i++) {
        if (!strncmp(argv[i], "--config=", 9)) *path = argv[i] + 9;
        if (strcmp(argv[i], "--config")) continue;
        if (i + 1 == argc) {
            snprintf(err, cap, "option '--config' needs a value");
            return UL_EINVAL;
        }
        *path = argv[++i];
    }
    return 0;
}

static int read_config(ul_server_config_t *c, const char *path, char *err, size_t cap) {
    FILE *f = fopen(path, "rb");
    int bad = f ? 0 : errno;
    char *buf = f ? malloc(FILE_MAX + 1) : NULL;
    size_t n = buf ? fread(buf, 1, FILE_MAX + 1, f) : 0;
    if (!bad) bad = !buf ? ENOMEM : ferror(f) ? EIO : n > FILE_MAX ? EFBIG : 0;
    if (f) fclose(f);
    if (bad) {
        free(buf);
        snprintf(err, cap, "cannot read config file '%s': %s", path, strerror(bad));
        return UL_EIO;
    }
    buf[n] = '\0';
    free(c->file_text);
    c->file_text = buf;
    return ul_server_config_parse_file(c, buf, path, err, cap);
}

int ul_server_config_load(ul_server_config_t *c, int argc, char **argv,
                          const char *(*get)(const char *name), int *help, char *err, size_t cap) {
    ul_server_config_default(c);
    *help = 0;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return *help = 1, 0;
    const char *path = get("UVLLM_CONFIG");
    int rc = config_path(argc, argv, &path, err, cap);
    if (!rc && path && *path) rc = read_config(c, path, err, cap);
    if (!rc) rc = ul_server_config_parse_env(c, get, err, cap);
    if (!rc) rc = ul_server_config_parse_argv(c, argc, argv, help, err, cap);
    if (!rc && !*help) rc = ul_server_config_check(c, err, cap);
    return rc;
}

int ul_server_config_check(ul_server_config_t *c, char *err, size_t cap) {
    if (!c->backend) c->backend = c->model ? "cpu" : "null";
    int null = !strcmp(c->backend, "null");
    if (!null && !c->model)
        snprintf(err, cap, "--backend %s needs --model PATH", c->backend);
    else if (c->null_reply && !null)
        snprintf(err, cap, "--null-reply needs the null backend (--backend null)");
    else if (c->null_fail_after >= 0 && !null)
        snprintf(err, cap, "--null-fail-after needs the null backend");
    else if (c->model_draft && strcmp(c->backend, "cpu"))
        snprintf(err, cap, "--model-draft needs the cpu backend (--model PATH)");
    else if (c->spec_ngram && !strcmp(c->backend, "cuda"))
        snprintf(err, cap, "the cuda backend does not verify proposals (--spec-ngram)");
    else if (c->draft_min > (c->draft_max ? c->draft_max : 6))
        snprintf(err, cap, "--draft-min is over --draft-max");
    else if (null && !c->null_reply != !c->model)
        snprintf(err, cap,
                 "with --backend null, --model (its vocabulary only) and --null-reply "
                 "TEXT go together");
    else
        return 0;
    return UL_EINVAL;
}
