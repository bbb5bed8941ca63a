/* Helpers of the request translators (translate.h). */
#include "api/translate.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uvllm/err.h"

int ul_tr_bad(ul_api_bad_t *bad, const char *param, const char *fmt, ...) {
    snprintf(bad->pbuf, sizeof bad->pbuf, "%s", param);
    bad->param = bad->pbuf;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(bad->msg, sizeof bad->msg, fmt, ap);
    va_end(ap);
    return UL_EINVAL;
}

const cJSON *ul_tr_get(const cJSON *o, const char *key) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    return it && !cJSON_IsNull(it) ? it : NULL;
}

void ul_tr_move(cJSON *dst, cJSON *src, const char *from, const char *to) {
    if (!ul_tr_get(src, from)) return;
    cJSON *it = cJSON_DetachItemFromObjectCaseSensitive(src, from);
    cJSON_AddItemToObject(dst, to, it);
}

cJSON *ul_tr_message(cJSON *msgs, const char *role) {
    cJSON *m = cJSON_CreateObject();
    if (!m) return NULL;
    if (!cJSON_AddStringToObject(m, "role", role)) {
        cJSON_Delete(m);
        return NULL;
    }
    cJSON_AddItemToArray(msgs, m);
    return m;
}

int ul_tr_tool_choice_fn(cJSON *chat, const char *name) {
    cJSON *o = cJSON_AddObjectToObject(chat, "tool_choice"), *f;
    return o && cJSON_AddStringToObject(o, "type", "function") &&
                   (f = cJSON_AddObjectToObject(o, "function")) &&
                   cJSON_AddStringToObject(f, "name", name)
               ? 0
               : UL_ENOMEM;
}

int ul_tr_copy_keys(cJSON *dst, const cJSON *src, const char *const *keys, int n) {
    for (int k = 0; k < n; k++) {
        const cJSON *v = ul_tr_get(src, keys[k]);
        cJSON *dup = v ? cJSON_Duplicate(v, 1) : NULL;
        if (v && !dup) return UL_ENOMEM;
        if (dup) cJSON_AddItemToObject(dst, keys[k], dup);
    }
    return 0;
}

void ul_tr_swap(cJSON *root, cJSON *chat) {
    cJSON *it = root->child;
    root->child = chat->child;
    chat->child = it;
    cJSON_Delete(chat);
}

int ul_tr_echo(ul_buf_t *b, const char *key, const cJSON *v, const char *dflt) {
    int rc = ul_buf_append(b, ",\"", 2);
    rc |= ul_buf_append(b, key, strlen(key));
    rc |= ul_buf_append(b, "\":", 2);
    if (!v || cJSON_IsNull(v)) return rc | ul_buf_append(b, dflt, strlen(dflt));
    char *s = cJSON_PrintUnformatted(v);
    if (!s) return UL_ENOMEM;
    rc |= ul_buf_append(b, s, strlen(s));
    free(s);
    return rc ? UL_ENOMEM : 0;
}
