#!/usr/bin/env python3
"""`uvllm quantize` recipes and `uvllm synth --type RECIPE`:
- quantizing the shared f16 models with q4_k_m, q5_k_m, q6_k, iq4_nl and iq4_xs writes
  byte for byte the file llama-quantize wrote (tests/data/quant_mix/llama-quantize.sha256,
  recorded by scripts/quant_mix_expect.sh): same per-tensor types, same quantized blocks,
  same metadata;
- the results load and generate (IQ4 and K-quant kernels on real files);
- synth writes a recipe directly: every tensor has the type llama-quantize gives the same
  tensor of the f16 model (tests/data/quant_mix/mini-f16.tsv), general.file_type is the
  recipe's, and the model generates.
Env: UVLLM_BIN, UVLLM_SHARED or UVLLM_SOURCE_DIR. UVLLM_SANITIZER_BUILD=1 (CMakeLists.txt
sets it in the ASan and TSan builds) compares every recipe on SANITIZER_MODELS only: the
same code on more bytes, single-threaded, and several minutes there; the Release build
(`make test`) always compares all of them."""
import hashlib
import os
import sys

from cli_check import SHARED, SRC, Gguf, check, generates, report, run, scratch_dir

DATA = os.path.join(SRC, "tests", "data", "quant_mix")
TYPE_NAMES = {0: "f32", 1: "f16", 2: "q4_0", 3: "q4_1", 6: "q5_0", 7: "q5_1", 8: "q8_0",
              12: "q4_k", 13: "q5_k", 14: "q6_k", 20: "iq4_nl", 23: "iq4_xs", 30: "bf16"}
FTYPES = {"q4_k_m": 15, "q5_k_m": 17, "q6_k": 18, "iq4_nl": 25, "iq4_xs": 30}


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def expected_types(tsv, recipe):
    cols, out = None, {}
    for line in open(tsv):
        f = line.rstrip("\n").split("\t")
        if line.startswith("# name"):
            cols = line[2:].rstrip("\n").split("\t")
        elif not line.startswith("#"):
            out[f[0]] = f[cols.index(recipe)]
    return out


# every recipe; aidreams260K's rows of 172 fall back, qwen3-tiny has the generate checks
SANITIZER_MODELS = ("aidreams260K-f16.gguf", "qwen3-tiny-f16.gguf")


def main():
    sums = [l.split() for l in open(os.path.join(DATA, "llama-quantize.sha256")) if l.strip()]
    check(len(sums) >= 25, f"{len(sums)} recorded llama-quantize outputs")
    if os.environ.get("UVLLM_SANITIZER_BUILD") == "1":
        sums = [s for s in sums if s[1] in SANITIZER_MODELS]
        check(len(sums) == 5 * len(SANITIZER_MODELS), f"sanitizer build: {len(sums)} of them")
    with scratch_dir("uvllm-qmix-") as tmp:
        for want, model, recipe in sums:
            src = os.path.join(SHARED, "models", model)
            out = os.path.join(tmp, "out.gguf")
            rc, _, err = run("quantize", src, out, recipe)
            check(rc == 0, f"quantize {model} {recipe} exits 0 ({err.strip()[-200:]})")
            if rc:
                continue
            got = sha256(out)
            check(got == want, f"{model} {recipe}: same bytes as llama-quantize ({got[:12]})")
            if model in ("mini-f16.gguf", "qwen3-tiny-f16.gguf") and recipe in (
                    "q4_k_m", "iq4_nl", "iq4_xs"):
                generates(out, f"{model} {recipe}")
            os.unlink(out)

        vocab = os.path.join(SHARED, "models", "mini-f16.gguf")
        for recipe in ("q4_k_m", "iq4_xs"):
            out = os.path.join(tmp, f"synth-{recipe}.gguf")
            rc, _, err = run("synth", "--shape", "mini", "--vocab", vocab, "--type", recipe, out)
            check(rc == 0, f"synth --type {recipe} exits 0 ({err.strip()})")
            if rc:
                continue
            g = Gguf(out)
            types, ftype = g.types(), g.kv.get("general.file_type")
            want = expected_types(os.path.join(DATA, "mini-f16.tsv"), recipe)
            bad = [n for n in want if TYPE_NAMES.get(types.get(n)) != want[n]]
            check(not bad and len(types) == len(want),
                  f"synth {recipe}: every tensor has llama-quantize's type (off: {bad[:4]})")
            check(ftype == FTYPES[recipe], f"synth {recipe}: general.file_type {ftype}")
            generates(out, f"synth {recipe}")
            os.unlink(out)
        check(run("quantize", vocab, os.path.join(tmp, "x.gguf"), "q4_k_s")[0] == 2,
              "unknown recipe: exit 2")
    return report()


if __name__ == "__main__":
    sys.exit(main())
