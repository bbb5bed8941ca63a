/* Tool-call parsing, per format: realistic outputs with content before one and two calls,
 * parsed to exact names and arguments (compared as JSON) with the syntax detected from the
 * model's real template; malformed sections stay content; every case is also parsed in
 * 1-byte and random pieces and must give the same events. */
#include "toolcall_testutil.h"
#include "../tsan_skip.h"

#include <time.h>

typedef struct {
    const char *tmpl; /* the syntax is detected from this template */
    int sir;          /* starts in reasoning */
    const char *text;
    const char *content, *reasoning;
    int n;
    const char *name[3], *args[3];
} case_t;

#define W "{\"location\": \"Paris\"}"
#define WJ "{\"location\":\"Paris\"}"
#define T "{\"tz\": \"CET\", \"n\": 2}"

static const case_t g_cases[] = {
    /* Hermes / Qwen2.5 / Qwen3 JSON in <tool_call> */
    {"Qwen-Qwen2.5-7B-Instruct.jinja",
     0,
     "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " W "}\n</tool_call>",
     "Let me check.",
     "",
     1,
     {"get_weather"},
     {WJ}},
    {"Qwen-Qwen3-0.6B.jinja",
     0,
     "<think>\nTwo lookups.\n</think>\n\nOn it.\n<tool_call>\n{\"name\": \"get_weather\", "
     "\"arguments\": " W "}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": " T
     "}\n</tool_call>",
     "On it.",
     "Two lookups.",
     2,
     {"get_weather", "get_time"},
     {WJ, T}},
    {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja",
     0,
     "<tool_call>\n{\"arguments\": " W ", \"name\": \"get_weather\"}\n</tool_call>",
     "",
     "",
     1,
     {"get_weather"},
     {WJ}},
    {"ibm-granite-granite-4.0.jinja",
     0,
     "Sure.<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call><tool_call>\n{\"name\": "
     "\"b\", \"arguments\": {\"x\": [1, 2.50, null]}}\n</tool_call>",
     "Sure.",
     "",
     2,
     {"a", "b"},
     {"{}", "{\"x\":[1,2.50,null]}"}},
    {"Qwen-Qwen2.5-7B-Instruct.jinja",
     0,
     "<tool_call>\n{\"name\": \"w\",\x01\"arguments\": {\"s\": \"a\tb\n\"}}\n</tool_call>",
     "",
     "",
     1,
     {"w"},
     {"{\"s\":\"a\\tb\\n\"}"}},
    /* Qwen3.5 / Qwen3-Coder / Nemotron XML */
    {"Qwen3.5-4B.jinja",
     1,
     "The user wants weather.\n</think>\n\nChecking.\n\n<tool_call>\n<function=get_weather>\n"
     "<parameter=location>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n"
     "</tool_call>",
     "Checking.",
     "The user wants weather.",
     1,
     {"get_weather"},
     {"{\"location\":\"Paris\",\"days\":3}"}},
    {"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja",
     1,
     "ok</think>\n<tool_call>\n<function=get_weather>\n<parameter=location>\nParis\n</parameter>\n"
     "</function>\n</tool_call>\n<tool_call>\n<function=get_time>\n<parameter=tz>\nCET\n"
     "</parameter>\n<parameter=opts>\n{\"n\": 2}\n</parameter>\n</function>\n</tool_call>",
     "",
     "ok",
     2,
     {"get_weather", "get_time"},
     {WJ, "{\"tz\":\"CET\",\"opts\":{\"n\":2}}"}},
    /* Llama 3.x */
    {"meta-llama-Llama-3.1-8B-Instruct.jinja",
     0,
     "{\"name\": \"get_weather\", \"parameters\": " W "}",
     "",
     "",
     1,
     {"get_weather"},
     {WJ}},
    {"meta-llama-Llama-3.2-3B-Instruct.jinja",
     0,
     "\n{\"type\": \"function\", \"name\": \"get_weather\", \"parameters\": " W "}",
     "",
     "",
     1,
     {"get_weather"},
     {WJ}},
    {"meta-llama-Llama-3.1-8B-Instruct.jinja",
     0,
     "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": " W "}",
     "",
     "",
     1,
     {"get_weather"},
     {WJ}},
    /* Mistral */
    {"mistralai-Mistral-Nemo-Instruct-2407.jinja",
     0,
     "Sure.[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": " W ", \"id\": \"abcdefghi\"}, "
     "{\"name\": \"get_time\", \"arguments\": " T "}]",
     "Sure.",
     "",
     2,
     {"get_weather", "get_time"},
     {WJ, T}},
    {"Mistral-Small-3.2-24B-Instruct-2506.jinja",
     0,
     "Let me look.[TOOL_CALLS]get_weather[ARGS]" W,
     "Let me look.",
     "",
     1,
     {"get_weather"},
     {WJ}},
    {"unsloth-mistral-Devstral-Small-2507.jinja",
     0,
     "[TOOL_CALLS]get_weather[ARGS]" W "[TOOL_CALLS]get_time[ARGS]" T,
     "",
     "",
     2,
     {"get_weather", "get_time"},
     {WJ, T}},
    /* functionary v3.1 */
    {"meetkai-functionary-medium-v3.1.jinja",
     0,
     "Checking.<function=get_weather>" W "</function><function=get_time>" T "</function>",
     "Checking.",
     "",
     2,
     {"get_weather", "get_time"},
     {WJ, T}},
    {"meetkai-functionary-medium-v3.1.jinja",
     0,
     "<|python_tag|>print(1 + 1)",
     "",
     "",
     1,
     {"python"},
     {"{\"code\":\"print(1 + 1)\"}"}},
    /* Command R+ / Command A */
    {"CohereForAI-c4ai-command-r-plus-tool_use.jinja",
     0,
     "Action: ```json\n[\n    {\n        \"tool_name\": \"get_weather\",\n        "
     "\"parameters\": " W "\n    }\n]\n```",
     "",
     "",
     1,
     {"get_weather"},
     {WJ}},
    {"Cohere2MoE.jinja",
     1,
     "I will look up both.<|END_THINKING|><|START_ACTION|>[\n    {\"tool_call_id\": \"0\", "
     "\"tool_name\": \"get_weather\", \"parameters\": " W "},\n    {\"tool_call_id\": \"1\", "
     "\"tool_name\": \"get_time\", \"parameters\": " T "}\n]<|END_ACTION|>",
     "",
     "I will look up both.",
     2,
     {"get_weather", "get_time"},
     {WJ, T}},
    {"Cohere2MoE.jinja",
     1,
     "Easy.<|END_THINKING|><|START_RESPONSE|>4<|END_RESPONSE|>",
     "4",
     "Easy.",
     0,
     {0},
     {0}},
    /* Granite 3.3 */
    {"ibm-granite-granite-3.3-2B-Instruct.jinja",
     0,
     "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": " W "}, {\"name\": \"get_time\", "
     "\"arguments\": " T "}]",
     "",
     "",
     2,
     {"get_weather", "get_time"},
     {WJ, T}},
    /* DeepSeek R1 */
    {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
     1,
     "Need the weather.\n</think>\n\nI'll check.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function"
     "<｜tool▁sep｜>get_weather\n```json\n" W
     "\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function"
     "<｜tool▁sep｜>get_time\n```json\n" T "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
     "I'll check.",
     "Need the weather.",
     2,
     {"get_weather", "get_time"},
     {WJ, T}},
    {"llama-cpp-deepseek-r1.jinja",
     1,
     "hm</think><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>" W
     "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
     "",
     "hm",
     1,
     {"get_weather"},
     {WJ}},
    /* DeepSeek V3.2 / V4 DSML */
    {"deepseek-ai-DeepSeek-V3.2.jinja",
     1,
     "Look it up.</think>\n\nChecking.\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke "
     "name=\"get_weather\">\n<｜DSML｜parameter name=\"location\" string=\"true\">Paris</｜DSML｜"
     "parameter>\n<｜DSML｜parameter name=\"days\" "
     "string=\"false\">3</｜DSML｜parameter>\n</｜DSML｜"
     "invoke>\n<｜DSML｜invoke name=\"get_time\">\n<｜DSML｜parameter name=\"tz\" "
     "string=\"true\">123</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
     "Checking.",
     "Look it up.",
     2,
     {"get_weather", "get_time"},
     {"{\"location\":\"Paris\",\"days\":3}", "{\"tz\":\"123\"}"}},
    {"deepseek-ai-DeepSeek-V4.jinja",
     1,
     "</think><｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter "
     "name=\"location\" string=\"true\">Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜"
     "tool_calls>",
     "",
     "",
     1,
     {"get_weather"},
     {WJ}},
    /* Kimi K2 */
    {"moonshotai-Kimi-K2.jinja",
     0,
     "Checking.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
     "<|tool_call_argument_begin|>" W "<|tool_call_end|><|tool_call_begin|>functions.get_time:1"
     "<|tool_call_argument_begin|>" T "<|tool_call_end|><|tool_calls_section_end|>",
     "Checking.",
     "",
     2,
     {"get_weather", "get_time"},
     {WJ, T}},
    {"Kimi-K2-Instruct.jinja",
     0,
     "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
     "<|tool_call_argument_begin|>" W "<|tool_call_end|><|tool_calls_section_end|>",
     "",
     "",
     1,
     {"get_weather"},
     {WJ}},
    /* GLM-4.6, Laguna */
    {"GLM-4.6.jinja",
     0,
     "<think>Weather and time.</think>\nBoth.\n<tool_call>get_weather\n<arg_key>location</arg_key>"
     "\n<arg_value>Paris</arg_value>\n</tool_call>\n<tool_call>get_time\n<arg_key>tz</arg_key>\n"
     "<arg_value>CET</arg_value>\n<arg_key>n</arg_key>\n<arg_value>2</arg_value>\n</tool_call>",
     "Both.",
     "Weather and time.",
     2,
     {"get_weather", "get_time"},
     {WJ, T}},
    {"poolside-Laguna-XS-2.1.jinja",
     1,
     " thoughts </think>\n<tool_call>get_weather\n<arg_key>location</arg_key>\n<arg_value>Paris"
     "</arg_value>\n</tool_call>",
     "",
     "thoughts",
     1,
     {"get_weather"},
     {WJ}},
    /* gpt-oss harmony */
    {"openai-gpt-oss-120b.jinja",
     0,
     "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
     "to=functions.get_weather <|constrain|>json<|message|>" W "<|call|>",
     "",
     "Need weather.",
     1,
     {"get_weather"},
     {WJ}},
    {"openai-gpt-oss-120b.jinja",
     0,
     "<|channel|>analysis<|message|>Simple.<|end|><|start|>assistant<|channel|>final<|message|>"
     "2+2 = 4.<|return|>",
     "2+2 = 4.",
     "Simple.",
     0,
     {0},
     {0}},
    {"openai-gpt-oss-120b.jinja",
     0,
     " to=functions.get_weather<|channel|>commentary json<|message|>" W,
     "",
     "",
     1,
     {"get_weather"},
     {WJ}},
    /* MiniMax-M2 */
    {"MiniMax-M2.jinja",
     1,
     "Two tools.\n</think>\n\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter "
     "name=\"location\">Paris</parameter>\n</invoke>\n<invoke name=\"get_time\">\n<parameter "
     "name=\"tz\">CET</parameter>\n<parameter name=\"n\">2</parameter>\n</invoke>\n"
     "</minimax:tool_call>",
     "",
     "Two tools.",
     2,
     {"get_weather", "get_time"},
     {WJ, T}},
    /* Seed-OSS */
    {"ByteDance-Seed-OSS.jinja",
     0,
     "<seed:think>Check.</seed:think>Checking.<seed:tool_call>\n<function=get_weather>\n"
     "<parameter=location>Paris</parameter>\n</function>\n</seed:tool_call>",
     "Checking.",
     "Check.",
     1,
     {"get_weather"},
     {WJ}},
    /* firefunction v2 */
    {"fireworks-ai-llama-3-firefunction-v2.jinja",
     0,
     " functools[{\"name\": \"get_weather\", \"arguments\": " W "}, {\"name\": \"get_time\", "
     "\"arguments\": " T "}]",
     "",
     "",
     2,
     {"get_weather", "get_time"},
     {WJ, T}},
    /* LFM2 pythonic */
    {"LFM2.5-8B-A1B.jinja",
     0,
     "<|tool_call_start|>[get_weather(location='Paris'), get_time(tz=\"CET\", n=2)]"
     "<|tool_call_end|>Checking both.",
     "Checking both.",
     "",
     2,
     {"get_weather", "get_time"},
     {WJ, T}},
    {"LFM2-8B-A1B.jinja",
     0,
     "<|tool_call_start|>[f(s='it\\'s', b=True, z=None, xs=[1, -2.5e3], d={'k': (1,)})]"
     "<|tool_call_end|>",
     "",
     "",
     1,
     {"f"},
     {"{\"s\":\"it's\",\"b\":true,\"z\":null,\"xs\":[1,-2.5e3],\"d\":{\"k\":[1]}}"}},
    /* Apriel */
    {"Apriel-1.6-15b-Thinker-fixed.jinja",
     1,
     "The user asks for weather.\n[BEGIN FINAL RESPONSE]\n<tool_calls>[{\"name\": \"get_weather\", "
     "\"arguments\": " W "}]</tool_calls>\n[END FINAL RESPONSE]",
     "",
     "The user asks for weather.",
     1,
     {"get_weather"},
     {WJ}},
    /* Apertus */
    {"Apertus-8B-Instruct.jinja",
     0,
     "<|inner_prefix|>Weather.<|inner_suffix|>Looking.<|tools_prefix|>[{\"get_weather\": " W
     "}, {\"get_time\": " T "}]<|tools_suffix|>",
     "Looking.",
     "Weather.",
     2,
     {"get_weather", "get_time"},
     {WJ, T}},
    /* GigaChat3 */
    {"GigaChat3-10B-A1.8B.jinja",
     0,
     "Checking.<|message_sep|>\n\nfunction call<|role_sep|>\n{\"name\": \"get_weather\", "
     "\"arguments\": " W "}",
     "Checking.",
     "",
     1,
     {"get_weather"},
     {WJ}},
    /* Solar Open */
    {"upstage-Solar-Open-100B.jinja",
     0,
     "<|think|>Weather.<|end|><|begin|>assistant<|tool_calls|><|tool_call:begin|>a1b2c3d4e5"
     "<|tool_call:name|>get_weather<|tool_call:args|>" W "<|tool_call:end|><|tool_call:begin|>"
     "f6g7h8i9j0<|tool_call:name|>get_time<|tool_call:args|>" T "<|tool_call:end|><|calls|>",
     "",
     "Weather.",
     2,
     {"get_weather", "get_time"},
     {WJ, T}},
    /* second calls for the formats above that had one */
    {"CohereForAI-c4ai-command-r-plus-tool_use.jinja",
     0,
     "I will check both.\nAction: ```json\n[{\"tool_name\": \"get_weather\", \"parameters\": " W
     "}, {\"tool_name\": \"get_time\", \"parameters\": " T "}]\n```",
     "I will check both.",
     "",
     2,
     {"get_weather", "get_time"},
     {WJ, T}},
    {"ByteDance-Seed-OSS.jinja",
     0,
     "Both.<seed:tool_call>\n<function=get_weather>\n<parameter=location>Paris</parameter>\n"
     "</function>\n<function=get_time>\n<parameter=tz>CET</parameter>\n<parameter=n>2</parameter>"
     "\n</function>\n</seed:tool_call>",
     "Both.",
     "",
     2,
     {"get_weather", "get_time"},
     {WJ, T}},
    {"Apriel-1.6-15b-Thinker-fixed.jinja",
     1,
     "Two.\n[BEGIN FINAL RESPONSE]\nSure.\n<tool_calls>[{\"name\": \"get_weather\", "
     "\"arguments\": " W "}, {\"name\": \"get_time\", \"arguments\": " T
     "}]</tool_calls>\n[END FINAL RESPONSE]",
     "Sure.",
     "Two.",
     2,
     {"get_weather", "get_time"},
     {WJ, T}},
    {"openai-gpt-oss-120b.jinja",
     0,
     "<|channel|>analysis<|message|>Both.<|end|><|start|>assistant<|channel|>commentary<|message|>"
     "Checking.<|end|><|start|>assistant to=functions.get_weather<|channel|>commentary json"
     "<|message|>" W "<|call|><|start|>assistant<|channel|>commentary to=functions.get_time "
     "<|constrain|>json<|message|>" T "<|call|>",
     "Checking.",
     "Both.",
     2,
     {"get_weather", "get_time"},
     {WJ, T}},
    {"GigaChat3-10B-A1.8B.jinja",
     0,
     "function call<|role_sep|>\n{\"name\": \"get_weather\", \"arguments\": " W
     "}<|message_sep|>\n\nfunction call<|role_sep|>\n{\"name\": \"get_time\", \"arguments\": " T
     "}",
     "",
     "",
     2,
     {"get_weather", "get_time"},
     {WJ, T}},
    {"deepseek-ai-DeepSeek-V4.jinja",
     1,
     "Hm.</think>Ok.<｜DSML｜tool_calls>\n<｜DSML｜invoke "
     "name=\"get_weather\">\n<｜DSML｜parameter "
     "name=\"location\" "
     "string=\"true\">Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n<｜DSML｜invoke "
     "name=\"get_time\">\n<｜DSML｜parameter name=\"tz\" string=\"true\">CET</｜DSML｜parameter>\n"
     "<｜DSML｜parameter name=\"n\" string=\"false\">2</｜DSML｜parameter>\n</｜DSML｜invoke>\n"
     "</｜DSML｜tool_calls>",
     "Ok.",
     "Hm.",
     2,
     {"get_weather", "get_time"},
     {WJ, T}},
    /* Gemma 4 */
    {"google-gemma-4-31B-it.jinja",
     0,
     "<|channel>thought\nWeather.<channel|>Checking.<|tool_call>call:get_weather{location:<|\"|>"
     "Paris<|\"|>}<tool_call|><|tool_call>call:get_time{n:2,opts:{<|\"|>a b<|\"|>:[true,None,"
     "1.5]},tz:<|\"|>CET, \"x\"<|\"|>}<tool_call|>",
     "Checking.",
     "Weather.",
     2,
     {"get_weather", "get_time"},
     {WJ, "{\"n\":2,\"opts\":{\"a b\":[true,null,1.5]},\"tz\":\"CET, \\\"x\\\"\"}"}},
};

