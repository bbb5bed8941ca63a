/* POST /v1/chat/completions and POST /apply-template, and the request side every chat
 * endpoint shares (ul_chat_serve, chat_gen.h: /v1/responses and /v1/messages arrive here
 * translated into a chat request).
 *
 * A chat request is validated as OpenAI does (each violation a 400 whose error.param names
 * the field), rendered with the model's own chat template (src/chat: a Jinja interpreter
 * that follows Python Jinja2 as Hugging Face configures it), tokenized with control tokens
 * only where the template wrote them (message text is marked plain, so a user who types
 * "<|im_end|>" cannot end the turn), and generated through api/gen.c. The output text goes
 * through the chat output parser (src/chat/toolcall.h): thinking -> reasoning_content,
 * tool-call syntax -> tool_calls, the rest -> content, streamed as chat.completion.chunk
 * deltas (the first carries the role) or answered as one chat.completion. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/chat_gen.h"
#include "chat/chat.h"
#include "chat/toolcall.h"
#include "engine/grammar.h"
#include "engine/json_gbnf.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

/* The request side of every chat endpoint (chat_gen.h). */
typedef ul_chat_req_t creq_t;

/* ---- validation -------------------------------------------------------------------- */

/* A 400 whose param is "list[i].rest" ("messages[2].content"). */
static int bad_at(ul_api_bad_t *bad, ul_arena_t *ar, const char *list, int i, const char *rest,
                  const char *msg) {
    char p[96];
    snprintf(p, sizeof p, "%s[%d]%s%s", list, i, *rest ? "." : "", rest);
    bad->param = ul_arena_strndup(ar, p, strlen(p));
    snprintf(bad->msg, sizeof bad->msg, "%s", msg);
    return UL_EINVAL;
}

static int check_content(const cJSON *m, int i, int required, ul_arena_t *ar, ul_api_bad_t *bad) {
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
    if (!c || cJSON_IsNull(c))
        return required
                   ? bad_at(bad, ar, "messages", i, "content", "this message needs a 'content'")
                   : 0;
    if (cJSON_IsString(c)) return 0;
    if (!cJSON_IsArray(c))
        return bad_at(bad, ar, "messages", i, "content",
                      "'content' must be a string or an array of content parts");
    int j = 0;
    const cJSON *part;
    cJSON_ArrayForEach(part, c) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(part, "type");
        char where[48];
        snprintf(where, sizeof where, "content[%d].type", j++);
        if (!cJSON_IsObject(part) || !cJSON_IsString(t))
            return bad_at(bad, ar, "messages", i, where,
                          "content parts must be objects with a 'type'");
        if (!strcmp(t->valuestring, "text")) {
            if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(part, "text")))
                return bad_at(bad, ar, "messages", i, where, "a text part needs a string 'text'");
        } else if (!strcmp(t->valuestring, "image_url") || !strcmp(t->valuestring, "input_audio") ||
                   !strcmp(t->valuestring, "image") || !strcmp(t->valuestring, "file") ||
                   !strcmp(t->valuestring, "audio")) {
            return bad_at(bad, ar, "messages", i, where,
                          "this model takes text only: image, audio and file parts are not "
                          "supported");
        } else if (strcmp(t->valuestring, "refusal")) {
            return bad_at(bad, ar, "messages", i, where,
                          "unknown content part type (expected 'text')");
        }
    }
    return 0;
}

static int check_tool_calls(const cJSON *m, int i, ul_arena_t *ar, ul_api_bad_t *bad) {
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
    if (!tc || cJSON_IsNull(tc)) return 0;
    if (!cJSON_IsArray(tc))
        return bad_at(bad, ar, "messages", i, "tool_calls", "'tool_calls' must be an array");
    const cJSON *c;
    cJSON_ArrayForEach(c, tc) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(c, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(f, "name");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(f, "arguments");
        if (!cJSON_IsObject(c) || !cJSON_IsObject(f) || !cJSON_IsString(name) ||
            !(cJSON_IsString(args) || cJSON_IsObject(args)))
            return bad_at(bad, ar, "messages", i, "tool_calls",
                          "each tool call needs a function with a string 'name' and "
                          "'arguments'");
    }
    return 0;
}

