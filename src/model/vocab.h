/* Tokenizers read from GGUF metadata: SentencePiece-style (`llama`) and byte-level BPE
 * (`gpt2` with the pre-tokenizer named by tokenizer.ggml.pre). Results must equal
 * llama.cpp's token for token. Thread-safe for concurrent tokenize calls. */
#ifndef UL_MODEL_VOCAB_H
#define UL_MODEL_VOCAB_H

#include <stddef.h>
#include <stdint.h>

#include "model/gguf.h"

typedef struct ul_vocab_s ul_vocab_t;

int ul_vocab_load(const ul_gguf_t *g, ul_vocab_t **out, char *err, size_t errlen);
void ul_vocab_free(ul_vocab_t *v);

int32_t ul_vocab_n_tokens(const ul_vocab_t *v);
int32_t ul_vocab_bos(const ul_vocab_t *v); /* -1 if none */
int32_t ul_vocab_eos(const ul_vocab_t *v); /* -1 if none */
/* 1 if id ends generation (eos, eot, eom...). */
int ul_vocab_is_eog(const ul_vocab_t *v, int32_t id);
/* Whether tokenize with add_special adds BOS / EOS (metadata or llama.cpp's defaults). */
int ul_vocab_adds_bos(const ul_vocab_t *v);
int ul_vocab_adds_eos(const ul_vocab_t *v);
/* 1 if tokenizing puts a space before the text (SPM): detokenizers drop it again. */
int ul_vocab_adds_space_prefix(const ul_vocab_t *v);
/* Two texts' ids (tokenized without specials) as one input of a cross-encoder, as
 * llama-server's format_prompt_rerank joins a query and a document: [BOS] a [EOS] [SEP] b
 * [EOS], each special as the vocabulary's add_bos / add_eos / add_sep say (EOS falling back
 * to SEP; BERT's converted GGUFs: [CLS] a [SEP] b [SEP]). Writes up to cap ids; returns the
 * count, -(needed) when cap is too small, or UL_ENOMEM. */
int ul_vocab_join_pair(const ul_vocab_t *v, const int32_t *a, int na, const int32_t *b, int nb,
                       int32_t *out, int cap);
/* Looks up the id of an exact token text; -1 if absent. */
int32_t ul_vocab_find(const ul_vocab_t *v, const char *text, size_t len);

/* Tokenizes len bytes of text. add_special: add BOS/EOS as the vocabulary asks.
 * parse_special: recognise special/control token texts (chat templates only, never user
 * text). Writes up to cap ids; returns the number of ids, or -(needed) when cap is too
 * small, or UL_ENOMEM. */
int ul_tokenize(const ul_vocab_t *v, const char *text, size_t len, int add_special,
                int parse_special, int32_t *out, int cap);

/* ul_tokenize with parse_special for the bytes of a chat template's own text only:
 * plain[i] != 0 marks byte i as request text (a message's content), where a control
 * token's text is plain text, so a user cannot forge a turn boundary. plain: len bytes,
 * or NULL (then this is ul_tokenize). */
int ul_tokenize_plain(const ul_vocab_t *v, const char *text, size_t len, const uint8_t *plain,
                      int add_special, int parse_special, int32_t *out, int cap);

/* The bytes of one token (byte-fallback and byte-level BPE decoded, SPM's U+2581 -> ' ').
 * Control tokens give "" unless special. Returns bytes written, or -(needed). */
int ul_token_to_piece(const ul_vocab_t *v, int32_t id, int special, char *buf, int cap);

/* Streaming detokenizer: feeds ids one at a time, emits only complete UTF-8 sequences. */
typedef struct ul_detok_s {
    unsigned char pending[8];
    int n_pending;
    int first; /* strip SPM's leading space of the first piece when asked */
} ul_detok_t;
void ul_detok_init(ul_detok_t *d);
/* Appends the bytes that became complete to out (cap bytes); returns bytes written or
 * -(needed). Bytes that can never be valid are emitted as U+FFFD. */
int ul_detok_push(ul_detok_t *d, const ul_vocab_t *v, int32_t id, char *out, int cap);
/* At end of stream: remaining incomplete bytes become U+FFFD. */
int ul_detok_flush(ul_detok_t *d, char *out, int cap);

#endif
