/* `uvllm info MODEL`: loads a GGUF the way the server would (full validation, weight table,
 * vocabulary) and describes it: architecture and shapes, tensor types, vocabulary and its
 * special tokens, file size. A file without tensors (a vocabulary file) is described as
 * such. A file the server would refuse gives one line on stderr and exit status 1, so the
 * command doubles as a pre-flight check for deployments. */
#include <stdio.h>
#include <string.h>

#include "cmd/cmd.h"
#include "model/model.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

static void usage(FILE *f) {
    fprintf(f, "usage: uvllm info [--kv] [--verbose] MODEL.gguf\n"
               "  --kv       also list every metadata key\n"
               "  --verbose  show the loader's warnings\n");
}

/* Prints a string from the file with control bytes escaped (names are not trusted). */
static void put_str(const char *p, uint64_t len, uint64_t max) {
    for (uint64_t i = 0; i < len && i < max; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c < 0x20 || c == 0x7f)
            printf("\\x%02x", c);
        else
            putchar(c);
    }
    if (len > max) printf("...");
}

static void put_token(const ul_gguf_t *g, int64_t id) {
    const ul_gguf_kv_t *kv = ul_gguf_find(g, "tokenizer.ggml.tokens");
    ul_gguf_iter_t it;
    ul_str_t s;
    if (!kv || ul_gguf_arr_iter(kv, &it)) return;
    for (int64_t i = 0; ul_gguf_iter_next_str(&it, &s); i++)
        if (i == id) {
            printf(" '");
            put_str(s.ptr, s.len, 40);
            printf("'");
            return;
        }
}

static void print_specials(const ul_model_t *m) {
    static const char *names[] = {"bos", "eos", "eot", "eom", "unknown", "padding", "seperator"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char key[64];
        snprintf(key, sizeof key, "tokenizer.ggml.%s_token_id", names[i]);
        uint32_t id;
        if (ul_gguf_get_u32(&m->gguf, key, &id)) continue;
        if ((int64_t)id >= m->hp.n_vocab) continue; /* llama.cpp writes -1 for "none" */
        printf("  %-16s %u", names[i], id);
        put_token(&m->gguf, id);
        printf("\n");
    }
    int b;
    if (!ul_gguf_get_bool(&m->gguf, "tokenizer.ggml.add_bos_token", &b))
        printf("  %-16s %s\n", "add_bos", b ? "yes" : "no");
    if (!ul_gguf_get_bool(&m->gguf, "tokenizer.ggml.add_eos_token", &b))
        printf("  %-16s %s\n", "add_eos", b ? "yes" : "no");
}

static void print_vocab(const ul_model_t *m) {
    ul_str_t s;
    printf("vocabulary\n  %-16s ", "type");
    if (!ul_gguf_get_str(&m->gguf, "tokenizer.ggml.model", &s))
        put_str(s.ptr, s.len, 64);
    else
        printf("(none)");
    if (!ul_gguf_get_str(&m->gguf, "tokenizer.ggml.pre", &s)) {
        printf(" (pre ");
        put_str(s.ptr, s.len, 64);
        printf(")");
    }
    printf("\n  %-16s %d\n", "size", m->hp.n_vocab);
    print_specials(m);
}

static void print_shapes(const ul_model_t *m) {
    const ul_hparams_t *hp = &m->hp;
    printf("shapes\n");
    printf("  %-16s %d\n  %-16s %d\n  %-16s %d\n  %-16s %d\n", "n_vocab", hp->n_vocab,
           "n_ctx_train", hp->n_ctx_train, "n_embd", hp->n_embd, "n_layer", hp->n_layer);
    printf("  %-16s %d\n  %-16s %d\n  %-16s %d\n  %-16s %d\n  %-16s %d\n", "n_head", hp->n_head,
           "n_head_kv", hp->n_head_kv, "n_ff", hp->n_ff, "head_dim", hp->head_dim, "n_rot",
           hp->n_rot);
    printf("  %-16s %g\n  %-16s %g\n  %-16s %g\n", "rope_freq_base", hp->rope_freq_base,
           "rope_freq_scale", hp->rope_freq_scale, "rms_eps", hp->rms_eps);
    if (hp->n_expert)
        printf("  %-16s %d (%d used per token, n_ff %d)\n", "experts", hp->n_expert,
               hp->n_expert_used, hp->n_ff_exp);
}