static void check_case(size_t k, const case_t *c) {
    ul_chat_syntax_t s;
    t_detect(c->tmpl, &s);
    t_res_t r;
    t_parse(&s, c->sir, 1, c->text, &r);
    cr_assert_str_eq(r.content.p, c->content, "case %zu (%s): content [%s]", k, c->tmpl,
                     r.content.p);
    cr_assert_str_eq(r.reasoning.p, c->reasoning, "case %zu (%s): reasoning [%s]", k, c->tmpl,
                     r.reasoning.p);
    cr_assert_eq(r.n, c->n, "case %zu (%s): %d calls", k, c->tmpl, r.n);
    for (int i = 0; i < c->n; i++) {
        cr_assert_str_eq(r.name[i], c->name[i], "case %zu call %d", k, i);
        cr_assert(t_json_eq(r.args[i], c->args[i]), "case %zu call %d: args %s", k, i, r.args[i]);
        cr_assert_eq(strlen(r.id[i]), 29);
        cr_assert_eq(strncmp(r.id[i], "call_", 5), 0);
        for (int j = 0; j < i; j++) cr_assert_str_neq(r.id[i], r.id[j]);
    }
    t_res_free(&r);
}

Test(toolcall, formats_parse_exact_calls) {
    for (size_t k = 0; k < sizeof g_cases / sizeof g_cases[0]; k++) check_case(k, &g_cases[k]);
}

