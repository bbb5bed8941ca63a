/* Placeholder until the owning module lands; replaced by the real command. */
#include <stdio.h>

#include "cmd/cmd.h"

int ul_cmd_convert_tokenizer(int argc, char **argv) {
    fprintf(stderr, "uvllm: '%s' is not available in this build\n", argv[0]);
    return 2;
}
