/* The pseudo-token codec used with the null backend: lets the whole serving path
 * (tokenize -> schedule -> detokenize -> SSE) run without a vocabulary. A prompt is one
 * token per whitespace-separated word, token = FNV-1a(word) % n_vocab (never the eos id);
 * a generated token reads " tok<ID>", so every token yields visible, non-empty text and
 * a stream has exactly one event per generated token. */
#include <stdio.h>

#include "api/api.h"
#include "uvllm/err.h"

static int is_space(char ch) {
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v';
}

/* No special tokens and no BOS: the flags change nothing. */
static int null_tokenize(const ul_codec_t *c, const char *text, size_t len, const uint8_t *plain,
                         int add_special, int parse_special, int32_t *out, int cap) {
    int n = 0;
    size_t i = 0;
    int32_t mod = c->eos_id >= 0 ? c->n_vocab - 1 : c->n_vocab; /* eos is the last id */
    while (i < len) {
        while (i < len && is_space(text[i])) i++;
        if (i == len) break;
        uint32_t h = 2166136261u;
        while (i < len && !is_space(text[i])) {
            h = (h ^ (unsigned char)text[i++]) * 16777619u;
        }
        if (n < cap) out[n] = (int32_t)(h % (uint32_t)mod);
        n++;
    }
    return n <= cap ? n : -n;
}

static int null_piece(const ul_codec_t *c, ul_detok_t *d, int32_t id, char *out, int cap) {
    char tmp[24];
    int n = snprintf(tmp, sizeof tmp, " tok%d", (int)id);
    if (n > cap) return -n;
    for (int i = 0; i < n; i++) out[i] = tmp[i];
    return n;
}

static int null_token_piece(const ul_codec_t *c, int32_t id, int special, int lstrip, char *out,
                            int cap) {
    if (id < 0 || id >= c->n_vocab) return UL_EINVAL;
    return null_piece(c, NULL, id, out, cap);
}

static int null_flush(const ul_codec_t *c, ul_detok_t *d, char *out, int cap) { return 0; }

void ul_codec_init_null(ul_codec_t *c, int32_t n_vocab, int32_t eos_id) {
    *c = (ul_codec_t){.vocab = NULL,
                      .n_vocab = n_vocab,
                      .eos_id = eos_id,
                      .tokenize = null_tokenize,
                      .piece = null_piece,
                      .flush = null_flush,
                      .is_eog = NULL,
                      .token_piece = null_token_piece};
}
