/* The streaming machine of the output parser. Undecided text sits in one buffer; the
 * parser is in one of four modes:
 *  - content / reasoning: the buffer is searched for the mode's markers (thinking open or
 *    close, tool-section opens, dropped markers, harmony headers). Text before the first
 *    marker is emitted; without a marker, everything except a possible marker prefix and
 *    trailing whitespace is emitted. Positions already searched are not searched again,
 *    so a long output costs linear time.
 *  - tool section: the section's text is held until its end (close marker, end of a JSON
 *    value, or end of output), then parsed whole; a parse failure emits the raw text as
 *    content.
 *  - harmony header (gpt-oss): "<|start|>assistant to=functions.f<|channel|>commentary
 *    <|message|>" decides whether the message is reasoning, content or a tool call.
 * Decisions depend only on the text, never on where it was cut into pieces. */
#include <stdlib.h>
#include <string.h>

#include "base/mix.h"
#include "chat/toolcall.h"
#include "chat/toolcall_impl.h"
#include "uvllm/err.h"

enum { M_CONTENT, M_REASON, M_SECTION, M_HEADER, M_HTOOL };
enum { A_THINK, A_CLOSE, A_DROP, A_TOOL, A_HEADER };

#define MAX_TRIG 16
#define HEADER_MAX 512 /* a harmony header longer than this is not one */
#define NAME_MAX_JSON 256
#define ANCHOR_WS_MAX 256 /* whitespace allowed before an anchored marker */

typedef struct {
    const char *s;
    size_t n;
    int act, arg, anchored;
} trig_t;

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

void ul_chat_parser_init(ul_chat_parser_t *p, const ul_chat_syntax_t *s, int starts_in_reasoning,
                         int parse_tools, uint64_t id_seed) {
    memset(p, 0, sizeof *p);
    p->syn = *s;
    p->parse_tools = parse_tools && s->tool_fmt != UL_CHAT_TOOLS_NONE;
    p->mode = starts_in_reasoning && (s->think_close || s->tool_fmt == UL_CHAT_TOOLS_HARMONY)
                  ? M_REASON
                  : M_CONTENT;
    p->seg_start = p->mode == M_REASON;
    p->fresh = 1;
    p->rng = id_seed;
}

void ul_chat_parser_free(ul_chat_parser_t *p) {
    ul_buf_free(&p->buf);
    ul_buf_free(&p->aux);
    ul_buf_free(&p->out);
}

static int harmony(const ul_chat_parser_t *p) { return p->syn.tool_fmt == UL_CHAT_TOOLS_HARMONY; }

static void add_trig(trig_t *t, int *n, const char *s, int act, int arg, int anchored) {
    if (!s || !*s || *n >= MAX_TRIG) return;
    t[(*n)++] = (trig_t){s, strlen(s), act, arg, anchored};
}

static int content_trigs(const ul_chat_parser_t *p, trig_t *t) {
    int n = 0;
    add_trig(t, &n, p->syn.think_open, A_THINK, 0, 0);
    for (int i = 0; i < UL_CHAT_SYNTAX_MAX_DROP; i++) add_trig(t, &n, p->syn.drop[i], A_DROP, 0, 0);
    if (harmony(p)) {
        add_trig(t, &n, "<|start|>", A_HEADER, 0, 0);
        add_trig(t, &n, "<|channel|>", A_HEADER, 0, 0);
        add_trig(t, &n, " to=", A_HEADER, 0, 1);
        add_trig(t, &n, "<|end|>", A_DROP, 0, 0);
        add_trig(t, &n, "<|return|>", A_DROP, 0, 0);
        add_trig(t, &n, "<|call|>", A_DROP, 0, 0);
    }
    const ul_tc_format_t *f = p->parse_tools ? ul_tc_format(p->syn.tool_fmt) : NULL;
    for (int i = 0; f && i < UL_TC_MAX_SECTIONS; i++)
        add_trig(t, &n, f->sec[i].open, A_TOOL, i, f->sec[i].flags & UL_TC_ANCHORED);
    return n;
}

