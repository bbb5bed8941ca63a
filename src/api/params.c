/* The request fields /v1/completions and /v1/chat/completions share. Every field of OpenAI's
 * schema is either honoured or answered with a 400 that names it ("'suffix' is not
 * supported yet"): a client that asks for something and silently gets something else is
 * worse off than one told no. Fields outside the schema are ignored, as OpenAI-compatible
 * servers do, and listed in one debug line. Extensions read too: top_k, min_p,
 * repetition_penalty (vLLM) / repeat_penalty (llama.cpp), ignore_eos. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/gen.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

int ul_api_bad(ul_api_bad_t *bad, const char *param, const char *fmt, ...) {
    bad->param = param;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(bad->msg, sizeof bad->msg, fmt, ap);
    va_end(ap);
    return UL_EINVAL;
}

int ul_api_reject(ul_api_t *a, ul_http_req_t *req, const ul_api_bad_t *bad) {
    a->stats.completions_rejected++;
    return ul_api_error(req, bad->status ? bad->status : 400,
                        bad->type ? bad->type : "invalid_request_error", bad->param, bad->code,
                        bad->msg);
}

static const cJSON *field(const cJSON *root, const char *name) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, name);
    return it && !cJSON_IsNull(it) ? it : NULL;
}

/* 1 when present (value in *out), 0 when absent or null, UL_EINVAL when out of range. */
static int number(const cJSON *root, const char *name, double lo, double hi, int integer,
                  double *out, ul_api_bad_t *bad) {
    const cJSON *it = field(root, name);
    if (!it) return 0;
    if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble) || it->valuedouble < lo ||
        it->valuedouble > hi || (integer && it->valuedouble != floor(it->valuedouble)))
        /* %.15g keeps integer bounds exact (1073741824, not 1.07374e+09) */
        return ul_api_bad(bad, name, "'%s' must be %s between %.15g and %.15g", name,
                          integer ? "an integer" : "a number", lo, hi);
    *out = it->valuedouble;
    return 1;
}

/* 1/0 for a boolean present, -1 when absent or null, UL_EINVAL otherwise. */
static int boolean(const cJSON *root, const char *name, ul_api_bad_t *bad) {
    const cJSON *it = field(root, name);
    if (!it) return -1;
    if (!cJSON_IsBool(it)) return ul_api_bad(bad, name, "'%s' must be a boolean", name);
    return cJSON_IsTrue(it);
}

static int parse_stop(const cJSON *root, ul_api_params_t *p, ul_api_bad_t *bad) {
    const cJSON *st = field(root, "stop");
    if (!st) return 0;
    if (cJSON_IsString(st)) {
        if (!st->valuestring[0]) return ul_api_bad(bad, "stop", "'stop' must not be empty");
        p->stop[p->n_stop++] = st->valuestring;
        return 0;
    }
    if (!cJSON_IsArray(st) || cJSON_GetArraySize(st) > UL_STOP_MAX)
        return ul_api_bad(bad, "stop", "'stop' must be a string or an array of up to %d strings",
                          UL_STOP_MAX);
    const cJSON *it;
    cJSON_ArrayForEach(it, st) {
        if (!cJSON_IsString(it) || !it->valuestring[0])
            return ul_api_bad(bad, "stop", "'stop' entries must be non-empty strings");
        p->stop[p->n_stop++] = it->valuestring;
    }
    return 0;
}

/* logit_bias: {"token id": bias in [-100, 100]} as OpenAI; ids must be in the vocabulary. */
static int parse_bias(ul_api_t *a, const cJSON *root, ul_arena_t *arena, ul_api_params_t *p,
                      ul_api_bad_t *bad) {
    const cJSON *lb = field(root, "logit_bias");
    if (!lb) return 0;
    if (!cJSON_IsObject(lb))
        return ul_api_bad(bad, "logit_bias", "'logit_bias' must be an object of token ids");
    int n = cJSON_GetArraySize(lb);
    if (n > 1024) return ul_api_bad(bad, "logit_bias", "'logit_bias' has more than 1024 entries");
    p->bias = ul_arena_alloc(arena, (size_t)(n ? n : 1) * sizeof *p->bias);
    if (!p->bias) return ul_api_bad(bad, "logit_bias", "out of memory");
    const cJSON *it;
    cJSON_ArrayForEach(it, lb) {
        char *end;
        long id = strtol(it->string, &end, 10);
        if (end == it->string || *end || id < 0 || id >= a->codec.n_vocab)
            return ul_api_bad(bad, "logit_bias",
                              "'logit_bias' key '%.40s' is not a token id of this model "
                              "(0..%d)",
                              it->string, (int)a->codec.n_vocab - 1);
        if (!cJSON_IsNumber(it) || !(it->valuedouble >= -100 && it->valuedouble <= 100))
            return ul_api_bad(bad, "logit_bias",
                              "'logit_bias' values must be between -100 and 100");
        p->bias[p->n_bias++] = (ul_logit_bias_t){.id = (int32_t)id, .bias = (float)it->valuedouble};
    }
    return 0;
}

