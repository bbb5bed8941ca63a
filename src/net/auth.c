/* Bearer-token authentication: a set of secret keys and the constant-time check of a
 * request's "Authorization: Bearer <token>" against it. The comparison must not tell an
 * attacker, through its timing, how long a key is or how many leading bytes of a guess
 * were right: each key is stored zero-padded to UL_HTTP_KEY_MAX bytes, the token is
 * copied into a buffer of the same size, and every check XORs all UL_HTTP_KEY_MAX bytes of
 * every key (plus the lengths) with no branch on the data. Keys never reach a log line. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "net/http.h"
#include "uvllm/err.h"

int ul_http_keys_add(ul_http_keys_t *k, const char *key, size_t len) {
    if (!key || len == 0 || len > UL_HTTP_KEY_MAX) return UL_EINVAL;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)key[i] < 0x21 || (unsigned char)key[i] > 0x7e) return UL_EINVAL;
    if (k->n == k->cap) {
        size_t cap = k->cap ? k->cap * 2 : 4;
        void *nk = realloc(k->key, cap * sizeof *k->key);
        if (!nk) return UL_ENOMEM;
        k->key = nk;
        size_t *nl = realloc(k->len, cap * sizeof *k->len);
        if (!nl) return UL_ENOMEM;
        k->len = nl;
        k->cap = cap;
    }
    memset(k->key[k->n], 0, UL_HTTP_KEY_MAX);
    memcpy(k->key[k->n], key, len);
    k->len[k->n++] = len;
    return 0;
}

void ul_http_keys_free(ul_http_keys_t *k) {
    if (k->key) memset(k->key, 0, k->cap * sizeof *k->key); /* no secrets left in freed memory */
    free(k->key);
    free(k->len);
    memset(k, 0, sizeof *k);
}

/* The difference of one key and the padded token: 0 only when they are equal. */
static unsigned key_diff(const unsigned char *key, size_t key_len, const unsigned char *tok,
                         size_t tok_len) {
    unsigned acc = (unsigned)(key_len ^ tok_len);
    acc |= (unsigned)((key_len ^ tok_len) >> 16 >> 16); /* the high half of a 64-bit size_t */
    for (size_t i = 0; i < UL_HTTP_KEY_MAX; i++) {
        acc |= (unsigned)(key[i] ^ tok[i]);
        /* keep the compiler from turning the loop into an early-exit memcmp */
        __asm__ volatile("" : "+r"(acc));
    }
    return acc;
}

int ul_http_keys_match(const ul_http_keys_t *k, const char *token, size_t len) {
    unsigned char tok[UL_HTTP_KEY_MAX] = {0};
    /* A token longer than any key cannot match; its length already differs, so the copy
     * may stop at the buffer's size (the token is the client's, not a secret). */
    memcpy(tok, token, len < UL_HTTP_KEY_MAX ? len : UL_HTTP_KEY_MAX);
    unsigned match = 0;
    for (size_t i = 0; i < k->n; i++) {
        unsigned d = key_diff(k->key[i], k->len[i], tok, len);
        match |= (unsigned)((d | (0u - d)) >> (sizeof d * 8 - 1)) ^ 1u; /* 1 when d == 0 */
    }
    memset(tok, 0, sizeof tok);
    __asm__ volatile("" : : "r"(tok) : "memory");
    return (int)match;
}

int ul_http_keys_check(const ul_http_keys_t *k, const ul_http_req_t *req) {
    const ul_http_header_t *h = ul_http_req_header(req, "authorization");
    if (!h || h->value_len < 7 || strncasecmp(h->value, "Bearer ", 7) != 0) return 0;
    const char *t = h->value + 7;
    size_t n = h->value_len - 7;
    while (n && (*t == ' ' || *t == '\t')) t++, n--;
    return n > 0 && ul_http_keys_match(k, t, n);
}

int ul_http_respond_unauthorized(ul_http_req_t *req) {
    ul_http_resp_header(req, "WWW-Authenticate", "Bearer");
    return ul_http_respond_error(req, 401, "invalid_request_error", "invalid_api_key",
                                 "Incorrect API key provided");
}
