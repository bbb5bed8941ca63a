/* Reasoning split and syntax detection: each of the 40 shared templates is detected as the
 * expected tool-call format with the expected thinking markers; the generation prompts
 * llama.cpp rendered (renderings.jsonl) open reasoning exactly for the templates that
 * force thinking; reasoning is split from content (closed, never closed, starting inside
 * the block) identically whole, in 1-byte and in random pieces. */
#include "toolcall_testutil.h"

typedef struct {
    const char *tmpl;
    int fmt;
    const char *open, *close;
    int prompt_opens; /* the user_only generation prompt ends inside reasoning */
} det_t;

static const det_t g_det[] = {
    {"Apertus-8B-Instruct.jinja", UL_CHAT_TOOLS_APERTUS, "<|inner_prefix|>", "<|inner_suffix|>", 0},
    {"Apriel-1.6-15b-Thinker-fixed.jinja", UL_CHAT_TOOLS_APRIEL, NULL, "[BEGIN FINAL RESPONSE]", 1},
    {"ByteDance-Seed-OSS.jinja", UL_CHAT_TOOLS_SEED_OSS, "<seed:think>", "</seed:think>", 0},
    {"Cohere2MoE.jinja", UL_CHAT_TOOLS_COMMAND_A, "<|START_THINKING|>", "<|END_THINKING|>", 1},
    {"CohereForAI-c4ai-command-r-plus-tool_use.jinja", UL_CHAT_TOOLS_COMMAND_R, NULL, NULL, 0},
    {"GLM-4.6.jinja", UL_CHAT_TOOLS_GLM45, "<think>", "</think>", 0},
    {"GigaChat3-10B-A1.8B.jinja", UL_CHAT_TOOLS_GIGACHAT3, NULL, NULL, 0},
    {"HuggingFaceTB-SmolLM3-3B.jinja", UL_CHAT_TOOLS_NONE, "<think>", "</think>", 0},
    {"Kimi-K2-Instruct.jinja", UL_CHAT_TOOLS_KIMI_K2, NULL, NULL, 0},
    {"LFM2-8B-A1B.jinja", UL_CHAT_TOOLS_LFM2, NULL, NULL, 0},
    {"LFM2.5-8B-A1B.jinja", UL_CHAT_TOOLS_LFM2, "<think>", "</think>", 0},
    {"MiniMax-M2.jinja", UL_CHAT_TOOLS_MINIMAX_M2, "<think>", "</think>", 1},
    {"Mistral-Small-3.2-24B-Instruct-2506.jinja", UL_CHAT_TOOLS_MISTRAL_ARGS, NULL, NULL, 0},
    {"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja", UL_CHAT_TOOLS_QWEN3_CODER, "<think>", "</think>",
     1},
    {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", UL_CHAT_TOOLS_HERMES, NULL, NULL, 0},
    {"Qwen-Qwen2.5-7B-Instruct.jinja", UL_CHAT_TOOLS_HERMES, NULL, NULL, 0},
    {"Qwen-Qwen3-0.6B.jinja", UL_CHAT_TOOLS_HERMES, "<think>", "</think>", 0},
    {"Qwen3.5-4B.jinja", UL_CHAT_TOOLS_QWEN3_CODER, "<think>", "</think>", 1},
    {"Reka-Edge.jinja", UL_CHAT_TOOLS_HERMES, "<think>", "</think>", 1},
    {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", UL_CHAT_TOOLS_DEEPSEEK_R1, "<think>",
     "</think>", 1},
    {"deepseek-ai-DeepSeek-V3.2.jinja", UL_CHAT_TOOLS_DEEPSEEK_DSML, "<think>", "</think>", 1},
    {"deepseek-ai-DeepSeek-V4.jinja", UL_CHAT_TOOLS_DEEPSEEK_DSML, "<think>", "</think>", 1},
    {"fireworks-ai-llama-3-firefunction-v2.jinja", UL_CHAT_TOOLS_FIREFUNCTION_V2, NULL, NULL, 0},
    {"google-gemma-2-2b-it.jinja", UL_CHAT_TOOLS_NONE, NULL, NULL, 0},
    {"google-gemma-4-31B-it.jinja", UL_CHAT_TOOLS_GEMMA4, "<|channel>thought", "<channel|>", 0},
    {"ibm-granite-granite-3.3-2B-Instruct.jinja", UL_CHAT_TOOLS_GRANITE, "<think>", "</think>", 0},
    {"ibm-granite-granite-4.0.jinja", UL_CHAT_TOOLS_HERMES, NULL, NULL, 0},
    {"llama-cpp-deepseek-r1.jinja", UL_CHAT_TOOLS_DEEPSEEK_R1, "<think>", "</think>", 1},
    {"llama-cpp-rwkv-world.jinja", UL_CHAT_TOOLS_NONE, "<think>", "</think>", 1},
    {"meetkai-functionary-medium-v3.1.jinja", UL_CHAT_TOOLS_FUNCTIONARY_V31, NULL, NULL, 0},
    {"meta-llama-Llama-3.1-8B-Instruct.jinja", UL_CHAT_TOOLS_LLAMA3, NULL, NULL, 0},
    {"meta-llama-Llama-3.2-3B-Instruct.jinja", UL_CHAT_TOOLS_LLAMA3, NULL, NULL, 0},
    {"microsoft-Phi-3.5-mini-instruct.jinja", UL_CHAT_TOOLS_NONE, NULL, NULL, 0},
    {"mistralai-Mistral-Nemo-Instruct-2407.jinja", UL_CHAT_TOOLS_MISTRAL, NULL, NULL, 0},
    {"moonshotai-Kimi-K2.jinja", UL_CHAT_TOOLS_KIMI_K2, NULL, NULL, 0},
    {"openai-gpt-oss-120b.jinja", UL_CHAT_TOOLS_HARMONY, NULL, NULL, 0},
    {"poolside-Laguna-S-2.1.jinja", UL_CHAT_TOOLS_GLM45, "<think>", "</think>", 1},
    {"poolside-Laguna-XS-2.1.jinja", UL_CHAT_TOOLS_GLM45, "<think>", "</think>", 1},
    {"unsloth-mistral-Devstral-Small-2507.jinja", UL_CHAT_TOOLS_MISTRAL_ARGS, NULL, NULL, 0},
    {"upstage-Solar-Open-100B.jinja", UL_CHAT_TOOLS_SOLAR_OPEN, "<|think|>", "<|end|>", 0},
};

static void str_eq_or_null(const char *got, const char *want, const char *what, const char *t) {
    if (!want)
        cr_assert_null(got, "%s: %s is %s", t, what, got);
    else
        cr_assert(got && !strcmp(got, want), "%s: %s is %s", t, what, got ? got : "NULL");
}

Test(reasoning, detects_every_shared_template) {
    cr_assert_eq(sizeof g_det / sizeof g_det[0], 40);
    for (size_t k = 0; k < sizeof g_det / sizeof g_det[0]; k++) {
        ul_chat_syntax_t s;
        t_detect(g_det[k].tmpl, &s);
        cr_assert_eq(s.tool_fmt, g_det[k].fmt, "%s: format %s", g_det[k].tmpl,
                     ul_chat_tool_fmt_name(s.tool_fmt));
        str_eq_or_null(s.think_open, g_det[k].open, "think_open", g_det[k].tmpl);
        str_eq_or_null(s.think_close, g_det[k].close, "think_close", g_det[k].tmpl);
    }
}

Test(reasoning, unknown_template_is_plain) {
    ul_chat_syntax_t s;
    ul_chat_syntax_detect("{{ messages }}", 14, &s);
    cr_assert_eq(s.tool_fmt, UL_CHAT_TOOLS_NONE);
    cr_assert_null(s.think_open);
    ul_chat_syntax_detect(NULL, 0, &s);
    cr_assert_eq(s.tool_fmt, UL_CHAT_TOOLS_NONE);
    cr_assert_str_eq(ul_chat_tool_fmt_name(UL_CHAT_TOOLS_HERMES), "hermes");
    cr_assert_str_eq(ul_chat_tool_fmt_name(-1), "none");
}

/* llama.cpp's own generation prompts (renderings.jsonl, user_only). */
Test(reasoning, prompt_opens_reasoning_on_real_prompts) {
    char path[2048];
    snprintf(path, sizeof path, "%s/chat-templates/renderings.jsonl", ut_shared_dir());
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    static char line[1 << 20];
    int seen = 0;
    while (fgets(line, sizeof line, f)) {
        cJSON *d = cJSON_Parse(line);
        const char *tmpl = cJSON_GetStringValue(cJSON_GetObjectItem(d, "template"));
        cJSON *u = cJSON_GetObjectItem(cJSON_GetObjectItem(d, "renderings"), "user_only");
        for (size_t k = 0; tmpl && cJSON_IsString(u) && k < sizeof g_det / sizeof g_det[0]; k++) {
            if (strcmp(tmpl, g_det[k].tmpl)) continue;
            ul_chat_syntax_t s;
            t_detect(tmpl, &s);
            const char *pr = u->valuestring;
            cr_assert_eq(ul_chat_syntax_prompt_opens_reasoning(&s, pr, strlen(pr)),
                         g_det[k].prompt_opens, "%s", tmpl);
            seen++;
        }
        cJSON_Delete(d);
    }
    fclose(f);
    cr_assert_geq(seen, 35);
}

Test(reasoning, prompt_closed_block_does_not_open) {
    ul_chat_syntax_t s;
    t_detect("Qwen-Qwen3-0.6B.jinja", &s);
    const char *p1 = "<|im_start|>assistant\n<think>\n\n</think>\n\n";
    const char *p2 = "<|im_start|>assistant\n<think>\n";
    cr_assert_not(ul_chat_syntax_prompt_opens_reasoning(&s, p1, strlen(p1)));
    cr_assert(ul_chat_syntax_prompt_opens_reasoning(&s, p2, strlen(p2)));
    cr_assert_not(ul_chat_syntax_prompt_opens_reasoning(&s, "", 0));
}

typedef struct {
    const char *tmpl;
    int sir;
    const char *text, *content, *reasoning;
} split_t;

static const split_t g_split[] = {
    {"Qwen-Qwen3-0.6B.jinja", 0, "<think>\nLet me add.\n</think>\n\n2+2 = 4.", "2+2 = 4.",
     "Let me add."},
    {"Qwen-Qwen3-0.6B.jinja", 0, "<think>\n\n</think>\n\nHi!", "Hi!", ""},
    {"Qwen-Qwen3-0.6B.jinja", 0, "No thinking here.\n", "No thinking here.\n", ""},
    {"Qwen-Qwen3-0.6B.jinja", 0, "  plain\ttext \n", "  plain\ttext \n", ""},
    /* the prompt opened the block */
    {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", 1, "Okay, 2+2.\n</think>\n\nIt is 4.",
     "It is 4.", "Okay, 2+2."},
    /* ... and the model opened it again anyway */
    {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", 1, "<think>\nOkay.\n</think>\nFour.",
     "Four.", "Okay."},
    /* never closed: all reasoning (cut by max_tokens) */
    {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", 1, "Hmm, let me think about <this", "",
     "Hmm, let me think about <this"},
    {"Qwen-Qwen3-0.6B.jinja", 0, "<think>\nstill going", "", "still going"},
    {"Qwen3.5-4B.jinja", 1, "Grüße 你好 🙂</think>\n\n«ok» 👋", "«ok» 👋",
     "Grüße 你好 🙂"},
    {"MiniMax-M2.jinja", 1, "a</think>b<think>c</think>d", "bd", "ac"},
    {"ByteDance-Seed-OSS.jinja", 0, "<seed:think>x y</seed:think>z", "z", "x y"},
    {"Cohere2MoE.jinja", 1, "Plan.<|END_THINKING|><|START_RESPONSE|>Done.<|END_RESPONSE|>", "Done.",
     "Plan."},
    {"Apriel-1.6-15b-Thinker-fixed.jinja", 1,
     "1. Add.\n[BEGIN FINAL RESPONSE]\n4\n[END FINAL RESPONSE]\n<|end|>", "4", "1. Add."},
    {"Apertus-8B-Instruct.jinja", 0, "<|inner_prefix|>hm<|inner_suffix|>Yes.", "Yes.", "hm"},
    {"google-gemma-4-31B-it.jinja", 0, "<|channel>thought\nWhy.<channel|>Because.", "Because.",
     "Why."},
    {"upstage-Solar-Open-100B.jinja", 0,
     "<|think|>Sum.<|end|><|begin|>assistant<|content|>4<|end|>", "4", "Sum."},
    {"ibm-granite-granite-3.3-2B-Instruct.jinja", 0, "<think>Add.</think><response>4</response>",
     "4", "Add."},
    {"openai-gpt-oss-120b.jinja", 0,
     "<|channel|>analysis<|message|>User greets.<|end|><|start|>assistant<|channel|>final"
     "<|message|>Hello!",
     "Hello!", "User greets."},
    {"openai-gpt-oss-120b.jinja", 0, "<|channel|>analysis<|message|>never finished", "",
     "never finished"},
    {"openai-gpt-oss-120b.jinja", 0, "no channel at all", "no channel at all", ""},
    {"openai-gpt-oss-120b.jinja", 0, "<|channel|>final no message marker",
     "<|channel|>final no message marker", ""},
    {"llama-cpp-rwkv-world.jinja", 1, "</think>Only content.", "Only content.", ""},
};

/* A harmony header is at most 512 bytes: one ending right at the bound is still a header,
 * a longer one is content, whatever the pieces. */
Test(reasoning, harmony_header_bound_is_exact) {
    ul_chat_syntax_t s;
    t_detect("openai-gpt-oss-120b.jinja", &s);
    static char txt[1024];
    for (int pad = 505; pad <= 515; pad++) {
        size_t n = (size_t)snprintf(txt, sizeof txt, "<|channel|>analysis");
        memset(txt + n, ' ', (size_t)pad - n);
        snprintf(txt + pad, sizeof txt - (size_t)pad, "<|message|>why<|end|>ok");
        t_res_t r;
        t_parse(&s, 0, 1, txt, &r);
        int header = pad <= 512;
        cr_assert_str_eq(r.reasoning.p, header ? "why" : "", "pad %d", pad);
        cr_assert_eq(r.content.len, header ? 2 : strlen(txt) - 7, "pad %d", pad);
        t_res_free(&r);
    }
}

Test(reasoning, split_whole_and_streamed_agree) {
    for (size_t k = 0; k < sizeof g_split / sizeof g_split[0]; k++) {
        const split_t *c = &g_split[k];
        ul_chat_syntax_t s;
        t_detect(c->tmpl, &s);
        t_res_t r;
        t_parse(&s, c->sir, 1, c->text, &r);
        cr_assert_str_eq(r.content.p, c->content, "split %zu: content [%s]", k, r.content.p);
        cr_assert_str_eq(r.reasoning.p, c->reasoning, "split %zu: reasoning [%s]", k,
                         r.reasoning.p);
        cr_assert_eq(r.n, 0);
        t_res_free(&r);
    }
}

/* Streaming emits early: reasoning arrives before the block closes, content is not held
 * beyond a possible marker prefix. */
static void count_ev(void *ud, const ul_chat_ev_t *ev) {
    t_res_t *r = ud;
    ul_buf_append(ev->kind == UL_CHAT_EV_REASONING ? &r->reasoning : &r->content, ev->text,
                  ev->len);
}

Test(reasoning, deltas_are_not_held_back) {
    ul_chat_syntax_t s;
    t_detect("Qwen-Qwen3-0.6B.jinja", &s);
    ul_chat_parser_t p;
    t_res_t r = {0};
    ul_chat_parser_init(&p, &s, 0, 1, 1);
    ul_chat_parser_push(&p, "<think>abc", 10, count_ev, &r);
    cr_assert_eq(r.reasoning.len, 3);
    ul_chat_parser_push(&p, " de </thi", 9, count_ev, &r);
    cr_assert_eq(r.reasoning.len, 6, "held '%.*s'", (int)r.reasoning.len, r.reasoning.p);
    ul_chat_parser_push(&p, "nk>Hi <tool_c", 13, count_ev, &r);
    cr_assert_eq(r.reasoning.len, 6);
    cr_assert_eq(r.content.len, 2);
    ul_chat_parser_push(&p, "x", 1, count_ev, &r);
    cr_assert_eq(r.content.len, 11); /* "Hi <tool_cx": not a marker after all */
    ul_chat_parser_finish(&p, count_ev, &r);
    ul_chat_parser_free(&p);
    t_res_free(&r);
}
