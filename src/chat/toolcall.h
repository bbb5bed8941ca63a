/* Splitting a chat model's generated text into OpenAI's assistant message: content,
 * reasoning_content (the text inside the template's thinking markers) and tool_calls
 * (parsed from the tool-call syntax the template taught the model).
 *
 * The syntax (which tool-call format, which thinking markers) is picked once per model
 * from its chat template's source text (ul_chat_syntax_detect). A parser is then run per
 * response: text pieces go in as they are generated, events come out. Content and
 * reasoning deltas are emitted as soon as they cannot be the start of a marker (only a
 * possible marker prefix and trailing whitespace are held back); a tool call is emitted as
 * one event once complete. The events of a response do not depend on how its text was
 * cut into pieces, so the non-streaming answer is the concatenation of the streamed one.
 *
 * Malformed model output (broken JSON, an unclosed section) is never an error: it stays
 * content. Whitespace next to a marker is trimmed ("<think>\nx\n</think>\n\nA" gives
 * reasoning "x", content "A"); text without markers passes through unchanged.
 *
 * No libuv; single-threaded per parser. Memory held is bounded by the text of the section
 * being parsed (the caller bounds the output length). */
#ifndef UL_CHAT_TOOLCALL_H
#define UL_CHAT_TOOLCALL_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "base/buf.h"

typedef enum {
    UL_CHAT_TOOLS_NONE = 0,
    UL_CHAT_TOOLS_HERMES,          /* <tool_call>{"name","arguments"}</tool_call> (Qwen2.5/3) */
    UL_CHAT_TOOLS_QWEN3_CODER,     /* <tool_call><function=N><parameter=K>V</parameter>... */
    UL_CHAT_TOOLS_LLAMA3,          /* whole output {"name","parameters"}; <|python_tag|>{...} */
    UL_CHAT_TOOLS_MISTRAL,         /* [TOOL_CALLS][{"name","arguments"},...] */
    UL_CHAT_TOOLS_MISTRAL_ARGS,    /* [TOOL_CALLS]NAME[ARGS]{...} (Mistral-Small-3.2, Devstral) */
    UL_CHAT_TOOLS_FUNCTIONARY_V31, /* <function=NAME>{...}</function> */
    UL_CHAT_TOOLS_COMMAND_R,       /* Action: ```json [{"tool_name","parameters"}] ``` */
    UL_CHAT_TOOLS_COMMAND_A,       /* <|START_ACTION|>[...]<|END_ACTION|> (Cohere2) */
    UL_CHAT_TOOLS_GRANITE,         /* <|tool_call|>[{"name","arguments"}] */
    UL_CHAT_TOOLS_DEEPSEEK_R1, /* <｜tool▁calls▁begin｜>...function<｜tool▁sep｜>N ```json */
    UL_CHAT_TOOLS_DEEPSEEK_DSML,   /* <｜DSML｜function_calls|tool_calls><｜DSML｜invoke ...> */
    UL_CHAT_TOOLS_KIMI_K2,         /* <|tool_calls_section_begin|>...functions.N:0... */
    UL_CHAT_TOOLS_GLM45,           /* <tool_call>N<arg_key>K</arg_key><arg_value>V</arg_value> */
    UL_CHAT_TOOLS_HARMONY,         /* gpt-oss channels; commentary to=functions.N */
    UL_CHAT_TOOLS_MINIMAX_M2,      /* <minimax:tool_call><invoke name=N><parameter name=K> */
    UL_CHAT_TOOLS_SEED_OSS,        /* <seed:tool_call><function=N><parameter=K>V</parameter> */
    UL_CHAT_TOOLS_FIREFUNCTION_V2, /* functools[{"name","arguments"}] */
    UL_CHAT_TOOLS_LFM2,            /* <|tool_call_start|>[name(a=1)]<|tool_call_end|> */
    UL_CHAT_TOOLS_APRIEL,          /* <tool_calls>[{"name","arguments"}]</tool_calls> */
    UL_CHAT_TOOLS_APERTUS,         /* <|tools_prefix|>[{"NAME": {...}}]<|tools_suffix|> */
    UL_CHAT_TOOLS_GIGACHAT3,       /* function call<|role_sep|>\n{"name","arguments"} */
    UL_CHAT_TOOLS_SOLAR_OPEN,      /* <|tool_calls|><|tool_call:begin|>id<|tool_call:name|>N... */
    UL_CHAT_TOOLS_GEMMA4,          /* <|tool_call>call:N{k:<|"|>v<|"|>}<tool_call|> */
    UL_CHAT_TOOLS_COUNT
} ul_chat_tool_fmt_t;

