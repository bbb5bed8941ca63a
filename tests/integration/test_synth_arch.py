#!/usr/bin/env python3
"""`uvllm synth --arch gemma3|phi3`: the tiny test shapes reproduce tests/models byte for
byte (the llama.cpp goldens in tests/golden were made from those files, so a change to the
generator must regenerate them with scripts/golden_arch.sh); the real shapes (Gemma-3-1B,
Phi-3-mini) have their tensor shapes and keys, `--layers N` cuts them to N layers, and the
result runs through `uvllm generate` (head_dim 256 and 96 attention); a shape of one
architecture with another --arch is refused. Env: UVLLM_BIN, UVLLM_SHARED or
UVLLM_SOURCE_DIR."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_check import SHARED, SRC, Gguf, check, report, run, scratch_dir  # noqa: E402


def main():
    vocab = os.path.join(SHARED, "models", "aidreams260K.gguf")
    with scratch_dir() as tmp:
        for arch in ("gemma3", "phi3"):
            out = os.path.join(tmp, f"{arch}-tiny.gguf")
            rc, _, err = run("synth", "--arch", arch, "--shape", f"{arch}-tiny", "--vocab", vocab,
                             out)
            ref = os.path.join(SRC, "tests", "models", f"{arch}-tiny-f16.gguf")
            check(rc == 0 and open(out, "rb").read() == open(ref, "rb").read(),
                  f"{arch}-tiny reproduces tests/models/{arch}-tiny-f16.gguf ({err.strip()})")

        g1 = os.path.join(tmp, "gemma3-1b.gguf")
        rc, _, err = run("synth", "--arch", "gemma3", "--shape", "gemma3-1b", "--layers", "2",
                         "--type", "q4_0", "--vocab", vocab, g1)
        check(rc == 0, f"gemma3-1b --layers 2 q4_0 written ({err.strip()})")
        g = Gguf(g1)
        check(g.kv["gemma3.block_count"] == 2, "--layers 2: block_count 2")
        check(g.kv["gemma3.attention.key_length"] == 256 and
              g.kv["gemma3.attention.sliding_window"] == 512, "Gemma-3-1B: head_dim 256, window 512")
        check(g.t["blk.1.attn_q.weight"][0] == (1152, 1024) and
              g.t["blk.1.attn_k.weight"][0] == (1152, 256) and
              g.t["blk.1.ffn_gate.weight"][0] == (1152, 6912), "Gemma-3-1B projection shapes")
        check("output.weight" not in g.t and "blk.1.post_ffw_norm.weight" in g.t and
              "blk.2.attn_norm.weight" not in g.t, "tied output, post norms, 2 layers")

        p3 = os.path.join(tmp, "phi3-mini.gguf")
        rc, _, err = run("synth", "--arch", "phi3", "--shape", "phi3-mini", "--layers", "1",
                         "--type", "q4_0", "--vocab", vocab, p3)
        check(rc == 0, f"phi3-mini --layers 1 q4_0 written ({err.strip()})")
        p = Gguf(p3)
        check(p.t["blk.0.attn_qkv.weight"][0] == (3072, 9216) and
              p.t["blk.0.ffn_up.weight"][0] == (3072, 16384) and "blk.0.ffn_gate.weight" not in p.t,
              "Phi-3-mini fused qkv and gate|up")

        for m in (g1, p3):
            rc, text, err = run("generate", "--model", m, "--prompt", "Hello world",
                                "--max-tokens", "4")
            check(rc == 0 and text, f"{os.path.basename(m)}: generate runs ({err.strip()[-200:]})")

        rc, _, err = run("synth", "--arch", "llama", "--shape", "gemma3-tiny", "--vocab", vocab,
                         os.path.join(tmp, "x.gguf"))
        check(rc == 2 and "--arch gemma3" in err, f"gemma3 shape with --arch llama: exit 2 ({err.strip()})")
        rc, _, _ = run("synth", "--arch", "phi3", "--shape", "phi3-tiny", "--layers", "-1",
                       "--vocab", vocab, os.path.join(tmp, "x.gguf"))
        check(rc == 2, "--layers -1: exit 2")
    return report()


if __name__ == "__main__":
    sys.exit(main())
