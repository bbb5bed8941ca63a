/* The names the served model answers to: its id (the model file's base name, or "null"),
 * the operator's --model-alias names, and the spellings clients copy from a command line
 * (the path as given, the base name with or without ".gguf"). Request parsers call
 * ul_api_model_known on a request's "model"; /v1/models lists the id and the aliases. */
#include <string.h>

#include "api/api.h"
#include "uvllm/err.h"

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* name equals s, or s without a trailing ".gguf" */
static int same_or_stem(const char *name, const char *s) {
    if (!strcmp(name, s)) return 1;
    size_t n = strlen(s), nl = strlen(name);
    return n > 5 && !strcmp(s + n - 5, ".gguf") && nl == n - 5 && !strncmp(name, s, nl);
}

int ul_api_model_known(const ul_api_t *a, const char *name) {
    if (!name || !*name) return 0;
    if (same_or_stem(name, a->model_id)) return 1;
    for (int i = 0; i < a->n_aliases; i++)
        if (!strcmp(name, a->aliases[i])) return 1;
    if (a->model_path &&
        (!strcmp(name, a->model_path) || same_or_stem(name, base_name(a->model_path))))
        return 1;
    return 0;
}

int ul_api_add_alias(ul_api_t *a, const char *name) {
    if (!name || !*name) return UL_EINVAL;
    size_t n = strlen(name);
    if (n >= UL_API_NAME_MAX) return UL_EINVAL;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f) return UL_EINVAL;
    if (ul_api_model_known(a, name)) return UL_EBUSY;
    if (a->n_aliases >= UL_API_MAX_ALIASES) return UL_EFULL;
    memcpy(a->aliases[a->n_aliases++], name, n + 1);
    return 0;
}
