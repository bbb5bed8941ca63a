/* POST /v1/responses (OpenAI's Responses API, stateless as llama-server serves it): the
 * request is translated into a chat request (chat_gen.h) and served by the chat core, so
 * templates, the special-token rule, tool calls and structured output are chat's; the
 * answer is written by responses_enc.c.
 *
 * input: a string (one user message) or items: messages (roles user, system, developer,
 * assistant; content a string or input_text/output_text parts), function_call and
 * function_call_output (an assistant tool call and its result), reasoning (the assistant's
 * reasoning_content, as templates read it). instructions become the first system message.
 * tools (function only), tool_choice, parallel_tool_calls, text.format (text, json_object,
 * json_schema: the same constrained decoding as chat's response_format),
 * max_output_tokens, temperature, top_p, reasoning.effort (enable_thinking off for "none"
 * and "minimal"; the effort is passed to the template as reasoning_effort) are honoured;
 * chat's extensions (seed, top_k, min_p, logit_bias, stop, penalties) pass through.
 * Nothing is stored: store: true, previous_response_id, item_reference, background and
 * conversation are a 400 naming them, as are other tool types and non-text inputs. */
#include <stdio.h>
#include <string.h>

#include "api/chat_gen.h"
#include "api/translate.h"
#include "uvllm/err.h"

/* Fields passed to the chat request as they are. */
static const char *const pass[] = {"model",
                                   "stream",
                                   "temperature",
                                   "top_p",
                                   "user",
                                   "metadata",
                                   "seed",
                                   "top_k",
                                   "min_p",
                                   "logit_bias",
                                   "stop",
                                   "ignore_eos",
                                   "presence_penalty",
                                   "frequency_penalty",
                                   "repetition_penalty",
                                   "repeat_penalty",
                                   "safety_identifier",
                                   "prompt_cache_key",
                                   "timeout",
                                   "parallel_tool_calls",
                                   NULL};

/* Fields of the Responses schema this server cannot honour. */
static int refuse(const cJSON *root, ul_api_bad_t *bad) {
    const cJSON *it;
    if ((it = ul_tr_get(root, "store")) && !cJSON_IsFalse(it))
        return ul_tr_bad(bad, "store",
                         "'store' is not supported: this server keeps no responses (send "
                         "the whole conversation as input)");
    static const char *const no[] = {"previous_response_id", "conversation", "prompt",
                                     "max_tool_calls"};
    for (size_t i = 0; i < sizeof no / sizeof *no; i++)
        if (ul_tr_get(root, no[i]))
            return ul_tr_bad(bad, no[i], "'%s' is not supported%s", no[i],
                             i < 3 ? ": this server keeps no state (send the whole "
                                     "conversation as input)"
                                   : "");
    if ((it = ul_tr_get(root, "background")) && !cJSON_IsFalse(it))
        return ul_tr_bad(bad, "background", "'background' is not supported");
    if ((it = ul_tr_get(root, "truncation")) &&
        !(cJSON_IsString(it) && !strcmp(it->valuestring, "disabled")))
        return ul_tr_bad(bad, "truncation", "'truncation' must be \"disabled\"");
    if ((it = ul_tr_get(root, "top_logprobs")) && !(cJSON_IsNumber(it) && it->valuedouble == 0))
        return ul_tr_bad(bad, "top_logprobs", "'top_logprobs' is not supported yet");
    if ((it = ul_tr_get(root, "service_tier")) &&
        (!cJSON_IsString(it) ||
         (strcmp(it->valuestring, "auto") && strcmp(it->valuestring, "default"))))
        return ul_tr_bad(bad, "service_tier", "'service_tier' must be \"auto\" or \"default\"");
    int i = 0;
    cJSON_ArrayForEach(it, ul_tr_get(root, "include")) {
        /* nothing is hidden: reasoning is returned as text, never encrypted */
        if (!cJSON_IsString(it) || strcmp(it->valuestring, "reasoning.encrypted_content")) {
            char p[32];
            snprintf(p, sizeof p, "include[%d]", i);
            return ul_tr_bad(bad, p, "only \"reasoning.encrypted_content\" can be included");
        }
        i++;
    }
    if ((it = ul_tr_get(root, "include")) && !cJSON_IsArray(it))
        return ul_tr_bad(bad, "include", "'include' must be an array of strings");
    return 0;
}

