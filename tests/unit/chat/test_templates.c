/* Golden test of the chat layer against ../shared/chat-templates: each of the 40 real
 * templates renders the README's six message sets (bos "<s>", eos "</s>", 2026-11-24
 * 12:00 UTC, generation prompt on, the get_weather tool for the two tools sets) through
 * ul_chat_render, a leading "<s>" is dropped as llama.cpp does, and the text must be
 * byte-identical to renderings.jsonl (or the render must fail where the golden is null).
 * firefunction-v2 gets functions="" (oracle.py explains why). Prints N/total and, for a
 * failure, the first differing offset. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../test_data.h"
#include "chat/chat.h"
#include "uvllm/err.h"

#define NOW_2026_11_24_NOON 1795521600LL

static const char tools_json[] =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": "
    "\"Current weather for a city\", \"parameters\": {\"type\": \"object\", \"properties\": "
    "{\"location\": {\"type\": \"string\", \"description\": \"City name\"}}, \"required\": "
    "[\"location\"]}}}]";

static const struct {
    const char *name, *messages;
} sets[] = {
    {"system_user", "[{\"role\":\"system\",\"content\":\"You are a concise assistant.\"},"
                    "{\"role\":\"user\",\"content\":\"What is 2+2?\"}]"},
    {"user_only", "[{\"role\":\"user\",\"content\":\"Hello there!\"}]"},
    {"multi_turn", "[{\"role\":\"system\",\"content\":\"Be brief.\"},"
                   "{\"role\":\"user\",\"content\":\"Hi\"},"
                   "{\"role\":\"assistant\",\"content\":\"Hello! How can I help?\"},"
                   "{\"role\":\"user\",\"content\":\"Tell me a joke.\"}]"},
    {"unicode_multi",
     "[{\"role\":\"user\",\"content\":\"Gr\\u00fc\\u00dfe! \\u4f60\\u597d \\u2014 \\u00abok\\u00bb "
     "\\ud83d\\ude42\"},{\"role\":\"assistant\",\"content\":\"Hallo \\ud83d\\udc4b\"},"
     "{\"role\":\"user\",\"content\":\"  spaces\\tand\\nnewlines  \"}]"},
    {"tools_offer", "[{\"role\":\"user\",\"content\":\"What is the weather in Paris?\"}]"},
    {"tools_roundtrip",
     "[{\"role\":\"system\",\"content\":\"You are a helpful assistant.\"},"
     "{\"role\":\"user\",\"content\":\"What is the weather in Paris?\"},"
     "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"call_1\",\"type\":"
     "\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":"
     "\"{\\\"location\\\": \\\"Paris\\\"}\"}}]},"
     "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"18 C and sunny\"}]"},
};

static cJSON *make_request(const char *set, const char *tmpl) {
    cJSON *req = cJSON_CreateObject();
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++)
        if (!strcmp(sets[i].name, set)) {
            cJSON *m = cJSON_Parse(sets[i].messages);
            cr_assert(m, "bad message set %s", set);
            cJSON_AddItemToObject(req, "messages", m);
        }
    cr_assert(cJSON_GetObjectItem(req, "messages"), "unknown message set %s", set);
    if (!strncmp(set, "tools", 5)) cJSON_AddItemToObject(req, "tools", cJSON_Parse(tools_json));
    if (strstr(tmpl, "firefunction")) {
        cJSON *kw = cJSON_AddObjectToObject(req, "chat_template_kwargs");
        cJSON_AddStringToObject(kw, "functions", "");
    }
    return req;
}

/* 1 when the case passes; prints why it does not. */
static int run_case(const ul_chat_tmpl_t *t, const char *tmpl, const char *set, const cJSON *want) {
    cJSON *req = make_request(set, tmpl);
    ul_chat_opts_t o;
    ul_chat_opts_init(&o);
    o.bos_token = "<s>";
    o.eos_token = "</s>";
    o.now = NOW_2026_11_24_NOON;
    ul_buf_t out = {0}, plain = {0};
    char msg[512];
    int rc = ul_chat_render(t, req, &o, &out, &plain, msg, sizeof msg);
    cJSON_Delete(req);
    int ok;
    if (cJSON_IsNull(want)) {
        ok = rc == UL_EINVAL;
        if (!ok) printf("FAIL %s %s: rendered, the golden says it raises\n", tmpl, set);
    } else if (rc) {
        ok = 0;
        printf("FAIL %s %s: %s (%s)\n", tmpl, set, ul_err_name(rc), msg);
    } else {
        const char *got = out.p ? out.p : "";
        size_t n = out.len;
        cr_assert_eq(plain.len, out.len, "plain mask length differs from the text's");
        if (n >= 3 && !memcmp(got, "<s>", 3)) {
            got += 3;
            n -= 3;
        }
        const char *w = want->valuestring;
        size_t wn = strlen(w), i = 0;
        while (i < n && i < wn && got[i] == w[i]) i++;
        ok = n == wn && i == n;
        if (!ok) printf("FAIL %s %s: first difference at byte %zu\n", tmpl, set, i);
    }
    ul_buf_free(&out);
    ul_buf_free(&plain);
    return ok;
}

