/* `uvllm tokenize` and `uvllm detokenize`: the tokenizer from the command line, with an
 * output other tools parse: token ids space-separated on one line, or the exact bytes of
 * the pieces with no newline added. The model is loaded vocabulary-only. --batch does many
 * texts (or id lists) with one load: records on stdin, one answer each, in order. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "cmd/cmd.h"
#include "model/model.h"
#include "uvllm/err.h"

/* The usage on f; returns rc, the exit status. */
static int tok_usage(FILE *f, int rc) {
    fprintf(f, "usage: uvllm tokenize --model MODEL.gguf [--no-bos] [--special] TEXT\n"
               "       uvllm tokenize --model MODEL.gguf [--no-bos] [--special] --batch\n"
               "  prints the token ids of TEXT ('-' reads stdin) on one line\n"
               "  --no-bos   add neither BOS nor EOS (default: what the vocabulary asks)\n"
               "  --special  recognise special token texts such as <|im_start|>\n"
               "  --batch    stdin holds texts, each as its byte count, a newline and its bytes;\n"
               "             prints one line of ids per text\n");
    return rc;
}

/* The usage on f; returns rc, the exit status. */
static int detok_usage(FILE *f, int rc) {
    fprintf(f, "usage: uvllm detokenize --model MODEL.gguf [--special] ID...\n"
               "       uvllm detokenize --model MODEL.gguf [--special] --batch\n"
               "  prints the bytes of the tokens, no newline added\n"
               "  --special  print the text of control tokens too\n"
               "  --batch    stdin holds one line of space-separated ids per text; prints each\n"
               "             text as its byte count, a newline and its bytes\n");
    return rc;
}

/* Reads all of stdin, bytes as they are. */
static char *read_stdin(size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    while (b) {
        size_t r = fread(b + n, 1, cap - n, stdin);
        n += r;
        if (n < cap) {
            if (ferror(stdin)) break;
            *len = n;
            return b;
        }
        char *nb = realloc(b, cap * 2);
        if (!nb) break;
        b = nb;
        cap *= 2;
    }
    free(b);
    return NULL;
}

static ul_model_t *load(const char *path) {
    ul_model_t *m;
    char err[512];
    int rc = ul_model_load(path, 1, &m, err, sizeof err);
    if (rc) {
        fprintf(stderr, "uvllm: %s: %s\n", path, err[0] ? err : ul_strerror(rc));
        return NULL;
    }
    return m;
}