static int check_message(const cJSON *m, int i, ul_arena_t *ar, ul_api_bad_t *bad) {
    if (!cJSON_IsObject(m))
        return bad_at(bad, ar, "messages", i, "", "each message must be an object");
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(m, "role");
    if (!cJSON_IsString(r))
        return bad_at(bad, ar, "messages", i, "role", "each message needs a string 'role'");
    const char *role = r->valuestring;
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(m, "name");
    if (name && !cJSON_IsNull(name) && !cJSON_IsString(name))
        return bad_at(bad, ar, "messages", i, "name", "'name' must be a string");
    if (!strcmp(role, "system") || !strcmp(role, "developer") || !strcmp(role, "user"))
        return check_content(m, i, 1, ar, bad);
    if (!strcmp(role, "assistant")) {
        int rc = check_content(m, i, 0, ar, bad);
        return rc ? rc : check_tool_calls(m, i, ar, bad);
    }
    if (!strcmp(role, "tool")) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(m, "tool_call_id");
        if (!cJSON_IsString(id))
            return bad_at(bad, ar, "messages", i, "tool_call_id",
                          "a tool message needs a string 'tool_call_id'");
        return check_content(m, i, 1, ar, bad);
    }
    return bad_at(bad, ar, "messages", i, "role",
                  "'role' must be one of system, developer, user, assistant, tool");
}

static int check_tools(const cJSON *root, ul_arena_t *ar, int *n_tools, ul_api_bad_t *bad) {
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(root, "tools");
    *n_tools = 0;
    if (!tools || cJSON_IsNull(tools)) return 0;
    if (!cJSON_IsArray(tools)) return ul_api_bad(bad, "tools", "'tools' must be an array");
    int i = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(t, "type");
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(t, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(f, "name");
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(f, "parameters");
        if (!cJSON_IsObject(t) || !cJSON_IsString(ty) || strcmp(ty->valuestring, "function"))
            return bad_at(bad, ar, "tools", i, "type", "only 'function' tools exist");
        if (!cJSON_IsObject(f) || !cJSON_IsString(name) || !name->valuestring[0])
            return bad_at(bad, ar, "tools", i, "function.name",
                          "each tool needs a function with a non-empty 'name'");
        if (params && !cJSON_IsNull(params) && !cJSON_IsObject(params))
            return bad_at(bad, ar, "tools", i, "function.parameters",
                          "'parameters' must be a JSON Schema object");
        i++;
    }
    *n_tools = i;
    return 0;
}

static int tool_named(const cJSON *root, const char *name) {
    const cJSON *t;
    cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(root, "tools")) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(t, "function"), "name");
        if (cJSON_IsString(n) && !strcmp(n->valuestring, name)) return 1;
    }
    return 0;
}

/* tool_choice: "none" | "auto" | "required" | {"type":"function","function":{"name":N}}.
 * *parse: whether tool calls are parsed from the output. */
static int any_strict(const cJSON *root) {
    const cJSON *t;
    cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(root, "tools")) if (
        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(t, "function"), "strict"))) return 1;
    return 0;
}

static int check_tool_choice(const cJSON *root, int n_tools, creq_t *c, ul_api_bad_t *bad) {
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(root, "tool_choice");
    int *parse = &c->parse_tools;
    *parse = n_tools > 0;
    c->force = n_tools > 0 && any_strict(root) ? UL_CHAT_FORCE_STRICT : UL_CHAT_FORCE_NONE;
    if (!tc || cJSON_IsNull(tc)) return 0;
    if (cJSON_IsString(tc)) {
        const char *s = tc->valuestring;
        if (!strcmp(s, "none")) {
            c->force = UL_CHAT_FORCE_NONE;
            return *parse = 0;
        }
        if (!strcmp(s, "auto")) return 0;
        if (!strcmp(s, "required")) {
            c->force = UL_CHAT_FORCE_ALL;
            return n_tools ? 0 : ul_api_bad(bad, "tool_choice", "'required' needs 'tools'");
        }
        return ul_api_bad(bad, "tool_choice",
                          "'tool_choice' must be none, auto, required or a named function");
    }
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(tc, "function");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(f, "name");
    if (!cJSON_IsObject(tc) || !cJSON_IsString(name))
        return ul_api_bad(bad, "tool_choice",
                          "'tool_choice' must be none, auto, required or a named function");
    if (!tool_named(root, name->valuestring))
        return ul_api_bad(bad, "tool_choice", "'tool_choice' names a function not in 'tools'");
    c->force = UL_CHAT_FORCE_NAMED;
    c->named = name->valuestring;
    return 0;
}

