/* UTF-8 checks for text that leaves the server: JSON answers must be valid UTF-8 (RFC 8259
 * section 8.1), whatever bytes a request or a token carried. Strict decoding as Python's and
 * browsers' decoders do: no overlong forms, no surrogates (U+D800..U+DFFF), nothing above
 * U+10FFFF. Plain functions, any thread. */
#ifndef UL_BASE_UTF8_H
#define UL_BASE_UTF8_H

#include <stddef.h>

/* Length (1..4) of the valid UTF-8 sequence at s[0..n), or 0 when s[0] does not start
 * one (n == 0 included). */
size_t ul_utf8_seq(const char *s, size_t n);

/* n when s[0..n) is valid UTF-8, else the offset of the first byte that is not. */
size_t ul_utf8_check(const char *s, size_t n);

/* Where s[0..n) does not start a valid sequence: the bytes one U+FFFD stands for, the
 * "maximal subpart" of Unicode's recommendation that WHATWG decoders and Python's
 * errors="replace" follow (a cut-short sequence, E4 B8, is one replacement; a stray byte
 * is one). At least 1 when n > 0. */
size_t ul_utf8_bad_len(const char *s, size_t n);

/* Bytes ul_utf8_sanitize writes for s[0..n). */
size_t ul_utf8_sanitized_len(const char *s, size_t n);
/* Copies s[0..n) to out (room for ul_utf8_sanitized_len bytes, at most 3 * n) with each
 * invalid subpart (ul_utf8_bad_len) replaced by U+FFFD; returns the bytes written. */
size_t ul_utf8_sanitize(const char *s, size_t n, char *out);

#endif
