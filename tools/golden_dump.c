/* golden_dump: llama.cpp's reference outputs for one GGUF file, one JSON line per prompt,
 * in the format of ../shared/golden/README.md. Our own program against llama.cpp's public
 * C API (llama.h); scripts/golden.sh builds llama.cpp (bench/peer.sh) and compiles this
 * file against its static libraries, so no llama.cpp code lives in this repository.
 *
 *   golden_dump MODEL.gguf [--tokens N] [--prompts FILE] [--threads N] [--ubatch N] [-v]
 *               > OUT.jsonl
 *
 * For every prompt (built-in list, or FILE with one prompt per line, blank lines skipped):
 *  - prompt_tokens: llama_tokenize with add_special (BOS as the vocabulary decides:
 *    tokenizer.ggml.add_bos_token, else SPM yes / gpt2 BPE no), special tokens not parsed;
 *  - prompt_top: the whole prompt decoded in ONE batch (one llama_decode, one ubatch unless
 *    --ubatch N splits it into ubatches of N rows) with logits requested at every
 *    position (teacher forcing); per position the 20 largest logits as [id, logit],
 *    largest first (equal logits: smaller id first), printed with %g (6 digits);
 *  - tokens: greedy (argmax, first index on ties) continuation of up to N tokens (default
 *    24), one llama_decode per token, stopping before an end-of-generation token (the EOG
 *    token itself is not recorded);
 *  - n_ctx: the context llama.cpp chose (n_ctx 0 = the model's training context);
 *  - text: the continuation's pieces (llama_token_to_piece, lstrip 0, special false)
 *    concatenated, decoded as UTF-8 with U+FFFD for each maximal invalid subsequence (as
 *    Python's errors="replace"); text_bytes_hex: the exact bytes.
 * Context: the model's training context (n_ctx 0), otherwise default parameters (f16 K and
 * V cache, flash attention as llama.cpp decides), 2 threads, one sequence, a fresh KV cache
 * per prompt. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

#define TOP_K 20

static const char *g_default_prompts[] = {
    "Once upon a time",
    "The capital of France is",
    "def fibonacci(n):",
    "Hello, world! 12345",
    "Streaming servers batch tokens every tick.",
};

static int g_verbose;

static void quiet_log(enum ggml_log_level level, const char *text, void *ud) {
    (void)ud;
    if (g_verbose || level >= GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static void die(const char *msg, const char *arg) {
    fprintf(stderr, "golden_dump: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
    exit(1);
}

/* ---- JSON output ---- */

static void put_utf8(FILE *o, uint32_t cp) {
    if (cp < 0x80) {
        fputc((int)cp, o);
    } else if (cp < 0x800) {
        fputc(0xC0 | (cp >> 6), o), fputc(0x80 | (cp & 0x3F), o);
    } else if (cp < 0x10000) {
        fputc(0xE0 | (cp >> 12), o), fputc(0x80 | ((cp >> 6) & 0x3F), o);
        fputc(0x80 | (cp & 0x3F), o);
    } else {
        fputc(0xF0 | (cp >> 18), o), fputc(0x80 | ((cp >> 12) & 0x3F), o);
        fputc(0x80 | ((cp >> 6) & 0x3F), o), fputc(0x80 | (cp & 0x3F), o);
    }
}

/* A JSON string of bytes s[0..n): valid UTF-8 kept as is (like Python's json.dumps with
 * ensure_ascii=False), each maximal invalid subsequence replaced by U+FFFD. */
