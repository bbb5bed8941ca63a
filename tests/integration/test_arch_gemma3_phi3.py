"""`uvllm serve` on the gemma3 and phi3 test models of this repository (tests/models, cpu
backend): /v1/completions tokenizes the golden prompts as llama.cpp did (SPM vocabulary,
BOS added) and its greedy first token is llama.cpp's (tests/golden; random weights: later
tokens are near-ties, so only the first is compared, as tests/unit/cpu/test_golden.c
does). The gemma3 prompts (31-55 tokens) are longer than its sliding window of 8, so the
answer depends on the window being honoured through the server's paged KV cache."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from uvllm_harness import Server, run, test  # noqa: E402

SRC = os.environ.get("UVLLM_SOURCE_DIR",
                     os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def cases(name):
    with open(os.path.join(SRC, "tests", "golden", f"{name}.jsonl")) as f:
        return [json.loads(line) for line in f]


def check(name):
    model = os.path.join(SRC, "tests", "models", f"{name}.gguf")
    with Server("--model", model, "--threads", "2", "--kv-mem", "64M", backend="cpu") as srv:
        for case in cases(name):
            body = json.dumps({"prompt": case["prompt"], "max_tokens": 1, "temperature": 0})
            r = srv.request("POST", "/v1/completions", body=body)
            assert r.status == 200, (name, r.status, r.body)
            j = r.json()
            assert j["usage"]["prompt_tokens"] == len(case["prompt_tokens"]), (name, case, j)
            # the text of llama.cpp's first token after the prompt (SPM drops the leading
            # space of a text's first piece, so detokenize it in context)
            ids = case["prompt_tokens"]
            before, after = (srv.request("POST", "/detokenize", body=json.dumps({"tokens": t}))
                             .json()["content"] for t in (ids, ids + case["tokens"][:1]))
            assert after.startswith(before), (name, before, after)
            want, got = after[len(before):], j["choices"][0]["text"]
            assert got == want, f"{name} {case['prompt']!r}: first token {got!r}, llama.cpp {want!r}"


@test
def gemma3_first_token_matches_llama_cpp():
    check("gemma3-tiny-f16")


@test
def phi3_first_token_matches_llama_cpp():
    check("phi3-tiny-f16")


if __name__ == "__main__":
    sys.exit(run())
