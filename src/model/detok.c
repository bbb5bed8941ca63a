/* Token ids back to bytes. Every token's piece is computed once at load (llama.cpp's
 * token_to_piece cache): SPM turns U+2581 into spaces and <0xXX> into the byte, BPE maps
 * the GPT-2 alphabet back to bytes, special tokens keep their text. The streaming
 * detokenizer then holds back an incomplete UTF-8 sequence until its last byte arrives,
 * so a consumer (an SSE frame) never receives half a character; bytes that can never
 * form a valid sequence come out as U+FFFD, one per maximal invalid subpart. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/vocab_impl.h"
#include "uvllm/err.h"

#define SPECIAL_ATTR (UL_TA_UNKNOWN | UL_TA_CONTROL)

static size_t spm_piece(const ul_vocab_t *v, int32_t id, char *d) {
    uint32_t n;
    const char *t = ul_tok_text(v, id, &n);
    uint8_t a = v->attr[id];
    if (a & (SPECIAL_ATTR | UL_TA_USER)) return memcpy(d, t, n), n;
    if (a & UL_TA_NORMAL) {
        size_t o = 0;
        for (uint32_t i = 0; i < n; i++) {
            if (i + 2 < n && !memcmp(t + i, "\xe2\x96\x81", 3)) {
                d[o++] = ' ';
                i += 2;
            } else {
                d[o++] = t[i];
            }
        }
        return o;
    }
    if ((a & UL_TA_BYTE) && n >= 5) {
        char hex[3] = {t[3], t[4], 0};
        d[0] = (char)strtol(hex, NULL, 16);
        return 1;
    }
    return 0;
}

/* BPE: each character of the alphabet is one byte; anything else is shown the way
 * llama.cpp shows it ("[UNK_BYTE_0x..<text>]"). d has room for 40 + 4 * n bytes. */
static size_t bpe_piece(const ul_vocab_t *v, int32_t id, char *d) {
    uint32_t n;
    const char *t = ul_tok_text(v, id, &n);
    uint8_t a = v->attr[id];
    if (a & (SPECIAL_ATTR | UL_TA_USER)) return memcpy(d, t, n), n;
    if (!(a & UL_TA_NORMAL)) return 0;
    uint32_t dn = v->doff[id + 1] - v->doff[id];
    if (dn) return memcpy(d, v->dtext + v->doff[id], dn), dn;
    size_t o = 0;
    for (uint32_t i = 0; i < n;) {
        unsigned char c = (unsigned char)t[i];
        uint32_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        if (len > n - i) len = n - i;
        uint32_t cp = len == 1 ? c : len == 2 ? ((c & 0x1Fu) << 6) | (t[i + 1] & 0x3F) : 0xFFFFFFFF;
        int b = cp < 512 ? ul_bpe_cpt_to_byte(cp) : -1;
        if (b >= 0) {
            d[o++] = (char)b;
        } else {
            o += (size_t)sprintf(d + o, "[UNK_BYTE_0x");
            for (uint32_t k = 0; k < len; k++)
                o += (size_t)sprintf(d + o, "%02x", (unsigned char)t[i + k]);
            memcpy(d + o, t, n), o += n;
            d[o++] = ']';
        }
        i += len;
    }
    return o;
}

int ul_vocab_build_pieces(ul_vocab_t *v) {
    size_t cap = 0;
    for (int32_t i = 0; i < v->n_tokens; i++) {
        size_t n = v->off[i + 1] - v->off[i];
        size_t need = n + 1;
        if (v->type == UL_VOCAB_BPE && !(v->doff[i + 1] - v->doff[i])) need = n * (n + 16) + 16;
        cap += need;
    }
    if (cap > UINT32_MAX) return UL_ENOMEM;
    v->piece = malloc(cap + 1);
    v->poff = malloc(sizeof *v->poff * ((size_t)v->n_tokens + 1));
    if (!v->piece || !v->poff) return UL_ENOMEM;
    size_t o = 0;
    for (int32_t i = 0; i < v->n_tokens; i++) {
        v->poff[i] = (uint32_t)o;
        o +=
            v->type == UL_VOCAB_BPE ? bpe_piece(v, i, v->piece + o) : spm_piece(v, i, v->piece + o);
    }
    v->poff[v->n_tokens] = (uint32_t)o;
    return 0;
}