/* A message's content (a string or parts) as chat content: a string or text parts. */
static int content(const cJSON *c, int i, cJSON **out, ul_api_bad_t *bad) {
    char p[64];
    if (cJSON_IsString(c)) {
        *out = cJSON_CreateString(c->valuestring);
        return *out ? 0 : UL_ENOMEM;
    }
    if (!cJSON_IsArray(c)) {
        snprintf(p, sizeof p, "input[%d].content", i);
        return ul_tr_bad(bad, p, "'content' must be a string or an array of content parts");
    }
    *out = cJSON_CreateArray();
    if (!*out) return UL_ENOMEM;
    int j = 0;
    const cJSON *part;
    cJSON_ArrayForEach(part, c) {
        const cJSON *t = ul_tr_get(part, "type"), *text = ul_tr_get(part, "text");
        const char *ty = cJSON_IsString(t) ? t->valuestring : "";
        snprintf(p, sizeof p, "input[%d].content[%d]", i, j++);
        if (!strcmp(ty, "refusal")) text = ul_tr_get(part, "refusal");
        if (strcmp(ty, "input_text") && strcmp(ty, "output_text") && strcmp(ty, "text") &&
            strcmp(ty, "refusal"))
            return ul_tr_bad(bad, p,
                             strncmp(ty, "input_", 6) ? "unknown content part type"
                                                      : "this model takes text only: image, "
                                                        "audio and file inputs are not supported");
        if (!cJSON_IsString(text)) return ul_tr_bad(bad, p, "a text part needs a string 'text'");
        cJSON *o = cJSON_CreateObject();
        if (!o) return UL_ENOMEM;
        cJSON_AddItemToArray(*out, o);
        if (!cJSON_AddStringToObject(o, "type", "text") ||
            !cJSON_AddStringToObject(o, "text", text->valuestring))
            return UL_ENOMEM;
    }
    return 0;
}

/* The assistant message function calls and reasoning join: the last message when it is an
 * assistant one, else a new one. */
static cJSON *assistant(cJSON *msgs) {
    cJSON *m = cJSON_GetArrayItem(msgs, cJSON_GetArraySize(msgs) - 1);
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(m, "role");
    if (m && cJSON_IsString(r) && !strcmp(r->valuestring, "assistant")) return m;
    return ul_tr_message(msgs, "assistant");
}

static int item_message(cJSON *msgs, const cJSON *it, int i, ul_api_bad_t *bad) {
    const cJSON *role = ul_tr_get(it, "role");
    char p[48];
    snprintf(p, sizeof p, "input[%d].role", i);
    const char *r = cJSON_IsString(role) ? role->valuestring : "";
    if (strcmp(r, "user") && strcmp(r, "system") && strcmp(r, "developer") &&
        strcmp(r, "assistant"))
        return ul_tr_bad(bad, p, "'role' must be one of user, system, developer, assistant");
    cJSON *c = NULL;
    int rc = content(ul_tr_get(it, "content"), i, &c, bad);
    if (rc) {
        cJSON_Delete(c);
        return rc;
    }
    /* an assistant message after reasoning items joins their message (no content yet) */
    cJSON *m = NULL;
    if (!strcmp(r, "assistant")) {
        m = assistant(msgs);
        if (m && cJSON_GetObjectItemCaseSensitive(m, "content")) m = ul_tr_message(msgs, r);
    } else {
        m = ul_tr_message(msgs, r);
    }
    if (!m) {
        cJSON_Delete(c);
        return UL_ENOMEM;
    }
    cJSON_AddItemToObject(m, "content", c);
    return 0;
}

static int item_call(cJSON *msgs, const cJSON *it, int i, ul_api_bad_t *bad) {
    const cJSON *id = ul_tr_get(it, "call_id"), *name = ul_tr_get(it, "name");
    const cJSON *args = ul_tr_get(it, "arguments");
    char p[48];
    snprintf(p, sizeof p, "input[%d]", i);
    if (!cJSON_IsString(id) || !cJSON_IsString(name) || !cJSON_IsString(args))
        return ul_tr_bad(bad, p, "a function_call needs string 'call_id', 'name' and 'arguments'");
    cJSON *m = assistant(msgs), *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
    if (m && !calls) calls = cJSON_AddArrayToObject(m, "tool_calls");
    cJSON *c = calls ? cJSON_CreateObject() : NULL, *f = NULL;
    if (c) cJSON_AddItemToArray(calls, c);
    if (!c || !cJSON_AddStringToObject(c, "id", id->valuestring) ||
        !cJSON_AddStringToObject(c, "type", "function") ||
        !(f = cJSON_AddObjectToObject(c, "function")) ||
        !cJSON_AddStringToObject(f, "name", name->valuestring) ||
        !cJSON_AddStringToObject(f, "arguments", args->valuestring))
        return UL_ENOMEM;
    return 0;
}

