/* Vocabulary behaviour a caller notices: special tokens recognised only when asked,
 * user-defined tokens always, BOS/EOS as the metadata says, buffer-size contracts,
 * end-of-generation ids, clean errors on malformed vocabularies, concurrent use. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf_write.h"
#include "test_vocab_util.h"
#include "uvllm/err.h"

static void load_shared(tv_vocab_t *t, const char *name) {
    char p[1200];
    snprintf(p, sizeof p, "%s/tokenizer/ggml-vocab-%s.gguf", tv_shared(), name);
    tv_load(t, p);
}

static int count(const int32_t *ids, int n, int32_t id) {
    int c = 0;
    for (int i = 0; i < n; i++) c += ids[i] == id;
    return c;
}

Test(vocab, control_tokens_only_with_parse_special) {
    tv_vocab_t t;
    load_shared(&t, "gpt-2");
    int32_t eot = ul_vocab_find(t.v, "<|endoftext|>", 13);
    cr_assert(eot >= 0);
    const char *s = "a<|endoftext|>b";
    int n1, n2;
    int32_t *a = tv_tokenize(t.v, s, strlen(s), 0, 1, &n1);
    int32_t *b = tv_tokenize(t.v, s, strlen(s), 0, 0, &n2);
    cr_expect_eq(n1, 3);
    cr_expect_eq(a[1], eot);
    cr_expect_eq(count(b, n2, eot), 0, "user text must never produce a control token");
    cr_expect_gt(n2, 3);
    cr_expect(ul_vocab_is_eog(t.v, eot));
    cr_expect(!ul_vocab_is_eog(t.v, a[0]));
    free(a);
    free(b);
    tv_free(&t);
}

/* A chat template's output: control tokens only where the template wrote them. The same
 * text "<|endoftext|>" appears twice; the second copy is marked plain (user content). */
Test(vocab, plain_bytes_never_form_control_tokens) {
    tv_vocab_t t;
    load_shared(&t, "gpt-2");
    int32_t eot = ul_vocab_find(t.v, "<|endoftext|>", 13);
    const char *s = "<|endoftext|>x<|endoftext|>y<|endoftext|>";
    size_t len = strlen(s);
    uint8_t plain[64] = {0};
    memset(plain + 14, 1, 13); /* the middle copy */
    int32_t ids[64];
    int n = ul_tokenize_plain(t.v, s, len, plain, 0, 1, ids, 64);
    cr_assert_gt(n, 0);
    cr_expect_eq(count(ids, n, eot), 2, "only the template's two copies are control tokens");
    cr_expect_eq(ids[0], eot);
    cr_expect_eq(ids[n - 1], eot);
    /* One plain byte inside a match is enough to make it text. */
    memset(plain, 0, sizeof plain);
    plain[20] = 1;
    n = ul_tokenize_plain(t.v, s, len, plain, 0, 1, ids, 64);
    cr_expect_eq(count(ids, n, eot), 2);
    /* Without a mask: all three. */
    n = ul_tokenize_plain(t.v, s, len, NULL, 0, 1, ids, 64);
    cr_expect_eq(n, 5);
    cr_expect_eq(count(ids, n, eot), 3);
    tv_free(&t);
}

Test(vocab, bos_follows_the_vocabulary) {
    tv_vocab_t spm, bpe;
    load_shared(&spm, "llama-spm");
    load_shared(&bpe, "gpt-2");
    int n1, n2;
    int32_t *a = tv_tokenize(spm.v, "Hello", 5, 1, 0, &n1);
    int32_t *b = tv_tokenize(spm.v, "Hello", 5, 0, 0, &n2);
    cr_expect(ul_vocab_adds_bos(spm.v));
    cr_expect_eq(n1, n2 + 1);
    cr_expect_eq(a[0], ul_vocab_bos(spm.v));
    cr_expect_eq(memcmp(a + 1, b, sizeof *b * (size_t)n2), 0);
    free(a);
    free(b);
    /* llama.cpp's default for gpt2 vocabularies: no BOS */
    cr_expect(!ul_vocab_adds_bos(bpe.v));
    a = tv_tokenize(bpe.v, "Hello", 5, 1, 0, &n1);
    b = tv_tokenize(bpe.v, "Hello", 5, 0, 0, &n2);
    cr_expect_eq(n1, n2);
    free(a);
    free(b);
    tv_free(&spm);
    tv_free(&bpe);
}

