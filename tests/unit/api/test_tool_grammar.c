/* Forced tool calls round trip, for every format: the grammar of a format's tool-call syntax
 * (chat/toolcall.h, with the arguments' rules from engine/json_gbnf.h, as api/chat.c builds
 * it) generates random sentences byte by byte, and the format's own output parser must read
 * each back as exactly the one call of the named tool, with arguments valid for its schema.
 * Streamed, the calls come as TOOL_START then argument fragments that add up to the
 * arguments. Also: lazy filters (strict tools under "auto"). */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "chat/toolcall.h"
#include "engine/grammar.h"
#include "engine/json_gbnf.h"
#include "../engine/tvocab.h"
#include "uvllm/err.h"

static const char *TOOLS =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":"
    "\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"maxLength\":3},\"days\":{"
    "\"type\":\"integer\",\"minimum\":1,\"maximum\":7}},\"required\":[\"city\",\"days\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"noop\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{}}}}]";

/* The grammar api/chat.c builds for format fmt (only: the named tool or NULL). */
static ul_grammar_t *tool_grammar(int fmt, const cJSON *tools, const char *only) {
    ul_buf_t g = {0};
    char err[200];
    const char *trigger;
    ul_buf_puts(&g, "root ::= tool-calls\n");
    int rc = ul_chat_tool_gbnf(fmt, tools, only, 0, &g, &trigger, err, sizeof err);
    if (rc == UL_ENOTSUP) {
        ul_buf_free(&g);
        return NULL;
    }
    cr_assert_eq(rc, 0, "%s: %s", ul_chat_tool_fmt_name(fmt), err);
    ul_json_gbnf_t *jb = ul_json_gbnf_new(err, sizeof err);
    int i = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(t, "function"), "parameters");
        char name[48];
        if (!ul_chat_tool_fmt_per_param(fmt)) {
            snprintf(name, sizeof name, "tool-args-%d", i);
            cr_assert_eq(ul_json_gbnf_add(jb, params, params, name), 0, "%s", err);
        } else {
            int j = 0;
            const cJSON *p;
            cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(params, "properties")) {
                snprintf(name, sizeof name, "tool-arg-%d-%d", i, j++);
                cr_assert_eq(ul_json_gbnf_add(jb, p, params, name), 0, "%s", err);
            }
        }
        i++;
    }
    cr_assert_eq(ul_json_gbnf_finish(jb, &g), 0);
    ul_grammar_t *gr = NULL;
    rc = ul_grammar_compile(NULL, g.p, g.len, &gr, err, sizeof err);
    cr_assert_eq(rc, 0, "%s: %s\n%.*s", ul_chat_tool_fmt_name(fmt), err, (int)g.len, g.p);
    ul_buf_free(&g);
    return gr;
}

/* A random sentence: bytes chosen among those the grammar takes (ASCII preferred). */
static size_t sentence(const ul_grammar_t *g, unsigned *rng, char *out, size_t cap) {
    ul_gmatch_t *m = ul_gmatch_new(g);
    size_t n = 0;
    while (!ul_gmatch_done(m) || (*rng = *rng * 1103515245u + 12345u) % 4) {
        uint8_t ok[256];
        int k = 0;
        for (int b = 1; b < 256; b++) {
            char c = (char)b;
            ul_gmatch_t *t = ul_gmatch_new(g);
            ul_gmatch_copy(t, m);
            if (ul_gmatch_feed(t, &c, 1) == 0 && (b < 0x80 || k == 0)) ok[k++] = (uint8_t)b;
            ul_gmatch_free(t);
        }
        if (!k) break; /* complete and nothing may follow */
        *rng = *rng * 1103515245u + 12345u;
        char c = (char)ok[(*rng >> 8) % (unsigned)k];
        cr_assert_eq(ul_gmatch_feed(m, &c, 1), 0);
        cr_assert_lt(n + 1, cap, "sentence too long");
        out[n++] = c;
    }
    cr_assert(ul_gmatch_done(m));
    ul_gmatch_free(m);
    out[n] = 0;
    return n;
}

