/* `uvllm generate`: one prompt through the CPU backend, printed as it streams (or one JSON
 * object with --json). It drives the backend exactly as the scheduler does: prompt
 * prefill in chunks of the step size, then one decode step per token, each through the
 * sequence's page table, with sampling on the backend's threads. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd/cmd.h"
#include "cpu/kv.h"
#include "engine/sampling.h"
#include "model/model.h"
#include "uvllm/backend.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

#define STEP_TOKENS 512
#define PAGE_SIZE 16

typedef struct {
    const char *model, *prompt;
    int max_tokens, threads, json, kv_type;
    ul_sampling_t sp;
    int have_seed, verbose;
} gen_args_t;

static void usage(FILE *f) {
    fprintf(f, "usage: uvllm generate --model M --prompt P [--max-tokens N] [--temperature T]\n"
               "                      [--seed S] [--threads N] [--kv-type f16|f32] [--json]\n"
               "                      [--top-k K] [--top-p P] [--min-p P] [--repeat-penalty R]\n"
               "                      [--verbose]\n"
               "Greedy when the temperature is 0 (the default). --max-tokens defaults to 128.\n");
}

static int parse_int(const char *s, long lo, long hi, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

static int parse_float(const char *s, float lo, float hi, float *out) {
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi)) return -1;
    *out = v;
    return 0;
}

static int known(const char *o) {
    static const char *const opts[] = {"--model",          "--prompt", "--max-tokens", "--threads",
                                       "--temperature",    "--top-k",  "--top-p",      "--min-p",
                                       "--repeat-penalty", "--seed",   "--kv-type"};
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
        if (!strcmp(o, opts[i])) return 1;
    return 0;
}

/* Returns 0, 1 for --help (exit 0), or 2 after printing a usage error. */
static int parse_args(int argc, char **argv, gen_args_t *a) {
    memset(a, 0, sizeof *a);
    a->max_tokens = 128;
    a->kv_type = UL_TYPE_F16;
    ul_sampling_default(&a->sp);
    a->sp.temperature = 0.0f;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0, takes = 1;
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
            usage(stdout);
            return 1;
        } else if (!strcmp(o, "--json")) {
            a->json = 1;
            takes = 0;
        } else if (!strcmp(o, "--verbose")) {
            a->verbose = 1;
            takes = 0;
        } else if (!known(o)) {
            fprintf(stderr, "uvllm generate: unknown option '%s'\n", o);
            return 2;
        } else if (!v) {
            fprintf(stderr, "uvllm generate: option '%s' needs a value\n", o);
            return 2;
        } else if (!strcmp(o, "--model"))
            a->model = v;
        else if (!strcmp(o, "--prompt"))
            a->prompt = v;
        else if (!strcmp(o, "--max-tokens"))
            bad = parse_int(v, 0, 1 << 24, &a->max_tokens);
        else if (!strcmp(o, "--threads"))
            bad = parse_int(v, 1, 1024, &a->threads);
        else if (!strcmp(o, "--temperature"))
            bad = parse_float(v, 0, 100, &a->sp.temperature);
        else if (!strcmp(o, "--top-k"))
            bad = parse_int(v, 0, 1 << 24, &a->sp.top_k);
        else if (!strcmp(o, "--top-p"))
            bad = parse_float(v, 0, 1, &a->sp.top_p);
        else if (!strcmp(o, "--min-p"))
            bad = parse_float(v, 0, 1, &a->sp.min_p);
        else if (!strcmp(o, "--repeat-penalty"))
            bad = parse_float(v, 0, 100, &a->sp.repeat_penalty);
        else if (!strcmp(o, "--seed")) {
            char *end;
            errno = 0;
            unsigned long long s = strtoull(v, &end, 10);
            bad = errno || end == v || *end || v[0] == '-';
            a->sp.seed = s;
            a->have_seed = 1;
        } else if (!strcmp(o, "--kv-type")) {
            if (!strcmp(v, "f16"))
                a->kv_type = UL_TYPE_F16;
            else if (!strcmp(v, "f32"))
                a->kv_type = UL_TYPE_F32;
            else
                bad = 1;
        } else {
            fprintf(stderr, "uvllm generate: unknown option '%s'\n", o);
            return 2;
        }
        if (bad) {
            fprintf(stderr, "uvllm generate: bad value '%s' for %s\n", v, o);
            return 2;
        }
        i += takes;
    }
    if (!a->model || !a->prompt) {
        fprintf(stderr, "uvllm generate: --model and --prompt are required\n");
        usage(stderr);
        return 2;
    }
    return 0;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