int ul_token_to_piece(const ul_vocab_t *v, int32_t id, int special, char *buf, int cap) {
    if (!v || id < 0 || id >= v->n_tokens) return 0;
    if (!special && (v->attr[id] & SPECIAL_ATTR)) return 0;
    int n = (int)(v->poff[id + 1] - v->poff[id]);
    if (n > cap) return -n;
    memcpy(buf, v->piece + v->poff[id], (size_t)n);
    return n;
}

void ul_detok_init(ul_detok_t *d) { memset(d, 0, sizeof *d); }

/* Whether byte b may follow the pending bytes p[0..n) of a UTF-8 sequence. */
static int cont_ok(const unsigned char *p, int n, unsigned char b) {
    if ((b & 0xC0) != 0x80) return 0;
    if (n != 1) return 1;
    switch (p[0]) {
    case 0xE0:
        return b >= 0xA0;
    case 0xED:
        return b <= 0x9F;
    case 0xF0:
        return b >= 0x90;
    case 0xF4:
        return b <= 0x8F;
    default:
        return 1;
    }
}

static int seq_len(unsigned char c) {
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return 2;
    if (c >= 0xE0 && c <= 0xEF) return 3;
    if (c >= 0xF0 && c <= 0xF4) return 4;
    return 0; /* never a lead byte */
}

static const char k_fffd[3] = {'\xef', '\xbf', '\xbd'};

/* Feeds bytes through the state (pend, *np); appends output to o (room for 3 per byte
 * plus 3). Returns bytes appended. */
static size_t feed(unsigned char *pend, int *np, const unsigned char *s, size_t n, char *o) {
    size_t w = 0;
    for (size_t i = 0; i < n;) {
        unsigned char b = s[i];
        if (*np == 0) {
            int l = seq_len(b);
            if (l == 1) {
                o[w++] = (char)b;
            } else if (l == 0) {
                memcpy(o + w, k_fffd, 3), w += 3;
            } else {
                pend[(*np)++] = b;
            }
            i++;
            continue;
        }
        if (!cont_ok(pend, *np, b)) { /* the held bytes can never complete */
            memcpy(o + w, k_fffd, 3), w += 3;
            *np = 0;
            continue; /* b starts afresh */
        }
        pend[(*np)++] = b;
        i++;
        if (*np == seq_len(pend[0])) {
            memcpy(o + w, pend, (size_t)*np), w += (size_t)*np;
            *np = 0;
        }
    }
    return w;
}

int ul_detok_push(ul_detok_t *d, const ul_vocab_t *v, int32_t id, char *out, int cap) {
    int n = ul_token_to_piece(v, id, 0, NULL, 0);
    n = n < 0 ? -n : 0;
    char small[256];
    char *piece = n <= (int)sizeof small ? small : malloc((size_t)n);
    if (!piece) return UL_ENOMEM;
    ul_token_to_piece(v, id, 0, piece, n);
    const char *p = piece;
    if (d->first && v->add_space_prefix && n > 0 && p[0] == ' ') p++, n--;
    size_t need = (size_t)n * 3 + 3;
    char tmp[768];
    char *o = need <= sizeof tmp ? tmp : malloc(need);
    if (!o) {
        if (piece != small) free(piece);
        return UL_ENOMEM;
    }
    unsigned char pend[8];
    int np = d->n_pending;
    memcpy(pend, d->pending, sizeof pend);
    size_t w = feed(pend, &np, (const unsigned char *)p, (size_t)n, o);
    int rc;
    if (w > (size_t)cap) {
        rc = -(int)w; /* state untouched: the caller retries with more room */
    } else {
        memcpy(out, o, w);
        memcpy(d->pending, pend, sizeof pend);
        d->n_pending = np;
        d->first = 0;
        rc = (int)w;
    }
    if (o != tmp) free(o);
    if (piece != small) free(piece);
    return rc;
}

int ul_detok_flush(ul_detok_t *d, char *out, int cap) {
    if (d->n_pending == 0) return 0;
    if (cap < 3) return -3;
    memcpy(out, k_fffd, 3);
    d->n_pending = 0;
    return 3;
}
