#!/usr/bin/env python3
"""`uvllm synth` and `uvllm quantize`: a synthesized mini model has the layout llama.cpp
gives the shipped mini (same file size), the stated weight statistics and the vocabulary
it was given; quantizing it to q8_0 gives the size of llama.cpp's q8_0 file and weights
within the type's error. `--arch qwen2|qwen3` adds those architectures' tensors and keys,
and the result (also quantized to q4_1 / q5_0 / q5_1) runs through `uvllm generate`.
Env: UVLLM_BIN, UVLLM_SHARED or UVLLM_SOURCE_DIR."""
import math
import os
import sys

from cli_check import SHARED, Gguf, check, generates, report, run, scratch_dir


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
        generates(out, arch)
        for t in ("q4_1", "q5_0", "q5_1"):
            qo = os.path.join(tmp, f"{arch}-{t}.gguf")
            rc, _, err = run("quantize", out, qo, t)
            check(rc == 0, f"{arch}: quantize {t} exits 0 ({err.strip()})")
            generates(qo, f"{arch} {t}")
            os.unlink(qo)


def main():
    vocab = os.path.join(SHARED, "models", "mini-f16.gguf")
    for f in [vocab, os.path.join(SHARED, "models", "aidreams260K.gguf")]:
        if not os.path.isfile(f):
            print(f"FAIL shared test data not found: {f} (set UVLLM_SHARED)")
            return 1
    with scratch_dir("uvllm-synth-") as tmp:
        out = os.path.join(tmp, "mini.gguf")
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
    return report()


if __name__ == "__main__":
    sys.exit(main())