/* Without tools in the request, the same text is content (reasoning still splits). */
Test(toolcall, tools_off_keeps_markup_as_content) {
    ul_chat_syntax_t s;
    t_detect("Qwen-Qwen3-0.6B.jinja", &s);
    const char *txt =
        "<think>x</think>A <tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
    t_res_t r;
    t_parse(&s, 0, 0, txt, &r);
    cr_assert_str_eq(r.content.p,
                     "A <tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>");
    cr_assert_str_eq(r.reasoning.p, "x");
    cr_assert_eq(r.n, 0);
    t_res_free(&r);
}

/* Ids: deterministic per seed, different across seeds and calls. */
Test(toolcall, ids_depend_on_seed_only) {
    ul_chat_syntax_t s;
    t_detect("Qwen-Qwen2.5-7B-Instruct.jinja", &s);
    const char *txt = "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>";
    char ids[3][32];
    uint64_t seeds[3] = {1, 1, 2};
    for (int k = 0; k < 3; k++) {
        t_res_t r = {0};
        ul_chat_parser_t p;
        ul_chat_parser_init(&p, &s, 0, 1, seeds[k]);
        ul_chat_parser_push(&p, txt, strlen(txt), t_on_ev, &r);
        ul_chat_parser_finish(&p, t_on_ev, &r);
        ul_chat_parser_free(&p);
        cr_assert_eq(r.n, 1);
        snprintf(ids[k], sizeof ids[k], "%s", r.id[0]);
        for (int i = 5; i < 29; i++) cr_assert(isalnum((unsigned char)ids[k][i]), "id %s", ids[k]);
        t_res_free(&r);
    }
    cr_assert_str_eq(ids[0], ids[1]);
    cr_assert_str_neq(ids[0], ids[2]);
}