/* tool_choice naming a function: the template sees only that tool. */
static void keep_named_tool(cJSON *root) {
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(root, "tool_choice");
    const cJSON *name =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(tc, "function"), "name");
    cJSON *tools = cJSON_GetObjectItemCaseSensitive(root, "tools");
    if (!cJSON_IsObject(tc) || !cJSON_IsString(name) || !cJSON_IsArray(tools)) return;
    cJSON *t = tools->child;
    while (t) {
        cJSON *next = t->next;
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(t, "function"), "name");
        if (!cJSON_IsString(n) || strcmp(n->valuestring, name->valuestring))
            cJSON_Delete(cJSON_DetachItemViaPointer(tools, t));
        t = next;
    }
}

/* The fields this endpoint reads itself (params.c reads the shared ones). */
static const char *const known[] = {"messages",
                                    "tools",
                                    "tool_choice",
                                    "parallel_tool_calls",
                                    "chat_template_kwargs",
                                    "add_generation_prompt",
                                    NULL};

static int check_request(ul_api_t *a, cJSON *root, ul_arena_t *ar, creq_t *c, ul_api_bad_t *bad) {
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(root, "messages");
    if (!msgs || cJSON_IsNull(msgs)) return ul_api_bad(bad, "messages", "'messages' is required");
    if (!cJSON_IsArray(msgs) || !cJSON_GetArraySize(msgs))
        return ul_api_bad(bad, "messages", "'messages' must be a non-empty array");
    int i = 0, rc;
    const cJSON *m;
    cJSON_ArrayForEach(m, msgs) if ((rc = check_message(m, i++, ar, bad))) return rc;
    int n_tools;
    if ((rc = check_tools(root, ar, &n_tools, bad))) return rc;
    if ((rc = check_tool_choice(root, n_tools, c, bad))) return rc;
    keep_named_tool(root);
    const cJSON *ptc = cJSON_GetObjectItemCaseSensitive(root, "parallel_tool_calls");
    if (ptc && !cJSON_IsNull(ptc) && !cJSON_IsBool(ptc))
        return ul_api_bad(bad, "parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
    c->parallel_tools = !ptc || !cJSON_IsFalse(ptc);
    const cJSON *kw = cJSON_GetObjectItemCaseSensitive(root, "chat_template_kwargs");
    if (kw && !cJSON_IsNull(kw) && !cJSON_IsObject(kw))
        return ul_api_bad(bad, "chat_template_kwargs", "'chat_template_kwargs' must be an object");
    const cJSON *agp = cJSON_GetObjectItemCaseSensitive(root, "add_generation_prompt");
    if (agp && !cJSON_IsNull(agp) && !cJSON_IsBool(agp))
        return ul_api_bad(bad, "add_generation_prompt",
                          "'add_generation_prompt' must be a boolean");
    (void)a;
    return 0;
}

/* ---- rendering --------------------------------------------------------------------- */

/* The template for this request: the tool_use variant with tools; when the template would
 * drop the tools (its source never reads them), ChatML's Hermes-style tools template for a
 * ChatML model (or one without a template), else NULL with bad set (never a silent drop).
 * Only reads a (may run on a worker): ensure_syntax built the fallback on the loop. */
static const ul_chat_tmpl_t *pick_template(const ul_api_t *a, const cJSON *root,
                                           ul_api_bad_t *bad) {
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(root, "tools");
    if (a->chat_tmpl_tool && cJSON_GetArraySize(tools) > 0) return a->chat_tmpl_tool;
    const ul_chat_tmpl_t *t = a->chat_tmpl;
    if (!t || cJSON_GetArraySize(tools) <= 0) return t;
    const char *src = ul_chat_tmpl_src(t);
    if (strstr(src, "tools")) return t;
    if (!strstr(src, "<|im_start|>")) {
        ul_api_bad(bad, "tools",
                   "this model's chat template cannot render tools, and it is not ChatML (which "
                   "has a tools fallback)");
        return NULL;
    }
    if (!a->chat_tmpl_hermes) { /* ensure_syntax could not build it */
        ul_api_bad(bad, "tools", "the tools fallback template is not available");
        return NULL;
    }
    return a->chat_tmpl_hermes;
}

/* OpenAI's developer role is the system role for templates that do not know it (as
 * llama.cpp maps it). */
static void map_developer(cJSON *root, const ul_chat_tmpl_t *t) {
    if (strstr(ul_chat_tmpl_src(t), "developer")) return;
    cJSON *m;
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(root, "messages")) {
        cJSON *r = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (cJSON_IsString(r) && !strcmp(r->valuestring, "developer"))
            cJSON_ReplaceItemInObjectCaseSensitive(m, "role", cJSON_CreateString("system"));
    }
}

