#!/usr/bin/env python3
"""Writes a small synthetic `bert` or `nomic-bert` GGUF (issue 26): random weights from a fixed seed and a
WordPiece vocabulary in llama.cpp's GGUF spelling (tokenizer.ggml.model "bert": a piece that
starts a word carries U+2581 in front, a "##" continuation piece is stored bare, the special
tokens as they are). Pure Python, no numpy; the same arguments give the same bytes.

    tools/gguf_bert.py OUT.gguf [--arch bert|nomic-bert] [--seed 7] [--pooling mean|cls|rank]
                       [--embd 64] [--layers 2] [--heads 4] [--ff 128] [--ctx 128]
                       [--vocab N]

--vocab N pads the vocabulary to N tokens with made-up words (bench/embed.sh's bge-small and
nomic-embed shapes use 30522, BERT's own count); without it the files are as before.

Tensors (llama.cpp's names for LLM_ARCH_BERT): token_embd, token_types, position_embd,
token_embd_norm.{weight,bias}; per layer attn_{q,k,v,output}.{weight,bias},
attn_output_norm.{weight,bias}, ffn_{up,down}.{weight,bias}, layer_output_norm.{weight,bias}.
Matrices (token, attention, FFN) are F16, everything else F32.
nomic-bert (as nomic-embed-text-v1.5's GGUF): no position_embd (RoPE, NEOX, rope.freq_base
1000), a fused attn_qkv.weight [n_embd, 3 n_embd] and attn_output.weight without biases,
ffn_gate/ffn_up/ffn_down (SwiGLU) without biases.
--pooling rank (a reranker, llama.cpp's LLAMA_POOLING_TYPE_RANK) adds the classification head
as a converted BERT cross-encoder carries it: cls.weight [n_embd, n_embd] F16 and cls.bias,
cls.output.weight [n_embd, 1] F16 and cls.output.bias (one label), and the tokenizer keys
convert_hf_to_gguf writes for BERT's "[CLS] $A [SEP] $B [SEP]" post-processor: eos [SEP],
add_bos_token and add_eos_token true, add_sep_token false (so llama-server joins a query and a
document as [CLS] q [SEP] d [SEP])."""
import argparse
import random
import struct

from gguf_write import kv_arr, kv_bool, kv_f32, kv_str, kv_u32, write_gguf

SP = "\u2581"
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ("the quick brown fox jump over lazy dog hello embed turn text into one vector similar "
         "get point same way so search can rank document by cosine of their with query and a "
         "that is to it in un play").split()
SUFFIXES = "s ing ed er ly ding tor ument ity able ness".split()
PUNCT = list(".,+=*!?-()'\"/:")  # ';' left out on purpose: a word of its own, [UNK]