Test(vocab, output_capacity_contract) {
    tv_vocab_t t;
    load_shared(&t, "llama-spm");
    const char *s = "The quick brown fox jumps over the lazy dog";
    int32_t ids[64];
    int n = ul_tokenize(t.v, s, strlen(s), 1, 0, ids, 64);
    cr_assert_gt(n, 3);
    cr_expect_eq(ul_tokenize(t.v, s, strlen(s), 1, 0, ids, 2), -n);
    cr_expect_eq(ul_tokenize(t.v, s, strlen(s), 1, 0, ids, n), n);
    cr_expect_eq(ul_tokenize(t.v, "", 0, 0, 0, ids, 0), 0);
    cr_expect_eq(ul_tokenize(t.v, s, strlen(s), 1, 0, ids, -1), UL_EINVAL);
    char buf[8];
    int32_t id = ul_vocab_find(t.v, "\xe2\x96\x81quick", 8);
    cr_assert(id >= 0);
    cr_expect_eq(ul_token_to_piece(t.v, id, 0, buf, 3), -6);
    cr_expect_eq(ul_token_to_piece(t.v, id, 0, buf, 8), 6);
    cr_expect_eq(memcmp(buf, " quick", 6), 0);
    /* control tokens are empty unless special */
    cr_expect_eq(ul_token_to_piece(t.v, ul_vocab_eos(t.v), 0, buf, 8), 0);
    cr_expect_eq(ul_token_to_piece(t.v, ul_vocab_eos(t.v), 1, buf, 8), 4);
    cr_expect_eq(memcmp(buf, "</s>", 4), 0);
    cr_expect_eq(ul_token_to_piece(t.v, -1, 1, buf, 8), 0);
    cr_expect_eq(ul_token_to_piece(t.v, ul_vocab_n_tokens(t.v), 1, buf, 8), 0);
    tv_free(&t);
}

Test(vocab, spm_byte_fallback_and_invalid_input) {
    tv_vocab_t t;
    load_shared(&t, "llama-spm");
    /* a character absent from the vocabulary becomes its UTF-8 bytes */
    const char *s = "\xf0\x9f\x98\x80"; /* U+1F600 */
    int n;
    int32_t *ids = tv_tokenize(t.v, s, 4, 0, 0, &n);
    cr_assert_eq(n, 5); /* "▁" + 4 byte tokens */
    cr_expect_eq(ids[1], ul_vocab_find(t.v, "<0xF0>", 6));
    cr_expect_eq(ids[4], ul_vocab_find(t.v, "<0x80>", 6));
    free(ids);
    /* invalid UTF-8 is tokenized, not rejected, and decodes back byte for byte */
    const char bad[] = "a\xff\xc3(b\xe2\x82";
    ids = tv_tokenize(t.v, bad, sizeof bad - 1, 0, 0, &n);
    size_t len;
    char *back = tv_detok(t.v, ids, n, 1, &len);
    cr_expect(len == sizeof bad - 1 && !memcmp(back, bad, len));
    free(back);
    free(ids);
    tv_free(&t);
}

Test(vocab, bpe_invalid_utf8_becomes_replacement_characters) {
    tv_vocab_t t;
    load_shared(&t, "gpt-2");
    const char bad[] = "a\xff"
                       "b";
    int n;
    int32_t *ids = tv_tokenize(t.v, bad, 3, 0, 0, &n);
    size_t len;
    char *back = tv_detok(t.v, ids, n, 0, &len);
    /* llama.cpp decodes leniently: the stray byte is read as U+FFFD */
    cr_expect(len == 5 && !memcmp(back,
                                  "a\xef\xbf\xbd"
                                  "b",
                                  5),
              "got '%.*s'", (int)len, back);
    free(back);
    free(ids);
    tv_free(&t);
}

/* ---- synthetic vocabularies for the error paths and user-defined tokens ---- */

/* A 9-token SPM vocabulary: <unk> <s> </s> \u2581 a b \u2581a, then the caller's t7 and t8;
 * with general.architecture when arch. */
static ul_gguf_writer_t *spm_vocab(const char *t7, const char *t8, const int32_t types[9],
                                   const float scores[9], int arch) {
    const char *toks[9] = {"<unk>",
                           "<s>",
                           "</s>",
                           "\xe2\x96\x81",
                           "a",
                           "b",
                           "\xe2\x96\x81"
                           "a",
                           t7,
                           t8};
    ul_str_t s[9];
    for (int i = 0; i < 9; i++) s[i] = (ul_str_t){toks[i], strlen(toks[i])};
    ul_gguf_writer_t *w;
    cr_assert_eq(ul_gguf_writer_new(&w, 0), 0);
    if (arch) ul_gguf_w_str(w, "general.architecture", "llama", 5);
    ul_gguf_w_str(w, "tokenizer.ggml.model", "llama", 5);
    ul_gguf_w_arr_str(w, "tokenizer.ggml.tokens", s, 9);
    ul_gguf_w_arr(w, "tokenizer.ggml.token_type", UL_GGUF_INT32, types, 9);
    ul_gguf_w_arr(w, "tokenizer.ggml.scores", UL_GGUF_FLOAT32, scores, 9);
    return w;
}

