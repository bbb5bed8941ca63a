/* Tool calls streamed as they are generated (toolcall.h, ul_chat_parser_stream_calls): while
 * a tool section (or a harmony tool message) is open, its text is scanned for a call's name
 * and the start of its JSON arguments; from then on every byte of the arguments goes out
 * as a TOOL_ARGS fragment until their closing brace. The section is still parsed whole at
 * its end (toolcall.c); calls streamed here are not emitted again, the others come out
 * whole. */
#include <string.h>

#include "chat/toolcall.h"
#include "chat/toolcall_impl.h"

#define NAME_MAX_LEN 256

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* How the format's sections name their calls: 1 JSON objects with a "name" (or
 * "tool_name") key before "arguments" (or "parameters"); 2 NAME then a delimiter then the
 * arguments; 3 blocks of an opening marker, the name, a delimiter, the arguments (Kimi K2,
 * DeepSeek); 4 the name known from the message's header (harmony); 0 not streamed. */
static int style(const ul_chat_parser_t *p, const char **delim) {
    switch (p->syn.tool_fmt) {
    case UL_CHAT_TOOLS_HERMES:
    case UL_CHAT_TOOLS_QWEN3_CODER:
    case UL_CHAT_TOOLS_MISTRAL:
    case UL_CHAT_TOOLS_GRANITE:
    case UL_CHAT_TOOLS_COMMAND_R:
    case UL_CHAT_TOOLS_COMMAND_A:
    case UL_CHAT_TOOLS_APRIEL:
    case UL_CHAT_TOOLS_FIREFUNCTION_V2:
    case UL_CHAT_TOOLS_GIGACHAT3:
        return 1;
    case UL_CHAT_TOOLS_LLAMA3: /* the anchored {"name", "parameters"}, not <|python_tag|> */
        return p->trig == 0;
    case UL_CHAT_TOOLS_MISTRAL_ARGS:
        *delim = "[ARGS]";
        return 2;
    case UL_CHAT_TOOLS_FUNCTIONARY_V31:
        *delim = ">";
        return p->trig == 0 ? 2 : 0;
    case UL_CHAT_TOOLS_KIMI_K2:
    case UL_CHAT_TOOLS_DEEPSEEK_R1:
        return 3;
    case UL_CHAT_TOOLS_HARMONY:
        return 4;
    default:
        return 0;
    }
}

void ul_tc_stream_reset(ul_chat_parser_t *p) {
    p->ic_phase = 0;
    p->ic_pos = 0;
    p->ic = (ul_json_end_t){0};
    p->ic_started = 0;
}

/* At b[i]: "KEY" ws ':' ws for one of keys; the offset after it, 0 when not there, -1 when
 * the text ends first (undecided). */
static long key_at(const char *b, size_t len, size_t i, const char *const *keys) {
    for (; *keys; keys++) {
        size_t k = strlen(*keys), j = i;
        size_t m = len - i < k ? len - i : k;
        if (memcmp(b + i, *keys, m)) continue;
        if (m < k) return -1;
        j += k;
        while (j < len && is_ws(b[j])) j++;
        if (j == len) return -1;
        if (b[j] != ':') continue;
        j++;
        while (j < len && is_ws(b[j])) j++;
        if (j == len) return -1;
        return (long)j;
    }
    return 0;
}

static void start_call(ul_chat_parser_t *p, int st, ul_chat_ev_cb cb, void *ud) {
    char id[30], name[NAME_MAX_LEN + 1];
    const char *src = st == 4 ? p->aux.p : p->buf.p + p->ic_name; /* harmony: the header's */
    size_t n = st == 4 ? p->aux.len : p->ic_nlen;
    if (n > NAME_MAX_LEN) n = NAME_MAX_LEN;
    memcpy(name, src, n);
    name[n] = 0;
    ul_tc_call_id(p, id);
    ul_chat_ev_t ev = {.kind = UL_CHAT_EV_TOOL_START, .index = p->n_calls, .id = id, .name = name};
    p->fresh = 0;
    cb(ud, &ev);
    p->ic_phase = 2;
    p->ic = (ul_json_end_t){0};
}

/* Phase 0 of style 1: a "name" key and its string value. */
static int find_name_json(ul_chat_parser_t *p, size_t len) {
    static const char *const keys[] = {"\"name\"", "\"tool_name\"", NULL};
    const char *b = p->buf.p;
    for (size_t i = p->ic_pos; i < len; i++) {
        if (b[i] != '"') continue;
        long v = key_at(b, len, i, keys);
        if (v < 0) return p->ic_pos = i, 0;
        if (!v || b[v] != '"') continue;
        size_t j = (size_t)v + 1;
        while (j < len && b[j] != '"' && b[j] != '\\' && j - (size_t)v <= NAME_MAX_LEN) j++;
        if (j == len) return p->ic_pos = i, 0;
        if (b[j] != '"' || j == (size_t)v + 1) continue;
        p->ic_name = (size_t)v + 1;
        p->ic_nlen = j - p->ic_name;
        p->ic_pos = j + 1;
        return 1;
    }
    p->ic_pos = len;
    return 0;
}

/* Phase 0 of style 2: NAME before the delimiter. */
static int find_name_delim(ul_chat_parser_t *p, size_t len, const char *delim) {
    const char *d = ul_tc_find(p->buf.p, len, delim);
    if (!d) return 0;
    const char *s = p->buf.p;
    size_t n = (size_t)(d - s);
    ul_tc_trim(&s, &n);
    if (!n || n > NAME_MAX_LEN) return p->ic_pos = len, p->ic_phase = 3, 0; /* not streamable */
    p->ic_name = (size_t)(s - p->buf.p);
    p->ic_nlen = n;
    p->ic_pos = (size_t)(d - p->buf.p) + strlen(delim);
    return 1;
}