def vocab(n=0):
    toks = list(SPECIAL)
    toks += [SP + w for w in WORDS]
    toks += SUFFIXES
    toks += [SP + c for c in "abcdefghijklmnopqrstuvwxyz0123456789"]
    toks += [c for c in "abcdefghijklmnopqrstuvwxyz0123456789"]
    toks += [SP + c for c in PUNCT]
    toks += [SP + "\u00e9t\u00e9", SP + "\u4e2d"]  # one accented word (never reached when
    # accents are stripped) and one CJK character (a word of its own)
    seen = set()
    out = []
    for t in toks:
        if t not in seen:
            seen.add(t)
            out.append(t)
    i = 0
    while len(out) < n:  # whole words "▁w0", "▁w1", ... none of them is in the base list
        out.append(f"{SP}w{i}")
        i += 1
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--arch", choices=["bert", "nomic-bert"], default="bert")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--pooling", choices=["mean", "cls", "rank"], default="mean")
    ap.add_argument("--embd", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ff", type=int, default=128)
    ap.add_argument("--ctx", type=int, default=128)
    ap.add_argument("--vocab", type=int, default=0, help="pad the vocabulary to this many tokens")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    E, F = a.embd, a.ff
    toks = vocab(a.vocab)
    V = len(toks)

    tensors = []  # (name, shape ne0.., type, bytes)

    def mat(name, ne0, ne1, scale):
        parts = []  # a row at a time: the bench shapes' lists of floats would not fit memory
        for _ in range(ne1):
            vals = [rng.gauss(0.0, scale) for _ in range(ne0)]
            parts.append(struct.pack(f"<{ne0}e", *vals))
        tensors.append((name, (ne0, ne1), 1, b"".join(parts)))

    def vec(name, n, mean, scale, ne1=None):
        cnt = n * (ne1 or 1)
        vals = [mean + rng.gauss(0.0, scale) for _ in range(cnt)]
        shape = (n,) if ne1 is None else (n, ne1)
        tensors.append((name, shape, 0, struct.pack(f"<{cnt}f", *vals)))

    nomic = a.arch == "nomic-bert"
    mat("token_embd.weight", E, V, 0.5)
    vec("token_types.weight", E, 0.0, 0.1, 2)
    if not nomic:
        vec("position_embd.weight", E, 0.0, 0.1, a.ctx)
    vec("token_embd_norm.weight", E, 1.0, 0.1)
    vec("token_embd_norm.bias", E, 0.0, 0.1)
    for i in range(a.layers):
        if nomic:
            mat(f"blk.{i}.attn_qkv.weight", E, 3 * E, E ** -0.5)
            mat(f"blk.{i}.attn_output.weight", E, E, E ** -0.5)
        else:
            for p in ("q", "k", "v", "output"):
                mat(f"blk.{i}.attn_{p}.weight", E, E, E ** -0.5)
                vec(f"blk.{i}.attn_{p}.bias", E, 0.0, 0.1)
        vec(f"blk.{i}.attn_output_norm.weight", E, 1.0, 0.1)
        vec(f"blk.{i}.attn_output_norm.bias", E, 0.0, 0.1)
        if nomic:
            mat(f"blk.{i}.ffn_gate.weight", E, F, E ** -0.5)
        mat(f"blk.{i}.ffn_up.weight", E, F, E ** -0.5)
        if not nomic:
            vec(f"blk.{i}.ffn_up.bias", F, 0.0, 0.1)
        mat(f"blk.{i}.ffn_down.weight", F, E, F ** -0.5)
        if not nomic:
            vec(f"blk.{i}.ffn_down.bias", E, 0.0, 0.1)
        vec(f"blk.{i}.layer_output_norm.weight", E, 1.0, 0.1)
        vec(f"blk.{i}.layer_output_norm.bias", E, 0.0, 0.1)
    rank = a.pooling == "rank"
    if rank:
        mat("cls.weight", E, E, E ** -0.5)
        vec("cls.bias", E, 0.0, 0.1)
        mat("cls.output.weight", E, 1, 1.0)  # wide: random encoders give close CLS states
        vec("cls.output.bias", 1, 0.0, 0.5)

    arch = a.arch
    kvs = [
        kv_str("general.architecture", arch),
        kv_str("general.name", f"{arch}-tiny-synthetic"),
        kv_u32("general.alignment", 32),
        kv_u32(f"{arch}.context_length", a.ctx),
        kv_u32(f"{arch}.embedding_length", E),
        kv_u32(f"{arch}.feed_forward_length", F),
        kv_u32(f"{arch}.block_count", a.layers),
        kv_u32(f"{arch}.attention.head_count", a.heads),
        kv_f32(f"{arch}.attention.layer_norm_epsilon", 1e-12),
        kv_bool(f"{arch}.attention.causal", False),
        kv_u32(f"{arch}.pooling_type", {"mean": 1, "cls": 2, "rank": 4}[a.pooling]),
        kv_str("tokenizer.ggml.model", "bert"),
        kv_arr("tokenizer.ggml.tokens", 8, toks),
        kv_arr("tokenizer.ggml.token_type", 5, [3 if t in SPECIAL else 1 for t in toks]),
        kv_u32("tokenizer.ggml.token_type_count", 2),
        kv_u32("tokenizer.ggml.padding_token_id", toks.index("[PAD]")),
        kv_u32("tokenizer.ggml.unknown_token_id", toks.index("[UNK]")),
        kv_u32("tokenizer.ggml.bos_token_id", toks.index("[CLS]")),
        kv_u32("tokenizer.ggml.cls_token_id", toks.index("[CLS]")),
        kv_u32("tokenizer.ggml.seperator_token_id", toks.index("[SEP]")),
        kv_u32("tokenizer.ggml.mask_token_id", toks.index("[MASK]")),
        kv_bool("tokenizer.ggml.normalizer.lowercase", True),
    ]
    if nomic:
        kvs.append(kv_f32(f"{arch}.rope.freq_base", 1000.0))
    if rank:
        kvs += [
            kv_u32("tokenizer.ggml.eos_token_id", toks.index("[SEP]")),
            kv_bool("tokenizer.ggml.add_bos_token", True),
            kv_bool("tokenizer.ggml.add_eos_token", True),
            kv_bool("tokenizer.ggml.add_sep_token", False),
        ]
    write_gguf(a.out, kvs, tensors)
    print(f"{a.out}: {arch}, {V} tokens, n_embd {E}, {a.layers} layers, pooling {a.pooling}")


if __name__ == "__main__":
    main()
