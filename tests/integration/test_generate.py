#!/usr/bin/env python3
"""`uvllm generate` end to end against llama.cpp's goldens (tokenizer + forward pass +
greedy sampling + streaming detokenizer): for every aidreams260K prompt (F32 and F16
files) the --json output must carry llama.cpp's prompt tokens and greedy tokens exactly,
and the text must equal the golden continuation. Also: usage errors exit 2, a bad model
exits 1 with one line, and the streamed (non-JSON) text equals the JSON text. --parallel:
four sequences decoded together through the scheduler (different prompt lengths, so steps
mix prefill chunks and decode tokens) each give the greedy tokens and text of the same
prompt run alone."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from uvllm_harness import binary, check, failures, shared  # noqa: E402

BIN = binary()
SHARED = shared()


def run(args, timeout=300):
    return subprocess.run([BIN, "generate"] + args, capture_output=True, timeout=timeout)


def golden(name):
    path = os.path.join(SHARED, "golden", name + ".public.jsonl")
    if not os.path.exists(path):
        print(f"FAIL: golden file {path} is missing (set UVLLM_SHARED)")
        sys.exit(1)
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def greedy_matches(name):
    model = os.path.join(SHARED, "models", name + ".gguf")
    for i, g in enumerate(golden(name)):
        r = run(["--model", model, "--prompt", g["prompt"], "--max-tokens", str(len(g["tokens"])),
                 "--threads", "2", "--json"])
        check(r.returncode == 0, f"{name} #{i}: exit {r.returncode}: {r.stderr.decode()[-300:]}")
        if r.returncode:
            continue
        out = json.loads(r.stdout)
        check(out["prompt_tokens"] == g["prompt_tokens"],
              f"{name} #{i}: prompt tokens {out['prompt_tokens']} != {g['prompt_tokens']}")
        # llama.cpp's list may end with the end-of-generation token, which we do not print
        want = g["tokens"]
        got = out["tokens"]
        check(got == want, f"{name} #{i}: tokens\n  ours  {got}\n  llama {want}")
        want_text = bytes.fromhex(g["text_bytes_hex"]).decode("utf-8", "replace")
        check(out["text"] == want_text, f"{name} #{i}: text {out['text']!r} != {want_text!r}")
        check(out["prefill_tokens_per_s"] > 0 and out["decode_tokens_per_s"] > 0,
              f"{name} #{i}: speeds not reported: {out}")
        check(out.get("isa") in ("scalar", "avx2", "avx512"), f"{name} #{i}: isa {out.get('isa')!r}")
    print(f"{name}: {len(golden(name))} prompts checked")


def isa_reported():
    """--json names the kernel path its speeds came from; UVLLM_ISA=scalar caps it."""
    model = os.path.join(SHARED, "models", "aidreams260K.gguf")
    args = [BIN, "generate", "--model", model, "--prompt", "x", "--max-tokens", "2", "--json"]
    r = subprocess.run(args, capture_output=True, env=dict(os.environ, UVLLM_ISA="scalar"))
    check(r.returncode == 0 and json.loads(r.stdout)["isa"] == "scalar",
          f"UVLLM_ISA=scalar: {r.stdout[:200]!r}")


def errors():
    model = os.path.join(SHARED, "models", "aidreams260K.gguf")
    for args in (["--model", model], ["--prompt", "x"], ["--model", model, "--prompt", "x", "--bogus"],
                 ["--model", model, "--prompt", "x", "--kv-type", "q8"],
                 ["--model", model, "--prompt", "x", "--max-tokens", "-3"],
                 ["--model", model, "--prompt", "x", "--temperature", "abc"]):
        r = run(args)
        check(r.returncode == 2, f"{args}: exit {r.returncode}, expected 2")
        check(r.stderr.strip() != b"", f"{args}: no message")
    r = run(["--model", "/nonexistent/m.gguf", "--prompt", "x"])
    check(r.returncode == 1, f"missing model: exit {r.returncode}, expected 1")
    check(len(r.stderr.decode().strip().splitlines()) == 1, f"missing model: {r.stderr!r}")
    r = run(["--model", os.path.join(SHARED, "golden", "README.md"), "--prompt", "x"])
    check(r.returncode == 1, f"not a GGUF: exit {r.returncode}, expected 1")
    # streamed text equals the JSON text; sampling with a seed is reproducible
    base = ["--model", model, "--prompt", "The robot", "--max-tokens", "30", "--temperature",
            "0.9", "--seed", "7"]
    a, b, c = run(base + ["--json"]), run(base + ["--json"]), run(base)
    ja, jb = json.loads(a.stdout), json.loads(b.stdout)
    check(ja["tokens"] == jb["tokens"], "same seed gave different tokens")
    check(c.stdout.decode().rstrip("\n") == ja["text"],
          f"streamed text {c.stdout!r} != json text {ja['text']!r}")


def parallel_matches():
    model = os.path.join(SHARED, "models", "aidreams260K.gguf")
    prompts = [g["prompt"] for g in golden("aidreams260K")][:4]
    prompts += ["Once upon a time"] * (4 - len(prompts))
    prompts[1] = prompts[1] + " and then, much later, the very same thing happened again"
    alone = []
    for p in prompts:
        r = run(["--model", model, "--prompt", p, "--max-tokens", "40", "--threads", "2",
                 "--json", "--parallel", "1"])
        check(r.returncode == 0, f"parallel 1: exit {r.returncode}: {r.stderr.decode()[-300:]}")
        alone.append(json.loads(r.stdout) if r.returncode == 0 else None)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(prompts) + "\n")
        path = f.name
    try:
        r = run(["--model", model, "--prompts-file", path, "--parallel", "4", "--max-tokens",
                 "40", "--threads", "2", "--json"])
    finally:
        os.unlink(path)
    check(r.returncode == 0, f"parallel 4: exit {r.returncode}: {r.stderr.decode()[-300:]}")
    if r.returncode:
        return
    out = json.loads(r.stdout)
    seqs = out["sequences"]
    check(out["parallel"] == 4 and len(seqs) == 4, f"parallel 4: {len(seqs)} sequences")
    check(out["decode_tokens_per_s"] > 0 and out["prefill_tokens_per_s"] > 0,
          f"parallel 4: speeds not reported: {out}")
    check(out["steps"] < 4 * 40, f"parallel 4: {out['steps']} steps, sequences not batched")
    for i, (a, b) in enumerate(zip(alone, seqs)):
        if a is None:
            continue
        check(b["prompt_tokens"] == a["prompt_tokens"], f"parallel #{i}: prompt tokens differ")
        check(b["tokens"] == a["tokens"], f"parallel #{i}: tokens\n  4   {b['tokens']}\n  1   {a['tokens']}")
        check(b["text"] == a["text"], f"parallel #{i}: text {b['text']!r} != {a['text']!r}")
    # N copies of one prompt: all the same greedy text
    r = run(["--model", model, "--prompt", prompts[0], "--parallel", "3", "--max-tokens", "40",
             "--threads", "2", "--json"])
    check(r.returncode == 0, f"parallel copies: exit {r.returncode}")
    if r.returncode == 0 and alone[0] is not None:
        texts = [q["text"] for q in json.loads(r.stdout)["sequences"]]
        check(texts == [alone[0]["text"]] * 3, f"parallel copies: {texts}")
    print("parallel: 4 sequences checked")


greedy_matches("aidreams260K")
greedy_matches("aidreams260K-f16")
errors()
isa_reported()
parallel_matches()
if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("ok")