static void put_json_string(FILE *o, const unsigned char *s, size_t n) {
    fputc('"', o);
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) {
            switch (c) {
            case '"':
                fputs("\\\"", o);
                break;
            case '\\':
                fputs("\\\\", o);
                break;
            case '\n':
                fputs("\\n", o);
                break;
            case '\r':
                fputs("\\r", o);
                break;
            case '\t':
                fputs("\\t", o);
                break;
            case '\b':
                fputs("\\b", o);
                break;
            case '\f':
                fputs("\\f", o);
                break;
            default:
                if (c < 0x20)
                    fprintf(o, "\\u%04x", c);
                else
                    fputc((int)c, o);
            }
            i++;
            continue;
        }
        int len = 0;
        unsigned lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
        if (c >= 0xC2 && c <= 0xDF)
            len = 2;
        else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            if (c == 0xE0) lo = 0xA0;
            if (c == 0xED) hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F;
        }
        size_t k = 1;
        if (len) {
            for (; k < (size_t)len && i + k < n; k++) {
                unsigned b = s[i + k];
                if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) break;
            }
        }
        if (len && k == (size_t)len) {
            fwrite(s + i, 1, k, o);
            i += k;
        } else {
            put_utf8(o, 0xFFFD);
            i += k; /* the maximal subpart (at least the lead byte) */
        }
    }
    fputc('"', o);
}

/* ---- logits ---- */

typedef struct {
    int32_t id;
    float v;
} top_t;

static int better(top_t a, top_t b) { return a.v > b.v || (a.v == b.v && a.id < b.id); }

static int top_k(const float *l, int32_t n_vocab, top_t *out) {
    int n = 0;
    for (int32_t j = 0; j < n_vocab; j++) {
        top_t t = {j, l[j]};
        if (n == TOP_K && !better(t, out[n - 1])) continue;
        int p = n < TOP_K ? n++ : TOP_K - 1;
        while (p > 0 && better(t, out[p - 1])) {
            out[p] = out[p - 1];
            p--;
        }
        out[p] = t;
    }
    return n;
}

static int32_t argmax(const float *l, int32_t n_vocab) {
    int32_t best = 0;
    for (int32_t j = 1; j < n_vocab; j++)
        if (l[j] > l[best]) best = j;
    return best;
}

static void decode_or_die(struct llama_context *ctx, struct llama_batch b) {
    int rc = llama_decode(ctx, b);
    if (rc != 0) {
        char num[32];
        snprintf(num, sizeof num, "%d", rc);
        die("llama_decode failed", num);
    }
}

static void dump_prompt(FILE *o, struct llama_model *model, const char *prompt, int n_gen,
                        int n_threads, int n_ubatch) {
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);
    const int32_t plen = (int32_t)strlen(prompt);

    int32_t n = -llama_tokenize(vocab, prompt, plen, NULL, 0, true, false);
    if (n <= 0) die("cannot tokenize", prompt);
    llama_token *toks = malloc((size_t)n * sizeof *toks);
    if (llama_tokenize(vocab, prompt, plen, toks, n, true, false) != n)
        die("tokenize count changed", prompt);

    struct llama_context_params cp = llama_context_default_params();
    cp.n_threads = cp.n_threads_batch = n_threads;
    cp.n_seq_max = 1;
    cp.n_ctx = 0; /* the model's training context, as the shared goldens */
    if ((uint32_t)n > cp.n_batch) cp.n_batch = (uint32_t)n;
    if ((uint32_t)n > cp.n_ubatch) cp.n_ubatch = (uint32_t)n; /* one ubatch: one graph */
    if (n_ubatch > 0) cp.n_ubatch = (uint32_t)n_ubatch;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) die("llama_init_from_model failed", NULL);
    const uint32_t n_ctx = llama_n_ctx(ctx);
    if ((uint32_t)(n + n_gen) > n_ctx) die("prompt plus tokens exceed the context", prompt);

    /* the prompt in one batch, logits at every position */
    struct llama_batch b = llama_batch_init(n, 0, 1);
    for (int32_t i = 0; i < n; i++) {
        b.token[i] = toks[i];
        b.pos[i] = i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = 1;
    }
    b.n_tokens = n;
    decode_or_die(ctx, b);

    fputs("{\"prompt\": ", o);
    put_json_string(o, (const unsigned char *)prompt, (size_t)plen);
    fputs(", \"prompt_tokens\": [", o);
    for (int32_t i = 0; i < n; i++) fprintf(o, "%s%d", i ? ", " : "", toks[i]);
    fputs("], \"prompt_top\": [", o);
    int32_t next = 0;
    for (int32_t i = 0; i < n; i++) {
        const float *l = llama_get_logits_ith(ctx, i);
        if (!l) die("no logits for a prompt position", prompt);
        top_t t[TOP_K];
        int k = top_k(l, n_vocab, t);
        fputs(i ? ", [" : "[", o);
        for (int j = 0; j < k; j++) fprintf(o, "%s[%d, %g]", j ? ", " : "", t[j].id, t[j].v);
        fputc(']', o);
        if (i == n - 1) next = argmax(l, n_vocab);
    }
    fputs("], \"tokens\": [", o);

    /* greedy continuation, one token per decode */
    size_t cap = 256, len = 0;
    unsigned char *text = malloc(cap);
    struct llama_batch one = llama_batch_init(1, 0, 1);
    for (int g = 0; g < n_gen; g++) {
        if (llama_vocab_is_eog(vocab, next)) break;
        fprintf(o, "%s%d", g ? ", " : "", next);
        char piece[256];
        int32_t pn = llama_token_to_piece(vocab, next, piece, sizeof piece, 0, false);
        if (pn < 0) die("token piece longer than 256 bytes", NULL);
        while (len + (size_t)pn > cap) text = realloc(text, cap *= 2);
        memcpy(text + len, piece, (size_t)pn);
        len += (size_t)pn;
        if (g + 1 == n_gen) break;
        one.token[0] = next;
        one.pos[0] = n + g;
        one.n_seq_id[0] = 1;
        one.seq_id[0][0] = 0;
        one.logits[0] = 1;
        one.n_tokens = 1;
        decode_or_die(ctx, one);
        next = argmax(llama_get_logits_ith(ctx, 0), n_vocab);
    }
    fprintf(o, "], \"n_ctx\": %u, \"text\": ", n_ctx);
    put_json_string(o, text, len);
    fputs(", \"text_bytes_hex\": \"", o);
    for (size_t i = 0; i < len; i++) fprintf(o, "%02x", text[i]);
    fputs("\"}\n", o);

    llama_batch_free(one);
    llama_batch_free(b);
    llama_free(ctx);
    free(text);
    free(toks);
}

