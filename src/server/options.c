/* The table of `uvllm serve` options: each option once (config.h says what comes from a
 * row), and --help written from it. To add an option: a field in ul_server_config_t, a row
 * here (grouped by what it configures), its use in server.c or backend.c. */
#include <ctype.h>
#include <stddef.h>
#include <string.h>

#include "server/config.h"
#include "uvllm/backend.h"

#define F(field) offsetof(ul_server_config_t, field)
#define MIB (1024.0 * 1024.0)

/* clang-format off */
const ul_opt_t g_ul_server_opts[] = {
    /* model and backend */
    {"model", UL_OPT_STR, F(model), .metavar = "PATH",
     .help = "GGUF model (implies --backend cpu)"},
    {"backend", UL_OPT_STR, F(backend), .choices = "cpu|null|cuda", .metavar = "cpu|null|cuda",
     .def_help = "cpu with --model, else null",
     .help = "null: no model, deterministic pseudo-tokens, prompts are one token per word; "
             "cpu: the model on this machine's CPUs; cuda: the model on an NVIDIA GPU (builds "
             "with CUDA)"},
    {"device", UL_OPT_INT, F(device), 0, 1023, .metavar = "N",
     .help = "cuda backend: device ordinal"},
    {"pipeline", UL_OPT_INT, F(pipeline), 1, 2, 1, .metavar = "1|2",
     .help = "steps in flight: 2 submits step N+1 while N computes (a sequence's next input is "
             "N's token, filled in by the backend; for a GPU, where the host's work per step "
             "can then overlap the device's)"},
    {"threads", UL_OPT_INT, F(threads), 1, 1024, .metavar = "N",
     .def_help = "the CPUs the process may use: its affinity mask and cgroup CPU quota",
     .help = "cpu backend threads"},
    {"kv-type", UL_OPT_STR, F(kv_type), .sdef = "f16", .choices = "f16|f32",
     .metavar = "f16|f32", .help = "cpu backend KV cache element type"},
    {"ctx-size", UL_OPT_INT, F(ctx_size), 2, 1 << 24, .metavar = "N",
     .def_help = "the model's training context",
     .help = "context per sequence (over the model's training context is refused); with "
             "--backend null it replaces --null-ctx"},
    {"kv-mem", UL_OPT_SIZE, F(kv_mem), 1, 0, .metavar = "SIZE",
     .def_help = "a quarter of MemAvailable or of the cgroup's memory limit if lower "
                 "(containers), at least one --ctx-size sequence, at most --max-seqs of them; "
                 "with --backend null 65536 pages",
     .help = "KV cache pool, e.g. 512M, 4G, 1073741824; the start-up log says the size, pages "
             "and tokens chosen. With --backend null: pages = SIZE / (16 x 12 bytes), the "
             "bytes it keeps per token"},
    /* speculative decoding */
    {"model-draft", UL_OPT_STR, F(model_draft), 1, .metavar = "PATH",
     .help = "speculative decoding: a small model with the same vocabulary proposes tokens "
             "that --model verifies (cpu backend)"},
    {"spec-ngram", UL_OPT_INT, F(spec_ngram), 1, 8, .metavar = "N", .def_help = "off",
     .help = "speculative decoding: propose what followed the last N tokens earlier in the "
             "prompt or output"},
    {"draft-max", UL_OPT_INT, F(draft_max), 1, UL_MAX_DRAFT, .metavar = "K", .def_help = "6",
     .help = "proposals per sequence and step"},
    {"draft-min", UL_OPT_INT, F(draft_min), 1, UL_MAX_DRAFT, .metavar = "K", .def_help = "1",
     .help = "fewer proposals are not made"},
    /* the null backend (no model: testing the serving layer) */
    {"null-delay-us", UL_OPT_I64, F(null_delay_us), 0, 60000000, .metavar = "N",
     .help = "null backend: time per step"},
    {"null-ctx", UL_OPT_INT, F(null_ctx), 2, 1 << 20, 4096, .metavar = "N",
     .help = "null backend: context length"},
    {"null-reply", UL_OPT_STR, F(null_reply), 1, .metavar = "TEXT",
     .help = "null backend: every request gets TEXT (tokenized with --model's vocabulary, "
             "special tokens parsed), then eos: a known output for testing the serving layer"},
    {"null-token-us", UL_OPT_I64, F(null_token_us), 0, 10000000, .metavar = "N",
     .help = "null backend: extra time per decode token"},
    {"null-prefill-us", UL_OPT_I64, F(null_prefill_us), 0, 10000000, .metavar = "N",
     .help = "null backend: extra time per prefill token"},
    {"null-fail-after", UL_OPT_I64, F(null_fail_after), 0, 4611686018427387904.0, -1,
     .metavar = "N", .def_help = "off",
     .help = "null backend, fault injection: the first N steps succeed, every later one fails "
             "(its requests get 500, /health/ready turns 503)"},
    /* HTTP */
    {"host", UL_OPT_STR, F(host), 1, .sdef = "127.0.0.1", .metavar = "H",
     .help = "bind address"},
    {"port", UL_OPT_INT, F(port), 0, 65535, 8080, .metavar = "P",
     .help = "TCP port, 0 picks a free one"},
    {"max-body", UL_OPT_SIZE, F(max_body), 1, 16384 * MIB, 8 * MIB, .metavar = "BYTES",
     .help = "largest request body"},
    {"max-conns", UL_OPT_INT, F(max_conns), 1, 1 << 20, 4096, .metavar = "N",
     .help = "open connections"},
    {"header-timeout", UL_OPT_DOUBLE, F(header_timeout), 0, 86400, 10, .flags = UL_OPT_LO_OPEN,
     .metavar = "SEC", .help = "request headers must arrive within SEC"},
    {"idle-timeout", UL_OPT_DOUBLE, F(idle_timeout), 0, 86400, 75, .flags = UL_OPT_LO_OPEN,
     .metavar = "SEC", .help = "idle keep-alive connections close after SEC"},
    {"stall-timeout-s", UL_OPT_DOUBLE, F(stall_timeout), 0, 86400, 60, .flags = UL_OPT_LO_OPEN,
     .metavar = "SEC",
     .help = "a client that takes none of its waiting output for SEC is dropped: its paused "
             "stream is cancelled and its KV pages return"},
    {"cors-origin", UL_OPT_LIST, F(cors), 0, 16, .flags = UL_OPT_NO_SPACE, .metavar = "ORIGIN",
     .help = "allow browser requests from ORIGIN ('*': any); answers OPTIONS preflights "
             "(repeatable, up to 16)"},
    {"max-buffered-mem", UL_OPT_SIZE, F(max_buffered_mem), MIB, 0, .metavar = "SIZE",
     .def_help = "1/8 of MemTotal or the cgroup limit, 64M..4G",
     .help = "memory for what clients make the server hold, all connections together; past "
             "it 503"},
    {"request-timeout", UL_OPT_DOUBLE, F(request_timeout), 0, 86400, 120,
     .flags = UL_OPT_LO_OPEN, .metavar = "SEC", .help = "headers and body within SEC, else 408"},
    {"min-body-rate", UL_OPT_I64, F(min_body_rate), 0, 1099511627776.0, 1024, .metavar = "BYTES",
     .help = "bodies slower than BYTES/s get 408"},
    /* scheduling and admission */
    {"max-seqs", UL_OPT_INT, F(max_seqs), 1, 1 << 20, 4096, .metavar = "N",
     .help = "sequences in flight before 503"},
    {"max-seqs-per-client", UL_OPT_INT, F(max_seqs_per_client), 0, 1 << 20, -1, .metavar = "N",
     .def_help = "--max-seqs / 4",
     .help = "sequences in flight per API key (else address); more is 429 (0: no limit)"},
    {"max-batch-tokens", UL_OPT_INT, F(max_batch_tokens), 1, 1 << 20, 512, .metavar = "N",
     .help = "tokens per step"},
    {"itl-target-ms", UL_OPT_DOUBLE, F(itl_target_ms), 0, 600000, 100, .metavar = "MS",
     .help = "while streams decode, prefill chunks are sized so a step is predicted to take "
             "at most MS (0: off, prefill fills --max-batch-tokens)"},
    {"no-prefix-cache", UL_OPT_FLAG, F(no_prefix_cache),
     .help = "do not keep computed KV pages for reuse by later requests sharing a prompt "
             "prefix"},
    {"batch-invariant", UL_OPT_FLAG, F(batch_invariant),
     .help = "cpu backend: a token's logits do not depend on how its prompt was split into "
             "steps (prefix cache hit or not, chunked prefill, other requests in the batch), "
             "so a greedy answer is the same every time; long prompts prefill slower. "
             "Without it attention takes a faster f32 path from 64 tokens of a sequence in a "
             "step, as llama.cpp does, and a cached prompt's logits can differ from the "
             "uncached ones in the last bits (a near-tie can change a greedy token)"},
    {"max-queue", UL_OPT_INT, F(max_queue), 1, 1 << 20, .metavar = "N", .def_help = "no limit",
     .help = "requests waiting for prefill before 429"},
    {"max-queue-wait-s", UL_OPT_DOUBLE, F(max_queue_wait_s), 0, 86400,
     .flags = UL_OPT_LO_OPEN, .metavar = "SEC", .def_help = "no limit",
     .help = "answer 429 with Retry-After when a request's predicted wait is over SEC"},
    /* the API */
    {"max-tokens-default", UL_OPT_INT, F(max_tokens_default), 1, 1 << 24, .metavar = "N",
     .def_help = "16 for completions, the rest of the context for chat",
     .help = "max_tokens of a request that has none"},
    {"truncate-max-tokens", UL_OPT_FLAG, F(truncate_max_tokens),
     .help = "clip a max_tokens that does not fit the context to what fits instead of "
             "answering 400"},
    {"no-parse-special", UL_OPT_FLAG, F(no_parse_special),
     .help = "special token texts in prompts (\"</s>\") stay plain text (else they become "
             "their ids)"},
    {"model-alias", UL_OPT_LIST, F(aliases), 0, 8, .metavar = "NAME",
     .help = "another name the model answers to and /v1/models lists (repeatable, up to 8)"},
    {"pooling", UL_OPT_STR, F(pooling), .choices = "none|mean|cls|last|rank",
     .metavar = "none|mean|cls|last|rank",
     .def_help = "the model's <arch>.pooling_type (none when absent; mean with --backend null)",
     .help = "embeddings (/v1/embeddings, /embedding): how a sequence's hidden states become "
             "one vector: their mean, the first token's (cls) or the last token's; none "
             "refuses embeddings; rank makes a bert reranker score query/document pairs on "
             "/v1/rerank (its classification head on [CLS])"},
    {"chat-template", UL_OPT_STR, F(chat_template), 1, .metavar = "FILE",
     .help = "a chat template (Jinja) that replaces the model's tokenizer.chat_template"},
    {"canary-interval-s", UL_OPT_DOUBLE, F(canary_interval_s), 0.05, 86400, 5,
     .metavar = "SEC",
     .help = "readiness: a one-token canary step runs at start-up and whenever no step "
             "completed for SEC; /health/ready is 200 while the last step succeeded and one "
             "succeeded within 3 x SEC"},
    {"api-key", UL_OPT_LIST, F(api_keys), 0, UL_SERVER_LIST_MAX, .flags = UL_OPT_SECRET,
     .metavar = "KEY",
     .help = "require 'Authorization: Bearer KEY' on /v1/*, /tokenize, /detokenize, "
             "/apply-template (repeatable, up to 64; any listed key is accepted; health stays "
             "open)"},
    {"api-key-file", UL_OPT_STR, F(api_key_file), 1, .metavar = "PATH",
     .help = "more keys, one per line ('#' comments, blank lines ignored)"},
    {"metrics-key", UL_OPT_STR, F(metrics_key), .flags = UL_OPT_SECRET, .metavar = "KEY",
     .help = "require 'Authorization: Bearer KEY' on /metrics"},
    /* shutdown */
    {"shutdown-grace", UL_OPT_DOUBLE, F(shutdown_grace), 0, 86400, 30, .metavar = "SEC",
     .help = "time streams get to finish once the listener closed after SIGTERM"},
    {"drain-delay-s", UL_OPT_DOUBLE, F(drain_delay_s), 0, 86400, .metavar = "SEC",
     .help = "after SIGTERM keep the listener open SEC seconds, answering /health/ready and "
             "new /v1 requests 503, so load balancers stop sending first; the process exits "
             "within SEC + --shutdown-grace"},
    {"log-level", UL_OPT_STR, F(log_level), .sdef = "info", .choices = "debug|info|warn|error|off",
     .metavar = "L", .help = "the lowest level logged"},
};
/* clang-format on */
const size_t g_ul_server_n_opts = sizeof g_ul_server_opts / sizeof g_ul_server_opts[0];