typedef struct {
    ul_backend_t *be;
    ul_step_t step;
    ul_step_seq_t seq;
    int32_t *toks; /* prompt + generated, [cap] */
    int32_t n, cap;
    int32_t *pages;
} gen_t;

/* Runs tokens [from, from+n) of g->toks as one step; samples after the last one. */
static int run_step(gen_t *g, int32_t from, int32_t n, int sample) {
    g->step.tokens = g->toks + from;
    g->step.n_tokens = n;
    g->seq.tok_offset = 0;
    g->seq.n_tokens = n;
    g->seq.pos0 = from;
    g->seq.sample = sample;
    g->seq.history = g->toks;
    g->seq.n_history = from + n;
    return ul_backend_run(g->be, &g->step);
}

static int append(char **text, size_t *len, size_t *cap, const char *buf, size_t n) {
    if (*len + n + 1 > *cap) {
        size_t nc = (*cap + n + 1) * 2;
        char *t = realloc(*text, nc);
        if (!t) return UL_ENOMEM;
        *text = t;
        *cap = nc;
    }
    memcpy(*text + *len, buf, n);
    *len += n;
    (*text)[*len] = 0;
    return 0;
}

static int emit(const ul_vocab_t *v, ul_detok_t *d, int32_t id, char **text, size_t *len,
                size_t *cap, int print) {
    char buf[256];
    int n = ul_detok_push(d, v, id, buf, sizeof buf);
    if (n < 0) return 0; /* a single piece longer than 256 bytes: not in real vocabularies */
    if (print) {
        fwrite(buf, 1, (size_t)n, stdout);
        fflush(stdout);
    }
    return append(text, len, cap, buf, (size_t)n);
}

static void print_json(const gen_t *g, int32_t n_prompt, const char *text, double pf, double dc) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "prompt_tokens", cJSON_CreateIntArray(g->toks, n_prompt));
    cJSON_AddItemToObject(o, "tokens", cJSON_CreateIntArray(g->toks + n_prompt, g->n - n_prompt));
    cJSON_AddStringToObject(o, "text", text ? text : "");
    cJSON_AddNumberToObject(o, "prefill_tokens_per_s", pf);
    cJSON_AddNumberToObject(o, "decode_tokens_per_s", dc);
    char *s = cJSON_PrintUnformatted(o);
    if (s) printf("%s\n", s);
    free(s);
    cJSON_Delete(o);
}

