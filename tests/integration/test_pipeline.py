"""`serve --pipeline 2` on the CPU backend with a real model: step N+1 is submitted while N
computes, each sequence's next input being the token N samples (filled in by the backend).
A client must not be able to tell: concurrent requests (greedy, seeded sampling with
top-k/top-p/min-p, logprobs, n=2, a stop string, max_tokens 1, a penalty, chat) get the same
answers as one step at a time, and /metrics shows the steps really were pipelined."""

import json
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from uvllm_harness import Server, assert_close, run, shared, test  # noqa: E402

MODEL = os.path.join(shared(), "models", "aidreams260K.gguf")

REQUESTS = [
    ("/v1/completions", dict(prompt="Once upon a time", max_tokens=48, temperature=0)),
    ("/v1/completions", dict(prompt="The latent space", max_tokens=40, temperature=0.9, seed=7,
                             top_p=0.9, logprobs=3)),
    ("/v1/completions", dict(prompt="Gradient", max_tokens=36, temperature=1.1, seed=3, top_k=20,
                             min_p=0.05, n=2)),
    ("/v1/completions", dict(prompt="I adjust", max_tokens=64, temperature=0, stop=["ing"])),
    ("/v1/completions", dict(prompt="Dimensions", max_tokens=1, temperature=0, logprobs=2)),
    ("/v1/completions", dict(prompt="A slow", max_tokens=40, temperature=0.7, seed=11,
                             frequency_penalty=0.5, presence_penalty=0.3)),
    ("/v1/completions", dict(prompt="Dimensions unfold", max_tokens=40, temperature=0,
                             repeat_penalty=1.3)),
    ("/v1/completions", dict(prompt="Mist", max_tokens=44, temperature=0.8, seed=5)),
    ("/v1/chat/completions", dict(messages=[{"role": "user", "content": "hello"}],
                                  max_tokens=32, temperature=0.6, seed=2)),
]


def strip(doc):
    """The answer without what differs between any two runs (ids, times)."""
    doc = dict(doc)
    for k in ("id", "created", "system_fingerprint"):
        doc.pop(k, None)
    return doc


def serve_all(depth):
    out = [None] * len(REQUESTS)
    with Server("--model", MODEL, "--threads", "1", "--pipeline", str(depth),
                backend="cpu") as srv:
        def one(i):
            path, body = REQUESTS[i]
            r = srv.request("POST", path, body=json.dumps(body))
            assert r.status == 200, (path, body, r.status, r.body[:200])
            out[i] = strip(r.json())
        threads = [threading.Thread(target=one, args=(i,)) for i in range(len(REQUESTS))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        m = srv.metrics()
        st, h = srv.health()
        assert h["kv_pages_free"] == h["kv_pages_total"], h
    return out, m


def close(a, b, path):
    """Equal, floats within 1e-4 (logprobs print with a few digits more than they hold)."""
    assert_close(a, b, 1e-4, path)


@test
def same_answers_as_one_step_at_a_time():
    one, m1 = serve_all(1)
    two, m2 = serve_all(2)
    for i, (a, b) in enumerate(zip(one, two)):
        close(a, b, f"request {i} {REQUESTS[i][0]}")
    assert m1["uvllm_pipeline_depth"] == 1 and m2["uvllm_pipeline_depth"] == 2
    assert m1["uvllm_steps_ahead_total"] == 0 and m1["uvllm_tokens_chained_total"] == 0
    assert m2["uvllm_steps_ahead_total"] >= 10, m2["uvllm_steps_ahead_total"]
    assert m2["uvllm_tokens_chained_total"] >= 50, m2["uvllm_tokens_chained_total"]
    print(f"  pipelined: {m2['uvllm_steps_ahead_total']:.0f} of "
          f"{m2['uvllm_steps_total']:.0f} steps built ahead, "
          f"{m2['uvllm_tokens_chained_total']:.0f} inputs chained")


@test
def bad_pipeline_values_are_refused():
    import subprocess
    from uvllm_harness import binary
    for v in ("0", "3", "x"):
        p = subprocess.run([binary(), "serve", "--pipeline", v], capture_output=True, timeout=20)
        assert p.returncode != 0, v
        assert b"--pipeline" in p.stderr, p.stderr[-300:]


if __name__ == "__main__":
    run()
