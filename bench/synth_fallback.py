"""Fallback model writer for bench/engine.sh, used ONLY while `uvllm synth`
is not available: writes a TinyLlama-1.1B-shaped llama GGUF (n_embd 2048,
22 layers, 32 heads, 4 kv heads, n_ff 5632) with F16 weights and F32 norms,
the tokenizer copied from a vocabulary-only GGUF. Weights are normal with
std 1/sqrt(fan_in), drawn as one 1 MiB block that is tiled (speed does not
depend on the values; pure Python cannot draw 1.1e9 numbers in time).
RESULTS.md says when a model came from here instead of uvllm.

usage: synth_fallback.py VOCAB.gguf OUT.gguf
"""
import random
import struct
import sys
import zlib

SC = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
E, L, H, HKV, FF, CTX = 2048, 22, 32, 4, 5632, 2048
ALIGN = 32


def read_kvs(path):
    """Raw (key, type, value bytes) of every tokenizer.* key."""
    f = open(path, "rb")
    assert f.read(4) == b"GGUF", "not a GGUF file"
    f.read(4)
    _, nkv = struct.unpack("<QQ", f.read(16))

    def raw(t):
        if t in SC:
            return f.read(SC[t])
        if t == 8:
            n = f.read(8)
            return n + f.read(struct.unpack("<Q", n)[0])
        head = f.read(12)
        et, n = struct.unpack("<IQ", head)
        return head + b"".join(raw(et) for _ in range(n))

    out = []
    for _ in range(nkv):
        kl = f.read(8)
        k = f.read(struct.unpack("<Q", kl)[0])
        t = struct.unpack("<I", f.read(4))[0]
        v = raw(t)
        if k.startswith(b"tokenizer."):
            out.append((k, t, v))
    return out


def gstr(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def kv(k, t, v):
    return gstr(k) + struct.pack("<I", t) + v


def main():
    vocab, out = sys.argv[1], sys.argv[2]
    tok = read_kvs(vocab)
    n_vocab = next(struct.unpack("<Q", v[4:12])[0] for k, t, v in tok if k == b"tokenizer.ggml.tokens")
    kvs = [kv("general.architecture", 8, gstr("llama")), kv("general.name", 8, gstr("bench-tinyllama-synth")),
           kv("general.file_type", 4, struct.pack("<I", 1)),
           kv("llama.context_length", 4, struct.pack("<I", CTX)),
           kv("llama.embedding_length", 4, struct.pack("<I", E)),
           kv("llama.block_count", 4, struct.pack("<I", L)),
           kv("llama.feed_forward_length", 4, struct.pack("<I", FF)),
           kv("llama.attention.head_count", 4, struct.pack("<I", H)),
           kv("llama.attention.head_count_kv", 4, struct.pack("<I", HKV)),
           kv("llama.rope.dimension_count", 4, struct.pack("<I", E // H)),
           kv("llama.attention.layer_norm_rms_epsilon", 6, struct.pack("<f", 1e-5)),
           kv("llama.vocab_size", 4, struct.pack("<I", n_vocab))]
    kvs += [kv(k, t, v) for k, t, v in tok]
    kvd = E // H * HKV
    tensors = [("token_embd.weight", [E, n_vocab], 1), ("output_norm.weight", [E], 0),
               ("output.weight", [E, n_vocab], 1)]
    for i in range(L):
        p = f"blk.{i}."
        tensors += [(p + "attn_norm.weight", [E], 0), (p + "attn_q.weight", [E, E], 1),
                    (p + "attn_k.weight", [E, kvd], 1), (p + "attn_v.weight", [E, kvd], 1),
                    (p + "attn_output.weight", [E, E], 1), (p + "ffn_norm.weight", [E], 0),
                    (p + "ffn_gate.weight", [E, FF], 1), (p + "ffn_up.weight", [E, FF], 1),
                    (p + "ffn_down.weight", [FF, E], 1)]
    infos, off, sizes = [], 0, []
    for name, dims, t in tensors:
        n = 1
        for d in dims:
            n *= d
        size = n * (2 if t == 1 else 4)
        infos.append(gstr(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
                     + struct.pack("<IQ", t, off))
        sizes.append(size)
        off += (size + ALIGN - 1) // ALIGN * ALIGN
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs) + b"".join(infos)
    head += b"\0" * ((-len(head)) % ALIGN)
    rng = random.Random(1234)
    blocks = {}
    for fan_in in {E, FF}:
        std = fan_in ** -0.5
        blocks[fan_in] = struct.pack(f"<{1 << 19}e", *(rng.gauss(0, std) for _ in range(1 << 19)))
    with open(out, "wb") as f:
        f.write(head)
        for (name, dims, t), size in zip(tensors, sizes):
            if t == 0:
                f.write(struct.pack("<f", 1.0) * (size // 4))
            else:
                blk = blocks[dims[0]]
                shift = (zlib.crc32(name.encode()) & 0xFFFF) * 2  # a different phase per tensor
                blk = blk[shift:] + blk[:shift]
                full, rest = divmod(size, len(blk))
                for _ in range(full):
                    f.write(blk)
                f.write(blk[:rest])
            f.write(b"\0" * ((-size) % ALIGN))


main()
