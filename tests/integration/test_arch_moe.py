"""`uvllm serve` on the qwen3moe test model (tests/models/qwen3moe-tiny-f16.gguf, cpu
backend): /v1/completions tokenizes the golden prompts as llama.cpp did and its greedy first
token is llama.cpp's (tests/golden/qwen3moe-tiny-f16.jsonl; random weights: only the first
token is compared, as tests/unit/cpu/test_moe.c does). Several requests in flight at once
(batched by the scheduler, their tokens grouped by expert in one step) give the same first
tokens, and a streamed request generates through several decode steps."""

import json
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from uvllm_harness import Server, run, test  # noqa: E402

SRC = os.environ.get("UVLLM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
MODEL = os.path.join(SRC, "tests", "models", "qwen3moe-tiny-f16.gguf")
GOLDEN = os.path.join(SRC, "tests", "golden", "qwen3moe-tiny-f16.jsonl")


def cases():
    return [json.loads(line) for line in open(GOLDEN) if line.strip()]


def detok(srv, ids):
    return srv.request("POST", "/detokenize", body=json.dumps({"tokens": ids})).json()["content"]


def want_text(srv, case):
    """llama.cpp's first token as the text a completion shows after the prompt (an SPM
    piece's leading space is stripped only at the start of a text, so it is read off the
    prompt followed by the token)."""
    base, full = detok(srv, case["prompt_tokens"]), detok(srv, case["prompt_tokens"] + case["tokens"][:1])
    assert full.startswith(base), (base, full)
    return full[len(base):]


def first(srv, case):
    body = json.dumps({"prompt": case["prompt"], "max_tokens": 1, "temperature": 0})
    r = srv.request("POST", "/v1/completions", body=body)
    assert r.status == 200, (r.status, r.body)
    return r.json()


def server():
    return Server("--model", MODEL, "--threads", "2", "--kv-mem", "64M", backend="cpu")


@test
def qwen3moe_first_token_matches_llama_cpp():
    with server() as srv:
        for case in cases():
            j = first(srv, case)
            assert j["usage"]["prompt_tokens"] == len(case["prompt_tokens"]), (case, j)
            got, want = j["choices"][0]["text"], want_text(srv, case)
            assert got == want, f"{case['prompt']!r}: first token {got!r}, llama.cpp {want!r}"


@test
def qwen3moe_concurrent_requests_same_first_tokens():
    with server() as srv:
        cs = cases()
        want = [want_text(srv, c) for c in cs]
        got = [None] * len(cs)

        def one(i):
            got[i] = first(srv, cs[i])["choices"][0]["text"]

        ts = [threading.Thread(target=one, args=(i,)) for i in range(len(cs))]
        for t in ts:
            t.start()
        for t in ts:
            t.join(60)
        assert got == want, (got, want)


@test
def qwen3moe_streams_a_continuation():
    with server() as srv:
        body = json.dumps({"prompt": cases()[0]["prompt"], "max_tokens": 8, "temperature": 0,
                           "stream": True})
        r = srv.request("POST", "/v1/completions", body=body)
        assert r.status == 200, (r.status, r.body)
        ev = r.events()
        assert ev[-1] == "[DONE]", ev
        chunks = [json.loads(e) for e in ev[:-1]]
        assert chunks and chunks[-1]["choices"][0]["finish_reason"] in ("length", "stop"), chunks


if __name__ == "__main__":
    sys.exit(run())
