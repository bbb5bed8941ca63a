/* POST /v1/messages and /v1/messages/count_tokens (Anthropic's Messages API): the request
 * is translated into a chat request (chat_gen.h) and served by the chat core; the answer
 * is written by messages_enc.c, errors in Anthropic's shape (api.c).
 *
 * system (a string or text blocks) becomes the first system message; user content blocks
 * text -> text parts, tool_result -> a tool message (its text; is_error prefixes "Error: ")
 * placed where the block is; assistant blocks text -> content, thinking -> reasoning_content,
 * tool_use -> tool_calls (input as arguments JSON). tools (input_schema as parameters),
 * tool_choice (auto, any -> required, tool -> the named function, none;
 * disable_parallel_tool_use -> parallel_tool_calls false), stop_sequences (up to 4),
 * max_tokens (required, as Anthropic), temperature, top_p, top_k, thinking (enabled /
 * disabled -> the template's enable_thinking; its budget_tokens is accepted and not
 * enforced), metadata.user_id are honoured; chat's extensions (seed, min_p, logit_bias,
 * penalties) pass through. Images, documents and server tools are a 400 naming them. */
#include <stdio.h>
#include <string.h>

#include "api/chat_gen.h"
#include "api/translate.h"
#include "uvllm/err.h"

static const char *const pass[] = {"model",
                                   "stream",
                                   "temperature",
                                   "top_p",
                                   "top_k",
                                   "seed",
                                   "min_p",
                                   "logit_bias",
                                   "ignore_eos",
                                   "timeout",
                                   "presence_penalty",
                                   "frequency_penalty",
                                   "repetition_penalty",
                                   "repeat_penalty",
                                   NULL};

static int oom(void) { return UL_ENOMEM; }

/* A text block's text, appended (any other block is a 400 naming where). */
static int block_text(const cJSON *b, const char *where, ul_buf_t *out, ul_api_bad_t *bad) {
    const cJSON *t = ul_tr_get(b, "type"), *text = ul_tr_get(b, "text");
    if (!cJSON_IsString(t) || strcmp(t->valuestring, "text"))
        return ul_tr_bad(bad, where, "only text blocks are allowed here");
    if (!cJSON_IsString(text)) return ul_tr_bad(bad, where, "a text block needs a string 'text'");
    ul_gen_add(out, text->valuestring, strlen(text->valuestring));
    return 0;
}

/* A string or text blocks, joined. */
static int text_of(const cJSON *v, const char *where, ul_buf_t *out, ul_api_bad_t *bad) {
    if (cJSON_IsString(v)) {
        ul_gen_add(out, v->valuestring, strlen(v->valuestring));
        return 0;
    }
    if (!cJSON_IsArray(v)) return ul_tr_bad(bad, where, "must be a string or an array of blocks");
    int i = 0, rc;
    const cJSON *b;
    cJSON_ArrayForEach(b, v) {
        char p[96];
        snprintf(p, sizeof p, "%s.%d", where, i++);
        if ((rc = block_text(b, p, out, bad))) return rc;
    }
    return 0;
}

/* Buffers are not NUL-terminated: ul_buf_cstr before a text is handed over as a C string. */
static int add_text_message(cJSON *msgs, const char *role, ul_buf_t *text) {
    const char *s = ul_buf_cstr(text);
    cJSON *m = s ? ul_tr_message(msgs, role) : NULL;
    return m && cJSON_AddStringToObject(m, "content", s) ? 0 : oom();
}

static int tool_result(cJSON *msgs, const cJSON *b, const char *where, ul_api_bad_t *bad) {
    const cJSON *id = ul_tr_get(b, "tool_use_id"), *c = ul_tr_get(b, "content");
    if (!cJSON_IsString(id))
        return ul_tr_bad(bad, where, "a tool_result block needs a string 'tool_use_id'");
    ul_buf_t text = {0};
    char p[96];
    snprintf(p, sizeof p, "%s.content", where);
    if (cJSON_IsTrue(ul_tr_get(b, "is_error"))) ul_gen_add(&text, "Error: ", 7);
    int rc = c ? text_of(c, p, &text, bad) : 0;
    const char *s = rc ? NULL : ul_buf_cstr(&text);
    cJSON *m = s ? ul_tr_message(msgs, "tool") : NULL;
    if (!rc && (!m || !cJSON_AddStringToObject(m, "tool_call_id", id->valuestring) ||
                !cJSON_AddStringToObject(m, "content", s)))
        rc = oom();
    ul_buf_free(&text);
    return rc;
}