typedef struct {
    int calls, starts, frags;
    char name[64];
    ul_buf_t args, streamed;
} res_t;

static void on_ev(void *ud, const ul_chat_ev_t *ev) {
    res_t *r = ud;
    if (ev->kind == UL_CHAT_EV_TOOL_CALL) {
        r->calls++;
        snprintf(r->name, sizeof r->name, "%s", ev->name);
        ul_buf_puts(&r->args, ev->arguments);
    } else if (ev->kind == UL_CHAT_EV_TOOL_START) {
        r->starts++;
        snprintf(r->name, sizeof r->name, "%s", ev->name);
        cr_assert(!strncmp(ev->id, "call_", 5));
    } else if (ev->kind == UL_CHAT_EV_TOOL_ARGS) {
        cr_assert_gt(r->starts, 0, "arguments before their call's start");
        r->frags++;
        ul_buf_append(&r->streamed, ev->text, ev->len);
    }
}

static void parse(int fmt, const char *text, size_t n, int stream, res_t *r) {
    ul_chat_syntax_t syn = {.tool_fmt = fmt};
    ul_chat_parser_t p;
    memset(r, 0, sizeof *r);
    ul_chat_parser_init(&p, &syn, 0, 1, 5);
    ul_chat_parser_stream_calls(&p, stream);
    for (size_t i = 0; i < n; i++) /* byte by byte: the hardest cut for streaming */
        cr_assert_eq(ul_chat_parser_push(&p, text + i, 1, on_ev, r), 0);
    cr_assert_eq(ul_chat_parser_finish(&p, on_ev, r), 0);
    ul_chat_parser_free(&p);
}

static void check_args(int fmt, const char *text, const char *args) {
    cJSON *a = cJSON_Parse(args);
    cr_assert(cJSON_IsObject(a), "%s: arguments %s of %s", ul_chat_tool_fmt_name(fmt), args, text);
    const cJSON *city = cJSON_GetObjectItemCaseSensitive(a, "city");
    const cJSON *days = cJSON_GetObjectItemCaseSensitive(a, "days");
    cr_assert(cJSON_IsString(city) && strlen(city->valuestring) <= 3, "%s", args);
    cr_assert(cJSON_IsNumber(days) && days->valuedouble >= 1 && days->valuedouble <= 7, "%s", args);
    cJSON_Delete(a);
}

Test(tool_grammar, every_format_round_trips_through_its_parser) {
    cJSON *tools = cJSON_Parse(TOOLS);
    int done = 0;
    for (int fmt = 1; fmt < UL_CHAT_TOOLS_COUNT; fmt++) {
        ul_grammar_t *g = tool_grammar(fmt, tools, "get_weather");
        if (!g) {
            cr_assert(fmt == UL_CHAT_TOOLS_GEMMA4, "%s cannot be forced",
                      ul_chat_tool_fmt_name(fmt));
            continue;
        }
        unsigned rng = (unsigned)fmt * 7919u;
        for (int k = 0; k < 3; k++) {
            char text[4096];
            size_t n = sentence(g, &rng, text, sizeof text);
            res_t r;
            parse(fmt, text, n, 0, &r);
            cr_assert_eq(r.calls, 1, "%s: %d calls in %s", ul_chat_tool_fmt_name(fmt), r.calls,
                         text);
            cr_assert_str_eq(r.name, "get_weather", "%s", text);
            check_args(fmt, text, ul_buf_cstr(&r.args));
            ul_buf_free(&r.args);
            ul_buf_free(&r.streamed);
            parse(fmt, text, n, 1, &r); /* streamed: START, then fragments */
            cr_assert_eq(r.starts, 1, "%s streamed %s", ul_chat_tool_fmt_name(fmt), text);
            cr_assert_eq(r.calls, 0);
            check_args(fmt, text, ul_buf_cstr(&r.streamed));
            ul_buf_free(&r.args);
            ul_buf_free(&r.streamed);
        }
        ul_grammar_unref(g);
        done++;
    }
    cr_assert_geq(done, 22, "formats constrained: %d", done);
    cJSON_Delete(tools);
}