#define UL_CHAT_SYNTAX_MAX_DROP 4

/* What a model's output looks like. Strings are static (string literals) or owned by the
 * caller; all may be NULL. */
typedef struct ul_chat_syntax_s {
    int tool_fmt;            /* ul_chat_tool_fmt_t */
    const char *think_open;  /* starts a reasoning block in the output ("<think>") */
    const char *think_close; /* ends it ("</think>") */
    const char *prompt_open; /* a prompt ending in this (after trailing whitespace) makes
                              * the output start inside reasoning; NULL: think_open */
    const char *drop[UL_CHAT_SYNTAX_MAX_DROP]; /* markers removed from content */
} ul_chat_syntax_t;

/* Picks the tool-call format and the reasoning markers from a chat template's source text,
 * by the markers it contains. Never fails: an unknown template gives no tool format and no
 * reasoning markers (plain content). */
void ul_chat_syntax_detect(const char *tmpl_src, size_t len, ul_chat_syntax_t *out);
/* Short stable name of a format ("hermes", "qwen3_coder", ...); "none" when out of range. */
const char *ul_chat_tool_fmt_name(int tool_fmt);
/* 1 when the rendered prompt ends inside an open thinking block (DeepSeek-R1's generation
 * prompt ends in "<think>\n"), so the parser must start in reasoning; 0 otherwise. */
int ul_chat_syntax_prompt_opens_reasoning(const ul_chat_syntax_t *s, const char *prompt,
                                          size_t len);

/* Forced tool calls (toolcall_gbnf.c): GBNF text for calls in format fmt of the tools
 * (OpenAI's [{"type":"function","function":{"name","parameters"}}], only the one named
 * `only` when not NULL; several calls when parallel), in exactly the syntax the format's
 * parser reads back. Writes rule "tool-calls" (and "tool-call"); the arguments are rules
 * the caller adds: "tool-args-I" (tool I's arguments, a JSON object; I its index in tools)
 * or, in formats with one element per parameter (ul_chat_tool_fmt_per_param),
 * "tool-arg-I-J" (the JSON value of the J-th property of its parameters' "properties").
 * *trigger: the text the calls start with (for lazy grammars). 0, UL_ENOTSUP (a format
 * this cannot constrain), UL_EINVAL (a tool name outside [A-Za-z0-9_.-]{1,64}) with err,
 * or UL_ENOMEM. */
int ul_chat_tool_gbnf(int fmt, const cJSON *tools, const char *only, int parallel, ul_buf_t *out,
                      const char **trigger, char *err, size_t err_len);
int ul_chat_tool_fmt_per_param(int fmt);

typedef enum {
    UL_CHAT_EV_CONTENT,
    UL_CHAT_EV_REASONING,
    UL_CHAT_EV_TOOL_CALL,  /* a whole call */
    UL_CHAT_EV_TOOL_START, /* streaming (ul_chat_parser_stream_calls): a call's id and name;
                            * its arguments follow as TOOL_ARGS fragments */
    UL_CHAT_EV_TOOL_ARGS   /* a fragment of the arguments of call index (text, len) */
} ul_chat_ev_kind_t;

/* One event. All pointers are valid only during the callback. */
typedef struct ul_chat_ev_s {
    ul_chat_ev_kind_t kind;
    const char *text; /* content / reasoning delta, UTF-8, never empty, not NUL-terminated */
    size_t len;
    int index;             /* tool call: 0, 1, ... within the response */
    const char *id;        /* tool call: "call_" + 24 alphanumerics, NUL-terminated */
    const char *name;      /* tool call: function name, NUL-terminated */
    const char *arguments; /* tool call: compact JSON object text, NUL-terminated */
} ul_chat_ev_t;

typedef void (*ul_chat_ev_cb)(void *ud, const ul_chat_ev_t *ev);

