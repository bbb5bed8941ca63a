"""`uvllm serve --model aidreams260K.gguf` (a real trained model on the cpu backend):
greedy completions over HTTP equal llama.cpp's golden continuations, streamed text equals
the one-shot text, and many requests batched into the same steps give the same text as
one at a time (the scheduler's page tables and chunking must not change the result).
Needs the shared folder ($UVLLM_SHARED, else $UVLLM_SOURCE_DIR/../shared)."""

import json
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from uvllm_harness import Lazy, Reader, build_request, main, shared_file, test  # noqa: E402


MODEL = shared_file("models", "aidreams260K.gguf")
GOLDEN = shared_file("golden", "aidreams260K.public.jsonl")

CASES = [json.loads(line) for line in open(GOLDEN)]


srv = Lazy("--model", MODEL, "--threads", "2", "--max-batch-tokens", "64", backend="cpu")


def n_golden(case):
    t = case["tokens"]
    return len(json.loads(t) if isinstance(t, str) else t)


def complete(prompt, n, stream=False):
    body = json.dumps({"prompt": prompt, "max_tokens": n, "temperature": 0, "stream": stream})
    r = srv().request("POST", "/v1/completions", body=body)
    assert r.status == 200, (r.status, r.body)
    if not stream:
        return r.json()
    ev = r.events()
    assert ev[-1] == "[DONE]"
    chunks = [json.loads(e) for e in ev[:-1]]
    return {"text": "".join(c["choices"][0]["text"] for c in chunks),
            "finish_reason": chunks[-1]["choices"][0]["finish_reason"]}


@test
def greedy_matches_llama_cpp():
    for case in CASES:
        j = complete(case["prompt"], n_golden(case))
        assert j["usage"]["prompt_tokens"] == len(case["prompt_tokens"]), (case["prompt"], j)
        got = j["choices"][0]["text"]
        assert got == case["text"], f"{case['prompt']!r}:\n got {got!r}\nwant {case['text']!r}"


@test
def stream_text_equals_one_shot_text():
    case = CASES[0]
    s = complete(case["prompt"], 20, stream=True)
    j = complete(case["prompt"], 20)
    assert s["text"] == j["choices"][0]["text"], (s, j)
    assert s["finish_reason"] == j["choices"][0]["finish_reason"] == "length"


@test
def concurrent_requests_match_sequential():
    # Every prompt at once, several times: steps mix prefill chunks (budget 64) and decodes
    # of up to 30 sequences; each must still produce the golden continuation.
    results, errors = {}, []

    def one(i, case):
        try:
            with srv().connect(timeout=60) as s:
                body = json.dumps({"prompt": case["prompt"], "max_tokens": n_golden(case),
                                   "temperature": 0})
                s.sendall(build_request("POST", "/v1/completions", body, close=True))
                results[i] = Reader(s).response().json()["choices"][0]["text"]
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    jobs = [(i, CASES[i % len(CASES)]) for i in range(3 * len(CASES))]
    threads = [threading.Thread(target=one, args=j) for j in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    for i, case in jobs:
        assert results.get(i) == case["text"], (case["prompt"], results.get(i), case["text"])
    m = srv().request("GET", "/metrics").body.decode()
    pre = [ln for ln in m.splitlines() if ln.startswith("uvllm_preemptions_total ")]
    pages = [ln for ln in m.splitlines() if ln.startswith("uvllm_kv_pages_total ")]
    print(f"  {pre[0]}, {pages[0]}")
    n_pre, n_pages = float(pre[0].split()[1]), float(pages[0].split()[1])
    need = sum(len(c["prompt_tokens"]) + n_golden(c) for _, c in jobs)
    if n_pages * 16 < need:  # the pool cannot hold every sequence at once
        assert n_pre > 0, "KV pool too small for all sequences, yet nothing was preempted"


@test
def models_names_the_file():
    j = srv().request("GET", "/v1/models").json()
    assert j["data"][0]["id"] == "aidreams260K.gguf", j


if __name__ == "__main__":
    main(srv)
