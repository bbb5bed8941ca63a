/* The tool-call formats as data (which marker opens a section, what ends it, which body
 * parser reads it) and their detection from a chat template's source: a template teaches
 * the model its format by rendering earlier tool calls, so the markers it contains name
 * the format. Reasoning markers are detected the same way, independently. Rules are
 * ordered most specific first (every Qwen3-Coder template also contains "<tool_call>"). */
#include <string.h>

#include "chat/toolcall.h"
#include "chat/toolcall_impl.h"

#define MARK(o, c, parse)                                                                          \
    { o, c, UL_TC_END_MARK, 0, NULL, parse }
#define JSON(o, after, parse)                                                                      \
    { o, NULL, UL_TC_END_JSON, 0, after, parse }

static const ul_tc_format_t g_formats[UL_CHAT_TOOLS_COUNT] = {
    [UL_CHAT_TOOLS_NONE] = {"none", {{0}}},
    [UL_CHAT_TOOLS_HERMES] = {"hermes", {MARK("<tool_call>", "</tool_call>", ul_tc_parse_hermes)}},
    [UL_CHAT_TOOLS_QWEN3_CODER] = {"qwen3_coder",
                                   {MARK("<tool_call>", "</tool_call>", ul_tc_parse_hermes)}},
    [UL_CHAT_TOOLS_LLAMA3] = {"llama3",
                              {{"{", NULL, UL_TC_END_JSON, UL_TC_ANCHORED | UL_TC_KEEP_OPEN, NULL,
                                ul_tc_parse_json_calls},
                               {"<|python_tag|>", NULL, UL_TC_END_EOF, 0, NULL,
                                ul_tc_parse_python_tag}}},
    [UL_CHAT_TOOLS_MISTRAL] = {"mistral", {JSON("[TOOL_CALLS]", NULL, ul_tc_parse_json_calls)}},
    [UL_CHAT_TOOLS_MISTRAL_ARGS] = {"mistral_args",
                                    {JSON("[TOOL_CALLS]", "[ARGS]", ul_tc_parse_mistral_args)}},
    [UL_CHAT_TOOLS_FUNCTIONARY_V31] = {"functionary_v3.1",
                                       {MARK("<function=", "</function>", ul_tc_parse_functionary),
                                        {"<|python_tag|>", NULL, UL_TC_END_EOF, 0, NULL,
                                         ul_tc_parse_python_tag}}},
    [UL_CHAT_TOOLS_COMMAND_R] = {"command_r",
                                 {MARK("Action: ```json", "```", ul_tc_parse_json_calls)}},
    [UL_CHAT_TOOLS_COMMAND_A] = {"command_a",
                                 {MARK("<|START_ACTION|>", "<|END_ACTION|>",
                                       ul_tc_parse_json_calls)}},
    [UL_CHAT_TOOLS_GRANITE] = {"granite", {JSON("<|tool_call|>", NULL, ul_tc_parse_json_calls)}},
    [UL_CHAT_TOOLS_DEEPSEEK_R1] = {"deepseek_r1",
                                   {MARK("<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>",
                                         ul_tc_parse_deepseek)}},
    [UL_CHAT_TOOLS_DEEPSEEK_DSML] =
        {"deepseek_dsml",
         {MARK("<｜DSML｜function_calls>", "</｜DSML｜function_calls>", ul_tc_parse_dsml),
          MARK("<｜DSML｜tool_calls>", "</｜DSML｜tool_calls>", ul_tc_parse_dsml)}},
    [UL_CHAT_TOOLS_KIMI_K2] = {"kimi_k2",
                               {MARK("<|tool_calls_section_begin|>", "<|tool_calls_section_end|>",
                                     ul_tc_parse_kimi)}},
    [UL_CHAT_TOOLS_GLM45] = {"glm45", {MARK("<tool_call>", "</tool_call>", ul_tc_parse_glm)}},
    [UL_CHAT_TOOLS_HARMONY] = {"harmony", {{0}}},
    [UL_CHAT_TOOLS_MINIMAX_M2] = {"minimax_m2",
                                  {MARK("<minimax:tool_call>", "</minimax:tool_call>",
                                        ul_tc_parse_invoke)}},
    [UL_CHAT_TOOLS_SEED_OSS] = {"seed_oss",
                                {MARK("<seed:tool_call>", "</seed:tool_call>",
                                      ul_tc_parse_xml_function)}},
    [UL_CHAT_TOOLS_FIREFUNCTION_V2] = {"firefunction_v2",
                                       {JSON("functools", NULL, ul_tc_parse_json_calls)}},
    [UL_CHAT_TOOLS_LFM2] = {"lfm2",
                            {MARK("<|tool_call_start|>", "<|tool_call_end|>",
                                  ul_tc_parse_pythonic)}},
    [UL_CHAT_TOOLS_APRIEL] = {"apriel",
                              {MARK("<tool_calls>", "</tool_calls>", ul_tc_parse_json_calls)}},
    [UL_CHAT_TOOLS_APERTUS] = {"apertus",
                               {MARK("<|tools_prefix|>", "<|tools_suffix|>", ul_tc_parse_apertus)}},
    [UL_CHAT_TOOLS_GIGACHAT3] = {"gigachat3",
                                 {JSON("function call<|role_sep|>", NULL, ul_tc_parse_json_calls)}},
    [UL_CHAT_TOOLS_SOLAR_OPEN] = {"solar_open",
                                  {MARK("<|tool_calls|>", "<|calls|>", ul_tc_parse_solar)}},
    [UL_CHAT_TOOLS_GEMMA4] = {"gemma4", {MARK("<|tool_call>", "<tool_call|>", ul_tc_parse_gemma)}},
};