/* Every format whose arguments are one JSON object streams them as generated: fed byte by
 * byte, the arguments arrive in many fragments (one per byte of the object), not whole at
 * the end of the section. */
Test(tool_grammar, json_argument_formats_stream_fragments) {
    static const int fmts[] = {
        UL_CHAT_TOOLS_HERMES,       UL_CHAT_TOOLS_LLAMA3,          UL_CHAT_TOOLS_MISTRAL,
        UL_CHAT_TOOLS_MISTRAL_ARGS, UL_CHAT_TOOLS_GRANITE,         UL_CHAT_TOOLS_COMMAND_R,
        UL_CHAT_TOOLS_COMMAND_A,    UL_CHAT_TOOLS_APRIEL,          UL_CHAT_TOOLS_FIREFUNCTION_V2,
        UL_CHAT_TOOLS_GIGACHAT3,    UL_CHAT_TOOLS_FUNCTIONARY_V31, UL_CHAT_TOOLS_KIMI_K2,
        UL_CHAT_TOOLS_DEEPSEEK_R1,  UL_CHAT_TOOLS_HARMONY};
    cJSON *tools = cJSON_Parse(TOOLS);
    for (size_t i = 0; i < sizeof fmts / sizeof *fmts; i++) {
        ul_grammar_t *g = tool_grammar(fmts[i], tools, "get_weather");
        cr_assert(g, "%s", ul_chat_tool_fmt_name(fmts[i]));
        unsigned rng = (unsigned)fmts[i] * 104729u;
        char text[4096];
        size_t n = sentence(g, &rng, text, sizeof text);
        res_t r;
        parse(fmts[i], text, n, 1, &r);
        cr_assert_eq(r.starts, 1, "%s: %s", ul_chat_tool_fmt_name(fmts[i]), text);
        cr_assert_str_eq(r.name, "get_weather");
        check_args(fmts[i], text, ul_buf_cstr(&r.streamed));
        cr_assert_geq((size_t)r.frags, r.streamed.len / 2, "%s: %d fragments for %s",
                      ul_chat_tool_fmt_name(fmts[i]), r.frags, ul_buf_cstr(&r.streamed));
        ul_buf_free(&r.args);
        ul_buf_free(&r.streamed);
        ul_grammar_unref(g);
    }
    cJSON_Delete(tools);
}

/* DeepSeek V3.1 writes "NAME<｜tool▁sep｜>ARGS" (no "function", no fence); several calls in one
 * section each stream. */
Test(tool_grammar, deepseek_v31_and_several_calls_stream) {
    static const char text[] =
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Rom\", "
        "\"days\": "
        "2}<｜tool▁call▁end｜><｜tool▁call▁begin｜>noop<｜tool▁sep｜>{}<｜tool▁call▁end｜>"
        "<｜tool▁calls▁end｜>";
    res_t r;
    parse(UL_CHAT_TOOLS_DEEPSEEK_R1, text, sizeof text - 1, 1, &r);
    cr_assert_eq(r.starts, 2);
    cr_assert_str_eq(r.name, "noop");
    cr_assert_str_eq(ul_buf_cstr(&r.streamed), "{\"city\": \"Rom\", \"days\": 2}{}");
    cr_assert_geq(r.frags, 20);
    ul_buf_free(&r.args);
    ul_buf_free(&r.streamed);
}