/* A user turn: tool results become tool messages where they stand, text the user's. */
static int user_blocks(cJSON *msgs, const cJSON *content, int i, ul_api_bad_t *bad) {
    ul_buf_t text = {0};
    int j = 0, rc = 0, any = 0;
    const cJSON *b;
    cJSON_ArrayForEach(b, content) {
        char p[64];
        snprintf(p, sizeof p, "messages.%d.content.%d", i, j++);
        const cJSON *t = ul_tr_get(b, "type");
        const char *ty = cJSON_IsString(t) ? t->valuestring : "";
        if (!strcmp(ty, "tool_result")) {
            if (any) { /* the text before it is a user turn of its own */
                rc = add_text_message(msgs, "user", &text);
                text.len = 0;
                any = 0;
            }
            if (!rc) rc = tool_result(msgs, b, p, bad);
        } else if (!strcmp(ty, "text")) {
            rc = block_text(b, p, &text, bad);
            any = 1;
        } else if (!strcmp(ty, "image") || !strcmp(ty, "document")) {
            rc = ul_tr_bad(bad, p,
                           "this model takes text only: images and documents are not "
                           "supported");
        } else {
            rc = ul_tr_bad(bad, p, "a user message's blocks must be text or tool_result");
        }
        if (rc) break;
    }
    if (!rc && (any || !cJSON_GetArraySize(content))) rc = add_text_message(msgs, "user", &text);
    ul_buf_free(&text);
    return rc;
}

static int tool_use(cJSON *m, const cJSON *b, const char *where, ul_api_bad_t *bad) {
    const cJSON *id = ul_tr_get(b, "id"), *name = ul_tr_get(b, "name"), *in = ul_tr_get(b, "input");
    if (!cJSON_IsString(id) || !cJSON_IsString(name) || (in && !cJSON_IsObject(in)))
        return ul_tr_bad(bad, where,
                         "a tool_use block needs a string 'id' and 'name' and an object 'input'");
    cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
    if (!calls && !(calls = cJSON_AddArrayToObject(m, "tool_calls"))) return oom();
    cJSON *c = cJSON_CreateObject(), *f = NULL;
    if (!c) return oom();
    cJSON_AddItemToArray(calls, c);
    char *args = in ? cJSON_PrintUnformatted(in) : NULL;
    int ok = (!in || args) && cJSON_AddStringToObject(c, "id", id->valuestring) &&
             cJSON_AddStringToObject(c, "type", "function") &&
             (f = cJSON_AddObjectToObject(c, "function")) &&
             cJSON_AddStringToObject(f, "name", name->valuestring) &&
             cJSON_AddStringToObject(f, "arguments", args ? args : "{}");
    cJSON_free(args);
    return ok ? 0 : oom();
}

static int assistant_blocks(cJSON *msgs, const cJSON *content, int i, ul_api_bad_t *bad) {
    cJSON *m = ul_tr_message(msgs, "assistant");
    if (!m) return oom();
    ul_buf_t text = {0}, think = {0};
    int j = 0, rc = 0;
    const cJSON *b;
    cJSON_ArrayForEach(b, content) {
        char p[64];
        snprintf(p, sizeof p, "messages.%d.content.%d", i, j++);
        const cJSON *t = ul_tr_get(b, "type"), *th = ul_tr_get(b, "thinking");
        const char *ty = cJSON_IsString(t) ? t->valuestring : "";
        if (!strcmp(ty, "text"))
            rc = block_text(b, p, &text, bad);
        else if (!strcmp(ty, "thinking") && cJSON_IsString(th))
            ul_gen_add(&think, th->valuestring, strlen(th->valuestring));
        else if (!strcmp(ty, "tool_use"))
            rc = tool_use(m, b, p, bad);
        else if (strcmp(ty, "redacted_thinking"))
            rc = ul_tr_bad(bad, p,
                           "an assistant message's blocks must be text, thinking or "
                           "tool_use");
        if (rc) break;
    }
    if (!rc && text.len && (!ul_buf_cstr(&text) || !cJSON_AddStringToObject(m, "content", text.p)))
        rc = oom();
    if (!rc && think.len &&
        (!ul_buf_cstr(&think) || !cJSON_AddStringToObject(m, "reasoning_content", think.p)))
        rc = oom();
    ul_buf_free(&text);
    ul_buf_free(&think);
    return rc;
}