const ul_tc_format_t *ul_tc_format(int fmt) {
    if (fmt <= UL_CHAT_TOOLS_NONE || fmt >= UL_CHAT_TOOLS_COUNT || fmt == UL_CHAT_TOOLS_HARMONY)
        return NULL;
    return &g_formats[fmt];
}

const char *ul_chat_tool_fmt_name(int fmt) {
    if (fmt < 0 || fmt >= UL_CHAT_TOOLS_COUNT) return "none";
    return g_formats[fmt].name;
}

/* Tool-call format rules: the format applies when the template contains every marker. */
typedef struct {
    int fmt;
    const char *has[2];
} tool_rule_t;

static const tool_rule_t g_tool_rules[] = {
    {UL_CHAT_TOOLS_HARMONY, {"<|channel|>", "<|message|>"}},
    {UL_CHAT_TOOLS_DEEPSEEK_DSML, {"｜DSML｜"}},
    {UL_CHAT_TOOLS_DEEPSEEK_R1, {"tool▁calls▁begin"}},
    {UL_CHAT_TOOLS_KIMI_K2, {"<|tool_calls_section_begin|>"}},
    {UL_CHAT_TOOLS_MINIMAX_M2, {"<minimax:tool_call>"}},
    {UL_CHAT_TOOLS_SEED_OSS, {"<seed:tool_call>"}},
    {UL_CHAT_TOOLS_GLM45, {"<arg_key>"}},
    {UL_CHAT_TOOLS_QWEN3_CODER, {"<tool_call>", "<parameter="}},
    {UL_CHAT_TOOLS_HERMES, {"<tool_call>"}},
    {UL_CHAT_TOOLS_MISTRAL_ARGS, {"[TOOL_CALLS]", "[ARGS]"}},
    {UL_CHAT_TOOLS_MISTRAL, {"[TOOL_CALLS]"}},
    {UL_CHAT_TOOLS_FUNCTIONARY_V31, {"<|python_tag|>", "<function="}},
    {UL_CHAT_TOOLS_LLAMA3, {"<|start_header_id|>ipython"}},
    {UL_CHAT_TOOLS_LLAMA3, {"<|python_tag|>"}},
    {UL_CHAT_TOOLS_FIREFUNCTION_V2, {"functools["}},
    {UL_CHAT_TOOLS_COMMAND_A, {"<|START_ACTION|>"}},
    {UL_CHAT_TOOLS_COMMAND_R, {"Action:", "```json"}},
    {UL_CHAT_TOOLS_GRANITE, {"<|tool_call|>"}},
    {UL_CHAT_TOOLS_LFM2, {"<|tool_call_start|>"}},
    {UL_CHAT_TOOLS_LFM2, {"<|tool_list_start|>"}},
    {UL_CHAT_TOOLS_APRIEL, {"<tool_calls>"}},
    {UL_CHAT_TOOLS_APERTUS, {"<|tools_prefix|>"}},
    {UL_CHAT_TOOLS_GIGACHAT3, {"function call", "<|role_sep|>"}},
    {UL_CHAT_TOOLS_SOLAR_OPEN, {"<|tool_call:begin|>"}},
    {UL_CHAT_TOOLS_GEMMA4, {"<|tool_call>call:"}},
};

