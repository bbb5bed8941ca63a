/* `uvllm generate`: prompts through the CPU backend, driven by the scheduler's core
 * (src/sched) exactly as the server drives it, minus HTTP and the loop: one sequence per
 * prompt (--parallel N: N of them decoding together), prefill in chunks under the step
 * budget, one decode token per sequence per step, each through its page table, with
 * sampling on the backend's threads. One sequence's text is printed as it streams (or
 * everything as one JSON object with --json). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd/cmd.h"
#include "cpu/kernels.h"
#include "cpu/kv.h"
#include "engine/sampling.h"
#include "model/model.h"
#include "sched/sched.h"
#include "server/draft.h"
#include "uvllm/backend.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

#define STEP_TOKENS 512
#define PAGE_SIZE 16

typedef struct {
    const char *model, *prompt, *prompts_file;
    int max_tokens, threads, json, kv_type, parallel;
    ul_sampling_t sp;
    int have_seed, verbose;
    const char *model_draft; /* speculative decoding, as serve's flags */
    int spec_ngram, draft_max, draft_min, spec_eager;
    char *prompt_rw; /* --prompt as the one-element list generate() takes */
} gen_args_t;

static void usage(FILE *f) {
    fprintf(f,
            "usage: uvllm generate --model M (--prompt P | --prompts-file F) [--parallel N]\n"
            "                      [--max-tokens N] [--temperature T] [--seed S] [--threads N]\n"
            "                      [--kv-type f16|f32] [--json] [--top-k K] [--top-p P]\n"
            "                      [--min-p P] [--repeat-penalty R] [--verbose]\n"
            "                      [--model-draft M] [--spec-ngram N] [--draft-max K]\n"
            "                      [--draft-min K] [--spec-eager]\n"
            "Greedy when the temperature is 0 (the default). --max-tokens defaults to 128.\n"
            "--parallel N decodes N sequences together through the scheduler, as the server\n"
            "does: N copies of the prompt, or the file's non-empty lines (one prompt each,\n"
            "cycled to N; N defaults to their number). Sequence i samples with seed S + i.\n"
            "Speeds are aggregated over all sequences: prefill until every sequence has its\n"
            "first token, decode after that.\n"
            "Speculative decoding as in 'uvllm serve': --model-draft M proposes tokens with\n"
            "a small model of the same vocabulary, --spec-ngram N from the text itself.\n"
            "--spec-eager: --draft-max proposals every step, whatever they cost (benchmarks).\n");
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
    static const char *const opts[] = {
        "--model",     "--prompt",   "--max-tokens",   "--threads",        "--temperature",
        "--top-k",     "--top-p",    "--min-p",        "--repeat-penalty", "--seed",
        "--kv-type",   "--parallel", "--prompts-file", "--model-draft",    "--spec-ngram",
        "--draft-max", "--draft-min"};
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
        } else if (!strcmp(o, "--spec-eager")) {
            a->spec_eager = 1;
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
        else if (!strcmp(o, "--prompts-file"))
            a->prompts_file = v;
        else if (!strcmp(o, "--model-draft"))
            a->model_draft = v;
        else if (!strcmp(o, "--spec-ngram"))
            bad = parse_int(v, 1, 8, &a->spec_ngram);
        else if (!strcmp(o, "--draft-max"))
            bad = parse_int(v, 1, UL_MAX_DRAFT, &a->draft_max);
        else if (!strcmp(o, "--draft-min"))
            bad = parse_int(v, 1, UL_MAX_DRAFT, &a->draft_min);
        else if (!strcmp(o, "--parallel"))
            bad = parse_int(v, 1, STEP_TOKENS, &a->parallel);
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
    if (!a->model || !a->prompt == !a->prompts_file) {
        fprintf(stderr,
                "uvllm generate: --model and one of --prompt, --prompts-file are required\n");
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

/* One sequence: its prompt, what it generated (the end-of-generation token included, as
 * llama.cpp lists it) and the detokenised text. The scheduler's ul_seq_t comes first. */
typedef struct {
    ul_seq_t seq;
    struct gen_run_s *run;
    int32_t *prompt, n_prompt;
    int32_t *out, n_out; /* [max_tokens] */
    ul_detok_t d;
    char *text;
    size_t tlen, tcap;
    int finished, status;
} gseq_t;

typedef struct gen_run_s {
    const ul_vocab_t *v;
    int print;         /* stream sequence 0's text to stdout */
    int32_t n_started; /* sequences that have their first token */
    int64_t n_gen;     /* tokens generated by all sequences */
    int rc;            /* first error */
} gen_run_t;

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

static int emit(gseq_t *q, int32_t id) {
    char buf[256];
    int n = ul_detok_push(&q->d, q->run->v, id, buf, sizeof buf);
    if (n < 0) return 0; /* a single piece longer than 256 bytes: not in real vocabularies */
    if (q->run->print) {
        fwrite(buf, 1, (size_t)n, stdout);
        fflush(stdout);
    }
    return append(&q->text, &q->tlen, &q->tcap, buf, (size_t)n);
}

/* The sequences ignore end-of-generation in the scheduler so that the token reaches this
 * callback: it is recorded (as the single-sequence loop always did) and ends the sequence. */
static int on_token(ul_seq_t *s, int32_t tok, const ul_token_lp_t *lp) {
    (void)lp;
    gseq_t *q = (gseq_t *)s;
    if (q->n_out == 0) q->run->n_started++;
    q->run->n_gen++;
    q->out[q->n_out++] = tok;
    if (ul_vocab_is_eog(q->run->v, tok)) return 1;
    int rc = emit(q, tok);
    if (rc && !q->run->rc) q->run->rc = rc;
    return rc != 0;
}

static void on_finish(ul_seq_t *s, ul_finish_t reason, int status) {
    gseq_t *q = (gseq_t *)s;
    (void)reason;
    q->finished = 1;
    q->status = status;
    if (status && !q->run->rc) q->run->rc = status;
    char tail[16];
    int nt = ul_detok_flush(&q->d, tail, sizeof tail);
    if (nt > 0) {
        if (q->run->print) fwrite(tail, 1, (size_t)nt, stdout);
        if (append(&q->text, &q->tlen, &q->tcap, tail, (size_t)nt) && !q->run->rc)
            q->run->rc = UL_ENOMEM;
    }
}

/* Tokenizes text with BOS into a new array; returns its length, or 0 after a message. */
static int32_t tokenize_prompt(const ul_vocab_t *v, const char *text, int32_t **out) {
    size_t plen = strlen(text);
    int cap = (int)(plen + 16);
    int32_t *t = malloc((size_t)cap * sizeof *t);
    if (!t) return 0;
    int n = ul_tokenize(v, text, plen, 1, 0, t, cap);
    if (n < 0 && n != UL_ENOMEM) { /* -(needed): grow once */
        cap = -n;
        int32_t *g = realloc(t, (size_t)cap * sizeof *t);
        if (!g) {
            free(t);
            return 0;
        }
        t = g;
        n = ul_tokenize(v, text, plen, 1, 0, t, cap);
    }
    if (n <= 0) {
        fprintf(stderr, "uvllm generate: %s\n",
                n == 0 ? "the prompt gives no tokens" : "cannot tokenize the prompt");
        free(t);
        return 0;
    }
    *out = t;
    return n;
}

static void print_tokens(cJSON *o, const gseq_t *q) {
    cJSON_AddItemToObject(o, "prompt_tokens", cJSON_CreateIntArray(q->prompt, q->n_prompt));
    cJSON_AddItemToObject(o, "tokens", cJSON_CreateIntArray(q->out, q->n_out));
    cJSON_AddStringToObject(o, "text", q->text ? q->text : "");
}

/* Sequence 0's fields at the top level (what single-prompt callers read), the speeds
 * aggregated over all sequences, and every sequence in "sequences". */
static void print_json(const gseq_t *qs, int n, double pf, double dc, double t_pf, double t_dc,
                       const ul_sched_stats_t *st) {
    const uint64_t steps = st ? st->steps : 0;
    cJSON *o = cJSON_CreateObject();
    print_tokens(o, &qs[0]);
    cJSON_AddNumberToObject(o, "parallel", n);
    cJSON_AddNumberToObject(o, "prefill_tokens_per_s", pf);
    cJSON_AddNumberToObject(o, "decode_tokens_per_s", dc);
    cJSON_AddNumberToObject(o, "prefill_s", t_pf);
    cJSON_AddNumberToObject(o, "decode_s", t_dc);
    cJSON_AddNumberToObject(o, "steps", (double)steps);
    cJSON_AddNumberToObject(o, "spec_proposed", st ? (double)st->spec_proposed : 0);
    cJSON_AddNumberToObject(o, "spec_accepted", st ? (double)st->spec_accepted : 0);
    cJSON_AddNumberToObject(o, "spec_draft_s", st ? st->spec_draft_us / 1e6 : 0);
    /* the kernel path the speeds came from (the CPU's best, or UVLLM_ISA's cap) */
    cJSON_AddStringToObject(o, "isa", ul_cpu_isa_name(ul_cpu_isa()));
    cJSON *arr = cJSON_AddArrayToObject(o, "sequences");
    for (int i = 0; i < n; i++) {
        cJSON *e = cJSON_CreateObject();
        print_tokens(e, &qs[i]);
        cJSON_AddItemToArray(arr, e);
    }
    char *s = cJSON_PrintUnformatted(o);
    if (s) printf("%s\n", s);
    free(s);
    cJSON_Delete(o);
}

/* Steps until nothing is runnable, synchronously: build, run on this thread plus the
 * backend's pool, absorb and deliver, as the loop driver does (without its overlap).
 * Records when every sequence has its first token (the end of prefill). */
static int drive(ul_sched_t *s, gen_run_t *run, int32_t n, double *t_pf_end, int64_t *n_pf) {
    *t_pf_end = 0;
    while (ul_sched_step_build(s) > 0) {
        int rc = ul_backend_run(s->backend, s->step);
        if (rc) s->step->status = rc;
        ul_sched_step_complete(s);
        if (*t_pf_end == 0 && run->n_started == n) {
            *t_pf_end = now_s();
            *n_pf = run->n_gen;
        }
    }
    return run->rc;
}

/* The CPU backend, or with --model-draft the speculative one (*draft: its model). */
static int make_backend(const gen_args_t *a, ul_model_t *m, const gseq_t *qs, int n,
                        ul_backend_t **be, ul_model_t **draft) {
    const int32_t n_ctx = m->hp.n_ctx_train;
    int64_t n_pages = 0;
    for (int i = 0; i < n; i++) {
        int64_t total = qs[i].n_prompt + (int64_t)a->max_tokens;
        n_pages += ((total < n_ctx ? total : n_ctx) + PAGE_SIZE - 1) / PAGE_SIZE;
    }
    ul_cpu_config_t cfg = {.n_threads = a->threads,
                           .kv_type = a->kv_type,
                           .n_ctx = n_ctx,
                           .page_size = PAGE_SIZE,
                           .max_batch_tokens = STEP_TOKENS};
    cfg.kv_bytes = n_pages * (int64_t)ul_kv_page_bytes(a->kv_type, m->hp.n_layer, m->hp.n_head_kv,
                                                       m->hp.head_dim, PAGE_SIZE);
    int rc = ul_cpu_backend_create(m, &cfg, be);
    if (rc || !a->model_draft) return rc;
    char err[320];
    ul_model_t *dm = NULL;
    rc = ul_server_draft_backend(m, a->model_draft, &cfg, be, &dm, err, sizeof err);
    if (rc) {
        fprintf(stderr, "uvllm generate: --model-draft: %s\n", err);
        ul_backend_destroy(*be);
        *be = NULL;
        if (dm) ul_model_free(dm);
        return rc;
    }
    *draft = dm;
    return 0;
}

static void report(const gen_args_t *a, gseq_t *qs, int n, double t_pf, double t_dc, int64_t n_dc,
                   const ul_sched_stats_t *st) {
    const uint64_t steps = st ? st->steps : 0;
    int64_t n_prompt = 0;
    for (int i = 0; i < n; i++) n_prompt += qs[i].n_prompt;
    const double pf = t_pf > 0 && a->max_tokens > 0 ? n_prompt / t_pf : 0;
    const double dc = t_dc > 0 && n_dc ? n_dc / t_dc : 0;
    if (a->json) {
        print_json(qs, n, pf, dc, t_pf, t_dc, st);
        return;
    }
    if (n == 1) {
        printf("\n");
    } else {
        for (int i = 0; i < n; i++)
            printf("--- sequence %d\n%s\n", i, qs[i].text ? qs[i].text : "");
    }
    fprintf(stderr, "prefill: %lld tokens, %.1f tokens/s; decode: %lld tokens, %.1f tokens/s",
            (long long)n_prompt, pf, (long long)n_dc, dc);
    if (n > 1) fprintf(stderr, " (%d sequences, %llu steps)", n, (unsigned long long)steps);
    if (st && st->spec_proposed)
        fprintf(stderr, "; speculative: %llu of %llu proposals accepted",
                (unsigned long long)st->spec_accepted, (unsigned long long)st->spec_proposed);
    fprintf(stderr, "\n");
}

/* n sequences (prompt i of the list, cycling) through the scheduler and the CPU backend. */
static int generate(const gen_args_t *a, ul_model_t *m, char **prompts, int n_prompts) {
    const int n = a->parallel;
    gen_run_t run = {.v = m->vocab, .print = n == 1 && !a->json};
    gseq_t *qs = calloc((size_t)n, sizeof *qs);
    int rc = qs ? 0 : UL_ENOMEM;
    const uint64_t seed = a->have_seed ? a->sp.seed : (uint64_t)time(NULL) ^ (uint64_t)clock();
    for (int i = 0; !rc && i < n; i++) {
        gseq_t *q = &qs[i];
        q->run = &run;
        q->n_prompt = tokenize_prompt(m->vocab, prompts[i % n_prompts], &q->prompt);
        q->out = malloc(((size_t)a->max_tokens + 1) * sizeof *q->out);
        if (!q->n_prompt || !q->out) {
            rc = UL_EINVAL;
        } else if (q->n_prompt >= m->hp.n_ctx_train) {
            fprintf(stderr, "uvllm generate: prompt of %d tokens does not fit the context (%d)\n",
                    q->n_prompt, m->hp.n_ctx_train);
            rc = UL_E2BIG;
        }
        ul_detok_init(&q->d);
        q->seq = (ul_seq_t){.max_tokens = a->max_tokens,
                            .sampling = a->sp,
                            .on_token = on_token,
                            .on_finish = on_finish,
                            .ignore_eos = 1};
        q->seq.sampling.seed = seed + (uint64_t)i;
    }
    ul_backend_t *be = NULL;
    ul_model_t *draft = NULL;
    if (!rc && a->max_tokens > 0) {
        rc = make_backend(a, m, qs, n, &be, &draft);
        if (rc && !a->model_draft)
            fprintf(stderr, "uvllm generate: cannot start the CPU backend: %s\n", ul_strerror(rc));
    } else if (rc == UL_ENOMEM) {
        fprintf(stderr, "uvllm generate: out of memory\n");
    }
    ul_sched_t s;
    int have_s = 0;
    double t0 = now_s(), t_pf_end = t0, t_end = t0;
    int64_t n_pf = 0;
    if (be) {
        ul_sched_config_t sc = {.max_batch_tokens = STEP_TOKENS,
                                .max_seqs = n,
                                .spec_ngram = a->spec_ngram,
                                .spec_draft_max = a->draft_max,
                                .spec_draft_min = a->draft_min,
                                .spec_eager = a->spec_eager};
        rc = ul_sched_init(&s, be, &sc);
        have_s = !rc;
        for (int i = 0; !rc && i < n; i++)
            rc = ul_sched_add(&s, &qs[i].seq, qs[i].prompt, qs[i].n_prompt);
        t0 = now_s();
        if (!rc) rc = drive(&s, &run, n, &t_pf_end, &n_pf);
        t_end = now_s();
        if (t_pf_end == 0) t_pf_end = t_end;
        if (rc) fprintf(stderr, "\nuvllm generate: step failed: %s\n", ul_strerror(rc));
    }
    if (!rc)
        report(a, qs, n, t_pf_end - t0, t_end - t_pf_end, run.n_gen - n_pf,
               have_s ? &s.stats : NULL);
    if (have_s) ul_sched_free(&s);
    if (be) ul_backend_destroy(be);
    if (draft) ul_model_free(draft);
    for (int i = 0; qs && i < n; i++) free(qs[i].prompt), free(qs[i].out), free(qs[i].text);
    free(qs);
    return rc ? 1 : 0;
}

/* The non-empty lines of a file, each a prompt (the file stays allocated: lines point
 * into it). Returns the number of lines, 0 after a message. */
static int read_prompts(const char *path, char **buf, char ***lines) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "uvllm generate: cannot open '%s': %s\n", path, strerror(errno));
        return 0;
    }
    size_t cap = 4096, len = 0, k;
    char *b = malloc(cap + 1);
    while (b && (k = fread(b + len, 1, cap - len, f)) > 0) {
        len += k;
        if (len == cap) {
            char *g = realloc(b, 2 * cap + 1);
            if (!g) free(b);
            b = g;
            cap *= 2;
        }
    }
    fclose(f);
    if (!b) return 0;
    b[len] = 0;
    int n = 0;
    char **l = NULL;
    for (char *p = b; p < b + len;) {
        char *e = memchr(p, '\n', (size_t)(b + len - p));
        if (!e) e = b + len;
        *e = 0;
        if (e > p && e[-1] == '\r') e[-1] = 0;
        if (*p) {
            char **g = realloc(l, (size_t)(n + 1) * sizeof *l);
            if (!g) break;
            l = g;
            l[n++] = p;
        }
        p = e + 1;
    }
    if (!n) {
        fprintf(stderr, "uvllm generate: '%s' holds no prompt\n", path);
        free(b), free(l);
        return 0;
    }
    *buf = b;
    *lines = l;
    return n;
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
    char *buf = NULL, **prompts = &a.prompt_rw;
    int n_prompts = 1;
    a.prompt_rw = (char *)a.prompt;
    if (a.prompts_file) n_prompts = read_prompts(a.prompts_file, &buf, &prompts);
    if (n_prompts) {
        if (!a.parallel) a.parallel = a.prompts_file ? n_prompts : 1;
        if (a.parallel > STEP_TOKENS) a.parallel = STEP_TOKENS;
        rc = generate(&a, m, prompts, n_prompts);
    } else {
        rc = 1;
    }
    if (buf) free(buf), free(prompts);
    ul_model_free(m);
    return rc;
}
