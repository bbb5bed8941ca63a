/* The vocabulary codec: a real model's tokenizer and streaming detokenizer (model/vocab.h)
 * behind the api's codec table. Kept in its own file so that only a binary serving a real
 * model links the tokenizer. Text is tokenized with add_special (BOS as the model asks);
 * control tokens only where the caller allows (parse_special) and the bytes are not marked
 * plain (a chat message's content). */
#include <string.h>

#include "api/api.h"
#include "uvllm/err.h"

static int vocab_tokenize(const ul_codec_t *c, const char *text, size_t len, const uint8_t *plain,
                          int add_special, int parse_special, int32_t *out, int cap) {
    return ul_tokenize_plain(c->vocab, text, len, plain, add_special, parse_special, out, cap);
}

static int vocab_piece(const ul_codec_t *c, ul_detok_t *d, int32_t id, char *out, int cap) {
    return ul_detok_push(d, c->vocab, id, out, cap);
}

static int vocab_flush(const ul_codec_t *c, ul_detok_t *d, char *out, int cap) {
    return ul_detok_flush(d, out, cap);
}

static void vocab_detok_init(const ul_codec_t *c, ul_detok_t *d) { ul_detok_init(d); }

/* llama.cpp's token_to_piece with lstrip: only the first piece of a text loses the space
 * SPM put in front of it. */
static int vocab_token_piece(const ul_codec_t *c, int32_t id, int special, int lstrip, char *out,
                             int cap) {
    if (id < 0 || id >= c->n_vocab) return UL_EINVAL;
    int n = ul_token_to_piece(c->vocab, id, special, out, cap);
    if (n > 0 && lstrip && out[0] == ' ' && ul_vocab_adds_space_prefix(c->vocab)) {
        memmove(out, out + 1, (size_t)n - 1);
        n--;
    }
    return n; /* < 0: -(needed), the room the piece takes before the strip */
}

static int vocab_is_eog(void *ctx, int32_t id) { return ul_vocab_is_eog(ctx, id); }

static int vocab_join_pair(const ul_codec_t *c, const int32_t *a, int na, const int32_t *b, int nb,
                           int32_t *out, int cap) {
    return ul_vocab_join_pair(c->vocab, a, na, b, nb, out, cap);
}

void ul_codec_init_vocab(ul_codec_t *c, const ul_vocab_t *v) {
    *c = (ul_codec_t){.vocab = v,
                      .n_vocab = ul_vocab_n_tokens(v),
                      .eos_id = ul_vocab_eos(v),
                      .tokenize = vocab_tokenize,
                      .detok_init = vocab_detok_init,
                      .piece = vocab_piece,
                      .flush = vocab_flush,
                      .is_eog = vocab_is_eog,
                      .token_piece = vocab_token_piece,
                      .join_pair = vocab_join_pair};
}
