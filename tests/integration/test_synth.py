#!/usr/bin/env python3
"""`uvllm synth` and `uvllm quantize`: a synthesized mini model has the layout llama.cpp
gives the shipped mini (same file size), the stated weight statistics and the vocabulary
it was given; quantizing it to q8_0 gives the size of llama.cpp's q8_0 file and weights
within the type's error. `--arch qwen2|qwen3` adds those architectures' tensors and keys,
and the result (also quantized to q4_1 / q5_0 / q5_1) runs through `uvllm generate`.
Env: UVLLM_BIN, UVLLM_SHARED or UVLLM_SOURCE_DIR."""
import math
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("UVLLM_SOURCE_DIR", os.path.join(HERE, "..", ".."))
SHARED = os.environ.get("UVLLM_SHARED") or os.path.join(SRC, "..", "shared")
BIN = os.environ.get("UVLLM_BIN", os.path.join(SRC, "build", "uvllm"))
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def run(*args):
    p = subprocess.run([BIN, *args], capture_output=True, timeout=600)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


class Gguf:
    """Just enough of a GGUF reader to check what the C code wrote."""

    def __init__(self, path):
        self.b = open(path, "rb").read()
        self.pos = 8
        n_t, n_kv = self.u("<QQ")
        self.kv_raw, self.kv = {}, {}
        for _ in range(n_kv):
            key = self.s()
            start = self.pos
            t, = self.u("<I")
            self.kv[key] = self.value(t)
            self.kv_raw[key] = self.b[start:self.pos]
        self.t = {}
        for _ in range(n_t):
            name = self.s()
            nd, = self.u("<I")
            ne = self.u("<" + "Q" * nd)
            typ, off = self.u("<IQ")
            self.t[name] = (ne, typ, off)
        align = self.kv.get("general.alignment", 32)
        self.data = (self.pos + align - 1) // align * align

    def u(self, fmt):
        v = struct.unpack_from(fmt, self.b, self.pos)
        self.pos += struct.calcsize(fmt)
        return v

    def s(self):
        n, = self.u("<Q")
        self.pos += n
        return self.b[self.pos - n:self.pos].decode()

    def value(self, t):
        if t == 8:
            return self.s()
        if t == 9:
            et, n = self.u("<IQ")
            return [self.value(et) for _ in range(n)] if et == 8 else self.skip(SCALAR[et] * n)
        fmt = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "B", 10: "Q", 11: "q",
               12: "d"}[t]
        return self.u("<" + fmt)[0]

    def skip(self, n):
        self.pos += n
        return None

    def floats(self, name):
        ne, typ, off = self.t[name]
        n = math.prod(ne)
        p = self.data + off
        if typ == 0:
            return list(struct.unpack_from(f"<{n}f", self.b, p))
        if typ == 1:
            return list(struct.unpack_from(f"<{n}e", self.b, p))
        if typ == 8:  # q8_0: f16 scale + 32 int8
            out = []
            for blk in range(n // 32):
                d, = struct.unpack_from("<e", self.b, p + 34 * blk)
                out += [d * q for q in struct.unpack_from("<32b", self.b, p + 34 * blk + 2)]
            return out
        raise ValueError(f"type {typ}")


def std(xs):
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs))


def check_qwen(tmp):
    qvocab = os.path.join(SHARED, "models", "qwen2-tiny-f16.gguf")
    hd, kv = 256 // 4, 2 * 256 // 4  # mini: 4 heads, 2 kv heads
    for arch, extra, ne in (("qwen2", "blk.1.attn_k.bias", (kv,)),
                            ("qwen3", "blk.1.attn_q_norm.weight", (hd,))):
        out = os.path.join(tmp, f"{arch}.gguf")
        rc, _, err = run("synth", "--arch", arch, "--shape", "mini", "--vocab", qvocab, out)
        check(rc == 0, f"synth --arch {arch} exits 0 ({err.strip()})")
        if rc:
            continue
        g = Gguf(out)
        check(g.kv["general.architecture"] == arch and g.kv[f"{arch}.block_count"] == 2,
              f"{arch}: architecture and its keys")
        check(extra in g.t and tuple(g.t[extra][0]) == ne and g.t[extra][1] == 0,
              f"{arch}: {extra} is f32 {ne} ({g.t.get(extra)})")
        if arch == "qwen2":
            b = g.floats("blk.0.attn_q.bias")
            check(abs(std(b) / 0.1 - 1) < 0.25, f"qwen2 bias std {std(b):.3f} ~ 0.1")
        else:
            check(set(g.floats("blk.0.attn_k_norm.weight")) == {1.0}, "qwen3 q/k norms are 1")
        rc, text, err = run("generate", "--model", out, "--prompt", "Hello world",
                            "--max-tokens", "4", "--threads", "2")
        check(rc == 0 and text, f"{arch}: generate runs ({err.strip()[-200:]})")
        for t in ("q4_1", "q5_0", "q5_1"):
            qo = os.path.join(tmp, f"{arch}-{t}.gguf")
            rc, _, err = run("quantize", out, qo, t)
            check(rc == 0, f"{arch}: quantize {t} exits 0 ({err.strip()})")
            rc, text, err = run("generate", "--model", qo, "--prompt", "Hello world",
                                "--max-tokens", "4", "--threads", "2")
            check(rc == 0 and text, f"{arch} {t}: generate runs ({err.strip()[-200:]})")
            os.unlink(qo)