/* Renders root's messages into text (and its plain mask); a template that raises is a 400
 * carrying its message. The leading BOS text is dropped when tokenizing adds BOS. */
static int render(ul_api_t *a, cJSON *root, ul_buf_t *text, ul_buf_t *plain,
                  const ul_chat_tmpl_t **picked, ul_api_bad_t *bad) {
    if (!a->chat_tmpl) return ul_api_bad(bad, NULL, "this server has no chat template");
    const ul_chat_tmpl_t *t = pick_template(a, root, bad);
    if (!t) return UL_EINVAL;
    if (picked) *picked = t;
    map_developer(root, t);
    const cJSON *agp = cJSON_GetObjectItemCaseSensitive(root, "add_generation_prompt");
    ul_chat_opts_t o = {.bos_token = a->bos_text,
                        .eos_token = a->eos_text,
                        .add_generation_prompt = !cJSON_IsFalse(agp)};
    char msg[200] = "";
    int rc = ul_chat_render(t, root, &o, text, plain, msg, sizeof msg);
    if (rc == UL_ENOMEM) {
        bad->status = 503, bad->type = "server_error";
        return ul_api_bad(bad, NULL, "out of memory");
    }
    if (rc) return ul_api_bad(bad, "messages", "the chat template refused the request: %s", msg);
    size_t nb = strlen(a->bos_text);
    if (a->codec.vocab && nb && ul_vocab_adds_bos(a->codec.vocab) && text->len >= nb &&
        !memcmp(text->p, a->bos_text, nb)) {
        ul_buf_consume(text, nb);
        ul_buf_consume(plain, nb);
    }
    return 0;
}

/* ---- handlers ---------------------------------------------------------------------- */

/* Forced tool calls (tool_choice "required" or named) and strict tools under "auto": a
 * grammar of the template's tool-call syntax (chat/toolcall.h) whose arguments are the
 * tools' parameters schemas (engine/json_gbnf.h); lazy (from the syntax's opening text
 * on) for strict tools, whose calls the model may or may not make. */