Test(tool_grammar, hermes_streams_arguments_in_fragments) {
    static const char text[] = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                               "{\"city\": \"Rome\", \"days\": 3}}\n</tool_call>";
    ul_chat_syntax_t syn = {.tool_fmt = UL_CHAT_TOOLS_HERMES};
    ul_chat_parser_t p;
    res_t r = {0};
    ul_chat_parser_init(&p, &syn, 0, 1, 5);
    ul_chat_parser_stream_calls(&p, 1);
    int frags = 0;
    for (size_t i = 0; i + 4 <= sizeof text - 1; i += 4) {
        size_t before = r.streamed.len;
        cr_assert_eq(ul_chat_parser_push(&p, text + i, 4, on_ev, &r), 0);
        frags += r.streamed.len > before;
    }
    size_t rest = (sizeof text - 1) % 4;
    cr_assert_eq(ul_chat_parser_push(&p, text + sizeof text - 1 - rest, rest, on_ev, &r), 0);
    cr_assert_eq(ul_chat_parser_finish(&p, on_ev, &r), 0);
    cr_assert_eq(r.starts, 1);
    cr_assert_str_eq(ul_buf_cstr(&r.streamed), "{\"city\": \"Rome\", \"days\": 3}");
    cr_assert_geq(frags, 5, "arguments arrive as they are generated (%d fragments)", frags);
    ul_chat_parser_free(&p);
    ul_buf_free(&r.streamed);
    ul_buf_free(&r.args);
}

static const char *const toks[] = {"Hello",       " there",   "<tool",
                                   "_call",       ">",        "\n",
                                   "{\"name\": ", "\"noop\"", ", \"arguments\": ",
                                   "{}",          "}",        "</tool_call>",
                                   "<tool_call>", ">{",       "<e>"};
#define NT ((int32_t)(sizeof toks / sizeof *toks))

static tvocab_t g_tv = {toks, NT, NT - 1};

Test(tool_grammar, lazy_filter_is_free_until_the_trigger) {
    ul_gvocab_t *v = tv_vocab(&g_tv);
    const char *src = "root ::= \"<tool_call>\\n{\\\"name\\\": \\\"noop\\\", \\\"arguments\\\": "
                      "{}}\\n</tool_call>\"\n";
    ul_grammar_t *g = NULL;
    char err[128];
    cr_assert_eq(ul_grammar_compile(v, src, strlen(src), &g, err, sizeof err), 0, "%s", err);
    ul_gfilter_t f;
    cr_assert_eq(ul_gfilter_init_lazy(&f, g, "<tool_call>"), 0);
    for (int32_t id = 0; id < NT; id++) /* free text: anything, even the end */
        cr_assert(f.base.allows(&f.base, id), "token %d", id);
    f.base.accept(&f.base, 0); /* "Hello" */
    f.base.accept(&f.base, 2); /* "<tool" */
    f.base.accept(&f.base, 3); /* "_call" */
    cr_assert(!f.active);
    cr_assert(!f.base.allows(&f.base, 13), "\">{\" completes the trigger, then breaks it");
    cr_assert(f.base.allows(&f.base, 4));
    f.base.accept(&f.base, 4); /* ">": the trigger is complete, the grammar decides */
    cr_assert(f.active);
    cr_assert(!f.base.allows(&f.base, NT - 1), "no end before the call is complete");
    uint32_t bits[1];
    f.base.fill_mask(&f.base, bits);
    cr_assert_eq(bits[0], 1u << 5, "only \"\\n\" may follow: %x", bits[0]);
    ul_gfilter_free(&f);
    ul_grammar_unref(g);
    ul_gvocab_free(v);
}

static size_t utf8_chars(const char *s) {
    size_t n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xc0) != 0x80;
    return n;
}

static int json_same(const char *a, const char *b) {
    cJSON *x = cJSON_Parse(a), *y = cJSON_Parse(b);
    int same = x && y && cJSON_Compare(x, y, 1);
    cJSON_Delete(x);
    cJSON_Delete(y);
    return same;
}

