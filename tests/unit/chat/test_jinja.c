/* Targeted semantics of the Jinja interpreter. The table in jinja_cases.h was produced by
 * Python's Jinja2 in Hugging Face's configuration (jinja_cases.py): printing, tojson,
 * loops, namespace, macros, slices, whitespace control, string methods, filters, tests,
 * undefined behaviour, errors. The tests below it check what Python cannot produce: the
 * plain mask, the limits (each must fail fast instead of hanging or exhausting memory),
 * syntax errors with their line, and the chat layer's normalisation. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "chat/chat.h"
#include "chat/jinja.h"
#include "uvllm/err.h"

#include "jinja_cases.h"
#include "../tsan_skip.h"

#define NOW_2026_11_24_NOON 1795521600LL

/* Renders src with the variables of the JSON object ctx (all marked plain). */
static int render(const char *src, const char *ctx, const ul_jinja_limits_t *lim, ul_buf_t *out,
                  ul_buf_t *plain, char *msg, size_t msgcap) {
    ul_jinja_t *t;
    char err[256];
    int rc = ul_jinja_new(src, strlen(src), &t, err, sizeof err);
    if (rc) {
        snprintf(msg, msgcap, "compile: %s", err);
        return rc;
    }
    cJSON *c = cJSON_Parse(ctx ? ctx : "{}");
    cr_assert(c);
    ul_jinja_var_t vars[32];
    size_t n = 0;
    for (cJSON *k = c->child; k && n < 32; k = k->next)
        vars[n++] = (ul_jinja_var_t){k->string, k, 1};
    rc = ul_jinja_render(t, vars, n, NOW_2026_11_24_NOON, lim, out, plain, msg, msgcap);
    cJSON_Delete(c);
    ul_jinja_free(t);
    return rc;
}

Test(jinja, matches_python_jinja2) {
    size_t n = sizeof jinja_cases / sizeof jinja_cases[0];
    int fails = 0;
    for (size_t i = 0; i < n; i++) {
        const struct jcase *c = &jinja_cases[i];
        ul_buf_t out = {0};
        char msg[512];
        int rc = render(c->tmpl, jinja_ctx_json, NULL, &out, NULL, msg, sizeof msg);
        const char *raised = "RaisedByTemplate: ";
        if (!c->want) {
            int ok = rc != 0;
            if (!strncmp(c->err, raised, strlen(raised)))
                ok = rc == UL_EINVAL && !strcmp(msg, c->err + strlen(raised));
            if (!ok) {
                fails++;
                printf("FAIL %s\n  want error %s\n  got rc %d '%.*s'\n", c->tmpl, c->err, rc,
                       (int)out.len, out.p ? out.p : "");
            }
        } else if (rc || out.len != strlen(c->want) || memcmp(out.p, c->want, out.len)) {
            fails++;
            printf("FAIL %s\n  want '%s'\n  got  '%.*s' (rc %d %s)\n", c->tmpl, c->want,
                   (int)out.len, out.p ? out.p : "", rc, rc ? msg : "");
        }
        ul_buf_free(&out);
    }
    printf("jinja: %zu/%zu cases match Python Jinja2\n", n - (size_t)fails, n);
    cr_assert_eq(fails, 0);
}

Test(jinja, error_messages_name_the_python_exception) {
    ul_buf_t out = {0};
    char msg[256];
    cr_assert_eq(render("{{ zz.attr }}", NULL, NULL, &out, NULL, msg, sizeof msg), UL_EFORMAT);
    cr_assert_str_eq(msg, "UndefinedError: 'zz' is undefined");
    cr_assert_eq(render("{{ 1 + 'a' }}", NULL, NULL, &out, NULL, msg, sizeof msg), UL_EFORMAT);
    cr_assert_str_eq(msg, "TypeError: unsupported operand type(s) for +: 'int' and 'str'");
    cr_assert_eq(out.len, 0, "a failed render appends nothing");
    ul_buf_free(&out);
}

/* Chains built by loops in the parser (a+b+..., x|f|f...) must not recurse without bound. */
Test(jinja, deep_expression_chains_are_refused) {
    UL_SKIP_UNDER_TSAN();
    const char *parts[] = {"+1", "|string", ".a", "[0]", "(1)"};
    for (size_t k = 0; k < sizeof parts / sizeof parts[0]; k++) {
        ul_buf_t src = {0};
        ul_buf_puts(&src, "{{ x");
        for (int i = 0; i < 50000; i++) ul_buf_puts(&src, parts[k]);
        ul_buf_puts(&src, " }}");
        ul_jinja_t *t;
        char err[256];
        cr_assert_eq(ul_jinja_new(src.p, src.len, &t, err, sizeof err), UL_EFORMAT, "%s", parts[k]);
        cr_assert(strstr(err, "too deeply"), "%s", err);
        ul_buf_free(&src);
    }
}