void ul_server_opt_env_name(const ul_opt_t *o, char *out, size_t cap) {
    size_t n = (size_t)snprintf(out, cap, "UVLLM_%s", o->name);
    for (size_t i = 6; i < n && i < cap; i++)
        out[i] = out[i] == '-' ? '_' : (char)toupper((unsigned char)out[i]);
}

/* "(default 512; UVLLM_MAX_BATCH_TOKENS)" */
static void opt_tail(const ul_opt_t *o, char *out, size_t cap) {
    char env[64], def[200] = "";
    ul_server_opt_env_name(o, env, sizeof env);
    if (o->def_help)
        snprintf(def, sizeof def, "%s", o->def_help);
    else if (o->type == UL_OPT_STR && o->sdef)
        snprintf(def, sizeof def, "%s", o->sdef);
    else if (o->type == UL_OPT_SIZE && o->def != 0)
        snprintf(def, sizeof def, "%.0f", o->def);
    else if (o->type != UL_OPT_STR && o->type != UL_OPT_LIST && o->type != UL_OPT_FLAG)
        snprintf(def, sizeof def, "%g", o->def);
    if (def[0])
        snprintf(out, cap, "(default: %s; %s)", def, env);
    else
        snprintf(out, cap, "(%s)", env);
}

/* Writes text from column 27 on, wrapped before column 100. */
static void wrap(FILE *f, const char *text, int col) {
    const int left = 27, width = 100;
    while (*text) {
        size_t n = strcspn(text, " ");
        if (col > left && col + 1 + (int)n > width) {
            fprintf(f, "\n%*s", left, "");
            col = left;
        } else if (col > left) {
            fputc(' ', f);
            col++;
        }
        fprintf(f, "%.*s", (int)n, text);
        col += (int)n;
        text += n;
        while (*text == ' ') text++;
    }
    fputc('\n', f);
}

