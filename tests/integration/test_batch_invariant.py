#!/usr/bin/env python3
"""`serve --batch-invariant` (cpu backend): a prompt's greedy answer and its logprobs are
the same to the last bit whether the prompt was computed whole or over pages the prefix
cache kept from an earlier request, and whether it ran alone or batched with others.

Without the option a sequence's tokens take the tiled attention path from 64 of them in a
step (as llama.cpp's flash attention does from 64 rows) and the per-token path below, so
a prompt of 64+ tokens computed whole and the same prompt's last 16 tokens computed over a
cached prefix differ in the last bits: on mini-q4_0 (random weights, near-tied logits) 18
of the 30 prompts below gave different top logprobs (measured at AVX-512 and AVX2), and the
batched check's first prompt a different greedy text. With it, every token takes the
per-token path, whatever the step's shape.
Needs the shared folder ($UVLLM_SHARED, else $UVLLM_SOURCE_DIR/../shared)."""

import os
import random
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from uvllm_harness import Server, run, shared_file, test  # noqa: E402

MODEL = shared_file("models", "mini-q4_0.gguf")
WORDS = ("the a dream robot sky light river machine quiet garden night silver memory road "
         "window ocean paper clock forest signal winter engine voice mirror city stone "
         "cloud fire glass song").split()
EXTRA = os.environ.get("BATCH_INVARIANT_FLAG", "--batch-invariant")  # "" shows the default


def answer(srv, prompt):
    r = srv.complete(prompt=prompt, max_tokens=6, temperature=0, logprobs=3)
    assert r.status == 200, r.body
    j = r.json()
    c = j["choices"][0]
    return (c["text"], c["logprobs"]["top_logprobs"]), j["usage"]["prompt_tokens_details"]


def prompts(seed, n):
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        words = [rnd.choice(WORDS) for _ in range(rnd.randint(50, 80))]
        k = rnd.randint(10, len(words) - 5)
        other = words[:k] + [rnd.choice(WORDS) for _ in range(5)]
        out.append((" ".join(words), " ".join(other)))
    return out


@test
def cached_prefix_gives_the_uncached_logprobs():
    with Server("--model", MODEL, "--threads", "2", "--kv-mem", "64M", *EXTRA.split(),
                backend="cpu") as srv:
        differ, cached = [], 0
        for a, b in prompts(1, 30):
            whole, d0 = answer(srv, a)
            assert d0["cached_tokens"] == 0, d0  # computed whole
            answer(srv, b)  # shares a prefix with a
            again, d1 = answer(srv, a)
            cached += d1["cached_tokens"] > 0
            if again != whole:
                differ.append((a, whole, again))
        assert cached == 30, f"only {cached} of 30 prompts were answered over cached pages"
        assert not differ, f"{len(differ)} of 30 prompts differ with a cached prefix: {differ[0]}"


@test
def batched_gives_the_alone_logprobs():
    with Server("--model", MODEL, "--threads", "2", "--kv-mem", "64M", "--no-prefix-cache",
                *EXTRA.split(), backend="cpu") as srv:
        ps = [a for a, _ in prompts(2, 6)]
        alone = [answer(srv, p)[0] for p in ps]
        got = [None] * len(ps)

        def ask(i):
            got[i] = answer(srv, ps[i])[0]

        ts = [threading.Thread(target=ask, args=(i,)) for i in range(len(ps))]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        bad = [i for i in range(len(ps)) if got[i] != alone[i]]
        assert not bad, f"prompts {bad} differ when batched: {got[bad[0]]} vs {alone[bad[0]]}"


if __name__ == "__main__":
    run()