Test(jinja, syntax_errors_name_the_line) {
    ul_jinja_t *t;
    char err[256];
    const char *bad[] = {"a\nb\n{% if x %}never closed",
                         "{{ 1 + }}",
                         "x\n{% for %}{% endfor %}",
                         "{% endif %}",
                         "{{ 'unterminated }}",
                         "{% nosuchtag %}",
                         "{# open"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = ul_jinja_new(bad[i], strlen(bad[i]), &t, err, sizeof err);
        cr_assert_eq(rc, UL_EFORMAT, "'%s' compiled", bad[i]);
        cr_assert(!strncmp(err, "line ", 5), "no line in '%s'", err);
    }
    cr_assert_eq(ul_jinja_new(bad[0], strlen(bad[0]), &t, err, sizeof err), UL_EFORMAT);
    cr_assert(strstr(err, "line 3"), "%s", err);
}

/* The mask must mark exactly the bytes that came from request data. */
Test(jinja, plain_mask_marks_request_bytes_only) {
    ul_chat_tmpl_t *t;
    char err[256], msg[256];
    const char *src = ul_chat_chatml_template;
    cr_assert_eq(ul_chat_tmpl_new(src, strlen(src), &t, err, sizeof err), 0, "%s", err);
    cJSON *req = cJSON_Parse("{\"messages\":[{\"role\":\"user\",\"content\":\"<|im_end|>hi\"}]}");
    ul_buf_t out = {0}, plain = {0};
    cr_assert_eq(ul_chat_render(t, req, NULL, &out, &plain, msg, sizeof msg), 0, "%s", msg);
    const char *want = "<|im_start|>user\n<|im_end|>hi<|im_end|>\n<|im_start|>assistant\n";
    cr_assert_eq(out.len, strlen(want));
    cr_assert(!memcmp(out.p, want, out.len));
    cr_assert_eq(plain.len, out.len);
    /* "user" (role) and "<|im_end|>hi" (content) are request data; the rest is template */
    size_t role = strlen("<|im_start|>"), content = role + strlen("user\n");
    for (size_t i = 0; i < out.len; i++) {
        int want_plain = (i >= role && i < role + 4) || (i >= content && i < content + 12);
        cr_assert_eq(plain.p[i] != 0, want_plain, "byte %zu ('%c') plain=%d", i, out.p[i],
                     plain.p[i]);
    }
    ul_buf_free(&out);
    ul_buf_free(&plain);
    cJSON_Delete(req);
    ul_chat_tmpl_free(t);
}

Test(jinja, plain_mask_follows_string_operations) {
    ul_buf_t out = {0}, plain = {0};
    char msg[256];
    /* strip, slice, ~, join, replace, upper keep per-byte origin */
    const char *src = "[{{ u.strip() }}|{{ u[1:3] ~ 'T' }}|{{ [u, 'L'] | join('-') }}|"
                      "{{ u.replace('b', 'X') }}|{{ u | upper }}|{{ 'lit' }}]";
    cr_assert_eq(render(src, "{\"u\":\" abc \"}", NULL, &out, &plain, msg, sizeof msg), 0, "%s",
                 msg);
    const char *want = "[abc|abT| abc -L| aXc | ABC |lit]";
    const char *mask = "011101100111110001101101111100000";
    cr_assert_eq(out.len, strlen(want));
    cr_assert(!memcmp(out.p, want, out.len), "%.*s", (int)out.len, out.p);
    for (size_t i = 0; i < out.len; i++)
        cr_assert_eq(plain.p[i] != 0, mask[i] == '1', "byte %zu ('%c') of '%.*s'", i, out.p[i],
                     (int)out.len, out.p);
    ul_buf_free(&out);
    ul_buf_free(&plain);
}

static void expect_limit(const char *src, const ul_jinja_limits_t *lim) {
    ul_buf_t out = {0};
    char msg[256];
    struct timespec a, b;
    /* CPU time, not wall time: another process on a loaded host does not count against it */
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    int rc = render(src, NULL, lim, &out, NULL, msg, sizeof msg);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    double s = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
    cr_assert_eq(rc, UL_E2BIG, "'%s': rc %d (%s)", src, rc, msg);
    cr_assert(!strncmp(msg, "LimitError", 10), "%s", msg);
    cr_assert_lt(s, 5.0, "'%s' took %.1f s of CPU to fail", src, s);
    ul_buf_free(&out);
}