/* Per-response parser state; embed it, init, push pieces, finish, free. */
/* Where a JSON object or array ends, fed a byte at a time: open objects and arrays, inside
 * a string, just after a backslash in one. */
typedef struct ul_json_end_s {
    int depth, str, esc;
} ul_json_end_t;

/* Feeds byte c; 1 when c closes the outermost object or array. */
static inline int ul_json_end_feed(ul_json_end_t *s, char c) {
    if (s->str) {
        if (s->esc)
            s->esc = 0;
        else if (c == '\\')
            s->esc = 1;
        else if (c == '"')
            s->str = 0;
    } else if (c == '"') {
        s->str = 1;
    } else if (c == '{' || c == '[') {
        s->depth++;
    } else if (c == '}' || c == ']') {
        return --s->depth == 0;
    }
    return 0;
}

typedef struct ul_chat_parser_s {
    ul_chat_syntax_t syn;
    int parse_tools;
    int mode;      /* internal: content, reasoning, tool section, harmony header */
    int trig;      /* tool section: its index in the format; harmony header: the length
                    * of the marker that opened it */
    int fresh;     /* nothing emitted and no marker seen yet */
    int seg_start; /* drop leading whitespace (just after a marker) */
    int n_calls;
    int err; /* sticky UL_ENOMEM */
    uint64_t rng;
    ul_buf_t buf; /* text not yet decided */
    size_t scan;  /* bytes of buf already searched */
    int js_phase; /* JSON-ended sections: 0 before the value, 3 in a name before
                   * json_after, 4 after it, 1 inside the value */
    ul_json_end_t js;
    ul_buf_t aux; /* tool section: the whitespace before it (returned if it fails);
                   * harmony tool message: the recipient function's name */
    ul_buf_t out; /* scratch for the events' strings */
    /* streamed calls (toolcall_stream.c): the section's calls as they are generated */
    int stream;              /* 1: TOOL_START / TOOL_ARGS events where the format allows */
    int ic_phase;            /* 0 seeking a name, 1 seeking the arguments, 2 inside them */
    size_t ic_pos;           /* bytes of the section scanned */
    size_t ic_name, ic_nlen; /* the name found (offset, length in buf) */
    ul_json_end_t ic;
    int ic_started; /* calls of this section started (streamed whole) */
} ul_chat_parser_t;

/* starts_in_reasoning: from ul_chat_syntax_prompt_opens_reasoning. parse_tools: 0 when the
 * request offered no tools (or tool_choice "none"): tool-call syntax then stays content.
 * id_seed: tool-call ids are a deterministic function of it. The syntax is copied. */
void ul_chat_parser_init(ul_chat_parser_t *p, const ul_chat_syntax_t *s, int starts_in_reasoning,
                         int parse_tools, uint64_t id_seed);
/* Streams tool calls: for the formats whose calls carry a name and then JSON arguments
 * (Hermes, Llama 3, Mistral, Granite, Command R/A, Apriel, FireFunction, GigaChat,
 * Mistral's NAME[ARGS], Functionary, Kimi K2, DeepSeek R1/V3/V3.1, harmony), a TOOL_START
 * event as soon as the name and the arguments' first byte are out, then TOOL_ARGS
 * fragments as generated, whose concatenation is the call's arguments text; other formats
 * (those with one element per argument: Qwen3-Coder's XML, GLM, MiniMax, Seed, DSML, ...)
 * and calls whose keys come in another order still give one TOOL_START and one TOOL_ARGS
 * (minified) when complete. */
void ul_chat_parser_stream_calls(ul_chat_parser_t *p, int on);

/* Feeds generated text (whole UTF-8 characters); calls cb for every event now decided.
 * 0, or UL_ENOMEM (the parser is then unusable). */
int ul_chat_parser_push(ul_chat_parser_t *p, const char *text, size_t len, ul_chat_ev_cb cb,
                        void *ud);
/* End of output: flushes held text (an unterminated tool call becomes content). */
int ul_chat_parser_finish(ul_chat_parser_t *p, ul_chat_ev_cb cb, void *ud);
void ul_chat_parser_free(ul_chat_parser_t *p);

#endif