static int parse_sampling(const cJSON *root, ul_api_params_t *p, ul_api_bad_t *bad) {
    ul_sampling_t *s = &p->sampling;
    double v;
    int rc;
    if ((rc = number(root, "temperature", 0, 2, 0, &v, bad)) < 0) return rc;
    if (rc) s->temperature = (float)v;
    if ((rc = number(root, "top_p", 0, 1, 0, &v, bad)) < 0) return rc;
    if (rc && v <= 0) return ul_api_bad(bad, "top_p", "'top_p' must be greater than 0");
    if (rc) s->top_p = (float)v;
    if ((rc = number(root, "top_k", -1, 1 << 30, 1, &v, bad)) < 0) return rc;
    if (rc) s->top_k = v < 0 ? 0 : (int32_t)v;
    if ((rc = number(root, "min_p", 0, 1, 0, &v, bad)) < 0) return rc;
    if (rc) s->min_p = (float)v;
    if ((rc = number(root, "presence_penalty", -2, 2, 0, &v, bad)) < 0) return rc;
    if (rc) s->presence_penalty = (float)v;
    if ((rc = number(root, "frequency_penalty", -2, 2, 0, &v, bad)) < 0) return rc;
    if (rc) s->frequency_penalty = (float)v;
    static const char *const rep[] = {"repetition_penalty", "repeat_penalty"};
    for (int i = 0; i < 2; i++) {
        if ((rc = number(root, rep[i], 0, 10, 0, &v, bad)) < 0) return rc;
        if (rc && v <= 0) return ul_api_bad(bad, rep[i], "'%s' must be greater than 0", rep[i]);
        if (rc) s->repeat_penalty = (float)v;
    }
    if ((rc = number(root, "timeout", 0, 86400, 0, &v, bad)) < 0) return rc;
    if (rc && v <= 0) return ul_api_bad(bad, "timeout", "'timeout' must be greater than 0");
    if (rc) p->timeout_s = v;
    if ((rc = number(root, "seed", -9.2e18, 1.8e19, 1, &v, bad)) < 0) return rc;
    p->seed_given = rc;
    if (rc) s->seed = v < 0 ? (uint64_t)(int64_t)v : (uint64_t)v;
    return 0;
}

static int parse_stream(const cJSON *root, ul_api_params_t *p, ul_api_bad_t *bad) {
    int rc = boolean(root, "stream", bad);
    if (rc == UL_EINVAL) return rc;
    p->stream = rc == 1;
    const cJSON *so = field(root, "stream_options");
    if (!so) return 0;
    const cJSON *iu = cJSON_GetObjectItemCaseSensitive(so, "include_usage");
    if (!cJSON_IsObject(so) || (iu && !cJSON_IsBool(iu) && !cJSON_IsNull(iu)))
        return ul_api_bad(bad, "stream_options",
                          "'stream_options' must be an object with a boolean include_usage");
    if (!p->stream)
        return ul_api_bad(bad, "stream_options",
                          "'stream_options' is only allowed when 'stream' is true");
    p->include_usage = iu && cJSON_IsTrue(iu);
    return 0;
}