static int reason_trigs(const ul_chat_parser_t *p, trig_t *t) {
    int n = 0;
    add_trig(t, &n, p->syn.think_close, A_CLOSE, 0, 0);
    add_trig(t, &n, p->syn.think_open, A_DROP, 0, 1); /* re-opened right after the prompt's */
    if (harmony(p)) {
        add_trig(t, &n, "<|end|>", A_CLOSE, 0, 0);
        add_trig(t, &n, "<|start|>", A_HEADER, 0, 0);
        add_trig(t, &n, "<|channel|>", A_HEADER, 0, 0);
    }
    return n;
}

static void emit_text(ul_chat_parser_t *p, int kind, const char *s, size_t n, ul_chat_ev_cb cb,
                      void *ud) {
    if (!n) return;
    ul_chat_ev_t ev = {.kind = (ul_chat_ev_kind_t)kind, .text = s, .len = n};
    p->fresh = 0;
    cb(ud, &ev);
}

static uint64_t next_rand(ul_chat_parser_t *p) { return ul_splitmix64(&p->rng); }

void ul_tc_call_id(ul_chat_parser_t *p, char *id) {
    static const char alnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    memcpy(id, "call_", 5);
    for (int k = 0; k < 24; k++) id[5 + k] = alnum[next_rand(p) % 62];
    id[29] = 0;
}

static void emit_calls(ul_chat_parser_t *p, const ul_tc_calls_t *c, ul_chat_ev_cb cb, void *ud) {
    const char *r = c->b.p;
    for (int i = 0; i < c->n; i++) {
        char id[30];
        const char *args = r + strlen(r) + 1;
        p->fresh = 0;
        if (p->stream && i < p->ic_started) { /* streamed already */
            r = args + strlen(args) + 1;
            continue;
        }
        ul_tc_call_id(p, id);
        ul_chat_ev_t ev = {.kind = p->stream ? UL_CHAT_EV_TOOL_START : UL_CHAT_EV_TOOL_CALL,
                           .index = p->n_calls++,
                           .id = id,
                           .name = r,
                           .arguments = args};
        cb(ud, &ev);
        if (p->stream) {
            ul_chat_ev_t a = {
                .kind = UL_CHAT_EV_TOOL_ARGS, .index = ev.index, .text = args, .len = strlen(args)};
            cb(ud, &a);
        }
        r = args + strlen(args) + 1;
    }
}

void ul_chat_parser_stream_calls(ul_chat_parser_t *p, int on) { p->stream = on; }

/* Which trigger starts at buf[i]: 1 and *hit on a full match, -1 when the buffer ends in
 * a prefix of a longer trigger (undecided), 0 otherwise. */
static int match_at(const ul_chat_parser_t *p, const trig_t *t, int nt, size_t i, size_t fnw,
                    int final, const trig_t **hit) {
    const char *b = p->buf.p;
    size_t avail = p->buf.len - i;
    int partial = 0;
    *hit = NULL;
    for (int k = 0; k < nt; k++) {
        if (b[i] != t[k].s[0]) continue;
        if (t[k].anchored && !(p->fresh && i <= fnw)) continue;
        if (avail >= t[k].n) {
            if (!memcmp(b + i, t[k].s, t[k].n) && (!*hit || t[k].n > (*hit)->n)) *hit = &t[k];
        } else if (!final && !memcmp(b + i, t[k].s, avail)) {
            partial = 1;
        }
    }
    if (partial) return -1; /* a longer trigger may still match here */
    return *hit ? 1 : 0;
}

/* Length of buf[0..n) without its trailing whitespace. In the text modes buf[0..scan) is
 * only whitespace (what was held back), so the search stops there: a long run of spaces
 * arriving one by one is not rescanned on every push. */
static size_t trim_end(const ul_chat_parser_t *p, size_t n) {
    while (n > p->scan && is_ws(p->buf.p[n - 1])) n--;
    return n > p->scan ? n : 0;
}

