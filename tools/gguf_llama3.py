#!/usr/bin/env python3
"""Turns a `llama` GGUF into a Llama-3.x-RoPE-scaling one, the way llama.cpp's converter
writes those files: a `rope_freqs.weight` tensor (F32, n_rot/2 per-frequency divisors from
the llama3 formula of rope_scaling {factor, low_freq_factor, high_freq_factor,
original_max_position_embeddings}) and no rope.scaling.* keys; also sets rope.freq_base
and context_length. Every other key and tensor is copied unchanged (pure Python, no numpy).

    tools/gguf_llama3.py IN.gguf OUT.gguf [--base 500000] [--ctx 131072] [--factor 32]
                         [--low 1] [--high 4] [--orig 8192]

Llama 3.2 uses base 500000, factor 32, low 1, high 4, orig 8192. With orig 8192 the
divisors only matter after thousands of positions; the goldens use a small --orig so that
most frequencies are divided at the positions of a short prompt."""
import argparse
import math
import struct

from gguf_write import gguf_str, write_gguf

SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "B", 10: "Q", 11: "q",
          12: "d"}
TYPE_SIZE = {0: (4, 1), 1: (2, 1)}  # F32, F16: bytes per element; others copied by offset


class Reader:
    def __init__(self, b):
        self.b, self.pos = b, 0

    def u(self, fmt):
        v = struct.unpack_from("<" + fmt, self.b, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return v

    def s(self):
        n, = self.u("Q")
        self.pos += n
        return self.b[self.pos - n:self.pos].decode()

    def skip_value(self, t):
        if t == 8:
            self.s()
        elif t == 9:
            et, n = self.u("IQ")
            for _ in range(n):
                self.skip_value(et)
        else:
            self.u(SCALAR[t])

    def value(self, t):
        if t == 8:
            return self.s()
        return self.u(SCALAR[t])[0]


def llama3_factors(n_rot, base, factor, low, high, orig):
    out = []
    lo_wl, hi_wl = orig / low, orig / high
    for i in range(0, n_rot, 2):
        # float32 as the converter computes the frequencies (torch float32)
        freq = struct.unpack("<f", struct.pack("<f", 1.0 / (base ** (i / n_rot))))[0]
        wavelen = 2 * math.pi / freq
        if wavelen < hi_wl:
            out.append(1.0)
        elif wavelen > lo_wl:
            out.append(factor)
        else:
            smooth = (orig / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("inp")
    ap.add_argument("out")
    ap.add_argument("--base", type=float, default=500000.0)
    ap.add_argument("--ctx", type=int, default=131072)
    ap.add_argument("--factor", type=float, default=32.0)
    ap.add_argument("--low", type=float, default=1.0)
    ap.add_argument("--high", type=float, default=4.0)
    ap.add_argument("--orig", type=float, default=8192.0)
    a = ap.parse_args()

    b = open(a.inp, "rb").read()
    r = Reader(b)
    assert b[:4] == b"GGUF", "not a GGUF file"
    r.pos = 4
    version, n_t, n_kv = r.u("IQQ")
    arch = None
    kvs = []  # (key, raw bytes of type+value)
    hp = {}
    for _ in range(n_kv):
        key = r.s()
        start = r.pos
        t, = r.u("I")
        if t in (8,) or t in SCALAR:
            v = r.value(t)
            hp[key] = v
        else:
            r.skip_value(t)
        kvs.append((key, b[start:r.pos]))
    arch = hp["general.architecture"]
    assert arch == "llama", f"architecture {arch}, not llama"
    align = hp.get("general.alignment", 32)
    tensors = []
    for _ in range(n_t):
        name = r.s()
        nd, = r.u("I")
        ne = r.u("Q" * nd)
        typ, off = r.u("IQ")
        tensors.append([name, ne, typ, off])
    assert all(t[0] != "rope_freqs.weight" for t in tensors), "already has rope_freqs"
    data0 = (r.pos + align - 1) // align * align
    # byte length of each tensor: up to the next offset (sorted), the last up to EOF
    offs = sorted(t[3] for t in tensors) + [len(b) - data0]
    size_of = {o: offs[i + 1] - o for i, o in enumerate(offs[:-1])}

    n_embd = hp[f"{arch}.embedding_length"]
    n_head = hp[f"{arch}.attention.head_count"]
    n_rot = hp.get(f"{arch}.rope.dimension_count", n_embd // n_head)
    factors = llama3_factors(n_rot, a.base, a.factor, a.low, a.high, a.orig)

    set_kv = {f"{arch}.rope.freq_base": struct.pack("<If", 6, a.base),
              f"{arch}.context_length": struct.pack("<II", 4, a.ctx)}
    out_kvs = [(k, set_kv.pop(k, v)) for k, v in kvs] + list(set_kv.items())

    rope = ("rope_freqs.weight", (len(factors),), 0, struct.pack(f"<{len(factors)}f", *factors))
    out = [(name, ne, typ, b[data0 + off:data0 + off + size_of[off]])
           for name, ne, typ, off in tensors] + [rope]
    write_gguf(a.out, [gguf_str(k) + v for k, v in out_kvs], out, align, version)
    print(f"{a.out}: rope_freqs[{len(factors)}] = " +
          " ".join(f"{x:.4g}" for x in factors))


if __name__ == "__main__":
    main()
