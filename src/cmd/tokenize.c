/* `uvllm tokenize` and `uvllm detokenize`: the tokenizer from the command line, with an
 * output other tools parse: token ids space-separated on one line, or the exact bytes of
 * the pieces with no newline added. The model is loaded vocabulary-only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cmd.h"
#include "model/model.h"
#include "uvllm/err.h"

static void tok_usage(FILE *f) {
    fprintf(f, "usage: uvllm tokenize --model MODEL.gguf [--no-bos] [--special] TEXT\n"
               "  prints the token ids of TEXT ('-' reads stdin) on one line\n"
               "  --no-bos   add neither BOS nor EOS (default: what the vocabulary asks)\n"
               "  --special  recognise special token texts such as <|im_start|>\n");
}

static void detok_usage(FILE *f) {
    fprintf(f, "usage: uvllm detokenize --model MODEL.gguf [--special] ID...\n"
               "  prints the bytes of the tokens, no newline added\n"
               "  --special  print the text of control tokens too\n");
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

int ul_cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *text = NULL;
    int bos = 1, special = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            tok_usage(stdout);
            return 0;
        } else if ((!strcmp(argv[i], "--model") || !strcmp(argv[i], "-m")) && i + 1 < argc) {
            model = argv[++i];
        } else if (!strcmp(argv[i], "--no-bos")) {
            bos = 0;
        } else if (!strcmp(argv[i], "--special")) {
            special = 1;
        } else if (!text && (argv[i][0] != '-' || !strcmp(argv[i], "-") || argv[i][1] == 0)) {
            text = argv[i];
        } else if (!text && !strcmp(argv[i], "--") && i + 1 < argc) {
            text = argv[++i];
        } else {
            tok_usage(stderr);
            return 2;
        }
    }
    if (!model || !text) {
        tok_usage(stderr);
        return 2;
    }
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

int ul_cmd_detokenize(int argc, char **argv) {
    const char *model = NULL;
    int special = 0, first_id = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            detok_usage(stdout);
            return 0;
        } else if ((!strcmp(argv[i], "--model") || !strcmp(argv[i], "-m")) && i + 1 < argc) {
            model = argv[++i];
        } else if (!strcmp(argv[i], "--special")) {
            special = 1;
        } else if (argv[i][0] != '-') {
            first_id = i;
            break;
        } else {
            detok_usage(stderr);
            return 2;
        }
    }
    if (!model) {
        detok_usage(stderr);
        return 2;
    }
    ul_model_t *m = load(model);
    if (!m) return 1;
    const ul_vocab_t *v = m->vocab;
    int rc = 0;
    /* Like llama_detokenize: the space SPM put in front of the text is dropped again. */
    char buf[4096];
    for (int i = first_id; first_id && i < argc && !rc; i++) {
        int32_t id;
        if (parse_id(argv[i], ul_vocab_n_tokens(v), &id)) {
            fprintf(stderr, "uvllm: detokenize: bad token id '%s'\n", argv[i]);
            rc = 1;
            break;
        }
        int n = ul_token_to_piece(v, id, special, buf, sizeof buf);
        if (n < 0) {
            fprintf(stderr, "uvllm: detokenize: token %d too long\n", id);
            rc = 1;
            break;
        }
        const char *p = buf;
        if (i == first_id && ul_vocab_adds_space_prefix(v) && n > 0 && p[0] == ' ') p++, n--;
        fwrite(p, 1, (size_t)n, stdout);
    }
    fflush(stdout);
    ul_model_free(m);
    return rc;
}