/* Acts on a marker found at buf[i]. */
static int on_marker(ul_chat_parser_t *p, const trig_t *t, size_t i, ul_chat_ev_cb cb, void *ud) {
    int kind = p->mode == M_REASON ? UL_CHAT_EV_REASONING : UL_CHAT_EV_CONTENT;
    size_t keep = trim_end(p, i);
    emit_text(p, kind, p->buf.p, keep, cb, ud);
    p->fresh = 0;
    p->scan = 0;
    if (t->act == A_HEADER) { /* the header keeps its opening marker */
        ul_buf_consume(&p->buf, i);
        p->mode = M_HEADER;
        p->trig = (int)t->n;
        return 0;
    }
    if (t->act == A_TOOL) { /* the whitespace before it returns if the section fails */
        p->aux.len = 0;
        int rc = ul_buf_append(&p->aux, p->buf.p + keep, i - keep);
        const ul_tc_section_t *sec = &ul_tc_format(p->syn.tool_fmt)->sec[t->arg];
        ul_buf_consume(&p->buf, i + (sec->flags & UL_TC_KEEP_OPEN ? 0 : t->n));
        ul_tc_stream_reset(p);
        p->mode = M_SECTION;
        p->trig = t->arg;
        p->js_phase = 0;
        p->js = (ul_json_end_t){0};
        return rc;
    }
    ul_buf_consume(&p->buf, i + t->n);
    if (t->act == A_THINK) p->mode = M_REASON;
    if (t->act == A_CLOSE) p->mode = M_CONTENT;
    p->seg_start = 1;
    return 0;
}

/* Content or reasoning: emits what is decided; 1 when the mode changed. */
static int text_step(ul_chat_parser_t *p, int final, ul_chat_ev_cb cb, void *ud) {
    if (p->seg_start) {
        size_t k = 0;
        while (k < p->buf.len && is_ws(p->buf.p[k])) k++;
        ul_buf_consume(&p->buf, k);
        p->scan = 0;
        if (!p->buf.len) return 0;
        p->seg_start = 0;
    }
    trig_t t[MAX_TRIG];
    int nt = p->mode == M_REASON ? reason_trigs(p, t) : content_trigs(p, t);
    size_t len = p->buf.len, fnw = 0, hold = len, i;
    while (p->fresh && fnw < len && fnw < ANCHOR_WS_MAX && is_ws(p->buf.p[fnw])) fnw++;
    for (i = p->scan; i < len; i++) {
        const trig_t *hit;
        int m = match_at(p, t, nt, i, fnw, final, &hit);
        if (m > 0) {
            int rc = on_marker(p, hit, i, cb, ud);
            return rc ? rc : 1;
        }
        if (m < 0) {
            hold = i;
            break;
        }
    }
    /* Pieces are whole characters and markers start with one, so cut is between two. */
    size_t cut = final ? len : trim_end(p, hold);
    emit_text(p, p->mode == M_REASON ? UL_CHAT_EV_REASONING : UL_CHAT_EV_CONTENT, p->buf.p, cut, cb,
              ud);
    if (cut) ul_buf_consume(&p->buf, cut); /* no memmove while everything is held */
    p->scan = hold - cut;
    return 0;
}

static const ul_tc_section_t *cur_sec(const ul_chat_parser_t *p) {
    return &ul_tc_format(p->syn.tool_fmt)->sec[p->trig];
}

/* The section was not a tool call: the whitespace before it, its opening marker and its
 * first n bytes become content. */
static int section_fallback(ul_chat_parser_t *p, size_t n, ul_chat_ev_cb cb, void *ud) {
    const ul_tc_section_t *sec = cur_sec(p);
    p->out.len = 0;
    int rc = ul_buf_append(&p->out, p->aux.p, p->aux.len);
    if (!rc && !(sec->flags & UL_TC_KEEP_OPEN)) rc = ul_buf_puts(&p->out, sec->open);
    if (!rc) rc = ul_buf_append(&p->out, p->buf.p, n);
    if (rc) return rc;
    emit_text(p, UL_CHAT_EV_CONTENT, p->out.p, p->out.len, cb, ud);
    ul_buf_consume(&p->buf, n);
    if (!n && (sec->flags & UL_TC_KEEP_OPEN)) ul_buf_consume(&p->buf, strlen(sec->open));
    p->mode = M_CONTENT;
    p->scan = 0;
    return 1;
}