static int force_tools(ul_api_t *a, const cJSON *root, creq_t *c, ul_api_params_t *p,
                       ul_api_bad_t *bad) {
    if (c->force == UL_CHAT_FORCE_NONE) return 0;
    if (p->grammar) {
        if (c->force == UL_CHAT_FORCE_STRICT) return 0; /* the structured output field wins */
        return ul_api_bad(bad, "tool_choice",
                          "a forced 'tool_choice' cannot be combined with 'response_format' or "
                          "another structured output field");
    }
    if (!a->codec.vocab || !a->codec.token_piece) {
        if (c->force == UL_CHAT_FORCE_STRICT) return 0;
        return ul_api_bad(
            bad, "tool_choice",
            "'tool_choice' %s needs a model vocabulary (this server runs without one)",
            c->force == UL_CHAT_FORCE_ALL ? "required" : "naming a function");
    }
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(root, "tools");
    int fmt = c->syn.tool_fmt ? c->syn.tool_fmt : UL_CHAT_TOOLS_HERMES;
    char err[200];
    const char *trigger = NULL;
    ul_buf_t g = {0};
    int rc = ul_buf_puts(&g, "root ::= tool-calls\n") ? UL_ENOMEM : 0;
    if (!rc)
        rc = ul_chat_tool_gbnf(fmt, tools, c->force == UL_CHAT_FORCE_NAMED ? c->named : NULL,
                               c->parallel_tools, &g, &trigger, err, sizeof err);
    ul_json_gbnf_t *jb = rc ? NULL : ul_json_gbnf_new(err, sizeof err);
    if (!rc && !jb) rc = UL_ENOMEM;
    cJSON *any_obj = cJSON_Parse("{\"type\":\"object\"}");
    if (!any_obj) rc = rc ? rc : UL_ENOMEM;
    int i = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        if (rc) break;
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
        int exact = c->force != UL_CHAT_FORCE_STRICT ||
                    cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(fn, "strict"));
        const cJSON *sch = exact && cJSON_IsObject(params) ? params : any_obj;
        char name[48];
        if (!ul_chat_tool_fmt_per_param(fmt)) {
            snprintf(name, sizeof name, "tool-args-%d", i);
            rc = ul_json_gbnf_add(jb, sch, sch, name);
        } else {
            int j = 0;
            const cJSON *pr;
            cJSON_ArrayForEach(pr, cJSON_GetObjectItemCaseSensitive(params, "properties")) {
                snprintf(name, sizeof name, "tool-arg-%d-%d", i, j++);
                if ((rc = ul_json_gbnf_add(jb, exact ? pr : any_obj, params, name))) break;
            }
        }
        i++;
    }
    cJSON_Delete(any_obj);
    if (!rc) rc = ul_json_gbnf_finish(jb, &g), jb = NULL;
    ul_json_gbnf_free(jb);
    if (rc == UL_EINVAL || rc == UL_ENOTSUP) {
        if (c->force == UL_CHAT_FORCE_STRICT && rc == UL_ENOTSUP)
            rc = 0; /* auto: left free */
        else
            rc = ul_api_bad(bad, c->force == UL_CHAT_FORCE_STRICT ? "tools" : "tool_choice",
                            "cannot constrain the tool calls: %s", err);
    } else if (!rc) {
        rc = ul_api_grammar_get(a, g.p, g.len, &p->grammar, err, sizeof err);
        if (rc == UL_EINVAL) rc = ul_api_bad(bad, "tools", "the tool-call grammar: %s", err);
        if (!rc && c->force == UL_CHAT_FORCE_STRICT) p->grammar_trigger = trigger;
    }
    if (rc == UL_ENOMEM) {
        bad->status = 503, bad->type = "server_error";
        rc = ul_api_bad(bad, "tools", "out of memory");
    }
    ul_buf_free(&g);
    return rc;
}

/* The output syntax of each template (tool-call format, thinking markers), found from its
 * source once, and the ChatML tools fallback when the template cannot render tools: on the
 * loop, since prepare() may run on a worker and only reads them. */
