/* Case mapping for str.upper/lower/title/capitalize and the |upper |lower |title
 * |capitalize filters, on code points as Python does, for the scripts with simple case
 * pairs: ASCII, Latin-1, Latin Extended-A, Greek, Cyrillic, Armenian, fullwidth Latin
 * (and ß -> "SS"). Other code points are left as they are and count as uncased; Python's
 * final-sigma rule and Turkish dotted I are not applied. The bytes of a mapped code point
 * keep the plain mask of the code point they came from. */
#include <string.h>

#include "chat/jinja_impl.h"

enum { CASE_UPPER, CASE_LOWER, CASE_TITLE, CASE_CAPITALIZE, CASE_JTITLE };

/* Pairs (upper, lower) by range: [lo, hi] upper letters map to +delta. */
static const struct {
    unsigned long lo, hi;
    long delta;
} ranges[] = {
    {0x41, 0x5A, 32},   {0xC0, 0xD6, 32},     {0xD8, 0xDE, 32},   {0x391, 0x3A1, 32},
    {0x3A3, 0x3AB, 32}, {0x388, 0x38A, 37},   {0x410, 0x42F, 32}, {0x400, 0x40F, 80},
    {0x531, 0x556, 48}, {0xFF21, 0xFF3A, 32},
};

/* Ranges where upper and lower alternate (even = upper unless odd_upper). */
static const struct {
    unsigned long lo, hi;
    int odd_upper;
} alternating[] = {
    {0x100, 0x12F, 0}, {0x132, 0x137, 0}, {0x139, 0x148, 1}, {0x14A, 0x177, 0},
    {0x179, 0x17E, 1}, {0x460, 0x481, 0}, {0x48A, 0x4BF, 0}, {0x4D0, 0x4FF, 0},
};

static unsigned long to_lower(unsigned long cp) {
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++)
        if (cp >= ranges[i].lo && cp <= ranges[i].hi)
            return (unsigned long)((long)cp + ranges[i].delta);
    for (size_t i = 0; i < sizeof alternating / sizeof alternating[0]; i++)
        if (cp >= alternating[i].lo && cp <= alternating[i].hi &&
            (cp & 1) == (unsigned long)alternating[i].odd_upper)
            return cp + 1;
    if (cp == 0x178) return 0xFF;
    if (cp == 0x386) return 0x3AC;
    if (cp == 0x38C) return 0x3CC;
    if (cp == 0x38E || cp == 0x38F) return cp + 63;
    return cp;
}

/* Upper case of cp into out (1 or 2 code points). */
static int to_upper(unsigned long cp, unsigned long out[2]) {
    out[0] = cp;
    if (cp == 0xDF) { /* ß */
        out[0] = out[1] = 'S';
        return 2;
    }
    if (cp == 0xB5)
        out[0] = 0x39C;
    else if (cp == 0xFF)
        out[0] = 0x178;
    else if (cp == 0x131)
        out[0] = 'I';
    else if (cp == 0x17F)
        out[0] = 'S';
    else if (cp == 0x3C2)
        out[0] = 0x3A3;
    else if (cp == 0x3AC)
        out[0] = 0x386;
    else if (cp == 0x3CC)
        out[0] = 0x38C;
    else if (cp == 0x3CD || cp == 0x3CE)
        out[0] = cp - 63;
    else {
        for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++)
            if (cp >= ranges[i].lo + (unsigned long)ranges[i].delta &&
                cp <= ranges[i].hi + (unsigned long)ranges[i].delta)
                out[0] = (unsigned long)((long)cp - ranges[i].delta);
        for (size_t i = 0; i < sizeof alternating / sizeof alternating[0]; i++)
            if (cp >= alternating[i].lo && cp <= alternating[i].hi &&
                (cp & 1) != (unsigned long)alternating[i].odd_upper)
                out[0] = cp - 1;
    }
    return 1;
}

static int is_cased(unsigned long cp) {
    unsigned long u[2];
    return to_lower(cp) != cp || to_upper(cp, u) != 1 || u[0] != cp;
}

static size_t encode(unsigned long cp, char *o) {
    if (cp < 0x80) return o[0] = (char)cp, 1;
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    o[0] = (char)(0xE0 | (cp >> 12));
    o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
}

static int jtitle_sep(unsigned long cp) {
    return cp == '-' || cp == ' ' || (cp >= '\t' && cp <= '\r') || cp == '(' || cp == '{' ||
           cp == '[' || cp == '<';
}

/* Whether the code point at this position is upper-cased (else lower-cased). */
static int wants_upper(int mode, int first, unsigned long prev, int prev_cased) {
    switch (mode) {
    case CASE_UPPER:
        return 1;
    case CASE_LOWER:
        return 0;
    case CASE_CAPITALIZE:
        return first;
    case CASE_TITLE:
        return !prev_cased;
    default:
        return first || jtitle_sep(prev);
    }
}

int jj_case(jstate *st, const jstr *s, const char *how, jv *out) {
    int mode = !strcmp(how, "upper")        ? CASE_UPPER
               : !strcmp(how, "lower")      ? CASE_LOWER
               : !strcmp(how, "capitalize") ? CASE_CAPITALIZE
               : !strcmp(how, "title")      ? CASE_TITLE
                                            : CASE_JTITLE;
    jsink k;
    jsink_init(&k);
    unsigned long prev = 0;
    int prev_cased = 0;
    for (size_t i = 0; i < s->len;) {
        size_t w;
        unsigned long cp = jj_utf8_at((const unsigned char *)s->p + i, s->len - i, &w), m[2];
        int n = 1;
        if (cp >= 0x10000 || (w == 1 && cp >= 0x80)) { /* outside the tables: copy */
            TRY(jsink_put(st, &k, s->p + i, w, s->plain ? s->plain + i : NULL));
        } else {
            if (wants_upper(mode, i == 0, prev, prev_cased))
                n = to_upper(cp, m);
            else
                m[0] = to_lower(cp);
            if (n == 2 && (mode == CASE_TITLE || mode == CASE_CAPITALIZE)) m[1] = 's'; /* "Ss" */
            char buf[8];
            size_t bl = 0;
            for (int j = 0; j < n; j++) bl += encode(m[j], buf + bl);
            TRY(jsink_put_plain(st, &k, buf, bl, s->plain && s->plain[i]));
        }
        prev_cased = is_cased(cp);
        prev = cp;
        i += w;
    }
    return jsink_str(st, &k, out);
}