static void print_tensors(const ul_model_t *m) {
    const ul_gguf_t *g = &m->gguf;
    uint64_t count[UL_TYPE_COUNT] = {0}, bytes = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        count[g->tensors[i].type]++; /* validated: type < UL_TYPE_COUNT */
        bytes += g->tensors[i].nbytes;
    }
    printf("tensors\n  %-16s %llu (%.2f MiB)\n", "count", (unsigned long long)g->n_tensors,
           (double)bytes / (1 << 20));
    for (int t = 0; t < UL_TYPE_COUNT; t++)
        if (count[t]) printf("  %-16s %llu\n", ul_type_name(t), (unsigned long long)count[t]);
    if (m->layers)
        printf("  %-16s %s\n", "output",
               m->output == m->tok_embd ? "tied to token_embd" : "separate output.weight");
}

static void print_kv(const ul_gguf_t *g) {
    printf("metadata\n");
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const ul_gguf_kv_t *kv = &g->kv[i];
        printf("  ");
        put_str(kv->key.ptr, kv->key.len, 128);
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)(kv->key.len < 255 ? kv->key.len : 255),
                 kv->key.ptr);
        int64_t iv;
        float fv;
        int bv;
        ul_str_t s;
        if (kv->type == UL_GGUF_ARRAY)
            printf(" = [%llu elements]", (unsigned long long)kv->n);
        else if (!ul_gguf_get_str(g, key, &s))
            printf(" = \""), put_str(s.ptr, s.len, 80), printf("\"");
        else if (!ul_gguf_get_i64(g, key, &iv))
            printf(" = %lld", (long long)iv);
        else if (!ul_gguf_get_f32(g, key, &fv))
            printf(" = %g", fv);
        else if (!ul_gguf_get_bool(g, key, &bv))
            printf(" = %s", bv ? "true" : "false");
        else if (kv->type == UL_GGUF_UINT64)
            printf(" = (u64 above int64)");
        printf("\n");
    }
}

int ul_cmd_info(int argc, char **argv) {
    const char *path = NULL;
    int show_kv = 0, verbose = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--kv")) {
            show_kv = 1;
        } else if (!strcmp(argv[i], "--verbose")) {
            verbose = 1;
        } else if (argv[i][0] == '-' || path) {
            usage(stderr);
            return 2;
        } else {
            path = argv[i];
        }
    }
    if (!path) {
        usage(stderr);
        return 2;
    }
    /* A file without tensors can only be a vocabulary; anything else must be a whole
     * model, checked exactly as `serve` would check it. */
    /* The verdict is the one line printed below; loader warnings would make it several. */
    if (!verbose && ul_log_get_level() < UL_LOG_LEVEL_ERROR) ul_log_set_level(UL_LOG_LEVEL_ERROR);
    ul_gguf_t probe;
    int vocab_only = 0;
    char err[512] = "";
    int rc = ul_gguf_open(&probe, path);
    if (!rc) {
        vocab_only = probe.n_tensors == 0;
        ul_gguf_free(&probe);
    }
    ul_model_t *m = NULL;
    if (!rc) rc = ul_model_load(path, vocab_only, &m, err, sizeof err);
    if (rc) {
        fprintf(stderr, "uvllm: %s: %s\n", path, err[0] ? err : probe.err);
        return 1;
    }
    printf("file\n  %-16s %s\n  %-16s %zu bytes (%.2f MiB), GGUF v%u, alignment %llu\n", "path",
           path, "size", m->gguf.size, (double)m->gguf.size / (1 << 20), m->gguf.version,
           (unsigned long long)m->gguf.alignment);
    printf("  %-16s %s%s\n", "architecture", m->hp.arch, vocab_only ? " (vocabulary only)" : "");
    ul_str_t s;
    if (!ul_gguf_get_str(&m->gguf, "general.name", &s)) {
        printf("  %-16s ", "name");
        put_str(s.ptr, s.len, 80);
        printf("\n");
    }
    if (!vocab_only) print_shapes(m);
    print_tensors(m);
    print_vocab(m);
    if (show_kv) print_kv(&m->gguf);
    ul_model_free(m);
    return 0;
}