static int parse_counts(const cJSON *root, ul_api_params_t *p, ul_api_bad_t *bad) {
    double v;
    int rc;
    if ((rc = number(root, "n", 1, UL_API_MAX_CHOICES, 1, &v, bad)) < 0) return rc;
    p->n = rc ? (int)v : 1;
    p->best_of = p->n;
    if (p->kind == UL_GEN_COMPLETION) {
        if ((rc = number(root, "best_of", 1, UL_API_MAX_CHOICES, 1, &v, bad)) < 0) return rc;
        if (rc && v < p->n) return ul_api_bad(bad, "best_of", "'best_of' must be at least 'n'");
        if (rc) p->best_of = (int)v;
        if (p->best_of > p->n && p->stream)
            return ul_api_bad(bad, "best_of", "'best_of' greater than 'n' cannot be streamed");
    }
    static const char *const mt[] = {"max_tokens", "max_completion_tokens"};
    for (int i = 0; i < (p->kind == UL_GEN_CHAT ? 2 : 1); i++) {
        if ((rc = number(root, mt[i], 1, 1 << 30, 1, &v, bad)) < 0) return rc;
        if (rc) p->max_tokens = (int32_t)v, p->max_tokens_name = mt[i]; /* the later wins */
    }
    return 0;
}

static int parse_logprobs(const cJSON *root, ul_api_params_t *p, ul_api_bad_t *bad) {
    double v;
    int rc;
    p->logprobs = -1;
    if (p->kind == UL_GEN_COMPLETION) {
        if ((rc = number(root, "logprobs", 0, UL_MAX_LOGPROBS, 1, &v, bad)) < 0) return rc;
        if (rc) p->logprobs = (int)v;
        p->sampling.n_logprobs = p->logprobs > 0 ? p->logprobs : 0;
        return 0;
    }
    if ((rc = boolean(root, "logprobs", bad)) == UL_EINVAL) return rc;
    p->logprobs = rc == 1 ? 1 : -1;
    if ((rc = number(root, "top_logprobs", 0, UL_MAX_LOGPROBS, 1, &v, bad)) < 0) return rc;
    if (rc && p->logprobs != 1)
        return ul_api_bad(bad, "top_logprobs", "'top_logprobs' needs 'logprobs' set to true");
    if (rc) p->top_logprobs = (int)v;
    p->sampling.n_logprobs = p->top_logprobs;
    return 0;
}

/* Identifiers the operator may want in logs (OpenAI's user, safety_identifier, ...). */
static int parse_ids(const cJSON *root, ul_api_params_t *p, ul_api_bad_t *bad) {
    static const char *const ids[] = {"user", "safety_identifier", "prompt_cache_key"};
    for (int i = 0; i < 3; i++) {
        const cJSON *it = field(root, ids[i]);
        if (it && !cJSON_IsString(it))
            return ul_api_bad(bad, ids[i], "'%s' must be a string", ids[i]);
        if (it && !p->user) p->user = it->valuestring;
    }
    const cJSON *md = field(root, "metadata");
    if (md && !cJSON_IsObject(md))
        return ul_api_bad(bad, "metadata", "'metadata' must be an object of strings");
    return 0;
}

/* Fields of OpenAI's chat schema this server does not do: a 400 naming each. */
static int refuse_chat_fields(const cJSON *root, ul_api_bad_t *bad) {
    static const char *const no[] = {"audio",         "prediction",       "functions",
                                     "function_call", "reasoning_effort", "web_search_options",
                                     "verbosity"};
    for (size_t i = 0; i < sizeof no / sizeof *no; i++)
        if (field(root, no[i])) return ul_api_bad(bad, no[i], "'%s' is not supported yet", no[i]);
    const cJSON *it = field(root, "store");
    if (it && !cJSON_IsFalse(it))
        return ul_api_bad(bad, "store", "'store' is not supported: completions are not stored");
    if ((it = field(root, "modalities"))) {
        const cJSON *m = cJSON_IsArray(it) ? cJSON_GetArrayItem(it, 0) : NULL;
        if (cJSON_GetArraySize(it) != 1 || !cJSON_IsString(m) || strcmp(m->valuestring, "text"))
            return ul_api_bad(bad, "modalities", "this model only outputs [\"text\"]");
    }
    if ((it = field(root, "service_tier")) &&
        (!cJSON_IsString(it) ||
         (strcmp(it->valuestring, "auto") && strcmp(it->valuestring, "default"))))
        return ul_api_bad(bad, "service_tier", "'service_tier' must be \"auto\" or \"default\"");
    return 0;
}