/* function_call_output.output: a string, or parts whose texts are joined. */
static int item_output(cJSON *msgs, const cJSON *it, int i, ul_api_bad_t *bad) {
    const cJSON *id = ul_tr_get(it, "call_id"), *out = ul_tr_get(it, "output");
    char p[48];
    snprintf(p, sizeof p, "input[%d]", i);
    if (!cJSON_IsString(id))
        return ul_tr_bad(bad, p, "a function_call_output needs a string 'call_id'");
    cJSON *c = NULL;
    int rc = out ? content(out, i, &c, bad) : ul_tr_bad(bad, p, "'output' is required");
    cJSON *m = rc ? NULL : ul_tr_message(msgs, "tool");
    if (!rc && (!m || !cJSON_AddStringToObject(m, "tool_call_id", id->valuestring))) rc = UL_ENOMEM;
    if (rc) {
        cJSON_Delete(c);
        return rc;
    }
    cJSON_AddItemToObject(m, "content", c);
    return 0;
}

/* reasoning: its content texts (or, without them, its summary's) as reasoning_content. */
static int item_reasoning(cJSON *msgs, const cJSON *it) {
    ul_buf_t b = {0};
    const cJSON *part, *list = ul_tr_get(it, "content");
    if (!cJSON_GetArraySize(list)) list = ul_tr_get(it, "summary");
    cJSON_ArrayForEach(part, list) {
        const cJSON *t = ul_tr_get(part, "text");
        if (cJSON_IsString(t)) ul_gen_add(&b, t->valuestring, strlen(t->valuestring));
    }
    cJSON *m = assistant(msgs);
    const char *s = ul_buf_cstr(&b); /* buffers are not NUL-terminated */
    int rc = m && s && cJSON_AddStringToObject(m, "reasoning_content", s) ? 0 : UL_ENOMEM;
    ul_buf_free(&b);
    return rc;
}

static int input_items(cJSON *msgs, const cJSON *input, ul_api_bad_t *bad) {
    int i = 0, rc = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, input) {
        char p[48];
        snprintf(p, sizeof p, "input[%d]", i);
        const cJSON *t = ul_tr_get(it, "type");
        const char *ty = cJSON_IsString(t)       ? t->valuestring
                         : ul_tr_get(it, "role") ? "message"
                                                 : "";
        if (!cJSON_IsObject(it)) return ul_tr_bad(bad, p, "each input item must be an object");
        if (!strcmp(ty, "message"))
            rc = item_message(msgs, it, i, bad);
        else if (!strcmp(ty, "function_call"))
            rc = item_call(msgs, it, i, bad);
        else if (!strcmp(ty, "function_call_output"))
            rc = item_output(msgs, it, i, bad);
        else if (!strcmp(ty, "reasoning"))
            rc = item_reasoning(msgs, it);
        else if (!strcmp(ty, "item_reference"))
            rc = ul_tr_bad(bad, p,
                           "item_reference needs stored responses: this server keeps none "
                           "(send the items themselves)");
        else
            rc = ul_tr_bad(bad, p,
                           "unknown or unsupported input item type (expected message, "
                           "function_call, function_call_output, reasoning)");
        if (rc) return rc;
        i++;
    }
    return 0;
}

static int messages(cJSON *chat, const cJSON *root, ul_api_bad_t *bad) {
    const cJSON *input = ul_tr_get(root, "input"), *ins = ul_tr_get(root, "instructions");
    if (!input) return ul_tr_bad(bad, "input", "'input' is required");
    if (ins && !cJSON_IsString(ins))
        return ul_tr_bad(bad, "instructions", "'instructions' must be a string");
    cJSON *msgs = cJSON_AddArrayToObject(chat, "messages"), *m;
    if (!msgs) return UL_ENOMEM;
    if (ins && (!(m = ul_tr_message(msgs, "system")) ||
                !cJSON_AddStringToObject(m, "content", ins->valuestring)))
        return UL_ENOMEM;
    if (cJSON_IsString(input))
        return (m = ul_tr_message(msgs, "user")) &&
                       cJSON_AddStringToObject(m, "content", input->valuestring)
                   ? 0
                   : UL_ENOMEM;
    if (!cJSON_IsArray(input) || !cJSON_GetArraySize(input))
        return ul_tr_bad(bad, "input", "'input' must be a string or a non-empty array of items");
    return input_items(msgs, input, bad);
}