static int print_ids(const ul_vocab_t *v, const char *text, size_t len, int bos, int special) {
    int cap = (int)(len < 1024 ? 1024 : len + 16);
    int32_t *ids = malloc(sizeof *ids * (size_t)cap);
    if (!ids) return 1;
    int n = ul_tokenize(v, text, len, bos, special, ids, cap);
    if (n < 0 && n > -(1 << 30) && n != UL_ENOMEM && n != UL_E2BIG && n != UL_EINVAL) {
        cap = -n;
        int32_t *p = realloc(ids, sizeof *ids * (size_t)cap);
        if (!p) return free(ids), 1;
        ids = p;
        n = ul_tokenize(v, text, len, bos, special, ids, cap);
    }
    if (n < 0) {
        fprintf(stderr, "uvllm: tokenize: %s\n", ul_strerror(n));
        free(ids);
        return 1;
    }
    for (int i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
    printf("\n");
    free(ids);
    return 0;
}

/* Parses a batch record header "LEN\n" at *p (end e): the record's byte count, or -1. */
static long long record_len(const char **p, const char *e) {
    long long n = 0;
    const char *q = *p;
    if (q == e || *q < '0' || *q > '9') return -1;
    while (q < e && *q >= '0' && *q <= '9' && n <= (1LL << 40)) n = n * 10 + (*q++ - '0');
    if (q == e || *q != '\n' || n > (long long)(e - q - 1)) return -1;
    *p = q + 1;
    return n;
}

static int tokenize_batch(const char *model, int bos, int special) {
    size_t len;
    char *in = read_stdin(&len);
    if (!in) {
        fprintf(stderr, "uvllm: tokenize: cannot read stdin\n");
        return 1;
    }
    ul_model_t *m = load(model);
    int rc = m ? 0 : 1;
    const char *p = in, *e = in + len;
    for (long n = 1; m && !rc && p < e; n++) {
        long long l = record_len(&p, e);
        if (l < 0) {
            fprintf(stderr,
                    "uvllm: tokenize: --batch record %ld: want a byte count, a newline "
                    "and that many bytes\n",
                    n);
            rc = 1;
            break;
        }
        rc = print_ids(m->vocab, p, (size_t)l, bos, special);
        p += l;
    }
    ul_model_free(m);
    free(in);
    return rc;
}

/* The options tokenize and detokenize both take. */
typedef struct {
    const char *model;
    int special, batch, help;
} opts_t;

/* Reads argv[*i] when it is one of the common options (and *i past its value): 1, else 0. */
static int common_opt(int argc, char **argv, int *i, opts_t *o) {
    const char *a = argv[*i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h"))
        o->help = 1;
    else if ((!strcmp(a, "--model") || !strcmp(a, "-m")) && *i + 1 < argc)
        o->model = argv[++*i];
    else if (!strcmp(a, "--special"))
        o->special = 1;
    else if (!strcmp(a, "--batch"))
        o->batch = 1;
    else
        return 0;
    return 1;
}

int ul_cmd_tokenize(int argc, char **argv) {
    opts_t o = {0};
    const char *text = NULL;
    int bos = 1;
    for (int i = 1; i < argc && !o.help; i++) {
        if (common_opt(argc, argv, &i, &o)) {
            continue;
        } else if (!strcmp(argv[i], "--no-bos")) {
            bos = 0;
        } else if (!text && (argv[i][0] != '-' || !strcmp(argv[i], "-") || argv[i][1] == 0)) {
            text = argv[i];
        } else if (!text && !strcmp(argv[i], "--") && i + 1 < argc) {
            text = argv[++i];
        } else {
            return tok_usage(stderr, 2);
        }
    }
    if (o.help) return tok_usage(stdout, 0);
    if (!o.model || !text == !o.batch) return tok_usage(stderr, 2);
    const char *model = o.model;
    int special = o.special;
    if (o.batch) return tokenize_batch(model, bos, special);
    size_t len = strlen(text);
    char *buf = NULL;
    if (!strcmp(text, "-")) {
        if (!(buf = read_stdin(&len))) {
            fprintf(stderr, "uvllm: tokenize: cannot read stdin\n");
            return 1;
        }
        text = buf;
    }
    ul_model_t *m = load(model);
    int rc = m ? print_ids(m->vocab, text, len, bos, special) : 1;
    ul_model_free(m);
    free(buf);
    return rc;
}

static int parse_id(const char *s, int32_t n_vocab, int32_t *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < 0 || v >= n_vocab) return UL_EINVAL;
    *out = (int32_t)v;
    return 0;
}

/* Appends the bytes of the n token ids (decimal strings) ids[] to *out; 1 with a message
 * on a bad id. */
static int detok_ids(const ul_vocab_t *v, char **ids, int n_ids, int special, ul_buf_t *out) {
    /* Like llama_detokenize: the space SPM put in front of the text is dropped again. */
    char buf[4096];
    for (int i = 0; i < n_ids; i++) {
        int32_t id;
        if (parse_id(ids[i], ul_vocab_n_tokens(v), &id)) {
            fprintf(stderr, "uvllm: detokenize: bad token id '%s'\n", ids[i]);
            return 1;
        }
        int n = ul_token_to_piece(v, id, special, buf, sizeof buf);
        if (n < 0) {
            fprintf(stderr, "uvllm: detokenize: token %d too long\n", id);
            return 1;
        }
        const char *p = buf;
        if (i == 0 && ul_vocab_adds_space_prefix(v) && n > 0 && p[0] == ' ') p++, n--;
        if (ul_buf_append(out, p, (size_t)n)) {
            fprintf(stderr, "uvllm: detokenize: out of memory\n");
            return 1;
        }
    }
    return 0;
}

/* --batch: each line of stdin is one text's ids; prints "LEN\n" and the bytes for each. */
static int detokenize_batch(const ul_vocab_t *v, int special) {
    size_t len;
    char *in = read_stdin(&len);
    if (!in) {
        fprintf(stderr, "uvllm: detokenize: cannot read stdin\n");
        return 1;
    }
    int rc = 0, cap = 0;
    char **ids = NULL;
    ul_buf_t out = {0};
    for (char *line = in, *e = in + len; !rc && line < e;) {
        char *nl = memchr(line, '\n', (size_t)(e - line));
        if (!nl) { /* a last line without its newline */
            fprintf(stderr, "uvllm: detokenize: --batch input must end with a newline\n");
            rc = 1;
            break;
        }
        *nl = 0;
        int n = 0;
        for (char *save, *t = strtok_r(line, " \t\r", &save); t;
             t = strtok_r(NULL, " \t\r", &save)) {
            if (n == cap) {
                char **p = realloc(ids, sizeof *ids * (size_t)(cap = cap ? cap * 2 : 64));
                if (!p) {
                    rc = 1;
                    break;
                }
                ids = p;
            }
            ids[n++] = t;
        }
        out.len = 0;
        if (!rc) rc = detok_ids(v, ids, n, special, &out);
        if (!rc) {
            printf("%zu\n", out.len);
            if (out.len) fwrite(out.p, 1, out.len, stdout);
        }
        line = nl + 1;
    }
    ul_buf_free(&out);
    free(ids);
    free(in);
    return rc;
}

int ul_cmd_detokenize(int argc, char **argv) {
    opts_t o = {0};
    int first_id = 0;
    for (int i = 1; i < argc && !o.help; i++) {
        if (common_opt(argc, argv, &i, &o)) {
            continue;
        } else if (argv[i][0] != '-') {
            first_id = i;
            break;
        } else {
            return detok_usage(stderr, 2);
        }
    }
    if (o.help) return detok_usage(stdout, 0);
    if (!o.model || (o.batch && first_id)) return detok_usage(stderr, 2);
    const int special = o.special;
    ul_model_t *m = load(o.model);
    if (!m) return 1;
    int rc = 0;
    if (o.batch) {
        rc = detokenize_batch(m->vocab, special);
    } else {
        ul_buf_t out = {0};
        rc = detok_ids(m->vocab, argv + first_id, first_id ? argc - first_id : 0, special, &out);
        if (out.len) fwrite(out.p, 1, out.len, stdout);
        ul_buf_free(&out);
    }
    fflush(stdout);
    ul_model_free(m);
    return rc;
}