def main():
    vocab = os.path.join(SHARED, "models", "mini-f16.gguf")
    for f in [vocab, os.path.join(SHARED, "models", "aidreams260K.gguf")]:
        if not os.path.isfile(f):
            print(f"FAIL shared test data not found: {f} (set UVLLM_SHARED)")
            return 1
    tmp = tempfile.mkdtemp(prefix="uvllm-synth-")
    out = os.path.join(tmp, "mini.gguf")
    try:
        rc, _, err = run("synth", "--shape", "mini", "--vocab", vocab, out)
        check(rc == 0, f"synth mini exits 0 (got {rc}: {err.strip()})")
        if rc:
            return 1
        check(os.path.getsize(out) == os.path.getsize(vocab),
              f"synth mini f16 has llama.cpp's mini-f16 size ({os.path.getsize(out)} vs "
              f"{os.path.getsize(vocab)})")
        rc, info, err = run("info", out)
        check(rc == 0 and "n_head_kv        2" in info and "n_ff             768" in info,
              f"info reads the synthesized model ({err.strip()})")
        g, ref = Gguf(out), Gguf(vocab)
        check(g.kv_raw["tokenizer.ggml.tokens"] == ref.kv_raw["tokenizer.ggml.tokens"],
              "vocabulary copied byte for byte")
        q = g.floats("blk.0.attn_q.weight")
        d = g.floats("blk.1.ffn_down.weight")
        check(abs(std(q) / (1 / 16) - 1) < 0.03, f"attn_q std {std(q):.4f} ~ 1/sqrt(256)")
        check(abs(std(d) / (1 / math.sqrt(768)) - 1) < 0.03,
              f"ffn_down std {std(d):.4f} ~ 1/sqrt(768)")
        check(set(g.floats("blk.0.attn_norm.weight")) == {1.0}, "norms are 1")

        q8 = os.path.join(tmp, "mini-q8_0.gguf")
        rc, _, err = run("quantize", out, q8, "q8_0")
        check(rc == 0, f"quantize q8_0 exits 0 ({err.strip()})")
        ref_q8 = os.path.join(SHARED, "models", "mini-q8_0.gguf")
        check(os.path.getsize(q8) == os.path.getsize(ref_q8),
              f"q8_0 file has llama.cpp's mini-q8_0 size ({os.path.getsize(q8)})")
        gq = Gguf(q8)
        check(gq.t["blk.0.attn_norm.weight"][1] == 0 and gq.t["blk.0.attn_q.weight"][1] == 8,
              "norms stay f32, matrices become q8_0")
        qq = gq.floats("blk.0.attn_q.weight")
        rel = math.sqrt(sum((a - b) ** 2 for a, b in zip(q, qq)) / len(q)) / std(q)
        check(rel < 0.01, f"q8_0 relative RMS error {rel:.5f} < 1%")
        check(gq.kv["general.file_type"] == 7, "general.file_type says q8_0")

        aq = os.path.join(tmp, "aid-q4_0.gguf")
        rc, _, err = run("quantize", os.path.join(SHARED, "models", "aidreams260K.gguf"), aq,
                         "q4_0")
        check(rc == 0 and "stay f16" in err, f"aidreams q4_0: rows of 172 fall back to f16 ({err.strip()})")
        rc, info, _ = run("info", aq)
        check(rc == 0 and "q4_0" in info, "quantized aidreams loads")

        check_qwen(tmp)

        check(run("synth", "--shape", "mini", out)[0] == 2, "synth without --vocab: exit 2")
        check(run("synth", "--arch", "mamba", "--shape", "mini", "--vocab", vocab, out)[0] == 2,
              "unknown arch: exit 2")
        check(run("synth", "--shape", "huge", "--vocab", vocab, out)[0] == 2, "unknown shape: exit 2")
        check(run("quantize", out, q8, "q3_x")[0] == 2, "unknown type: exit 2")
        rc, _, err = run("quantize", os.path.join(tmp, "nope.gguf"), q8, "q8_0")
        check(rc == 1 and len(err.splitlines()) == 1, "missing input: exit 1, one line")
    finally:
        for f in os.listdir(tmp):
            os.unlink(os.path.join(tmp, f))
        os.rmdir(tmp)
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