/* Malformed sections: the text stays content, byte for byte. */
typedef struct {
    const char *tmpl;
    const char *text;
} bad_t;

static const bad_t g_bad[] = {
    {"Qwen-Qwen2.5-7B-Instruct.jinja",
     "A <tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}\n"},
    {"Qwen-Qwen2.5-7B-Instruct.jinja", "A <tool_call>{broken json}</tool_call> B"},
    {"Qwen-Qwen2.5-7B-Instruct.jinja", "<tool_call>{\"arguments\": {}}</tool_call>"},
    {"Qwen-Qwen2.5-7B-Instruct.jinja",
     "<tool_call>{\"name\": \"f\", \"arguments\": 3}</tool_call>"},
    {"Qwen3.5-4B.jinja", "<tool_call>\n<function=f>\n<parameter=x>\n1\n</function>\n</tool_call>"},
    {"Qwen3.5-4B.jinja", "x <tool_call>\n<function=f>\n<parameter=x>\n1\n"},
    {"meta-llama-Llama-3.1-8B-Instruct.jinja", "{\"answer\": 42}"},
    {"meta-llama-Llama-3.1-8B-Instruct.jinja", "{\"name\": \"f\", \"parameters\": {"},
    {"meta-llama-Llama-3.1-8B-Instruct.jinja", "I think {\"name\": \"f\", \"parameters\": {}}"},
    {"mistralai-Mistral-Nemo-Instruct-2407.jinja", "[TOOL_CALLS] nothing here"},
    {"mistralai-Mistral-Nemo-Instruct-2407.jinja", "[TOOL_CALLS][{\"name\": 1}]"},
    {"unsloth-mistral-Devstral-Small-2507.jinja", "[TOOL_CALLS]f[ARGS]not json"},
    {"unsloth-mistral-Devstral-Small-2507.jinja", "[TOOL_CALLS][ARGS]{}"},
    {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
     "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{\"a\":"},
    {"moonshotai-Kimi-K2.jinja", "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0"},
    {"GLM-4.6.jinja", "<tool_call>f\n<arg_key>x</arg_key>\n</tool_call>"},
    {"MiniMax-M2.jinja", "<minimax:tool_call>\n<invoke name=\"f\">\n</minimax:tool_call>"},
    {"LFM2.5-8B-A1B.jinja", "<|tool_call_start|>[f(1, 2)]<|tool_call_end|>"},
    {"LFM2.5-8B-A1B.jinja", "<|tool_call_start|>[f(x=os.system('x'))]<|tool_call_end|>"},
    {"fireworks-ai-llama-3-firefunction-v2.jinja", "functools are great"},
    {"ibm-granite-granite-3.3-2B-Instruct.jinja", "<|tool_call|>[{\"name\": \"f\"]"},
    {"upstage-Solar-Open-100B.jinja", "<|tool_calls|><|tool_call:begin|>x<|calls|>"},
    {"google-gemma-4-31B-it.jinja", "<|tool_call>call:f{a:<|\"|>x}<tool_call|>"},
    {"google-gemma-4-31B-it.jinja", "<|tool_call>f{}<tool_call|>"},
};