static int messages(cJSON *chat, const cJSON *root, ul_api_bad_t *bad) {
    const cJSON *ms = ul_tr_get(root, "messages"), *sys = ul_tr_get(root, "system"), *m;
    if (!cJSON_IsArray(ms) || !cJSON_GetArraySize(ms))
        return ul_tr_bad(bad, "messages", "'messages' must be a non-empty array");
    cJSON *msgs = cJSON_AddArrayToObject(chat, "messages");
    if (!msgs) return oom();
    int rc = 0, i = 0;
    if (sys) {
        ul_buf_t text = {0};
        rc = text_of(sys, "system", &text, bad);
        if (!rc) rc = add_text_message(msgs, "system", &text);
        ul_buf_free(&text);
    }
    cJSON_ArrayForEach(m, ms) {
        if (rc) break;
        char p[48];
        snprintf(p, sizeof p, "messages.%d", i);
        const cJSON *role = ul_tr_get(m, "role"), *c = ul_tr_get(m, "content");
        const char *r = cJSON_IsString(role) ? role->valuestring : "";
        if (strcmp(r, "user") && strcmp(r, "assistant"))
            rc = ul_tr_bad(bad, p, "'role' must be user or assistant");
        else if (cJSON_IsString(c)) {
            cJSON *o = ul_tr_message(msgs, r);
            rc = o && cJSON_AddStringToObject(o, "content", c->valuestring) ? 0 : oom();
        } else if (!cJSON_IsArray(c))
            rc = ul_tr_bad(bad, p, "'content' must be a string or an array of blocks");
        else
            rc = !strcmp(r, "user") ? user_blocks(msgs, c, i, bad)
                                    : assistant_blocks(msgs, c, i, bad);
        i++;
    }
    return rc;
}

/* {"name","description","input_schema"} -> chat's function tool. */
static int tools(cJSON *chat, const cJSON *root, ul_api_bad_t *bad) {
    const cJSON *ts = ul_tr_get(root, "tools"), *t;
    if (!ts) return 0;
    if (!cJSON_IsArray(ts)) return ul_tr_bad(bad, "tools", "'tools' must be an array");
    cJSON *out = cJSON_AddArrayToObject(chat, "tools");
    if (!out) return oom();
    int i = 0;
    cJSON_ArrayForEach(t, ts) {
        char p[32];
        snprintf(p, sizeof p, "tools.%d", i++);
        const cJSON *ty = ul_tr_get(t, "type"), *name = ul_tr_get(t, "name");
        const cJSON *sch = ul_tr_get(t, "input_schema"), *d = ul_tr_get(t, "description");
        if (ty && (!cJSON_IsString(ty) || strcmp(ty->valuestring, "custom")))
            return ul_tr_bad(bad, p, "server tools are not supported (only custom tools)");
        if (!cJSON_IsString(name) || !name->valuestring[0] || !cJSON_IsObject(sch))
            return ul_tr_bad(bad, p, "a tool needs a non-empty 'name' and an 'input_schema'");
        cJSON *o = cJSON_CreateObject(), *f;
        if (!o) return oom();
        cJSON_AddItemToArray(out, o);
        cJSON *sd = cJSON_Duplicate(sch, 1), *dd = d ? cJSON_Duplicate(d, 0) : NULL;
        if (!sd || (d && !dd)) {
            cJSON_Delete(sd);
            cJSON_Delete(dd);
            return oom();
        }
        if (!cJSON_AddStringToObject(o, "type", "function") ||
            !(f = cJSON_AddObjectToObject(o, "function")) ||
            !cJSON_AddStringToObject(f, "name", name->valuestring)) {
            cJSON_Delete(sd);
            cJSON_Delete(dd);
            return oom();
        }
        if (dd) cJSON_AddItemToObject(f, "description", dd);
        cJSON_AddItemToObject(f, "parameters", sd);
    }
    return 0;
}

static int tool_choice(cJSON *chat, const cJSON *root, ul_api_bad_t *bad) {
    const cJSON *tc = ul_tr_get(root, "tool_choice");
    if (!tc) return 0;
    const cJSON *ty = ul_tr_get(tc, "type"), *name = ul_tr_get(tc, "name");
    const char *t = cJSON_IsString(ty) ? ty->valuestring : "";
    if (cJSON_IsTrue(ul_tr_get(tc, "disable_parallel_tool_use")) &&
        !cJSON_AddFalseToObject(chat, "parallel_tool_calls"))
        return oom();
    if (!strcmp(t, "auto") || !strcmp(t, "none"))
        return cJSON_AddStringToObject(chat, "tool_choice", t) ? 0 : oom();
    if (!strcmp(t, "any"))
        return cJSON_AddStringToObject(chat, "tool_choice", "required") ? 0 : oom();
    if (strcmp(t, "tool") || !cJSON_IsString(name))
        return ul_tr_bad(bad, "tool_choice",
                         "'tool_choice' must be {\"type\": auto, any, none} or "
                         "{\"type\":\"tool\",\"name\":...}");
    return ul_tr_tool_choice_fn(chat, name->valuestring);
}