void ul_server_config_usage(FILE *f) {
    fprintf(f, "usage: uvllm serve [--config FILE] [--OPTION VALUE | --OPTION=VALUE | --FLAG]...\n"
               "\n"
               "Every option may also come from the environment, as UVLLM_ and its name in\n"
               "capitals with '-' as '_' (UVLLM_MAX_BATCH_TOKENS=256), or from a config file\n"
               "(--config FILE, or UVLLM_CONFIG): lines 'name value' or 'name = value', '#'\n"
               "comment lines. Precedence: defaults < config file < environment < command line.\n"
               "Repeatable options (--api-key, --model-alias, --cors-origin) add up across all\n"
               "three (one value per variable). In the environment and a file a flag takes 1/0,\n"
               "true/false, yes/no or on/off. An empty variable counts as unset.\n"
               "\n"
               "  --config FILE            options from FILE (UVLLM_CONFIG)\n");
    for (size_t i = 0; i < g_ul_server_n_opts; i++) {
        const ul_opt_t *o = &g_ul_server_opts[i];
        char head[64], tail[300], text[1024];
        int col = snprintf(head, sizeof head, "  --%s%s%s", o->name, o->metavar ? " " : "",
                           o->metavar ? o->metavar : "");
        fputs(head, f);
        if (col > 25) {
            fputc('\n', f);
            col = 0;
        }
        fprintf(f, "%*s", 27 - col, "");
        opt_tail(o, tail, sizeof tail);
        snprintf(text, sizeof text, "%s %s", o->help, tail);
        wrap(f, text, 27);
    }
}