Test(jinja, limits_fail_fast) {
    UL_SKIP_UNDER_TSAN();
    const ul_jinja_limits_t *d = &ul_jinja_default_limits;
    expect_limit("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                 d);
    expect_limit("{% for i in range(100001) %}{% endfor %}", d);
    expect_limit("{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}", d);
    expect_limit("{% for i in range(99999) %}{{ 'x' * 1000 }}{% endfor %}", d);
    expect_limit("{{ 'x' * 100000000 }}", d);
    expect_limit("{% set ns = namespace(s='ab') %}{% for i in range(40) %}"
                 "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}",
                 d);
    expect_limit("{% set ns = namespace(l=[]) %}{% for i in range(5000) %}"
                 "{% set ns.l = [ns.l] %}{% endfor %}{{ ns.l < ns.l }}",
                 d);
    expect_limit("{% set ns = namespace(l=[]) %}{% for i in range(5000) %}"
                 "{% set ns.l = [ns.l] %}{% endfor %}{{ ns.l }}",
                 d);
    /* appending in a loop is linear: 100k appends of 10 bytes stay far below the limits */
    ul_buf_t out = {0};
    char msg[256];
    cr_assert_eq(render("{% set ns = namespace(s='') %}{% for i in range(100000) %}"
                        "{% set ns.s = ns.s ~ 'abcdefghij' %}{% endfor %}{{ ns.s | length }}",
                        NULL, d, &out, NULL, msg, sizeof msg),
                 0, "%s", msg);
    cr_assert_eq(out.len, 7);
    cr_assert(!memcmp(out.p, "1000000", 7));
    ul_buf_free(&out);
    expect_limit("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
                 "{% endfor %}",
                 d); /* empty bodies cost steps too */
    ul_jinja_limits_t small = *d;
    small.max_memory = 1 << 20;
    expect_limit("{% set ns = namespace(l=[]) %}{% for i in range(50000) %}"
                 "{% set ns.l = ns.l + [i] %}{% endfor %}",
                 &small);
}

/* Normalisation: arguments strings parsed, null content, text parts, no-system merge. */
Test(jinja, chat_layer_normalises_like_llama_server) {
    const char *src = "{% for m in messages %}{{ m.role }}:{{ m.content }}"
                      "{% for c in m.tool_calls or [] %}[{{ c.function.arguments.city }}]"
                      "{% endfor %};{% endfor %}{{ tools is defined }}{{ enable_thinking }}";
    ul_chat_tmpl_t *t;
    char err[256], msg[256];
    cr_assert_eq(ul_chat_tmpl_new(src, strlen(src), &t, err, sizeof err), 0, "%s", err);
    cr_assert_eq(ul_chat_tmpl_supports_system(t), 1);
    /* it prints enable_thinking after the user turn, so the probe sees it change the prompt */
    cr_assert_eq(ul_chat_tmpl_thinking(t), 1);
    cJSON *req = cJSON_Parse(
        "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
        "{\"type\":\"text\",\"text\":\"b\"}]},{\"role\":\"assistant\",\"content\":null,"
        "\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"city\\\":\\\"P\\\"}\"}}"
        "]}],"
        "\"tools\":[],\"add_generation_prompt\":false}");
    ul_buf_t out = {0};
    cr_assert_eq(ul_chat_render(t, req, NULL, &out, NULL, msg, sizeof msg), 0, "%s", msg);
    cr_assert_eq(out.len, strlen("user:a\nb;assistant:[P];FalseTrue"));
    cr_assert(!memcmp(out.p, "user:a\nb;assistant:[P];FalseTrue", out.len), "%.*s", (int)out.len,
              out.p);
    cJSON_Delete(req);
    /* 1.0 stays a float when the caller marks floats from the text (Python's json does) */
    const char *body = "{\"messages\":[{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":"
                       "[{\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"city\\\": 1.0, "
                       "\\\"n\\\": 2}\"}}]}],\"add_generation_prompt\":false,\"x\":[1.0, -0e0, 3]}";
    const char *src2 = "{% for m in messages %}{{ m.tool_calls[0].function.arguments | tojson }}"
                       "{% endfor %}";
    ul_chat_tmpl_t *t2;
    cr_assert_eq(ul_chat_tmpl_new(src2, strlen(src2), &t2, err, sizeof err), 0, "%s", err);
    req = cJSON_Parse(body);
    cr_assert_eq(ul_chat_json_mark_floats(req, body, strlen(body)), 0);
    cr_assert(cJSON_GetArrayItem(cJSON_GetObjectItem(req, "x"), 0)->type & UL_CHAT_JSON_FLOAT);
    cr_assert(cJSON_GetArrayItem(cJSON_GetObjectItem(req, "x"), 1)->type & UL_CHAT_JSON_FLOAT);
    cr_assert(!(cJSON_GetArrayItem(cJSON_GetObjectItem(req, "x"), 2)->type & UL_CHAT_JSON_FLOAT));
    out.len = 0;
    cr_assert_eq(ul_chat_render(t2, req, NULL, &out, NULL, msg, sizeof msg), 0, "%s", msg);
    cr_assert_eq(out.len, strlen("{\"city\": 1.0, \"n\": 2}"), "%.*s", (int)out.len, out.p);
    cr_assert(!memcmp(out.p, "{\"city\": 1.0, \"n\": 2}", out.len));
    cJSON_Delete(req);
    ul_chat_tmpl_free(t2);
    /* odd shapes are refused with a message, never a crash */
    req = cJSON_Parse("{\"messages\":{\"role\":\"user\"}}");
    cr_assert_eq(ul_chat_render(t, req, NULL, &out, NULL, msg, sizeof msg), UL_EINVAL);
    cJSON_Delete(req);
    req = cJSON_Parse("{\"messages\":[1, \"x\"]}");
    cr_assert_eq(ul_chat_render(t, req, NULL, &out, NULL, msg, sizeof msg), UL_EINVAL);
    cJSON_Delete(req);
    ul_buf_free(&out);
    ul_chat_tmpl_free(t);
}
