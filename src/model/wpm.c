/* WordPiece (tokenizer.ggml.model "bert"), as llama.cpp's llm_tokenizer_wpm_session:
 *  1. normalise: decode UTF-8 (an invalid byte is U+FFFD, dropped); with strip_accents the
 *     text is decomposed (NFD) and accent marks dropped; whitespace ends a word; NUL,
 *     U+FFFD and control characters are dropped; each character is lowercased when asked;
 *     punctuation, ASCII symbols and CJK ideographs are words of their own;
 *  2. each word gets U+2581 in front (the GGUF spells word-initial pieces that way and
 *     "##" continuations bare) and is cut greedily into the longest pieces of the vocabulary
 *     from the left; a word with a position no piece matches is one [UNK].
 * The Unicode tables here are partial (llama.cpp uses the full character database):
 * exact for ASCII; Latin-1 and Latin Extended-A letters decompose and lowercase, Greek and
 * Cyrillic capitals lowercase; whitespace is the full White_Space set; punctuation is
 * ASCII, Latin-1, General Punctuation, CJK and fullwidth punctuation; control characters
 * are C0, C1 and the common format characters. Other characters are letters here. */
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "model/vocab_impl.h"
#include "uvllm/err.h"

static int is_space(uint32_t c) {
    return (c >= 0x9 && c <= 0xD) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

static int is_control(uint32_t c) {
    return c < 0x20 || (c >= 0x7F && c <= 0x9F) || c == 0xAD || (c >= 0x600 && c <= 0x605) ||
           c == 0x61C || c == 0x6DD || c == 0x70F || c == 0x180E || (c >= 0x200B && c <= 0x200F) ||
           (c >= 0x202A && c <= 0x202E) || (c >= 0x2060 && c <= 0x2064) ||
           (c >= 0x2066 && c <= 0x206F) || c == 0xFEFF || (c >= 0xFFF9 && c <= 0xFFFB) ||
           (c >= 0xE000 && c <= 0xF8FF);
}

/* Unicode P*, plus the ASCII symbols (S* below 0x7F) llama.cpp also splits off */
static int is_punct(uint32_t c) {
    if (c < 0x80)
        return c > 0x20 && c < 0x7F && !(c >= '0' && c <= '9') &&
               !((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
    if (c < 0x100)
        return c == 0xA1 || c == 0xA7 || c == 0xAB || c == 0xB6 || c == 0xB7 || c == 0xBB ||
               c == 0xBF;
    if (c >= 0x2010 && c <= 0x205E)
        return c <= 0x2027 || (c >= 0x2030 && c <= 0x2043) || (c >= 0x2045 && c <= 0x2051) ||
               c >= 0x2053;
    if (c >= 0x3001 && c <= 0x301F)
        return c <= 0x3003 || (c >= 0x3008 && c <= 0x3011) || c >= 0x3014;
    if (c >= 0xFF01 && c <= 0xFF65)
        return c != 0xFF04 && c != 0xFF0B && !(c >= 0xFF10 && c <= 0xFF19) && c != 0xFF1C &&
               c != 0xFF1D && c != 0xFF1E && !(c >= 0xFF21 && c <= 0xFF3A) && c != 0xFF3E &&
               c != 0xFF40 && !(c >= 0xFF41 && c <= 0xFF5A) && c != 0xFF5C && c != 0xFF5E;
    return 0;
}

static int is_cjk(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
           (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
           (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* The base letter of a Latin-1 / Latin Extended-A letter with canonical decomposition
 * (its marks are dropped with strip_accents), or c itself. */
static uint32_t strip_accent(uint32_t c) {
    static const char l1[] = "AAAAAA\0CEEEEIIII\0NOOOOO\0\0UUUUY\0\0"
                             "aaaaaa\0ceeeeiiii\0nooooo\0\0uuuuy\0y";
    static const char xa[] = "AaAaAaCcCcCcCcDd\0\0EeEeEeEeEeGgGgGgGgHh\0\0IiIiIiIiI\0\0\0JjKk\0"
                             "LlLlLl\0\0\0\0NnNnNn\0\0\0OoOoOo\0\0RrRrRrSsSsSsSsTtTt\0\0"
                             "UuUuUuUuUuUuWwYyYZzZzZz\0";
    if (c >= 0xC0 && c <= 0xFF && l1[c - 0xC0]) return (uint32_t)l1[c - 0xC0];
    if (c >= 0x100 && c <= 0x17F && xa[c - 0x100]) return (uint32_t)xa[c - 0x100];
    return c;
}

static uint32_t to_lower(uint32_t c) {
    if (c < 0x80) return c >= 'A' && c <= 'Z' ? c + 32 : c;
    if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
    if (c == 0x130) return 'i';
    if (c == 0x178) return 0xFF;
    if ((c >= 0x100 && c <= 0x137 && c != 0x131) || (c >= 0x14A && c <= 0x177)) return c | 1;
    if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return c & 1 ? c + 1 : c;
    if ((c >= 0x391 && c <= 0x3A9 && c != 0x3A2) || (c >= 0x410 && c <= 0x42F)) return c + 32;
    if (c >= 0x400 && c <= 0x40F) return c + 80;
    return c;
}

static size_t put_utf8(char *d, uint32_t c) {
    if (c < 0x80) return d[0] = (char)c, 1;
    if (c < 0x800) return d[0] = (char)(0xC0 | c >> 6), d[1] = (char)(0x80 | (c & 63)), 2;
    if (c < 0x10000)
        return d[0] = (char)(0xE0 | c >> 12), d[1] = (char)(0x80 | (c >> 6 & 63)),
               d[2] = (char)(0x80 | (c & 63)), 3;
    return d[0] = (char)(0xF0 | c >> 18), d[1] = (char)(0x80 | (c >> 12 & 63)),
           d[2] = (char)(0x80 | (c >> 6 & 63)), d[3] = (char)(0x80 | (c & 63)), 4;
}

static uint32_t get_cpt(const char *s, size_t n, size_t *len) {
    const unsigned char *u = (const unsigned char *)s;
    size_t k = ul_utf8_seq(s, n);
    if (!k) {
        *len = ul_utf8_bad_len(s, n);
        return 0xFFFD;
    }
    *len = k;
    if (k == 1) return u[0];
    if (k == 2) return (uint32_t)(u[0] & 31) << 6 | (u[1] & 63);
    if (k == 3) return (uint32_t)(u[0] & 15) << 12 | (uint32_t)(u[1] & 63) << 6 | (u[2] & 63);
    return (uint32_t)(u[0] & 7) << 18 | (uint32_t)(u[1] & 63) << 12 | (uint32_t)(u[2] & 63) << 6 |
           (u[3] & 63);
}

/* One word (U+2581 + its bytes, in w[0..n)) cut into the longest pieces from the left. */
static int word_pieces(const ul_vocab_t *v, const char *w, size_t n, ul_ids_t *out) {
    const size_t n0 = out->n;
    for (size_t i = 0; i < n;) {
        size_t j = n - i < (size_t)v->max_tok_len ? n : i + (size_t)v->max_tok_len;
        int32_t id = -1;
        for (; j > i && id < 0; j--) id = ul_vocab_find(v, w + i, j - i);
        if (id < 0) {
            out->n = n0; /* discard the word's pieces: it is one [UNK] */
            break;
        }
        ul_ids_push(out, id);
        i = j + 1;
    }
    if (out->n == n0 && v->unk >= 0) ul_ids_push(out, v->unk);
    return out->err;
}

int ul_wpm_tokenize(const ul_vocab_t *v, const char *text, size_t len, ul_ids_t *out) {
    /* a character grows by at most 4 / its byte length: 4 bytes per input byte bounds it */
    char *w = malloc(len * 4 + 8);
    if (!w) return UL_ENOMEM;
    size_t n = 0;
    int rc = 0;
#define FLUSH()                                                                                    \
    do {                                                                                           \
        if (n > 3 && (rc = word_pieces(v, w, n, out))) goto done;                                  \
        n = 3;                                                                                     \
    } while (0)
    memcpy(w, "\xe2\x96\x81", 3);
    n = 3;
    for (size_t i = 0, k; i < len; i += k) {
        uint32_t c = get_cpt(text + i, len - i, &k);
        if (v->wpm_strip_accents) {
            if (c >= 0x300 && c <= 0x36F) continue; /* combining marks (Mn) */
            c = strip_accent(c);
        }
        if (is_space(c)) {
            FLUSH();
            continue;
        }
        if (c == 0 || c == 0xFFFD || is_control(c)) continue;
        if (v->wpm_lowercase) c = to_lower(c);
        if (is_punct(c) || is_cjk(c)) {
            FLUSH();
            n += put_utf8(w + n, c);
            FLUSH();
            continue;
        }
        n += put_utf8(w + n, c);
    }
    FLUSH();
#undef FLUSH
done:
    free(w);
    return rc;
}
