/* Sub-commands of the uvllm binary; each gets argv after the command name
 * (argv[0] is the command) and returns the process exit code:
 * 0 success, 1 failure (bad file, runtime error), 2 usage error. */
#ifndef UL_CMD_H
#define UL_CMD_H

#include <stddef.h>

#include "uvllm/backend.h"

int ul_cmd_serve(int argc, char **argv);
int ul_cmd_info(int argc, char **argv);
int ul_cmd_tokenize(int argc, char **argv);
int ul_cmd_detokenize(int argc, char **argv);
int ul_cmd_convert_tokenizer(int argc, char **argv);
int ul_cmd_generate(int argc, char **argv);
int ul_cmd_synth(int argc, char **argv);
int ul_cmd_quantize(int argc, char **argv);
int ul_cmd_chat_template(int argc, char **argv);

/* draft.c, --model-draft: loads the draft model at path (*draft_model, the caller's to free
 * after the backend), checks its vocabulary against target's, and replaces *backend (the
 * target's CPU backend, created with tc) by the speculative backend over both. On failure
 * *backend is unchanged and err says why (UL_EINVAL: another vocabulary). */
int ul_cmd_draft_backend(const ul_model_t *target, const char *path, const ul_cpu_config_t *tc,
                         ul_backend_t **backend, ul_model_t **draft_model, char *err,
                         size_t errlen);

#endif
