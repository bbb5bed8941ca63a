/* --model-draft, for `serve` (backend.c) and `generate`: the speculative backend over the
 * target's CPU backend and a draft model's (draft.c). */
#ifndef UL_SERVER_DRAFT_H
#define UL_SERVER_DRAFT_H

#include <stddef.h>

#include "model/model.h"
#include "uvllm/backend.h"

/* Loads the draft model at path (*draft_model, the caller's to free
 * after the backend), checks its vocabulary against target's, and replaces *backend (the
 * target's CPU backend, created with tc) by the speculative backend over both. On failure
 * *backend is unchanged and err says why (UL_EINVAL: another vocabulary). */
int ul_server_draft_backend(const ul_model_t *target, const char *path, const ul_cpu_config_t *tc,
                            ul_backend_t **backend, ul_model_t **draft_model, char *err,
                            size_t errlen);

#endif