/* Reasoning rules: the first whose marker the template contains. */
typedef struct {
    const char *has;
    ul_chat_syntax_t syn; /* tool_fmt unused */
} think_rule_t;

static const think_rule_t g_think_rules[] = {
    {"<seed:think>", {0, "<seed:think>", "</seed:think>", NULL, {NULL}}},
    {"<|START_THINKING|>",
     {0,
      "<|START_THINKING|>",
      "<|END_THINKING|>",
      NULL,
      {"<|START_RESPONSE|>", "<|END_RESPONSE|>"}}},
    {"[BEGIN FINAL RESPONSE]",
     {0,
      NULL,
      "[BEGIN FINAL RESPONSE]",
      "Here are my reasoning steps:",
      {"[END FINAL RESPONSE]", "<|end|>"}}},
    {"<|inner_prefix|>", {0, "<|inner_prefix|>", "<|inner_suffix|>", NULL, {NULL}}},
    {"<|channel>", {0, "<|channel>thought", "<channel|>", NULL, {NULL}}},
    {"<|tool_call:begin|>",
     {0, "<|think|>", "<|end|>", NULL, {"<|begin|>assistant", "<|content|>", "<|end|>"}}},
    {"<response></response>", {0, "<think>", "</think>", NULL, {"<response>", "</response>"}}},
    {"<think>", {0, "<think>", "</think>", NULL, {NULL}}},
};

static int has(const char *s, size_t n, const char *m) { return !m || ul_tc_find(s, n, m); }

void ul_chat_syntax_detect(const char *src, size_t n, ul_chat_syntax_t *out) {
    memset(out, 0, sizeof *out);
    if (!src) return;
    for (size_t i = 0; i < sizeof g_tool_rules / sizeof g_tool_rules[0]; i++) {
        const tool_rule_t *r = &g_tool_rules[i];
        if (has(src, n, r->has[0]) && has(src, n, r->has[1])) {
            out->tool_fmt = r->fmt;
            break;
        }
    }
    if (out->tool_fmt == UL_CHAT_TOOLS_HARMONY) return; /* channels, not markers */
    for (size_t i = 0; i < sizeof g_think_rules / sizeof g_think_rules[0]; i++) {
        if (!has(src, n, g_think_rules[i].has)) continue;
        int fmt = out->tool_fmt;
        *out = g_think_rules[i].syn;
        out->tool_fmt = fmt;
        break;
    }
    if (out->tool_fmt == UL_CHAT_TOOLS_GIGACHAT3) out->drop[0] = "<|message_sep|>";
}

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

int ul_chat_syntax_prompt_opens_reasoning(const ul_chat_syntax_t *s, const char *prompt,
                                          size_t len) {
    const char *m = s->prompt_open ? s->prompt_open : s->think_open;
    if (!m || !prompt) return 0;
    while (len && is_ws(prompt[len - 1])) len--;
    size_t ml = strlen(m);
    return ml && len >= ml && !memcmp(prompt + len - ml, m, ml);
}
