/* uvllm command-line entry: dispatches to the sub-commands in src/cmd/. */
#include <stdio.h>
#include <string.h>

#include "cmd/cmd.h"

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} g_cmds[] = {
    {"serve", ul_cmd_serve, "run the OpenAI-compatible HTTP server"},
    {"generate", ul_cmd_generate, "generate text from a prompt on the CPU engine"},
    {"info", ul_cmd_info, "describe a GGUF model file"},
    {"chat-template", ul_cmd_chat_template, "render a chat request with a chat template"},
    {"tokenize", ul_cmd_tokenize, "print the token ids of a text"},
    {"detokenize", ul_cmd_detokenize, "print the bytes of token ids"},
    {"convert-tokenizer", ul_cmd_convert_tokenizer,
     "write a vocabulary-only GGUF from a Hugging Face tokenizer.json"},
    {"synth", ul_cmd_synth, "write a random-weight model at a real shape"},
    {"quantize", ul_cmd_quantize, "convert a model's weights to another type"},
};
#define N_CMDS (sizeof g_cmds / sizeof g_cmds[0])

static void usage(FILE *f) {
    fprintf(f, "usage: uvllm COMMAND [OPTIONS]\n\ncommands:\n");
    for (size_t i = 0; i < N_CMDS; i++) fprintf(f, "  %-18s %s\n", g_cmds[i].name, g_cmds[i].help);
    fprintf(f, "\n'uvllm COMMAND --help' describes a command's options.\n"
               "  --help     this text\n  --version  print the version\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
        printf("uvllm %s\n", UVLLM_VERSION);
        return 0;
    }
    for (size_t i = 0; i < N_CMDS; i++)
        if (!strcmp(argv[1], g_cmds[i].name)) return g_cmds[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "uvllm: unknown command '%s' (see 'uvllm --help')\n", argv[1]);
    return 2;
}
