/* Python's json keeps 1.0 a float and 1 an int, and templates print them differently
 * ("1.0" vs "1"); cJSON keeps only a double. ul_chat_json_mark_floats recovers the
 * distinction from the text the tree was parsed from: number tokens appear in the text in
 * the same order as number items in a depth-first walk of the tree, so the n-th token's
 * spelling (with '.', 'e' or 'E': a float) marks the n-th item with UL_CHAT_JSON_FLOAT,
 * a bit above the ones cJSON uses (it masks the type with 0xFF and keeps other bits when
 * duplicating). */
#include <string.h>

#include "chat/chat.h"
#include "uvllm/err.h"

typedef struct scan {
    const char *p, *e;
} scan;

/* The next number token's kind: 1 float, 0 int, -1 none left. */
static int next_number(scan *s) {
    while (s->p < s->e) {
        char c = *s->p;
        if (c == '"') {
            for (s->p++; s->p < s->e && *s->p != '"'; s->p++)
                if (*s->p == '\\') s->p++;
            s->p++;
            continue;
        }
        if (c == '-' || (c >= '0' && c <= '9')) {
            int is_float = 0;
            while (s->p < s->e && strchr("-+0123456789.eE", *s->p) && *s->p) {
                is_float |= *s->p == '.' || *s->p == 'e' || *s->p == 'E';
                s->p++;
            }
            return is_float;
        }
        s->p++;
    }
    return -1;
}

static int mark(cJSON *item, scan *s, int depth) {
    if (depth > 1000) return UL_EINVAL;
    for (; item; item = item->next) {
        if (cJSON_IsNumber(item)) {
            int k = next_number(s);
            if (k < 0) return UL_EINVAL; /* text and tree disagree: leave the rest */
            if (k) item->type |= UL_CHAT_JSON_FLOAT;
        } else if (item->child) {
            int rc = mark(item->child, s, depth + 1);
            if (rc) return rc;
        }
    }
    return 0;
}

int ul_chat_json_mark_floats(cJSON *root, const char *text, size_t len) {
    scan s = {text, text + len};
    if (!root || !text) return UL_EINVAL;
    if (cJSON_IsNumber(root)) {
        int k = next_number(&s);
        if (k > 0) root->type |= UL_CHAT_JSON_FLOAT;
        return k < 0 ? UL_EINVAL : 0;
    }
    return mark(root->child, &s, 0);
}
