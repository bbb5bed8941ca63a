/* The answer to an embeddings request (embed.c): every vector L2-normalised, then
 * /v1/embeddings' list object (float arrays, or base64 of the little-endian float32 bytes as
 * OpenAI's SDKs decode them) or /embedding's array (llama-server: one row per pooled input,
 * [[...]]). Floats are printed with 9 significant digits, so each reads back as the same
 * float32. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "api/embed.h"
#include "uvllm/err.h"

void ul_embed_normalize(float *x, int32_t n) {
    double sum = 0;
    for (int32_t i = 0; i < n; i++) sum += (double)x[i] * x[i];
    if (sum <= 0) return;
    const float inv = (float)(1.0 / sqrt(sum));
    for (int32_t i = 0; i < n; i++) x[i] *= inv;
}

int ul_embed_base64(ul_buf_t *b, const uint8_t *p, size_t n) {
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    if (ul_buf_reserve(b, (n + 2) / 3 * 4)) return UL_ENOMEM;
    char *o = b->p + b->len;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        *o++ = tab[v >> 18], *o++ = tab[v >> 12 & 63], *o++ = tab[v >> 6 & 63], *o++ = tab[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0);
        *o++ = tab[v >> 18], *o++ = tab[v >> 12 & 63];
        *o++ = i + 1 < n ? tab[v >> 6 & 63] : '=';
        *o++ = '=';
    }
    b->len = (size_t)(o - b->p);
    return 0;
}

static int put_floats(ul_buf_t *b, const float *x, int32_t n) {
    char tmp[32];
    int rc = ul_buf_append(b, "[", 1);
    for (int32_t i = 0; i < n && !rc; i++) {
        int k = snprintf(tmp, sizeof tmp, "%s%.9g", i ? "," : "", (double)x[i]);
        rc = ul_buf_append(b, tmp, (size_t)k);
    }
    return rc ? rc : ul_buf_append(b, "]", 1);
}

/* The float32 bytes in little-endian order, whatever the host's. */
static int put_base64(ul_buf_t *b, const float *x, int32_t n) {
    uint8_t tmp[3 * 256];
    int rc = ul_buf_append(b, "\"", 1);
    /* chunks of a multiple of 3 bytes keep the encoding seamless */
    for (int32_t i0 = 0; i0 < n && !rc; i0 += 192) {
        int32_t m = n - i0 < 192 ? n - i0 : 192;
        for (int32_t i = 0; i < m; i++) {
            uint32_t u;
            memcpy(&u, &x[i0 + i], 4);
            for (int k = 0; k < 4; k++) tmp[4 * i + k] = (uint8_t)(u >> (8 * k));
        }
        rc = ul_embed_base64(b, tmp, (size_t)m * 4);
    }
    return rc ? rc : ul_buf_append(b, "\"", 1);
}

static int answer_oai(ul_embed_req_t *e, ul_buf_t *b) {
    char tmp[160];
    int rc = ul_buf_puts(b, "{\"object\":\"list\",\"data\":[");
    for (int i = 0; i < e->n && !rc; i++) {
        snprintf(tmp, sizeof tmp,
                 "%s{\"object\":\"embedding\",\"index\":%d,\"embedding\":", i ? "," : "", i);
        rc = ul_buf_puts(b, tmp);
        const float *x = e->vec + (size_t)i * (size_t)e->n_embd;
        if (!rc) rc = e->base64 ? put_base64(b, x, e->n_embd) : put_floats(b, x, e->n_embd);
        if (!rc) rc = ul_buf_append(b, "}", 1);
    }
    if (!rc) rc = ul_buf_puts(b, "],\"model\":\"");
    if (!rc) rc = ul_buf_append_json_str(b, e->a->model_id, strlen(e->a->model_id));
    snprintf(tmp, sizeof tmp, "\",\"usage\":{\"prompt_tokens\":%lld,\"total_tokens\":%lld}}",
             (long long)e->n_tokens, (long long)e->n_tokens);
    return rc ? rc : ul_buf_puts(b, tmp);
}

static int answer_llama(ul_embed_req_t *e, ul_buf_t *b) {
    char tmp[64];
    int rc = ul_buf_append(b, "[", 1);
    for (int i = 0; i < e->n && !rc; i++) {
        snprintf(tmp, sizeof tmp, "%s{\"index\":%d,\"embedding\":[", i ? "," : "", i);
        rc = ul_buf_puts(b, tmp);
        if (!rc) rc = put_floats(b, e->vec + (size_t)i * (size_t)e->n_embd, e->n_embd);
        if (!rc) rc = ul_buf_append(b, "]}", 2);
    }
    return rc ? rc : ul_buf_append(b, "]", 1);
}

int ul_embed_answer(ul_embed_req_t *e) {
    if (e->rerank) return ul_rerank_answer(e);
    for (int i = 0; i < e->n; i++)
        ul_embed_normalize(e->vec + (size_t)i * (size_t)e->n_embd, e->n_embd);
    ul_buf_t b = {0};
    int rc = e->oai ? answer_oai(e, &b) : answer_llama(e, &b);
    if (!rc) ul_http_respond_buf(e->req, 200, NULL, &b);
    ul_buf_free(&b);
    return rc;
}
