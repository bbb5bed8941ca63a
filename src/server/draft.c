/* --model-draft for serve and generate: the draft model loaded, its vocabulary checked
 * against the target's id for id, and its CPU backend created beside the target's (on the
 * target's threads; engine/spec_backend.c runs the two one after the other) with as many
 * KV pages as the target, both behind the speculative backend. */
#include <stdio.h>
#include <string.h>

#include "cpu/kv.h"
#include "model/model.h"
#include "server/draft.h"
#include "uvllm/err.h"

/* The same ids with the same texts: proposals are token ids, so a draft whose ids mean
 * other texts would only ever be rejected. */
static int same_vocab(const ul_vocab_t *a, const ul_vocab_t *b) {
    const int32_t n = ul_vocab_n_tokens(a);
    if (n != ul_vocab_n_tokens(b)) return 0;
    char pa[256], pb[256];
    for (int32_t id = 0; id < n; id++) {
        int la = ul_token_to_piece(a, id, 1, pa, sizeof pa);
        int lb = ul_token_to_piece(b, id, 1, pb, sizeof pb);
        if (la != lb || (la > 0 && memcmp(pa, pb, (size_t)la))) return 0;
    }
    return 1;
}

int ul_server_draft_backend(const ul_model_t *target, const char *path, const ul_cpu_config_t *tc,
                            ul_backend_t **backend, ul_model_t **draft_model, char *err,
                            size_t errlen) {
    char why[256] = "";
    int rc = ul_model_load(path, 0, draft_model, why, sizeof why);
    if (rc) {
        snprintf(err, errlen, "cannot load '%s': %s", path, why[0] ? why : ul_strerror(rc));
        return rc;
    }
    const ul_model_t *d = *draft_model;
    if (!target->vocab || !d->vocab || !same_vocab(target->vocab, d->vocab)) {
        snprintf(err, errlen, "'%s' has another vocabulary than the model", path);
        return UL_EINVAL;
    }
    ul_cpu_config_t dc = *tc;
    if (dc.n_ctx > d->hp.n_ctx_train) dc.n_ctx = d->hp.n_ctx_train;
    dc.kv_bytes = (int64_t)(*backend)->n_pages *
                  (int64_t)ul_kv_page_bytes(tc->kv_type, d->hp.n_layer, d->hp.n_head_kv,
                                            d->hp.head_dim, tc->page_size);
    ul_backend_t *draft, *spec;
    rc = ul_cpu_backend_create_beside(d, &dc, *backend, &draft);
    if (!rc) {
        rc = ul_spec_backend_create(*backend, draft, &spec);
        if (rc) ul_backend_destroy(draft);
    }
    if (rc) {
        snprintf(err, errlen, "cannot start the draft model '%s': %s", path, ul_strerror(rc));
        return rc;
    }
    *backend = spec;
    return 0;
}