/* {"type":"function","name","description","parameters","strict"} -> chat's tool. */
static int tools(cJSON *chat, const cJSON *root, ul_api_bad_t *bad) {
    const cJSON *ts = ul_tr_get(root, "tools"), *t;
    if (!ts) return 0;
    if (!cJSON_IsArray(ts)) return ul_tr_bad(bad, "tools", "'tools' must be an array");
    cJSON *out = cJSON_AddArrayToObject(chat, "tools");
    if (!out) return UL_ENOMEM;
    int i = 0;
    cJSON_ArrayForEach(t, ts) {
        char p[40];
        snprintf(p, sizeof p, "tools[%d]", i++);
        const cJSON *ty = ul_tr_get(t, "type"), *name = ul_tr_get(t, "name");
        if (!cJSON_IsString(ty) || strcmp(ty->valuestring, "function"))
            return ul_tr_bad(bad, p, "only 'function' tools are supported");
        if (!cJSON_IsString(name) || !name->valuestring[0])
            return ul_tr_bad(bad, p, "a function tool needs a non-empty 'name'");
        cJSON *o = cJSON_CreateObject(), *f = cJSON_CreateObject();
        if (!o || !f || !cJSON_AddStringToObject(o, "type", "function")) {
            cJSON_Delete(o);
            cJSON_Delete(f);
            return UL_ENOMEM;
        }
        cJSON_AddItemToArray(out, o);
        cJSON_AddItemToObject(o, "function", f);
        static const char *const keys[] = {"name", "description", "parameters", "strict"};
        if (ul_tr_copy_keys(f, t, keys, 4)) return UL_ENOMEM;
    }
    return 0;
}

static int tool_choice(cJSON *chat, const cJSON *root, ul_api_bad_t *bad) {
    const cJSON *tc = ul_tr_get(root, "tool_choice");
    if (!tc) return 0;
    if (cJSON_IsString(tc)) {
        cJSON *dup = cJSON_Duplicate(tc, 0);
        return dup && cJSON_AddItemToObject(chat, "tool_choice", dup) ? 0 : UL_ENOMEM;
    }
    const cJSON *ty = ul_tr_get(tc, "type"), *name = ul_tr_get(tc, "name");
    if (!cJSON_IsString(ty) || strcmp(ty->valuestring, "function") || !cJSON_IsString(name))
        return ul_tr_bad(bad, "tool_choice",
                         "'tool_choice' must be none, auto, required or "
                         "{\"type\":\"function\",\"name\":...}");
    return ul_tr_tool_choice_fn(chat, name->valuestring);
}

/* text.format -> response_format (chat's structured output). */
static int text_format(cJSON *chat, const cJSON *root, ul_api_bad_t *bad) {
    const cJSON *text = ul_tr_get(root, "text");
    if (!text) return 0;
    if (!cJSON_IsObject(text)) return ul_tr_bad(bad, "text", "'text' must be an object");
    const cJSON *vb = ul_tr_get(text, "verbosity");
    if (vb && !(cJSON_IsString(vb) && !strcmp(vb->valuestring, "medium")))
        return ul_tr_bad(bad, "text.verbosity", "'verbosity' is not supported (only \"medium\")");
    const cJSON *f = ul_tr_get(text, "format"), *ty = ul_tr_get(f, "type");
    if (!f) return 0;
    if (!cJSON_IsString(ty)) return ul_tr_bad(bad, "text.format.type", "'format' needs a 'type'");
    if (!strcmp(ty->valuestring, "text")) return 0;
    cJSON *rf = cJSON_AddObjectToObject(chat, "response_format");
    if (!rf || !cJSON_AddStringToObject(rf, "type", ty->valuestring)) return UL_ENOMEM;
    if (!strcmp(ty->valuestring, "json_object")) return 0;
    if (strcmp(ty->valuestring, "json_schema"))
        return ul_tr_bad(bad, "text.format.type",
                         "'type' must be text, json_object or json_schema");
    if (!ul_tr_get(f, "schema"))
        return ul_tr_bad(bad, "text.format.schema", "a json_schema format needs a 'schema'");
    cJSON *js = cJSON_AddObjectToObject(rf, "json_schema");
    if (!js) return UL_ENOMEM;
    static const char *const keys[] = {"name", "schema", "strict", "description"};
    return ul_tr_copy_keys(js, f, keys, 4);
}

/* reasoning.effort: "none"/"minimal" turn thinking off where the template can; the effort
 * itself reaches templates that read reasoning_effort (gpt-oss). */