static void ensure_syntax(ul_api_t *a) {
    if (a->chat_syn_ready || !a->chat_tmpl) return;
    const char *s = ul_chat_tmpl_src(a->chat_tmpl);
    ul_chat_syntax_detect(s, strlen(s), &a->chat_syn);
    if (a->chat_tmpl_tool) {
        s = ul_chat_tmpl_src(a->chat_tmpl_tool);
        ul_chat_syntax_detect(s, strlen(s), &a->chat_syn_tool);
    }
    s = ul_chat_tmpl_src(a->chat_tmpl);
    if (!a->chat_tmpl_hermes && !strstr(s, "tools") && strstr(s, "<|im_start|>")) {
        char err[200];
        const char *h = ul_chat_chatml_tools_template;
        if (ul_chat_tmpl_new(h, strlen(h), &a->chat_tmpl_hermes, err, sizeof err))
            UL_LOG_WARN("the ChatML tools fallback template: %s", err);
        else
            ul_chat_syntax_detect(h, strlen(h), &a->chat_syn_hermes);
    }
    a->chat_syn_ready = 1;
}

/* Everything before generation: the shared fields, the chat checks, the rendering. Reads
 * only a's immutable parts (ensure_syntax ran) and its locked grammar cache. */
static int prepare(ul_api_t *a, cJSON *root, ul_arena_t *ar, ul_api_params_t *p, creq_t *c,
                   ul_buf_t *text, ul_buf_t *plain, ul_api_bad_t *bad) {
    const ul_chat_tmpl_t *t = NULL;
    int rc = ul_api_params_parse(a, root, UL_GEN_CHAT, ar, known, p, bad);
    if (!rc) rc = check_request(a, root, ar, c, bad);
    if (!rc) rc = render(a, root, text, plain, &t, bad);
    if (rc) return rc;
    c->syn = t == a->chat_tmpl          ? a->chat_syn
             : t == a->chat_tmpl_hermes ? a->chat_syn_hermes
                                        : a->chat_syn_tool;
    c->starts_in_reasoning = ul_chat_syntax_prompt_opens_reasoning(&c->syn, text->p, text->len);
    return force_tools(a, root, c, p, bad);
}

int ul_api_chat_prepare_body(ul_api_t *a, ul_api_body_t endpoint, const char *body, size_t len,
                             ul_buf_t *text, ul_buf_t *plain, ul_api_bad_t *bad) {
    static const ul_chat_ep_t *const eps[] = {
        [UL_API_BODY_CHAT] = &ul_chat_ep_chat,
        [UL_API_BODY_RESPONSES] = &ul_chat_ep_responses,
        [UL_API_BODY_MESSAGES] = &ul_chat_ep_messages,
    };
    const ul_chat_ep_t *ep = eps[endpoint];
    size_t at;
    if (ul_api_body_check(body, len, bad->pbuf, sizeof bad->pbuf, &at))
        return ul_api_bad(bad, NULL, "the request body is not valid UTF-8 or contains \\u0000");
    cJSON *root = cJSON_ParseWithLength(body, len);
    if (!root) return ul_api_bad(bad, NULL, "the request body is not valid JSON");
    ul_chat_json_mark_floats(root, body, len);
    ensure_syntax(a);
    ul_arena_t ar;
    ul_arena_init(&ar, 1024);
    ul_api_params_t p;
    creq_t c = {.enc = ep->enc};
    ul_buf_t echo = {0};
    int rc = cJSON_IsObject(root) ? 0 : ul_api_bad(bad, NULL, "the body must be a JSON object");
    if (!rc && ep->translate) rc = ep->translate(a, root, &echo, bad);
    if (!rc) rc = prepare(a, root, &ar, &p, &c, text, plain, bad);
    if (bad->param) bad->param = NULL; /* may point into ar */
    ul_buf_free(&echo);
    ul_arena_free(&ar);
    cJSON_Delete(root);
    return rc;
}

/* ---- serving ----------------------------------------------------------------------- */

/* A chat-shaped request (chat, Responses, Messages; generate, /apply-template or
 * count_tokens) from its body to its prompt: a job (job.c) when the body is large, since
 * parsing, translating, checking, rendering and tokenizing all grow with it. */
typedef struct cjob_s {
    ul_api_job_t job; /* first */
    ul_api_t *a;
    ul_http_req_t *req; /* NULL once the client left */
    const ul_chat_ep_t *ep;
    ul_chat_mode_t mode;
    char *owned; /* the body, when taken from the request */
    const char *body;
    size_t body_len;
    cJSON *root;
    ul_arena_t ar;
    ul_api_params_t p;
    creq_t c;
    ul_buf_t text, plain, echo, out;
    ul_gen_prompt_t pr;
    ul_api_bad_t bad;
    int failed, translated;
} cjob_t;