Test(toolcall, malformed_stays_content) {
    for (size_t k = 0; k < sizeof g_bad / sizeof g_bad[0]; k++) {
        ul_chat_syntax_t s;
        t_detect(g_bad[k].tmpl, &s);
        t_res_t r;
        t_parse(&s, 0, 1, g_bad[k].text, &r);
        cr_assert_eq(r.n, 0, "bad %zu: %d calls", k, r.n);
        cr_assert_str_eq(r.content.p, g_bad[k].text, "bad %zu: content [%s]", k, r.content.p);
        cr_assert_eq(r.reasoning.len, 0);
        t_res_free(&r);
    }
}

/* Every prefix of every case (an output cut by max_tokens) parses the same in pieces. */
Test(toolcall, truncated_outputs_agree_in_pieces) {
    for (size_t k = 0; k < sizeof g_cases / sizeof g_cases[0]; k++) {
        ul_chat_syntax_t s;
        t_detect(g_cases[k].tmpl, &s);
        const char *txt = g_cases[k].text;
        size_t n = strlen(txt);
        char *cut = malloc(n + 1);
        for (size_t i = 0; i <= n; i++) {
            if (i < n && ((unsigned char)txt[i] & 0xC0) == 0x80) continue;
            memcpy(cut, txt, i);
            cut[i] = 0;
            t_res_t r;
            t_parse(&s, g_cases[k].sir, 1, cut, &r);
            cr_assert_leq(r.n, g_cases[k].n);
            t_res_free(&r);
        }
        free(cut);
    }
}

