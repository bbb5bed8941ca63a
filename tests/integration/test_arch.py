"""`uvllm serve` on the qwen2 and qwen3 test models (cpu backend): /v1/completions tokenizes
the golden prompts as llama.cpp did (gpt2 BPE, no BOS) and its greedy first token is
llama.cpp's (random weights: later tokens are near-ties, so only the first is compared,
as tests/unit/cpu/test_golden.c does). The files carry no chat template: the server falls
back to ChatML (Qwen's format) and /v1/chat/completions answers through it.
Needs the shared folder ($UVLLM_SHARED, else $UVLLM_SOURCE_DIR/../shared)."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from uvllm_harness import Server, run, shared, shared_file, test  # noqa: E402



ARCHS = ("qwen2", "qwen3")
for a in ARCHS:
    shared_file("models", f"{a}-tiny-f16.gguf")
    shared_file("golden", f"{a}-tiny-f16.public.jsonl")


def cases(arch):
    path = os.path.join(shared(), "golden", f"{arch}-tiny-f16.public.jsonl")
    return [json.loads(line) for line in open(path)]


def first_token(case):
    t = case["tokens"]
    return (json.loads(t) if isinstance(t, str) else t)[0]


def check_arch(arch):
    model = os.path.join(shared(), "models", f"{arch}-tiny-f16.gguf")
    with Server("--model", model, "--threads", "2", "--kv-mem", "64M", backend="cpu") as srv:
        for case in cases(arch):
            body = json.dumps({"prompt": case["prompt"], "max_tokens": 1, "temperature": 0})
            r = srv.request("POST", "/v1/completions", body=body)
            assert r.status == 200, (arch, r.status, r.body)
            j = r.json()
            assert j["usage"]["prompt_tokens"] == len(case["prompt_tokens"]), (arch, case, j)
            want = srv.request("POST", "/detokenize",
                               body=json.dumps({"tokens": [first_token(case)]})).json()["content"]
            got = j["choices"][0]["text"]
            assert got == want, f"{arch} {case['prompt']!r}: first token {got!r}, llama.cpp {want!r}"
        body = json.dumps({"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 4,
                           "temperature": 0})
        r = srv.request("POST", "/v1/chat/completions", body=body)
        assert r.status == 200, (arch, r.status, r.body)
        j = r.json()
        assert j["choices"][0]["message"]["role"] == "assistant", j
        assert j["usage"]["completion_tokens"] >= 1, j


@test
def qwen2_first_token_matches_llama_cpp():
    check_arch("qwen2")


@test
def qwen3_first_token_matches_llama_cpp():
    check_arch("qwen3")


if __name__ == "__main__":
    sys.exit(run())