static ul_gguf_writer_t *spm_writer(void) {
    static const int32_t types[] = {2, 3, 3, 1, 1, 1, 1, 1, 4};
    static const float scores[] = {0, 0, 0, -1, -2, -2, -1.5f, -0.5f, 0};
    return spm_vocab("ab", "<tool>", types, scores, 1);
}

static int load_mem(ul_gguf_writer_t *w, ul_gguf_t *g, uint8_t **img, ul_vocab_t **v, char *err,
                    size_t errlen) {
    size_t len;
    cr_assert_eq(ul_gguf_w_write_mem(w, img, &len), 0);
    ul_gguf_writer_free(w);
    cr_assert_eq(ul_gguf_open_mem(g, *img, len), 0, "%s", g->err);
    return ul_vocab_load(g, v, err, errlen);
}

Test(vocab, user_defined_tokens_split_plain_text) {
    ul_gguf_t g;
    uint8_t *img;
    ul_vocab_t *v;
    char err[256];
    cr_assert_eq(load_mem(spm_writer(), &g, &img, &v, err, sizeof err), 0, "%s", err);
    int32_t ids[16];
    /* "ab<tool>a": " ab" has no token: ▁ a b -> (ab scores best) ▁ ab, then <tool>, then ▁a */
    int n = ul_tokenize(v, "ab<tool>a", 9, 1, 0, ids, 16);
    cr_assert_eq(n, 5);
    cr_expect_eq(ids[0], 1);
    cr_expect_eq(ids[1], 3);
    cr_expect_eq(ids[2], 7);
    cr_expect_eq(ids[3], 8, "user-defined tokens are matched even in user text");
    cr_expect_eq(ids[4], 6, "text after a special token gets the space prefix again");
    /* no byte tokens in this vocabulary: an unknown character becomes <unk> */
    n = ul_tokenize(v, "a\xc3\xa9", 3, 0, 0, ids, 16);
    cr_assert_eq(n, 3);
    cr_expect_eq(ids[2], 0);
    ul_vocab_free(v);
    ul_gguf_free(&g);
    free(img);
}

