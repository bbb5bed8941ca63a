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

#endif