/* The section's text is buf[0..body_n), followed by tail_n bytes of closing marker. */
static int end_section(ul_chat_parser_t *p, size_t body_n, size_t tail_n, ul_chat_ev_cb cb,
                       void *ud) {
    ul_tc_calls_t calls = {0};
    int rc = cur_sec(p)->parse(p->buf.p, body_n, &calls);
    if (!rc) {
        emit_calls(p, &calls, cb, ud);
        ul_buf_consume(&p->buf, body_n + tail_n);
        p->mode = M_CONTENT;
        p->scan = 0;
        p->seg_start = 1;
        rc = 1;
    } else if (rc == UL_EFORMAT) {
        rc = section_fallback(p, body_n + tail_n, cb, ud);
    }
    ul_buf_free(&calls.b);
    return rc;
}

/* Finds the end of the JSON value of a UL_TC_END_JSON section: 1 with *end, 0 when more
 * text is needed, -1 when the section does not hold one. */
static int json_scan(ul_chat_parser_t *p, size_t *end) {
    const char *ja = cur_sec(p)->json_after, *b = p->buf.p;
    size_t len = p->buf.len, an = ja ? strlen(ja) : 0;
    for (size_t i = p->scan; i < len; i++) {
        char c = b[i];
        if (p->js_phase == 0 || p->js_phase == 4) {
            if (is_ws(c)) continue;
            if (p->js_phase == 0 && ja && c == ja[0] &&
                !memcmp(b + i, ja, len - i < an ? len - i : an)) {
                if (len - i >= an) return -1; /* no name before it */
                p->scan = i;
                return 0;
            }
            if (c != '{' && c != '[') {
                if (p->js_phase == 4 || !ja) return -1;
                p->js_phase = 3; /* NAME[ARGS]{...} */
                p->scan = i;
                return json_scan(p, end);
            }
            p->js_phase = 1;
            p->js = (ul_json_end_t){.depth = 1};
        } else if (p->js_phase == 3) {
            const char *a = memmem(b + i, len - i, ja, an);
            if (!a || (size_t)(a - b) > NAME_MAX_JSON) {
                if (a || len > NAME_MAX_JSON + an) return -1;
                p->scan = len >= an ? len - an + 1 : 0;
                if (p->scan < i) p->scan = i;
                return 0;
            }
            i = (size_t)(a - b) + an - 1;
            p->js_phase = 4;
        } else if (ul_json_end_feed(&p->js, c)) {
            *end = i + 1;
            return 1;
        }
    }
    p->scan = len;
    return 0;
}

static int section_step(ul_chat_parser_t *p, int final, ul_chat_ev_cb cb, void *ud) {
    const ul_tc_section_t *sec = cur_sec(p);
    size_t len = p->buf.len, end;
    if (sec->end == UL_TC_END_MARK) {
        size_t cn = strlen(sec->close);
        const char *e =
            len > p->scan ? memmem(p->buf.p + p->scan, len - p->scan, sec->close, cn) : NULL;
        if (p->stream) ul_tc_stream_scan(p, e ? (size_t)(e - p->buf.p) : len, cb, ud);
        if (e) return end_section(p, (size_t)(e - p->buf.p), cn, cb, ud);
        p->scan = len >= cn ? len - cn + 1 : 0;
    } else if (sec->end == UL_TC_END_JSON) {
        int r = json_scan(p, &end);
        if (p->stream) ul_tc_stream_scan(p, r > 0 ? end : len, cb, ud);
        if (r > 0) return end_section(p, end, 0, cb, ud);
        if (r < 0) return section_fallback(p, 0, cb, ud);
    } else if (final) {
        if (p->stream) ul_tc_stream_scan(p, len, cb, ud);
        return end_section(p, len, 0, cb, ud);
    }
    return final ? section_fallback(p, len, cb, ud) : 0;
}

/* The word after key in s[0..n) (up to whitespace or '<'); length 0 when absent. */
static const char *word_after(const char *s, size_t n, const char *key, size_t *wn) {
    const char *k = ul_tc_find(s, n, key);
    *wn = 0;
    if (!k) return NULL;
    const char *w = k + strlen(key), *e = s + n;
    while (w + *wn < e && !is_ws(w[*wn]) && w[*wn] != '<') (*wn)++;
    return w;
}