/* Names both endpoints read here. */
static const char *const common[] = {"model",
                                     "stream",
                                     "stream_options",
                                     "max_tokens",
                                     "temperature",
                                     "top_p",
                                     "top_k",
                                     "min_p",
                                     "presence_penalty",
                                     "frequency_penalty",
                                     "repetition_penalty",
                                     "repeat_penalty",
                                     "seed",
                                     "n",
                                     "stop",
                                     "logit_bias",
                                     "user",
                                     "safety_identifier",
                                     "prompt_cache_key",
                                     "metadata",
                                     "ignore_eos",
                                     "logprobs",
                                     "response_format",
                                     "grammar",
                                     "json_schema",
                                     "structured_outputs",
                                     "guided_json",
                                     "guided_regex",
                                     "guided_choice",
                                     "guided_grammar",
                                     "timeout",
                                     NULL};
static const char *const chat_only[] = {"max_completion_tokens",
                                        "top_logprobs",
                                        "audio",
                                        "prediction",
                                        "functions",
                                        "function_call",
                                        "reasoning_effort",
                                        "web_search_options",
                                        "verbosity",
                                        "store",
                                        "modalities",
                                        "service_tier",
                                        NULL};
static const char *const completion_only[] = {"best_of", NULL};

static int listed(const char *const *names, const char *s) {
    for (; names && *names; names++)
        if (!strcmp(*names, s)) return 1;
    return 0;
}

static void log_unknown(const cJSON *root, ul_gen_kind_t kind, const char *const *known) {
    if (ul_log_get_level() > UL_LOG_LEVEL_DEBUG) return;
    char names[256], q[96];
    size_t len = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, root) {
        if (listed(common, it->string) || listed(known, it->string) ||
            listed(kind == UL_GEN_CHAT ? chat_only : completion_only, it->string))
            continue;
        /* the names are the client's: each quoted when it is not plain */
        int n = snprintf(names + len, sizeof names - len, "%s%s", len ? "," : "",
                         ul_log_field(it->string, strlen(it->string), q, sizeof q));
        if (n < 0 || (size_t)n >= sizeof names - len) break;
        len += (size_t)n;
    }
    if (len) UL_LOG_DEBUG("ignored request fields outside the OpenAI schema: %s", names);
}

int ul_api_params_parse(ul_api_t *a, const cJSON *root, ul_gen_kind_t kind, ul_arena_t *arena,
                        const char *const *known, ul_api_params_t *p, ul_api_bad_t *bad) {
    memset(p, 0, sizeof *p);
    p->kind = kind;
    p->grammar_ref = ul_api_job_thread(); /* ul_api_grammar_get's references */
    ul_sampling_default(&p->sampling);
    if (!cJSON_IsObject(root)) return ul_api_bad(bad, NULL, "the body must be a JSON object");
    const cJSON *m = field(root, "model");
    if (m && !cJSON_IsString(m)) return ul_api_bad(bad, "model", "'model' must be a string");
    if (m && !ul_api_model_known(a, m->valuestring)) {
        bad->status = 404;
        bad->code = "model_not_found";
        return ul_api_bad(bad, "model",
                          "The model '%.100s' does not exist; this server serves '%s'",
                          m->valuestring, a->model_id);
    }
    int rc = parse_stream(root, p, bad);
    if (!rc) rc = parse_counts(root, p, bad);
    if (!rc) rc = parse_sampling(root, p, bad);
    if (!rc) rc = parse_logprobs(root, p, bad);
    if (!rc) rc = parse_stop(root, p, bad);
    if (!rc) rc = parse_bias(a, root, arena, p, bad);
    if (!rc) rc = parse_ids(root, p, bad);
    if (!rc) rc = ul_api_structured_parse(a, root, p, bad);
    if (!rc && kind == UL_GEN_CHAT) rc = refuse_chat_fields(root, bad);
    if (rc) return rc;
    if ((rc = boolean(root, "ignore_eos", bad)) == UL_EINVAL) return rc;
    p->ignore_eos = rc == 1;
    if (p->ignore_eos && p->grammar)
        return ul_api_bad(bad, "ignore_eos",
                          "'ignore_eos' cannot be used with structured output (the output "
                          "ends when the grammar is complete)");
    p->sampling.logit_bias = p->bias;
    p->sampling.n_logit_bias = p->n_bias;
    /* Without a seed each request samples differently, as OpenAI's do: ul_gen_new draws
     * one (on the loop; this may run on a worker). */
    log_unknown(root, kind, known);
    return 0;
}