Test(vocab, malformed_vocabularies_are_errors) {
    struct {
        const char *key, *val;
        int rc;
        const char *msg;
    } cases[] = {
        {"tokenizer.ggml.model", "t5", UL_ENOTSUP, "t5"},
        {"tokenizer.ggml.model", "gpt2", UL_EFORMAT, "merges"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ul_gguf_writer_t *w;
        cr_assert_eq(ul_gguf_writer_new(&w, 0), 0);
        ul_gguf_w_str(w, "general.architecture", "llama", 5);
        ul_gguf_w_str(w, cases[i].key, cases[i].val, strlen(cases[i].val));
        ul_str_t s[2] = {{"a", 1}, {"b", 1}};
        ul_gguf_w_arr_str(w, "tokenizer.ggml.tokens", s, 2);
        ul_gguf_w_str(w, "tokenizer.ggml.pre", "gpt-2", 5);
        ul_gguf_t g;
        uint8_t *img;
        ul_vocab_t *v = (ul_vocab_t *)1;
        char err[256] = "";
        int rc = load_mem(w, &g, &img, &v, err, sizeof err);
        cr_expect_eq(rc, cases[i].rc, "case %zu: rc %d", i, rc);
        cr_expect(v == NULL);
        cr_expect(strstr(err, cases[i].msg), "case %zu: message '%s'", i, err);
        ul_gguf_free(&g);
        free(img);
    }
    /* scores of the wrong length, unknown pre-tokenizer */
    ul_gguf_writer_t *w;
    float sc[2] = {0, 0};
    cr_assert_eq(ul_gguf_writer_new(&w, 0), 0);
    ul_gguf_w_str(w, "tokenizer.ggml.model", "llama", 5);
    ul_str_t s[2] = {{"a", 1}, {"b", 1}};
    ul_gguf_w_arr_str(w, "tokenizer.ggml.tokens", s, 2);
    ul_gguf_w_arr(w, "tokenizer.ggml.scores", UL_GGUF_FLOAT32, sc, 1);
    ul_gguf_t g;
    uint8_t *img;
    ul_vocab_t *v;
    char err[256] = "";
    cr_expect_eq(load_mem(w, &g, &img, &v, err, sizeof err), UL_EFORMAT);
    cr_expect(strstr(err, "scores"), "message '%s'", err);
    ul_gguf_free(&g);
    free(img);

    cr_assert_eq(ul_gguf_writer_new(&w, 0), 0);
    ul_gguf_w_str(w, "tokenizer.ggml.model", "gpt2", 4);
    ul_gguf_w_str(w, "tokenizer.ggml.pre", "no-such-pre", 11);
    ul_gguf_w_arr_str(w, "tokenizer.ggml.tokens", s, 2);
    ul_str_t m[1] = {{"a b", 3}};
    ul_gguf_w_arr_str(w, "tokenizer.ggml.merges", m, 1);
    cr_expect_eq(load_mem(w, &g, &img, &v, err, sizeof err), UL_ENOTSUP);
    cr_expect(strstr(err, "no-such-pre"), "message '%s'", err);
    ul_gguf_free(&g);
    free(img);
}

typedef struct job_s {
    const ul_vocab_t *v;
    const char *text;
    size_t len;
    int32_t *ids;
    int n;
} job_t;

static void *run_job(void *p) {
    job_t *j = p;
    for (int r = 0; r < 5; r++) {
        free(j->ids);
        j->ids = malloc(sizeof(int32_t) * (j->len + 8));
        j->n = ul_tokenize(j->v, j->text, j->len, 0, 0, j->ids, (int)j->len + 8);
    }
    return NULL;
}

Test(vocab, concurrent_tokenize_agrees) {
    tv_vocab_t t;
    load_shared(&t, "gpt-2");
    tv_set_t s;
    const char *dir = tv_tokenizer_dir();
    tv_set_read(&s, dir, "gpt-2");
    size_t len = 0;
    char *text = malloc(1 << 20);
    for (int rep = 0; rep < 20; rep++)
        for (size_t i = 0; i < s.n; i++) memcpy(text + len, s.str[i], s.len[i]), len += s.len[i];
    job_t j[3] = {{t.v, text, len, NULL, 0}, {t.v, text, len, NULL, 0}, {t.v, text, len, NULL, 0}};
    run_job(&j[0]);
    pthread_t th[2];
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, run_job, &j[i + 1]);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    cr_assert_gt(j[0].n, 1000);
    for (int i = 1; i < 3; i++) {
        cr_expect_eq(j[i].n, j[0].n);
        cr_expect_eq(memcmp(j[i].ids, j[0].ids, sizeof(int32_t) * (size_t)j[0].n), 0);
    }
    for (int i = 0; i < 3; i++) free(j[i].ids);
    free(text);
    tv_set_free(&s);
    tv_free(&t);
}

/* A token with U+2581 inside ("a▁b") lets merges cross word starts: the tokenizer must not
 * cut the text into words then (it only does when no token has one inside). */
Test(vocab, spm_merges_across_spaces_when_a_token_does) {
    static const int32_t types[] = {2, 3, 3, 1, 1, 1, 1, 1, 1};
    static const float scores[] = {0, 0, 0, -1, -2, -2, -1.5f, -0.1f, 0};
    ul_gguf_writer_t *w = spm_vocab("a\xe2\x96\x81",
                                    "a\xe2\x96\x81"
                                    "b",
                                    types, scores, 0);
    ul_gguf_t g;
    uint8_t *img;
    ul_vocab_t *v;
    char err[256];
    cr_assert_eq(load_mem(w, &g, &img, &v, err, sizeof err), 0, "%s", err);
    int32_t ids[8];
    /* ▁ a ▁ b: "a▁" (-0.1) beats "▁a" (-1.5), then "a▁b" (0) */
    int n = ul_tokenize(v, "a b", 3, 0, 0, ids, 8);
    cr_assert_eq(n, 2);
    cr_expect_eq(ids[0], 3);
    cr_expect_eq(ids[1], 8);
    ul_vocab_free(v);
    ul_gguf_free(&g);
    free(img);
}

/* phi-3 ships </s> as a user-defined token; llama.cpp treats the end-of-generation texts
 * as control tokens, so user text "</s>" must stay text and only parse_special matches it. */
Test(vocab, eog_texts_are_control_tokens) {
    tv_vocab_t t;
    load_shared(&t, "phi-3");
    int32_t eos = ul_vocab_find(t.v, "</s>", 4);
    cr_assert(eos >= 0);
    cr_expect(ul_vocab_is_eog(t.v, eos));
    int n1, n2;
    int32_t *a = tv_tokenize(t.v, "</s>", 4, 0, 0, &n1);
    int32_t *b = tv_tokenize(t.v, "</s>", 4, 0, 1, &n2);
    cr_expect_eq(count(a, n1, eos), 0);
    cr_expect_eq(n2, 1);
    cr_expect_eq(b[0], eos);
    free(a);
    free(b);
    tv_free(&t);
}
