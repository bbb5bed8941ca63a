"""Cost of structured output's token filter: ms per generated token for the same
/v1/completions request as plain text, JSON mode and json_schema, interleaved round by round
(median of the rounds). With a model of random weights (qwen2-tiny-f16: 50257 tokens, a
forward pass well under a millisecond) the sampled token is refused at almost every
constrained step, so the sampler asks the filter about the whole vocabulary each time: the
worst case of the filter's cost relative to the forward pass.
usage: python3 bench/json_schema.py [MODEL.gguf] [ROUNDS]   (run in a session of its own at
nice -15, as bench/batched.sh does)"""
import json
import os
import statistics
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "tests", "integration"))
from uvllm_harness import Server, shared  # noqa: E402

SCHEMA = {"type": "object", "properties": {
    "mood": {"enum": ["happy", "sad"]}, "n": {"type": "integer"},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 3},
             "minItems": 1, "maxItems": 2},
    "pet": {"type": "object", "properties": {"kind": {"const": "cat"}}, "required": ["kind"],
            "additionalProperties": False}},
    "required": ["mood", "tags", "pet"], "additionalProperties": False}
FORMATS = {"text": None, "json_object": {"type": "json_object"},
           "json_schema": {"type": "json_schema", "json_schema": {"name": "p", "schema": SCHEMA}}}

model = sys.argv[1] if len(sys.argv) > 1 else "qwen2-tiny-f16.gguf"
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
with Server("--model", os.path.join(shared(), "models", model), "--threads", "2",
            backend="cpu") as s:
    ms = {k: [] for k in FORMATS}
    for rnd in range(rounds):
        for k, f in FORMATS.items():
            body = {"prompt": "Once upon a time", "max_tokens": 48, "temperature": 1,
                    "seed": rnd, "ignore_eos": f is None}
            if f:
                body["response_format"] = f
            t = time.monotonic()
            r = s.request("POST", "/v1/completions", body=json.dumps(body))
            dt = time.monotonic() - t
            assert r.status == 200, r.body
            ms[k].append(dt * 1000 / r.json()["usage"]["completion_tokens"])
    base = statistics.median(ms["text"])
    print(f"model {model}, {rounds} rounds, 48 tokens at most, load {os.getloadavg()}")
    for k, v in ms.items():
        m = statistics.median(v)
        print(f"{k:12s} {m:.2f} ms/token (median), {m / base:.2f}x text")