static int settings(cJSON *chat, cJSON *root, int count, ul_api_bad_t *bad) {
    const cJSON *mt = ul_tr_get(root, "max_tokens"), *st = ul_tr_get(root, "stop_sequences");
    if (!count && !mt) return ul_tr_bad(bad, "max_tokens", "'max_tokens' is required");
    if (mt && (!cJSON_IsNumber(mt) || mt->valuedouble < 1 || mt->valuedouble > (1 << 30) ||
               mt->valuedouble != (double)(int)mt->valuedouble))
        return ul_tr_bad(bad, "max_tokens", "'max_tokens' must be an integer of at least 1");
    if (!count) ul_tr_move(chat, root, "max_tokens", "max_tokens");
    if (st && (!cJSON_IsArray(st) || cJSON_GetArraySize(st) > 4))
        return ul_tr_bad(bad, "stop_sequences",
                         "'stop_sequences' must be an array of at most 4 strings here");
    if (cJSON_GetArraySize(st) > 0) ul_tr_move(chat, root, "stop_sequences", "stop");
    const cJSON *th = ul_tr_get(root, "thinking"), *tt = ul_tr_get(th, "type");
    if (th) {
        const char *t = cJSON_IsString(tt) ? tt->valuestring : "";
        if (strcmp(t, "enabled") && strcmp(t, "disabled") && strcmp(t, "adaptive"))
            return ul_tr_bad(bad, "thinking.type", "'type' must be enabled, disabled or adaptive");
        cJSON *kw = cJSON_AddObjectToObject(chat, "chat_template_kwargs");
        if (!kw || (strcmp(t, "adaptive") &&
                    !cJSON_AddBoolToObject(kw, "enable_thinking", !strcmp(t, "enabled"))))
            return oom();
    }
    const cJSON *md = ul_tr_get(root, "metadata"), *uid = ul_tr_get(md, "user_id");
    if (md && !cJSON_IsObject(md))
        return ul_tr_bad(bad, "metadata", "'metadata' must be an object");
    if (uid && !cJSON_IsString(uid))
        return ul_tr_bad(bad, "metadata.user_id", "'user_id' must be a string");
    if (uid && !cJSON_AddStringToObject(chat, "user", uid->valuestring)) return oom();
    static const char *const no[] = {"container", "mcp_servers", "context_management"};
    for (size_t i = 0; i < sizeof no / sizeof *no; i++)
        if (ul_tr_get(root, no[i])) return ul_tr_bad(bad, no[i], "'%s' is not supported", no[i]);
    return 0;
}

static int translate_as(cJSON *root, int count, ul_api_bad_t *bad) {
    cJSON *chat = cJSON_CreateObject();
    if (!chat) return oom();
    int rc = messages(chat, root, bad);
    if (!rc) rc = tools(chat, root, bad);
    if (!rc) rc = tool_choice(chat, root, bad);
    if (!rc) rc = settings(chat, root, count, bad);
    for (int i = 0; !rc && pass[i]; i++)
        if (!count || strcmp(pass[i], "stream")) ul_tr_move(chat, root, pass[i], pass[i]);
    if (rc) {
        cJSON_Delete(chat);
        if (rc == UL_ENOMEM) {
            *bad = (ul_api_bad_t){.status = 503, .type = "server_error"};
            ul_api_bad(bad, NULL, "out of memory");
        }
        return rc;
    }
    ul_tr_swap(root, chat);
    return 0;
}

static int translate(ul_api_t *a, cJSON *root, ul_buf_t *echo, ul_api_bad_t *bad) {
    return translate_as(root, 0, bad);
}

static int translate_count(ul_api_t *a, cJSON *root, ul_buf_t *echo, ul_api_bad_t *bad) {
    return translate_as(root, 1, bad);
}

extern const ul_chat_enc_t ul_messages_enc; /* messages_enc.c */

const ul_chat_ep_t ul_chat_ep_messages = {.enc = &ul_messages_enc, .translate = translate};
static const ul_chat_ep_t ep_count = {.enc = &ul_messages_enc, .translate = translate_count};

int ul_api_messages(ul_http_req_t *req, void *data) {
    return ul_chat_serve(data, req, &ul_chat_ep_messages, UL_CHAT_GENERATE);
}

int ul_api_messages_count_tokens(ul_http_req_t *req, void *data) {
    return ul_chat_serve(data, req, &ep_count, UL_CHAT_COUNT);
}