/* Harmony: "<|start|>assistant to=functions.f<|channel|>commentary json<|message|>". */
static int header_step(ul_chat_parser_t *p, int final, ul_chat_ev_cb cb, void *ud) {
    static const char msg[] = "<|message|>";
    size_t len = p->buf.len, mn = sizeof msg - 1;
    const char *e = len > p->scan ? memmem(p->buf.p + p->scan, len - p->scan, msg, mn) : NULL;
    if (!e || (size_t)(e - p->buf.p) > HEADER_MAX) {
        if (!e && !final && len < HEADER_MAX + mn) { /* a marker within the bound may follow */
            p->scan = len >= mn ? len - mn + 1 : 0;
            return 0;
        }
        emit_text(p, UL_CHAT_EV_CONTENT, p->buf.p, (size_t)p->trig, cb, ud); /* not a header */
        ul_buf_consume(&p->buf, (size_t)p->trig);
        p->mode = M_CONTENT;
        p->scan = 0;
        return 1;
    }
    size_t hn = (size_t)(e - p->buf.p), cn, rn;
    const char *ch = word_after(p->buf.p, hn, "<|channel|>", &cn);
    const char *to = word_after(p->buf.p, hn, "to=functions.", &rn);
    p->mode = ch && cn == 8 && !memcmp(ch, "analysis", 8) ? M_REASON : M_CONTENT;
    if (to && rn && p->parse_tools) {
        p->aux.len = 0;
        if (ul_buf_append(&p->aux, to, rn) || !ul_buf_cstr(&p->aux)) return UL_ENOMEM;
        p->mode = M_HTOOL;
        ul_tc_stream_reset(p);
    }
    ul_buf_consume(&p->buf, hn + mn);
    p->scan = 0;
    p->seg_start = 1;
    return 1;
}

/* Harmony tool message: JSON arguments up to "<|call|>" (an end-of-generation token the
 * detokenizer may have dropped, so the end of the output also ends it). */
static int htool_step(ul_chat_parser_t *p, int final, ul_chat_ev_cb cb, void *ud) {
    static const char call[] = "<|call|>";
    size_t len = p->buf.len, cn = sizeof call - 1;
    const char *e = len > p->scan ? memmem(p->buf.p + p->scan, len - p->scan, call, cn) : NULL;
    if (p->stream) ul_tc_stream_scan(p, e ? (size_t)(e - p->buf.p) : len, cb, ud);
    if (!e && !final) {
        p->scan = len >= cn ? len - cn + 1 : 0;
        return 0;
    }
    size_t body = e ? (size_t)(e - p->buf.p) : len, used = e ? body + cn : len;
    ul_tc_calls_t calls = {0};
    int rc = ul_tc_calls_add_json(&calls, p->aux.p, p->aux.len, p->buf.p, body);
    if (!rc)
        emit_calls(p, &calls, cb, ud);
    else if (rc == UL_EFORMAT)
        emit_text(p, UL_CHAT_EV_CONTENT, p->buf.p, used, cb, ud);
    ul_buf_free(&calls.b);
    if (rc && rc != UL_EFORMAT) return rc;
    ul_buf_consume(&p->buf, used);
    p->mode = M_CONTENT;
    p->scan = 0;
    p->seg_start = 1;
    return 1;
}

static int run(ul_chat_parser_t *p, int final, ul_chat_ev_cb cb, void *ud) {
    int r;
    do {
        switch (p->mode) {
        case M_SECTION:
            r = section_step(p, final, cb, ud);
            break;
        case M_HEADER:
            r = header_step(p, final, cb, ud);
            break;
        case M_HTOOL:
            r = htool_step(p, final, cb, ud);
            break;
        default:
            r = text_step(p, final, cb, ud);
            break;
        }
    } while (r > 0);
    if (r < 0) p->err = r;
    return r;
}

int ul_chat_parser_push(ul_chat_parser_t *p, const char *text, size_t len, ul_chat_ev_cb cb,
                        void *ud) {
    if (p->err) return p->err;
    if (ul_buf_append(&p->buf, text, len)) return p->err = UL_ENOMEM;
    return run(p, 0, cb, ud);
}

int ul_chat_parser_finish(ul_chat_parser_t *p, ul_chat_ev_cb cb, void *ud) {
    if (p->err) return p->err;
    return run(p, 1, cb, ud);
}