static int reasoning(cJSON *chat, const cJSON *root, ul_api_bad_t *bad) {
    const cJSON *r = ul_tr_get(root, "reasoning"), *e = ul_tr_get(r, "effort");
    if (!r) return 0;
    if (!cJSON_IsObject(r)) return ul_tr_bad(bad, "reasoning", "'reasoning' must be an object");
    if (!e) return 0;
    static const char *const ok[] = {"none", "minimal", "low", "medium", "high", "xhigh"};
    size_t i = 0;
    while (i < 6 && !(cJSON_IsString(e) && !strcmp(e->valuestring, ok[i]))) i++;
    if (i == 6)
        return ul_tr_bad(bad, "reasoning.effort",
                         "'effort' must be none, minimal, low, medium, high or xhigh");
    cJSON *kw = cJSON_AddObjectToObject(chat, "chat_template_kwargs");
    if (!kw || !cJSON_AddStringToObject(kw, "reasoning_effort", e->valuestring)) return UL_ENOMEM;
    if (i < 2 && !cJSON_AddFalseToObject(kw, "enable_thinking")) return UL_ENOMEM;
    return 0;
}

static int numbers(cJSON *chat, cJSON *root, ul_api_bad_t *bad) {
    const cJSON *m = ul_tr_get(root, "max_output_tokens");
    if (m && (!cJSON_IsNumber(m) || m->valuedouble < 1 || m->valuedouble > (1 << 30) ||
              m->valuedouble != (double)(int)m->valuedouble))
        return ul_tr_bad(bad, "max_output_tokens",
                         "'max_output_tokens' must be an integer between 1 and 1073741824");
    ul_tr_move(chat, root, "max_output_tokens", "max_tokens");
    const cJSON *so = ul_tr_get(root, "stream_options");
    if (so && !cJSON_IsObject(so))
        return ul_tr_bad(bad, "stream_options", "'stream_options' must be an object");
    return 0;
}

/* What the response object repeats of the request (responses_enc.c). */
static int echo(ul_buf_t *b, const cJSON *root) {
    static const char *const keys[] = {"instructions", "max_output_tokens",
                                       "metadata",     "parallel_tool_calls",
                                       "reasoning",    "temperature",
                                       "text",         "tool_choice",
                                       "tools",        "top_p",
                                       "user"};
    static const char *const dflt[] = {"null",
                                       "null",
                                       "{}",
                                       "true",
                                       "{\"effort\":null,\"summary\":null}",
                                       "1",
                                       "{\"format\":{\"type\":\"text\"}}",
                                       "\"auto\"",
                                       "[]",
                                       "1",
                                       "null"};
    int rc = 0;
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        const cJSON *v = ul_tr_get(root, keys[i]);
        if (!strcmp(keys[i], "text") && v && !ul_tr_get(v, "format")) v = NULL;
        rc |= ul_tr_echo(b, keys[i], v, dflt[i]);
    }
    return rc | ul_buf_puts(b, ",\"previous_response_id\":null,\"store\":false,"
                               "\"truncation\":\"disabled\",\"service_tier\":\"default\"");
}

static int translate(ul_api_t *a, cJSON *root, ul_buf_t *out, ul_api_bad_t *bad) {
    cJSON *chat = cJSON_CreateObject();
    if (!chat) return UL_ENOMEM;
    int rc = refuse(root, bad);
    if (!rc) rc = messages(chat, root, bad);
    if (!rc) rc = tools(chat, root, bad);
    if (!rc) rc = tool_choice(chat, root, bad);
    if (!rc) rc = text_format(chat, root, bad);
    if (!rc) rc = reasoning(chat, root, bad);
    if (!rc && echo(out, root)) rc = UL_ENOMEM;
    if (!rc) rc = numbers(chat, root, bad);
    for (int i = 0; !rc && pass[i]; i++) ul_tr_move(chat, root, pass[i], pass[i]);
    if (rc) {
        cJSON_Delete(chat);
        if (rc == UL_ENOMEM) *bad = (ul_api_bad_t){.status = 503, .type = "server_error"};
        if (rc == UL_ENOMEM) ul_api_bad(bad, NULL, "out of memory");
        return rc;
    }
    ul_tr_swap(root, chat);
    return 0;
}

extern const ul_chat_enc_t ul_responses_enc; /* responses_enc.c */

const ul_chat_ep_t ul_chat_ep_responses = {.enc = &ul_responses_enc, .translate = translate};

int ul_api_responses(ul_http_req_t *req, void *data) {
    return ul_chat_serve(data, req, &ul_chat_ep_responses, UL_CHAT_GENERATE);
}