static int parse_json(cjob_t *j) {
    size_t at;
    int bc = ul_api_body_check(j->body, j->body_len, j->bad.pbuf, sizeof j->bad.pbuf, &at);
    if (bc) {
        j->bad.code = bc == 2 ? "nul_character" : "invalid_utf8";
        return ul_api_bad(&j->bad, j->bad.pbuf[0] ? j->bad.pbuf : NULL,
                          bc == 2 ? "the request contains \\u0000 (a NUL character), which "
                                    "this server does not accept"
                                  : "the request body is not valid UTF-8 (byte %zu)",
                          at);
    }
    j->root = cJSON_ParseWithLength(j->body, j->body_len);
    if (!j->root) {
        j->bad.code = "invalid_json";
        return ul_api_bad(&j->bad, NULL, "the request body is not valid JSON");
    }
    /* 1.0 stays a float for the template (tojson of a tool schema), as in Python */
    ul_chat_json_mark_floats(j->root, j->body, j->body_len);
    if (!cJSON_IsObject(j->root))
        return ul_api_bad(&j->bad, NULL, "the body must be a JSON object");
    return 0;
}

/* {"prompt": text} or {"input_tokens": n}; the text may be large: checked appends. */
static int answer_text(cjob_t *j) {
    ul_buf_t *o = &j->out;
    int rc;
    if (j->mode == UL_CHAT_APPLY) {
        rc = ul_buf_puts(o, "{\"prompt\":\"");
        rc |= ul_buf_append_json_str(o, j->text.p ? j->text.p : "", j->text.len);
        rc |= ul_buf_puts(o, "\"}");
    } else {
        char n[48];
        snprintf(n, sizeof n, "{\"input_tokens\":%d}", (int)j->pr.n_ids);
        rc = ul_buf_puts(o, n);
    }
    if (!rc) return 0;
    j->bad = (ul_api_bad_t){.status = 503, .type = "server_error"};
    return ul_api_bad(&j->bad, NULL, "out of memory");
}

/* Off the loop for a job: parse, translate, check, render, tokenize (or write the answer
 * of /apply-template and count_tokens). */
static void run(ul_api_job_t *job) {
    cjob_t *j = (cjob_t *)job;
    ul_api_t *a = j->a;
    int rc = parse_json(j);
    if (!rc && j->ep->translate) {
        rc = j->ep->translate(a, j->root, &j->echo, &j->bad);
        j->translated = !rc;
    }
    if (!rc && j->mode == UL_CHAT_APPLY) {
        rc = check_request(a, j->root, &j->ar, &j->c, &j->bad);
        if (!rc) rc = render(a, j->root, &j->text, &j->plain, NULL, &j->bad);
    } else if (!rc) {
        rc = prepare(a, j->root, &j->ar, &j->p, &j->c, &j->text, &j->plain, &j->bad);
    }
    if (!rc && j->mode != UL_CHAT_APPLY) {
        j->pr.ids = ul_api_tokenize_text(&a->codec, j->text.p, j->text.len,
                                         (const uint8_t *)j->plain.p, 1, 1, &j->pr.n_ids);
        if (!j->pr.ids && j->mode == UL_CHAT_COUNT) { /* generating, ul_gen_start answers it */
            j->bad = (ul_api_bad_t){.status = 503, .type = "server_error"};
            rc = ul_api_bad(&j->bad, NULL, "the prompt could not be tokenized");
        }
    }
    if (!rc && j->mode != UL_CHAT_GENERATE) rc = answer_text(j);
    j->failed = rc != 0;
}