static int generate(const gen_args_t *a, ul_model_t *m) {
    const ul_vocab_t *v = m->vocab;
    size_t plen = strlen(a->prompt);
    int cap = (int)(plen + 16);
    int32_t *ptoks = malloc((size_t)cap * sizeof *ptoks);
    if (!ptoks) return 1;
    int n_prompt = ul_tokenize(v, a->prompt, plen, 1, 0, ptoks, cap);
    if (n_prompt < 0 && n_prompt != UL_ENOMEM) { /* -(needed): grow once */
        cap = -n_prompt;
        int32_t *t = realloc(ptoks, (size_t)cap * sizeof *ptoks);
        if (!t) {
            free(ptoks);
            return 1;
        }
        ptoks = t;
        n_prompt = ul_tokenize(v, a->prompt, plen, 1, 0, ptoks, cap);
    }
    if (n_prompt <= 0) {
        fprintf(stderr, "uvllm generate: %s\n",
                n_prompt == 0 ? "the prompt gives no tokens" : "cannot tokenize the prompt");
        free(ptoks);
        return 1;
    }
    int32_t n_ctx = m->hp.n_ctx_train;
    if (n_prompt >= n_ctx) {
        fprintf(stderr, "uvllm generate: prompt of %d tokens does not fit the context (%d)\n",
                n_prompt, n_ctx);
        free(ptoks);
        return 1;
    }
    int32_t total = n_prompt + a->max_tokens < n_ctx ? n_prompt + a->max_tokens : n_ctx;
    int32_t n_pages = (total + PAGE_SIZE - 1) / PAGE_SIZE;
    ul_cpu_config_t cfg = {.n_threads = a->threads,
                           .kv_type = a->kv_type,
                           .n_ctx = n_ctx,
                           .page_size = PAGE_SIZE,
                           .max_batch_tokens = STEP_TOKENS};
    cfg.kv_bytes =
        (int64_t)n_pages * (int64_t)ul_kv_page_bytes(a->kv_type, m->hp.n_layer, m->hp.n_head_kv,
                                                     m->hp.head_dim, PAGE_SIZE);
    gen_t g = {.cap = total + 1};
    g.toks = malloc((size_t)g.cap * sizeof *g.toks);
    g.pages = malloc((size_t)n_pages * sizeof *g.pages);
    int rc = g.toks && g.pages ? ul_cpu_backend_create(m, &cfg, &g.be) : UL_ENOMEM;
    if (rc) {
        fprintf(stderr, "uvllm generate: cannot start the CPU backend: %s\n", ul_strerror(rc));
        free(ptoks), free(g.toks), free(g.pages);
        return 1;
    }
    memcpy(g.toks, ptoks, (size_t)n_prompt * sizeof *ptoks);
    free(ptoks);
    g.n = n_prompt;
    for (int32_t i = 0; i < n_pages; i++) g.pages[i] = i;
    g.step = (ul_step_t){.n_seqs = 1, .seqs = &g.seq};
    g.seq = (ul_step_seq_t){.seq_id = 1, .pages = g.pages, .n_pages = n_pages, .sampling = a->sp};
    uint64_t seed = a->have_seed ? a->sp.seed : (uint64_t)time(NULL) ^ (uint64_t)clock();
    ul_sampling_rng_seed(seed, g.seq.rng);

    ul_detok_t d;
    ul_detok_init(&d);
    char *text = NULL;
    size_t tlen = 0, tcap = 0;
    double t0 = now_s(), t_prefill = 0, t1 = t0;
    int32_t n_decode = 0;
    for (int32_t p = 0; !rc && p < n_prompt && a->max_tokens > 0; p += STEP_TOKENS) {
        int32_t n = n_prompt - p < STEP_TOKENS ? n_prompt - p : STEP_TOKENS;
        rc = run_step(&g, p, n, p + n == n_prompt);
    }
    t1 = now_s();
    t_prefill = t1 - t0;
    while (!rc && a->max_tokens > 0) {
        int32_t tok = g.seq.out_token;
        g.toks[g.n++] = tok;
        if (ul_vocab_is_eog(v, tok)) break;
        rc = emit(v, &d, tok, &text, &tlen, &tcap, !a->json);
        if (rc || g.n - n_prompt >= a->max_tokens || g.n >= total) break;
        rc = run_step(&g, g.n - 1, 1, 1);
        n_decode++;
    }
    double t_decode = now_s() - t1;
    char tail[16];
    int nt = ul_detok_flush(&d, tail, sizeof tail);
    if (nt > 0 && !rc) {
        if (!a->json) fwrite(tail, 1, (size_t)nt, stdout);
        rc = append(&text, &tlen, &tcap, tail, (size_t)nt);
    }
    if (rc) {
        fprintf(stderr, "\nuvllm generate: step failed: %s\n", ul_strerror(rc));
    } else if (a->json) {
        print_json(&g, n_prompt, text,
                   t_prefill > 0 && a->max_tokens > 0 ? n_prompt / t_prefill : 0,
                   t_decode > 0 && n_decode ? n_decode / t_decode : 0);
    } else {
        printf("\n");
        fprintf(stderr, "prefill: %d tokens, %.1f tokens/s; decode: %d tokens, %.1f tokens/s\n",
                n_prompt, t_prefill > 0 && a->max_tokens > 0 ? n_prompt / t_prefill : 0, n_decode,
                t_decode > 0 && n_decode ? n_decode / t_decode : 0);
    }
    ul_backend_destroy(g.be);
    free(text), free(g.toks), free(g.pages);
    return rc ? 1 : 0;
}

int ul_cmd_generate(int argc, char **argv) {
    gen_args_t a;
    int rc = parse_args(argc, argv, &a);
    if (rc) return rc == 1 ? 0 : 2;
    /* loader warnings (odd metadata) would interleave with the streamed text */
    if (!a.verbose && ul_log_get_level() < UL_LOG_LEVEL_ERROR) ul_log_set_level(UL_LOG_LEVEL_ERROR);
    char err[256];
    ul_model_t *m = NULL;
    rc = ul_model_load(a.model, 0, &m, err, sizeof err);
    if (rc) {
        fprintf(stderr, "uvllm generate: cannot load model '%s': %s\n", a.model,
                err[0] ? err : ul_strerror(rc));
        return 1;
    }
    rc = generate(&a, m);
    ul_model_free(m);
    return rc;
}
