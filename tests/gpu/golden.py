#!/usr/bin/env python3
"""The shared goldens (../shared/golden, produced by llama.cpp) through `uvllm serve
--backend cuda`: the prompts go in as llama.cpp's token ids, greedy; for aidreams260K (F32,
F16) the whole continuation must equal llama.cpp's, for the random-weight mini-* and
qwen2/qwen3-tiny files the first token (later ones are near-ties, as
tests/unit/cpu/test_golden.c explains).

Without a CUDA device the server refuses to start with a clear line; the test then prints
it and exits 77, which ctest reports as skipped (SKIP_RETURN_CODE)."""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from uvllm_harness import Server, run, shared, test  # noqa: E402

FULL = ("aidreams260K", "aidreams260K-f16")
FIRST = ("mini-f16", "mini-bf16", "mini-q8_0", "mini-q4_0", "mini-q4_k_m", "qwen2-tiny-f16",
         "qwen3-tiny-f16")


def start(name):
    model = os.path.join(shared(), "models", name + ".gguf")
    return Server("--model", model, "--kv-mem", "64M", backend="cuda")


def device_or_skip():
    try:
        with start(FULL[0]):
            return
    except AssertionError as e:
        text = str(e)
        if "no CUDA device" in text or "this build has no CUDA" in text:
            reason = [ln for ln in text.splitlines() if "cuda backend" in ln]
            print("SKIP: " + (reason[0].strip() if reason else "no CUDA device"))
            sys.exit(77)
        raise


def cases(name):
    path = os.path.join(shared(), "golden", name + ".public.jsonl")
    out = []
    for line in open(path):
        c = json.loads(line)
        t = c["tokens"]
        c["tokens"] = json.loads(t) if isinstance(t, str) else t
        out.append(c)
    return out


def check(name, whole):
    with start(name) as srv:
        for c in cases(name):
            n = len(c["tokens"]) if whole else 1
            body = json.dumps({"prompt": c["prompt_tokens"], "max_tokens": n, "temperature": 0})
            r = srv.request("POST", "/v1/completions", body=body)
            assert r.status == 200, (name, r.status, r.body)
            j = r.json()
            got_n = j["usage"]["completion_tokens"]
            want = srv.request("POST", "/detokenize",
                               body=json.dumps({"tokens": c["tokens"][:got_n]})).json()["content"]
            got = j["choices"][0]["text"]
            assert got == want, f"{name} {c['prompt']!r}: {got!r} != llama.cpp {want!r}"
            assert got_n == n or j["choices"][0]["finish_reason"] == "stop", (name, j)


@test
def aidreams_greedy_continuations_match():
    for name in FULL:
        check(name, True)


@test
def mini_first_tokens_match():
    for name in FIRST:
        check(name, False)


if __name__ == "__main__":
    device_or_skip()
    sys.exit(run())