static void cjob_free(cjob_t *j) {
    free(j->pr.ids);
    ul_api_params_release(&j->p);
    ul_buf_free(&j->text);
    ul_buf_free(&j->plain);
    ul_buf_free(&j->echo);
    ul_buf_free(&j->out);
    ul_arena_free(&j->ar);
    cJSON_Delete(j->root);
    free(j->owned);
    free(j);
}

static void start(cjob_t *j) {
    ul_api_t *a = j->a;
    ul_http_req_t *req = j->req;
    const creq_t *c = &j->c;
    ul_gen_t *g = ul_gen_new(a, req, &j->p, &ul_chat_gen_ops, 1, c->enc->id_prefix);
    if (!g || ul_chat_gen_setup(g, c, j->echo.p, j->echo.len)) {
        if (g) ul_gen_discard(g);
        ul_api_error(req, 503, "server_error", NULL, NULL, "out of memory");
        return;
    }
    if (j->p.stream) ul_api_timing_stream(a, req);
    if (ul_gen_start(g, &j->pr) == 0 && j->p.stream) c->enc->start(g);
}

/* What a Responses or Messages body became: the chat request the rest of the path sees. */
static void log_translated(const ul_http_req_t *req, const cJSON *root) {
    char *s = cJSON_PrintUnformatted(root);
    UL_LOG_DEBUG("conn=%llu req=%llu as chat: %.2000s", (unsigned long long)req->conn_id,
                 (unsigned long long)req->req_id, s ? s : "(out of memory)");
    cJSON_free(s);
}

/* On the loop: the refusal, the text answer, or the generation. */
static void done(ul_api_job_t *job, int status) {
    cjob_t *j = (cjob_t *)job;
    if (j->req) {
        ul_http_req_set_cbs(j->req, NULL, NULL);
        if (status && !j->failed) {
            j->bad = (ul_api_bad_t){.status = 503, .type = "server_error"};
            ul_api_bad(&j->bad, NULL, "the request could not be processed");
            j->failed = 1;
        }
        if (j->translated && ul_log_get_level() <= UL_LOG_LEVEL_DEBUG)
            log_translated(j->req, j->root);
        if (j->failed)
            ul_api_reject(j->a, j->req, &j->bad);
        else if (j->mode != UL_CHAT_GENERATE)
            ul_http_respond_buf(j->req, 200, NULL, &j->out);
        else
            start(j);
    }
    cjob_free(j);
}

static void on_abort(ul_http_req_t *req, void *data, int reason) {
    (void)req, (void)reason;
    cjob_t *j = data;
    j->req = NULL;
}

int ul_chat_serve(ul_api_t *a, ul_http_req_t *req, const ul_chat_ep_t *ep, ul_chat_mode_t mode) {
    if (mode == UL_CHAT_GENERATE && ul_api_refuse_generate(a, req)) return 0;
    ensure_syntax(a);
    cjob_t *j = calloc(1, sizeof *j);
    if (!j) return ul_api_error(req, 503, "server_error", NULL, NULL, "out of memory");
    j->a = a;
    j->req = req;
    j->ep = ep;
    j->mode = mode;
    j->c.enc = ep->enc;
    ul_arena_init(&j->ar, 1024);
    j->job = (ul_api_job_t){.req = &j->req, .run = run, .done = done};
    int small =
        req->body_len <= UL_API_JOB_BYTES && !ul_api_body_may_constrain(req->body, req->body_len);
    if (ul_api_job_inline(a, req, &j->job, small, &j->body, &j->body_len, &j->owned)) return 0;
    j->job.charge = 5 * j->body_len; /* body, parse tree, prompt, its mask, token ids */
    if (ul_api_job_start(a, req, &j->job, on_abort, j)) cjob_free(j);
    return 0;
}

int ul_api_chat_completions(ul_http_req_t *req, void *data) {
    return ul_chat_serve(data, req, &ul_chat_ep_chat, UL_CHAT_GENERATE);
}

/* POST /apply-template: the prompt a chat request renders to, as llama-server answers. */
int ul_api_apply_template(ul_http_req_t *req, void *data) {
    return ul_chat_serve(data, req, &ul_chat_ep_chat, UL_CHAT_APPLY);
}
