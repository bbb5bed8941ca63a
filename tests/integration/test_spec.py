"""Speculative decoding through `uvllm serve` on the CPU backend (issue 27): with n-gram
proposals (--spec-ngram) and with a draft model (--model-draft, the f32 model drafting for
itself and the f16 file drafting for the f32 one), greedy requests get the answers of plain
decoding, streamed and not, with stop strings, logprobs, n > 1 and JSON mode (a grammar);
sampled requests with a seed answer the same twice; every KV page is free afterwards; /metrics counts proposals and
acceptance; a draft with another vocabulary and bad flag values are refused at start-up."""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from uvllm_harness import Server, assert_close, binary, run, shared, sse_events, test  # noqa: E402

MODEL = os.path.join(shared(), "models", "aidreams260K.gguf")
MODEL_F16 = os.path.join(shared(), "models", "aidreams260K-f16.gguf")
OTHER_VOCAB = os.path.join(shared(), "models", "tiny-bpe-f16.gguf")

GREEDY = [
    dict(prompt="Once upon a time", max_tokens=60, temperature=0),
    dict(prompt="Once upon a time there was a little girl. Once upon a time", max_tokens=48,
         temperature=0, logprobs=3),
    dict(prompt="The cat sat on the mat. The cat", max_tokens=64, temperature=0, stop=["ing"]),
    dict(prompt="Lily and Ben", max_tokens=40, temperature=0, n=2, logprobs=1),
    dict(prompt="Dimensions", max_tokens=1, temperature=0, logprobs=2),
]
SAMPLED = dict(prompt="Once upon a time", max_tokens=40, temperature=0.8, seed=5)


def strip(doc):
    doc = dict(doc)
    for k in ("id", "created", "system_fingerprint"):
        doc.pop(k, None)
    return doc


def close(a, b, path):
    """Equal, floats within 1e-3 (verification computes a sequence's rows in one product)."""
    assert_close(a, b, 1e-3, path)


def streamed_text(srv, body):
    r = srv.request("POST", "/v1/completions", body=json.dumps(dict(body, stream=True)))
    assert r.status == 200, r.body[:200]
    text, finish = {}, {}
    for ev in sse_events(r.body):
        if ev == "[DONE]":
            break
        for c in json.loads(ev)["choices"]:
            text[c["index"]] = text.get(c["index"], "") + c["text"]
            if c.get("finish_reason"):
                finish[c["index"]] = c["finish_reason"]
    return text, finish


def serve_all(*flags):
    out = []
    with Server("--model", MODEL, "--threads", "1", *flags, backend="cpu") as srv:
        for body in GREEDY:
            r = srv.request("POST", "/v1/completions", body=json.dumps(body))
            assert r.status == 200, (body, r.status, r.body[:200])
            out.append(strip(r.json()))
            out.append(streamed_text(srv, body))
        # constrained decoding: proposals outside the grammar are cut, the answer is the same
        b = {str(srv.token_id('"')): 6, str(srv.token_id(":")): 4, str(srv.token_id("}")): 1}
        r = srv.request("POST", "/v1/chat/completions", body=json.dumps(dict(
            messages=[{"role": "user", "content": "Hi"}], max_tokens=60, temperature=0,
            logit_bias=b, response_format={"type": "json_object"})))
        assert r.status == 200, r.body[:200]
        out.append(strip(r.json()))
        sampled = []
        for _ in range(2):
            r = srv.request("POST", "/v1/completions", body=json.dumps(SAMPLED))
            assert r.status == 200
            sampled.append(r.json()["choices"][0]["text"])
        assert sampled[0] == sampled[1], sampled
        m = srv.metrics()
        st, h = srv.health()
        assert h["kv_pages_free"] == h["kv_pages_total"], h
    return out, m


@test
def greedy_answers_as_without_speculation():
    plain, m0 = serve_all()
    assert m0["uvllm_spec_proposed_tokens_total"] == 0
    for flags in (("--spec-ngram", "3"), ("--model-draft", MODEL, "--draft-max", "4"),
                  ("--model-draft", MODEL_F16)):
        got, m = serve_all(*flags)
        for i, (a, b) in enumerate(zip(plain, got)):
            close(a, b, f"{flags[0]} answer {i}")
        prop, acc = m["uvllm_spec_proposed_tokens_total"], m["uvllm_spec_accepted_tokens_total"]
        assert prop > 0 and acc > 0, (flags, prop, acc)
        assert m['uvllm_spec_acceptance_rate_count'] == m["uvllm_spec_verifications_total"]
        print(f"  {' '.join(os.path.basename(f) for f in flags)}: {acc:.0f} of {prop:.0f} "
              f"proposals accepted in {m['uvllm_spec_verifications_total']:.0f} verifications, "
              f"{m['uvllm_steps_total']:.0f} steps (plain {m0['uvllm_steps_total']:.0f})")


@test
def bad_speculative_flags_are_refused():
    for args, word in ((["--spec-ngram", "0"], b"--spec-ngram"),
                       (["--draft-max", "17"], b"--draft-max"),
                       (["--model", MODEL, "--draft-min", "5", "--draft-max", "4"], b"--draft-min"),
                       (["--model-draft", MODEL], b"--model-draft"),
                       (["--model", MODEL, "--model-draft", OTHER_VOCAB], b"vocabulary")):
        p = subprocess.run([binary(), "serve", "--port", "0", *args], capture_output=True,
                           timeout=60)
        assert p.returncode == 2, (args, p.returncode, p.stderr[-300:])
        assert word in p.stderr, (args, p.stderr[-300:])


if __name__ == "__main__":
    run()
