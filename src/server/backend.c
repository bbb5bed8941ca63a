/* The backend the configuration asks for: the null backend (no model, or a vocabulary only
 * for --null-reply), the CPU backend with a GGUF model, or the CUDA backend; and the KV
 * pool's size: --kv-mem, else a quarter of MemAvailable within one and --max-seqs
 * full-context sequences. Start-up only (the loop is not running yet). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/memlimit.h"
#include "base/size.h"
#include "cpu/kernels.h"
#include "cpu/kv.h"
#include "cpu/pool.h"
#include "model/model.h"
#include "server/draft.h"
#include "server/server.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

#define PAGE_SIZE 16
/* --kv-mem with the null backend: what it really stores per token slot (owner id and
 * token, engine/null.c), so the option bounds its pages by the same arithmetic */
#define NULL_KV_BYTES_PER_TOKEN 12

static int kv_type(const ul_server_t *sv) {
    return !strcmp(sv->cfg.kv_type, "f32") ? UL_TYPE_F32 : UL_TYPE_F16;
}

static int fail_config(ul_server_t *sv) {
    sv->bad_config = 1;
    return UL_EINVAL;
}

/* MemAvailable now, or the cgroup's limit when lower (a container), or -1; which one into
 * src. */
static int64_t mem_available(char *src, int cap) {
    ul_mem_info_t m;
    ul_mem_info_read("/", &m);
    ul_mem_info_source(&m, 1, src, cap);
    return m.limit_available;
}

/* The KV budget in bytes for pages of page_bytes: --kv-mem, else a quarter of MemAvailable
 * kept between one and max_seqs full-context sequences. Says how it was chosen in
 * sv->kv_note; 0 with sv->err when --kv-mem cannot hold one sequence. */
static int64_t kv_budget(ul_server_t *sv, int32_t n_ctx, int64_t page_bytes) {
    const ul_server_config_t *c = &sv->cfg;
    int64_t one = (int64_t)((n_ctx + PAGE_SIZE - 1) / PAGE_SIZE) * page_bytes;
    char b1[32], b2[32];
    if (c->kv_mem) {
        if (c->kv_mem < one) {
            snprintf(sv->err, sizeof sv->err,
                     "--kv-mem %s holds less than one sequence of %d tokens (%s); raise "
                     "--kv-mem or lower --ctx-size",
                     ul_size_format(c->kv_mem, b1, sizeof b1), n_ctx,
                     ul_size_format(one, b2, sizeof b2));
            fail_config(sv);
            return 0;
        }
        snprintf(sv->kv_note, sizeof sv->kv_note, "--kv-mem");
        return c->kv_mem;
    }
    char src[128];
    int64_t avail = mem_available(src, sizeof src), most = one * c->max_seqs;
    int64_t want = avail > 0 ? avail / 4 : 4 * one;
    if (want > most) want = most;
    if (want < one) want = one;
    if (avail > 0)
        snprintf(sv->kv_note, sizeof sv->kv_note,
                 "default: a quarter of %s, within 1..%d sequences", src, c->max_seqs);
    else
        snprintf(sv->kv_note, sizeof sv->kv_note, "default: 4 sequences, MemAvailable unknown");
    return want;
}

/* --model, whole or (vocab_only, for --null-reply) its vocabulary. */
static int load_model(ul_server_t *sv, int vocab_only) {
    char err[256] = "";
    int rc = ul_model_load(sv->cfg.model, vocab_only, &sv->model, err, sizeof err);
    if (rc)
        snprintf(sv->err, sizeof sv->err, "cannot load model '%s': %s", sv->cfg.model,
                 err[0] ? err : ul_strerror(rc));
    return rc;
}

/* --null-reply: the model's vocabulary only, and TEXT as token ids. */
static int null_reply(ul_server_t *sv, ul_null_config_t *nc, int32_t **ids) {
    const ul_server_config_t *c = &sv->cfg;
    int rc = load_model(sv, 1);
    if (rc) return rc;
    const ul_vocab_t *v = sv->model->vocab;
    size_t len = strlen(c->null_reply);
    *ids = malloc((len + 8) * sizeof **ids);
    int n = *ids ? ul_tokenize(v, c->null_reply, len, 0, 1, *ids, (int)len + 8) : UL_ENOMEM;
    if (n <= 0 || ul_vocab_eos(v) < 1) {
        snprintf(sv->err, sizeof sv->err, "--null-reply: cannot tokenize it (or no eos)");
        return n < 0 ? n : UL_EINVAL;
    }
    nc->n_vocab = ul_vocab_n_tokens(v);
    nc->eos_id = ul_vocab_eos(v);
    nc->reply = *ids;
    nc->n_reply = n;
    return 0;
}

static int make_null(ul_server_t *sv) {
    const ul_server_config_t *c = &sv->cfg;
    ul_null_config_t nc = {.delay_us = c->null_delay_us,
                           .fail = c->null_fail_after >= 0,
                           .fail_after = c->null_fail_after > 0 ? c->null_fail_after : 0,
                           .token_us = c->null_token_us,
                           .prefill_us = c->null_prefill_us,
                           .n_ctx = c->ctx_size ? c->ctx_size : c->null_ctx,
                           .page_size = PAGE_SIZE};
    int32_t *ids = NULL;
    int rc = c->null_reply ? null_reply(sv, &nc, &ids) : 0;
    if (!rc && c->kv_mem) {
        int64_t per_page = (int64_t)PAGE_SIZE * NULL_KV_BYTES_PER_TOKEN;
        int64_t b = kv_budget(sv, nc.n_ctx ? nc.n_ctx : 4096, per_page);
        int64_t pages = b / per_page, most = ((int64_t)1 << 31) / PAGE_SIZE - 1;
        nc.n_pages = (int32_t)(pages < most ? pages : most);
        if (!b) rc = UL_EINVAL;
    } else if (!rc) {
        snprintf(sv->kv_note, sizeof sv->kv_note, "null backend default");
    }
    if (!rc) rc = ul_null_backend_create(&nc, &sv->backend);
    free(ids); /* copied by the backend */
    if (rc && !sv->err[0])
        snprintf(sv->err, sizeof sv->err, "cannot start the null backend: %s", ul_strerror(rc));
    return rc;
}