static char **read_prompts(const char *path, int *n_out) {
    FILE *f = fopen(path, "rb");
    if (!f) die("cannot open prompts file", path);
    char **v = NULL;
    int n = 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t r;
    while ((r = getline(&line, &cap, f)) >= 0) {
        while (r > 0 && (line[r - 1] == '\n' || line[r - 1] == '\r')) line[--r] = 0;
        if (r == 0) continue;
        v = realloc(v, (size_t)(n + 1) * sizeof *v);
        v[n++] = strdup(line);
    }
    free(line);
    fclose(f);
    if (n == 0) die("no prompts in", path);
    *n_out = n;
    return v;
}

int main(int argc, char **argv) {
    const char *model_path = NULL, *prompts_path = NULL;
    int n_gen = 24, n_threads = 2, n_ubatch = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tokens") && i + 1 < argc)
            n_gen = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--prompts") && i + 1 < argc)
            prompts_path = argv[++i];
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            n_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--ubatch") && i + 1 < argc)
            n_ubatch = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-v"))
            g_verbose = 1;
        else if (argv[i][0] != '-' && !model_path)
            model_path = argv[i];
        else {
            fprintf(stderr, "usage: golden_dump MODEL.gguf [--tokens N] [--prompts FILE] "
                            "[--threads N] [--ubatch N] [-v] > OUT.jsonl\n");
            return 2;
        }
    }
    if (!model_path || n_gen < 1 || n_threads < 1) die("bad arguments (see the header)", NULL);

    llama_log_set(quiet_log, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    struct llama_model *model = llama_model_load_from_file(model_path, mp);
    if (!model) die("cannot load model", model_path);

    int n_prompts = (int)(sizeof g_default_prompts / sizeof *g_default_prompts);
    char **prompts = (char **)g_default_prompts;
    if (prompts_path) prompts = read_prompts(prompts_path, &n_prompts);
    for (int i = 0; i < n_prompts; i++)
        dump_prompt(stdout, model, prompts[i], n_gen, n_threads, n_ubatch);

    llama_model_free(model);
    llama_backend_free();
    return fflush(stdout) == 0 ? 0 : 1;
}