/* Phase 0 of style 3: the next block's name. Kimi K2: "<|tool_call_begin|>functions.N:0
 * <|tool_call_argument_begin|>"; DeepSeek: "<｜tool▁call▁begin｜>function<｜tool▁sep｜>N\n```json"
 * (R1, V3) or "<｜tool▁call▁begin｜>N<｜tool▁sep｜>" (V3.1), as toolcall_xml.c reads them. */
static int find_name_block(ul_chat_parser_t *p, size_t len) {
    int kimi = p->syn.tool_fmt == UL_CHAT_TOOLS_KIMI_K2;
    const char *open = kimi ? "<|tool_call_begin|>" : "<｜tool▁call▁begin｜>";
    const char *delim = kimi ? "<|tool_call_argument_begin|>" : "<｜tool▁sep｜>";
    const char *b = p->buf.p, *o = ul_tc_find(b + p->ic_pos, len - p->ic_pos, open);
    if (!o) return 0;
    size_t from = (size_t)(o - b) + strlen(open);
    const char *d = ul_tc_find(b + from, len - from, delim), *nm = b + from;
    if (!d) return len - from > NAME_MAX_LEN + 32 ? (p->ic_phase = 3, 0) : 0;
    size_t nn = (size_t)(d - nm), after = (size_t)(d - b) + strlen(delim);
    ul_tc_trim(&nm, &nn);
    if (kimi) { /* functions.NAME:IDX */
        const char *colon = memrchr(nm, ':', nn), *dot;
        if (colon) nn = (size_t)(colon - nm);
        if ((dot = memchr(nm, '.', nn))) nn -= (size_t)(dot + 1 - nm), nm = dot + 1;
    } else if (nn == 8 && !memcmp(nm, "function", 8)) {
        const char *f = ul_tc_find(b + after, len - after, "```");
        if (!f || len - (size_t)(f - b) < 7) /* the fence and "json" may follow */
            return len - after > NAME_MAX_LEN + 32 ? (p->ic_phase = 3, 0) : 0;
        nm = b + after;
        nn = (size_t)(f - nm);
        ul_tc_trim(&nm, &nn);
        after = (size_t)(f - b) + 3;
        if (!memcmp(b + after, "json", 4)) after += 4;
    }
    if (!nn || nn > NAME_MAX_LEN) return p->ic_pos = len, p->ic_phase = 3, 0; /* not streamable */
    p->ic_name = (size_t)(nm - b);
    p->ic_nlen = nn;
    p->ic_pos = after;
    return 1;
}

/* Phase 1: the arguments' opening brace ({"arguments": { for style 1). */
static int find_args(ul_chat_parser_t *p, size_t len, int st) {
    static const char *const keys[] = {"\"arguments\"", "\"parameters\"", NULL};
    const char *b = p->buf.p;
    for (size_t i = p->ic_pos; i < len; i++) {
        if (st >= 2) {
            if (is_ws(b[i])) continue;
            if (b[i] != '{') return p->ic_phase = 3, 0;
            p->ic_pos = i;
            return 1;
        }
        if (b[i] == '}') return p->ic_phase = 3, 0; /* no arguments: the rest whole at the end */
        if (b[i] != '"') continue;
        long v = key_at(b, len, i, keys);
        if (v < 0) return p->ic_pos = i, 0;
        if (!v) continue;
        if (b[v] != '{') return p->ic_phase = 3, 0; /* a string of JSON: whole at the end */
        p->ic_pos = (size_t)v;
        return 1;
    }
    p->ic_pos = len;
    return 0;
}

/* Phase 2: argument bytes up to the matching brace. */
static void stream_args(ul_chat_parser_t *p, size_t len, ul_chat_ev_cb cb, void *ud) {
    const char *b = p->buf.p;
    size_t from = p->ic_pos, i = from;
    for (; i < len; i++) {
        char c = b[i];
        if (ul_json_end_feed(&p->ic, c)) {
            i++;
            p->ic_phase = 0;
            break;
        }
    }
    if (i > from) {
        ul_chat_ev_t ev = {
            .kind = UL_CHAT_EV_TOOL_ARGS, .index = p->n_calls, .text = b + from, .len = i - from};
        cb(ud, &ev);
    }
    p->ic_pos = i;
    if (p->ic_phase == 0) { /* this call's arguments are complete */
        p->n_calls++;
        p->ic_started++;
    }
}

void ul_tc_stream_scan(ul_chat_parser_t *p, size_t len, ul_chat_ev_cb cb, void *ud) {
    const char *delim = NULL;
    int st = style(p, &delim);
    if (!st) return;
    while (p->ic_pos < len && p->ic_phase != 3) {
        size_t before = p->ic_pos;
        int phase = p->ic_phase;
        if (phase == 0) {
            /* one call per NAME[ARGS] section, per harmony message */
            if ((st == 2 || st == 4) && p->ic_started) return;
            if (st == 1 && !find_name_json(p, len)) return;
            if (st == 2 && !find_name_delim(p, len, delim)) return;
            if (st == 3 && !find_name_block(p, len)) return;
            p->ic_phase = 1;
        } else if (phase == 1) {
            if (!find_args(p, len, st)) {
                if (p->ic_phase != 1 || p->ic_pos == before) return;
                continue;
            }
            start_call(p, st, cb, ud);
        } else {
            stream_args(p, len, cb, ud);
        }
        if (p->ic_pos == before && p->ic_phase == phase) return;
    }
}