/* --backend cuda: the model on --device; every start-up failure (no device, no CUDA in
 * this build, out of device memory) is one clear line. */
static int make_cuda(ul_server_t *sv, int32_t n_ctx) {
#ifdef UVLLM_HAVE_CUDA
    const ul_server_config_t *c = &sv->cfg;
    char err[256] = "";
    ul_gpu_config_t gc = {.device = c->device,
                          .n_ctx = n_ctx,
                          .page_size = PAGE_SIZE,
                          .kv_bytes = c->kv_mem,
                          .max_batch_tokens = c->max_batch_tokens};
    int rc = ul_gpu_backend_create(sv->model, &gc, &sv->backend, err, sizeof err);
    if (rc)
        snprintf(sv->err, sizeof sv->err, "cannot start the cuda backend: %s",
                 err[0] ? err : ul_strerror(rc));
    return rc;
#else
    (void)n_ctx;
    snprintf(sv->err, sizeof sv->err,
             "cannot start the cuda backend: this build has no CUDA (configure with "
             "-DUVLLM_CUDA=ON on a machine with the CUDA toolkit)");
    return UL_ENOTSUP;
#endif
}

/* --model-draft: the speculative backend over the target and the draft. */
static int make_draft(ul_server_t *sv, const ul_cpu_config_t *cc) {
    char err[320];
    int rc = ul_server_draft_backend(sv->model, sv->cfg.model_draft, cc, &sv->backend,
                                     &sv->draft_model, err, sizeof err);
    if (rc) {
        snprintf(sv->err, sizeof sv->err, "--model-draft: %s", err);
        sv->bad_config = rc == UL_EINVAL;
        return rc;
    }
    UL_LOG_INFO("speculative decoding: draft model %s", sv->cfg.model_draft);
    return 0;
}

static int make_cpu(ul_server_t *sv, int32_t n_ctx) {
    const ul_server_config_t *c = &sv->cfg;
    const ul_hparams_t *hp = &sv->model->hp;
    int64_t page =
        (int64_t)ul_kv_page_bytes(kv_type(sv), hp->n_layer, hp->n_head_kv, hp->head_dim, PAGE_SIZE);
    char why[160] = "--threads";
    ul_cpu_config_t cc = {.n_threads =
                              c->threads ? c->threads : ul_pool_default_threads(why, sizeof why),
                          .kv_type = kv_type(sv),
                          .n_ctx = n_ctx,
                          .page_size = PAGE_SIZE,
                          .kv_bytes = kv_budget(sv, n_ctx, page),
                          .max_batch_tokens = c->max_batch_tokens,
                          .batch_invariant = c->batch_invariant};
    if (!cc.kv_bytes) return UL_EINVAL;
    UL_LOG_INFO("cpu backend: %d threads (%s), %s kernels", cc.n_threads, why,
                ul_cpu_isa_name(ul_cpu_isa()));
    int rc = ul_cpu_backend_create(sv->model, &cc, &sv->backend);
    if (rc) snprintf(sv->err, sizeof sv->err, "cannot start the cpu backend: %s", ul_strerror(rc));
    if (!rc && c->model_draft) rc = make_draft(sv, &cc);
    return rc;
}

int ul_server_make_backend(ul_server_t *sv) {
    const ul_server_config_t *c = &sv->cfg;
    if (!strcmp(c->backend, "null")) return make_null(sv);
    int rc = load_model(sv, 0);
    if (rc) return rc;
    const ul_hparams_t *hp = &sv->model->hp;
    if (c->ctx_size > hp->n_ctx_train) {
        snprintf(sv->err, sizeof sv->err,
                 "--ctx-size %d is over the model's training context (%d tokens)", c->ctx_size,
                 hp->n_ctx_train);
        return fail_config(sv);
    }
    int32_t n_ctx = c->ctx_size ? c->ctx_size : hp->n_ctx_train;
    return !strcmp(c->backend, "cuda") ? make_cuda(sv, n_ctx) : make_cpu(sv, n_ctx);
}

void ul_server_log_kv(const ul_server_t *sv) {
    const ul_backend_t *b = sv->backend;
    int64_t tokens = (int64_t)b->n_pages * b->page_size, bytes;
    if (sv->model && strcmp(sv->cfg.backend, "null")) {
        const ul_hparams_t *hp = &sv->model->hp;
        bytes =
            (int64_t)b->n_pages * (int64_t)ul_kv_page_bytes(kv_type(sv), hp->n_layer, hp->n_head_kv,
                                                            hp->head_dim, b->page_size);
    } else {
        bytes = tokens * NULL_KV_BYTES_PER_TOKEN;
    }
    char sz[32];
    UL_LOG_INFO("kv cache: %s in %d pages of %d tokens = %lld tokens, %lld full-context "
                "sequences (%s)",
                ul_size_format(bytes, sz, sizeof sz), b->n_pages, b->page_size, (long long)tokens,
                (long long)(tokens / (b->n_ctx ? b->n_ctx : 1)), sv->kv_note);
}