/* A long plain output: linear time, passed through unchanged. */
Test(toolcall, long_content_is_linear) {
    UL_SKIP_UNDER_TSAN();
    ul_chat_syntax_t s;
    t_detect("Qwen-Qwen3-0.6B.jinja", &s);
    size_t n = 4u << 20;
    char *txt = malloc(n + 1);
    for (size_t i = 0; i < n; i++) txt[i] = "ab <tool  \n"[i % 11];
    txt[n] = 0;
    t_res_t r = {0};
    ul_chat_parser_t p;
    ul_chat_parser_init(&p, &s, 0, 1, 7);
    for (size_t i = 0; i < n; i += 3) /* ~1.4M pushes, like tokens */
        cr_assert_eq(ul_chat_parser_push(&p, txt + i, n - i < 3 ? n - i : 3, t_on_ev, &r), 0);
    ul_chat_parser_finish(&p, t_on_ev, &r);
    ul_chat_parser_free(&p);
    cr_assert_eq(r.content.len, n);
    cr_assert_eq(memcmp(r.content.p, txt, n), 0);
    t_res_free(&r);
    free(txt);
}

/* CPU seconds of this thread to push a whitespace run of n bytes, one at a time, with one
 * "x" in its middle. */
static double whitespace_run_cpu_s(const ul_chat_syntax_t *s, int sir, size_t n) {
    struct timespec a, b;
    t_res_t r = {0};
    ul_chat_parser_t p;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    ul_chat_parser_init(&p, s, sir, 1, 7);
    for (size_t i = 0; i < n; i++) ul_chat_parser_push(&p, i == n / 2 ? "x" : " ", 1, t_on_ev, &r);
    ul_chat_parser_finish(&p, t_on_ev, &r);
    ul_chat_parser_free(&p);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    cr_assert_eq(r.content.len, n);
    t_res_free(&r);
    return (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
}

/* Held-back whitespace arriving one byte at a time is not rescanned per byte (1 MiB of
 * spaces would take minutes if it were): four times the bytes cost about four times the
 * CPU time, not sixteen. CPU time of this thread, so neither a loaded host nor a
 * sanitiser's slowdown (it scales both runs) decides it. */
Test(toolcall, long_whitespace_run_is_linear, .timeout = 600) {
    UL_SKIP_UNDER_TSAN();
    ul_chat_syntax_t s;
    t_detect("meta-llama-Llama-3.1-8B-Instruct.jinja", &s); /* anchored "{" looks at the start */
    for (int sir = 0; sir < 2; sir++) {
        double small = 1e9, big = 1e9; /* the best of 3: noise only ever adds time */
        for (int k = 0; k < 3; k++) {
            double t = whitespace_run_cpu_s(&s, sir, 1u << 18);
            small = t < small ? t : small;
            t = whitespace_run_cpu_s(&s, sir, 1u << 20);
            big = t < big ? t : big;
        }
        cr_log_info("whitespace run (sir %d): 256 KiB %.3f s, 1 MiB %.3f s of CPU", sir, small,
                    big);
        cr_assert_lt(big, 8 * small + 0.01, "4x the bytes took %.1fx the time", big / small);
    }
}