Test(chat_templates, goldens_render_byte_identical) {
    char path[1200];
    snprintf(path, sizeof path, "%s/chat-templates/renderings.jsonl", ut_shared_dir());
    char *all = ut_slurp(path, NULL), *save = NULL;
    int total = 0, pass = 0, unexpected = 0;
    for (char *line = strtok_r(all, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        cJSON *d = cJSON_Parse(line);
        cr_assert(d, "bad line in renderings.jsonl");
        const char *tmpl = cJSON_GetObjectItem(d, "template")->valuestring;
        snprintf(path, sizeof path, "%s/chat-templates/templates/%s", ut_shared_dir(), tmpl);
        size_t len;
        char *src = ut_slurp(path, &len), err[256];
        ul_chat_tmpl_t *t;
        cr_assert_eq(ul_chat_tmpl_new(src, len, &t, err, sizeof err), 0, "%s: %s", tmpl, err);
        cJSON *r;
        cJSON_ArrayForEach(r, cJSON_GetObjectItem(d, "renderings")) {
            int ok = run_case(t, tmpl, r->string, r);
            total++;
            pass += ok;
            if (!ok) unexpected++;
        }
        ul_chat_tmpl_free(t);
        free(src);
        cJSON_Delete(d);
    }
    free(all);
    printf("chat templates: %d/%d goldens pass\n", pass, total);
    cr_assert_gt(total, 200, "too few cases read (%d)", total);
    cr_assert_eq(unexpected, 0, "%d golden case(s) fail", unexpected);
}

/* A compiled template is shared by threads that render at once: every thread must get the
 * single-threaded result every time (run under ASan/TSan builds, this also checks that
 * rendering writes nothing shared). */
typedef struct shared_case {
    const ul_chat_tmpl_t *t;
    const char *want;
    size_t want_len;
    int mismatches;
} shared_case;

static void *render_many(void *arg) {
    shared_case *c = arg;
    cJSON *req = make_request("tools_roundtrip", "qwen");
    ul_chat_opts_t o;
    ul_chat_opts_init(&o);
    o.now = NOW_2026_11_24_NOON;
    for (int i = 0; i < 50; i++) {
        ul_buf_t out = {0};
        char msg[256];
        if (ul_chat_render(c->t, req, &o, &out, NULL, msg, sizeof msg) || out.len != c->want_len ||
            memcmp(out.p, c->want, out.len))
            c->mismatches++;
        ul_buf_free(&out);
    }
    cJSON_Delete(req);
    return NULL;
}

Test(chat_templates, one_template_renders_on_many_threads) {
    char path[1200], err[256], msg[256];
    snprintf(path, sizeof path, "%s/chat-templates/templates/Qwen-Qwen3-0.6B.jinja",
             ut_shared_dir());
    size_t len;
    char *src = ut_slurp(path, &len);
    ul_chat_tmpl_t *t;
    cr_assert_eq(ul_chat_tmpl_new(src, len, &t, err, sizeof err), 0, "%s", err);
    cJSON *req = make_request("tools_roundtrip", "qwen");
    ul_chat_opts_t o;
    ul_chat_opts_init(&o);
    o.now = NOW_2026_11_24_NOON;
    ul_buf_t want = {0};
    cr_assert_eq(ul_chat_render(t, req, &o, &want, NULL, msg, sizeof msg), 0, "%s", msg);
    cJSON_Delete(req);
    pthread_t th[4];
    shared_case cases[4];
    for (int i = 0; i < 4; i++) {
        cases[i] = (shared_case){t, want.p, want.len, 0};
        cr_assert_eq(pthread_create(&th[i], NULL, render_many, &cases[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        cr_assert_eq(cases[i].mismatches, 0, "thread %d: %d renders differ", i,
                     cases[i].mismatches);
    }
    ul_buf_free(&want);
    ul_chat_tmpl_free(t);
    free(src);
}