/* LFM2's pythonic calls: keyword arguments, required ones first, optional ones each present
 * or not (with none required, any run of them or none), JSON values read back (\u escapes
 * included); a property no keyword can name is refused. */
Test(tool_grammar, lfm2_keyword_arguments_optional_ones_too) {
    static const char *tools_src =
        "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\","
        "\"properties\":{\"b\":{\"type\":\"boolean\"},\"a\":{\"type\":\"integer\"},\"s\":{"
        "\"type\":\"string\",\"maxLength\":4}},\"required\":[\"a\"]}}},"
        "{\"type\":\"function\",\"function\":{\"name\":\"g\",\"parameters\":{\"type\":\"object\","
        "\"properties\":{\"x\":{\"type\":\"null\"},\"y\":{\"type\":\"null\"},\"z\":{\"type\":"
        "\"null\"}}}}}]";
    cJSON *tools = cJSON_Parse(tools_src);
    int seen_b = 0, seen_none = 0, seen_later = 0;
    for (int k = 0; k < 40; k++) {
        const char *only = k % 2 ? "g" : "f";
        ul_grammar_t *g = tool_grammar(UL_CHAT_TOOLS_LFM2, tools, only);
        unsigned rng = 977u * (unsigned)k + 1;
        char text[2048];
        size_t n = sentence(g, &rng, text, sizeof text);
        res_t r;
        parse(UL_CHAT_TOOLS_LFM2, text, n, 0, &r);
        cr_assert_eq(r.calls, 1, "%s", text);
        cr_assert_str_eq(r.name, only);
        cJSON *a = cJSON_Parse(ul_buf_cstr(&r.args));
        cr_assert(cJSON_IsObject(a), "%s -> %s", text, ul_buf_cstr(&r.args));
        if (!strcmp(only, "f")) {
            cr_assert(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(a, "a")), "%s", text);
            const cJSON *s = cJSON_GetObjectItemCaseSensitive(a, "s");
            cr_assert(!s || (cJSON_IsString(s) && utf8_chars(s->valuestring) <= 4), "%s", text);
            seen_b += cJSON_GetObjectItemCaseSensitive(a, "b") != NULL;
        } else {
            seen_none += cJSON_GetArraySize(a) == 0;
            seen_later += cJSON_GetArraySize(a) > 0 && !cJSON_GetObjectItemCaseSensitive(a, "x");
        }
        cJSON_Delete(a);
        ul_buf_free(&r.args);
        ul_buf_free(&r.streamed);
        ul_grammar_unref(g);
    }
    cr_assert(seen_b && seen_none && seen_later, "%d %d %d", seen_b, seen_none, seen_later);
    cJSON_Delete(tools);

    res_t r;
    static const char esc[] =
        "<|tool_call_start|>[f(s=\"\\u00e9\\n\", t='x\\'y')]<|tool_call_end|>";
    parse(UL_CHAT_TOOLS_LFM2, esc, sizeof esc - 1, 0, &r);
    cr_assert_eq(r.calls, 1);
    cr_assert(json_same(ul_buf_cstr(&r.args), "{\"s\":\"\xc3\xa9\\n\",\"t\":\"x'y\"}"), "%s",
              ul_buf_cstr(&r.args));
    ul_buf_free(&r.args);

    cJSON *bad_tools = cJSON_Parse("[{\"type\":\"function\",\"function\":{\"name\":\"h\","
                                   "\"parameters\":{\"type\":\"object\",\"properties\":{"
                                   "\"a b\":{\"type\":\"integer\"}}}}}]");
    ul_buf_t gb = {0};
    char err[200];
    const char *trig;
    cr_assert_eq(
        ul_chat_tool_gbnf(UL_CHAT_TOOLS_LFM2, bad_tools, NULL, 0, &gb, &trig, err, sizeof err),
        UL_EINVAL);
    cr_assert(strstr(err, "'a b'"), "%s", err);
    ul_buf_free(&gb);
    cJSON_Delete(bad_tools);
}
