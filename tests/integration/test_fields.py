"""Every OpenAI field of /v1/completions is honoured or refused by name: the real trained
model (aidreams260K.gguf, cpu backend) shows that each honoured field changes the output as
specified, checked against llama.cpp's goldens where they say what the model computes."""

import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from uvllm_harness import Lazy, Server, main, shared, sse_events, test  # noqa: E402


MODEL = os.path.join(shared(), "models", "aidreams260K.gguf")
GOLD = [json.loads(line) for line in open(os.path.join(shared(), "golden", "aidreams260K.public.jsonl"))]
G = GOLD[0]  # "Once upon a time"


srv = Lazy("--model", MODEL, "--threads", "2", "--max-batch-tokens", "64", backend="cpu")


def complete(**body):
    r = srv().complete(**body)
    assert r.status == 200, r.body
    return r.json()


def text_of(ids):
    """The ids' text; /detokenize drops SPM's leading space, so compare stripped."""
    r = srv().request("POST", "/detokenize", body=json.dumps({"tokens": ids}))
    assert r.status == 200, r.body
    return r.json()["content"]


def bad(body, param, status=400):
    r = srv().complete(**body)
    assert r.status == status, (r.status, r.body)
    err = r.json()["error"]
    assert err["param"] == param, err
    return err


GREEDY = None


def greedy(n=12):
    global GREEDY
    if GREEDY is None:
        GREEDY = complete(prompt=G["prompt"], max_tokens=12, temperature=0)["choices"][0]["text"]
    return GREEDY


@test
def greedy_matches_the_golden_continuation():
    assert greedy() == text_of(G["tokens"][:12]), (greedy(), text_of(G["tokens"][:12]))


@test
def top_k_1_and_min_p_1_equal_greedy():
    for extra in ({"top_k": 1}, {"min_p": 1.0}):
        t = complete(prompt=G["prompt"], max_tokens=12, temperature=1.0, seed=7, **extra)
        assert t["choices"][0]["text"] == greedy(), (extra, t)


@test
def logit_bias_bans_and_forces_tokens():
    first, second = G["prompt_top"][-1][0][0], G["prompt_top"][-1][1][0]
    j = complete(prompt=G["prompt"], max_tokens=1, temperature=0, logit_bias={str(first): -100})
    assert j["choices"][0]["text"].strip() == text_of([second]).strip(), j
    forced = G["prompt_top"][-1][7][0]
    j = complete(prompt=G["prompt"], max_tokens=3, temperature=0, logit_bias={str(forced): 100})
    t = text_of([forced])
    assert j["choices"][0]["text"].strip().startswith(t.strip()), (j, t)
    err = bad({"prompt": "a", "logit_bias": {"99999": 1}}, "logit_bias")
    assert "token id" in err["message"]
    bad({"prompt": "a", "logit_bias": {"5": 101}}, "logit_bias")


@test
def logprobs_are_the_models_log_softmax():
    j = complete(prompt=G["prompt"], max_tokens=1, temperature=0, logprobs=20)
    lp = j["choices"][0]["logprobs"]
    assert lp["text_offset"] == [0] and len(lp["tokens"]) == 1
    top = {k.strip(): v for k, v in lp["top_logprobs"][0].items()}
    assert len(top) >= 15, top  # texts may repeat (then one key)
    gold = G["prompt_top"][-1]
    # log-softmax keeps differences: logprob(i) - logprob(best) == logit(i) - logit(best)
    best_logit = gold[0][1]
    checked = 0
    for tid, logit in gold:
        t = text_of([tid]).strip()
        if t in top and sum(1 for x, _ in gold if text_of([x]).strip() == t) == 1:
            want = logit - best_logit
            got = top[t] - max(top.values())
            assert abs(got - want) < 2e-3, (t, got, want)
            checked += 1
    assert checked >= 10, checked
    assert lp["token_logprobs"][0] == max(top.values())
    assert lp["token_logprobs"][0] < 0 and sum(math.exp(v) for v in top.values()) <= 1.0001


@test
def echo_returns_the_prompt_and_suffix_is_refused():
    j = complete(prompt=G["prompt"], max_tokens=4, temperature=0, echo=True)
    assert j["choices"][0]["text"].startswith(G["prompt"]), j
    assert j["choices"][0]["text"][len(G["prompt"]):] == complete(
        prompt=G["prompt"], max_tokens=4, temperature=0)["choices"][0]["text"]
    bad({"prompt": "a", "suffix": "tail"}, "suffix")
    bad({"prompt": "a", "echo": True, "logprobs": 2}, "echo")
    bad({"prompt": "a", "response_format": {"type": "json_schema"}}, "response_format")


@test
def n_choices_and_best_of():
    j = complete(prompt=G["prompt"], max_tokens=8, temperature=0, n=3)
    assert [c["index"] for c in j["choices"]] == [0, 1, 2]
    assert all(c["text"] == greedy()[:len(c["text"])] for c in j["choices"]), j
    assert j["usage"]["completion_tokens"] == 24
    a = complete(prompt=G["prompt"], max_tokens=8, temperature=1.0, n=3, seed=11)
    b = complete(prompt=G["prompt"], max_tokens=8, temperature=1.0, n=3, seed=11)
    assert a["choices"] == b["choices"], "a seed makes every choice reproducible"
    assert len({c["text"] for c in a["choices"]}) > 1, "choices of one seed still differ"
    j = complete(prompt=G["prompt"], max_tokens=8, temperature=1.0, n=2, best_of=4, seed=3)
    assert len(j["choices"]) == 2 and j["usage"]["completion_tokens"] == 32, j
    bad({"prompt": "a", "n": 2, "best_of": 1}, "best_of")
    bad({"prompt": "a", "best_of": 3, "stream": True}, "best_of")


@test
def prompt_arrays_and_token_ids():
    j = complete(prompt=[G["prompt"], GOLD[1]["prompt"]], max_tokens=6, temperature=0, n=2)
    assert len(j["choices"]) == 4, j
    assert [c["index"] for c in j["choices"]] == [0, 1, 2, 3]
    one = complete(prompt=GOLD[1]["prompt"], max_tokens=6, temperature=0)["choices"][0]["text"]
    assert j["choices"][0]["text"] == greedy()[:len(j["choices"][0]["text"])]
    assert j["choices"][2]["text"] == one and j["choices"][3]["text"] == one
    ids = complete(prompt=G["prompt_tokens"], max_tokens=12, temperature=0)
    assert ids["choices"][0]["text"] == greedy()
    assert ids["usage"]["prompt_tokens"] == len(G["prompt_tokens"])
    two = complete(prompt=[G["prompt_tokens"], G["prompt_tokens"]], max_tokens=2, temperature=0)
    assert len(two["choices"]) == 2
    bad({"prompt": []}, "prompt")
    bad({"prompt": ["a", [1, 2]]}, "prompt")
    bad({"prompt": [1, 2, 99999]}, "prompt")
    bad({"prompt": 5}, "prompt")


@test
def special_token_text_in_prompts_is_parsed():
    plain = complete(prompt=G["prompt"], max_tokens=1)["usage"]["prompt_tokens"]
    j = complete(prompt=G["prompt"] + "</s>", max_tokens=1)
    assert j["usage"]["prompt_tokens"] == plain + 1, "</s> is one control token"
    with Server("--model", MODEL, "--threads", "1", "--no-parse-special", backend="cpu") as s:
        r = s.complete(prompt=G["prompt"] + "</s>", max_tokens=1)
        assert r.json()["usage"]["prompt_tokens"] > plain + 1, "</s> as plain text"


@test
def context_length_is_a_400_unless_truncating():
    n = len(G["prompt_tokens"])
    err = bad({"prompt": G["prompt"], "max_tokens": 200}, "max_tokens")
    assert err["code"] == "context_length_exceeded", err
    with Server("--model", MODEL, "--threads", "1", "--truncate-max-tokens", backend="cpu") as s:
        j = s.complete(prompt=G["prompt"], max_tokens=200, temperature=0, ignore_eos=True).json()
        assert j["choices"][0]["finish_reason"] == "length"
        assert j["usage"]["completion_tokens"] == 128 - n, j["usage"]


@test
def ignore_eos_runs_to_max_tokens():
    # find a prompt whose greedy continuation ends by itself
    for g in GOLD:
        j = complete(prompt=g["prompt"], max_tokens=100, temperature=0)
        if j["choices"][0]["finish_reason"] == "stop":
            k = complete(prompt=g["prompt"], max_tokens=100, temperature=0, ignore_eos=True)
            assert k["choices"][0]["finish_reason"] == "length", k
            assert k["usage"]["completion_tokens"] == 100
            return
    raise AssertionError("no golden prompt stops by itself within 100 tokens")


@test
def model_must_be_the_served_one_and_created_is_now():
    j = complete(prompt="a", max_tokens=1, model="aidreams260K.gguf")
    assert abs(j["created"] - time.time()) < 5, j["created"]
    err = bad({"prompt": "a", "model": "gpt-4o"}, "model", status=404)
    assert err["code"] == "model_not_found"


@test
def stream_with_n_and_usage():
    r = srv().complete(prompt=G["prompt"], max_tokens=5, temperature=0, n=2, stream=True,
                       stream_options={"include_usage": True})
    ev = sse_events(r.body)
    assert ev[-1] == "[DONE]"
    chunks = [json.loads(e) for e in ev[:-1]]
    usage = chunks[-1]
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 10
    for i in (0, 1):
        mine = [c["choices"][0] for c in chunks[:-1] if c["choices"][0]["index"] == i]
        assert "".join(c["text"] for c in mine) == greedy()[:len("".join(c["text"] for c in mine))]
        assert mine[-1]["finish_reason"] == "length"
    bad({"prompt": "a", "stream_options": {"include_usage": True}}, "stream_options")


@test
def refused_and_invalid_fields_name_themselves():
    for body, param in [({"prompt": "a", "temperature": 3}, "temperature"),
                        ({"prompt": "a", "top_p": 0}, "top_p"),
                        ({"prompt": "a", "top_k": 1.5}, "top_k"),
                        ({"prompt": "a", "min_p": 2}, "min_p"),
                        ({"prompt": "a", "repetition_penalty": 0}, "repetition_penalty"),
                        ({"prompt": "a", "logprobs": 21}, "logprobs"),
                        ({"prompt": "a", "ignore_eos": "yes"}, "ignore_eos"),
                        ({"prompt": "a", "user": 5}, "user"),
                        ({"prompt": "a", "seed": 1.5}, "seed")]:
        bad(body, param)
    j = complete(prompt="a", max_tokens=1, some_vendor_field={"x": 1})
    assert j["choices"][0]["finish_reason"] in ("length", "stop"), "unknown fields are ignored"


@test
def a_small_kv_pool_preempts_and_every_output_is_still_golden():
    """--kv-mem of 16 pages (256 tokens) for 8 concurrent requests of ~60 tokens each (~32
    pages): the scheduler preempts and recomputes, and each greedy text equals llama.cpp's."""
    from uvllm_harness import Reader, build_request
    page = 16 * 4 * 2 * 64 * 2  # tokens x layers x (K, V) x kv dims x f16
    with Server("--model", MODEL, "--threads", "2", "--kv-mem", str(16 * page), backend="cpu") as s:
        assert s.health()[1]["kv_pages_total"] == 16
        socks = []
        for g in (GOLD * 2)[:8]:
            k = s.connect()
            k.sendall(build_request("POST", "/v1/completions", json.dumps(
                {"prompt": g["prompt"], "max_tokens": len(g["tokens"]), "temperature": 0})))
            socks.append((k, g))
        for k, g in socks:
            r = Reader(k).response("POST")
            assert r.status == 200, r.body
            assert r.json()["choices"][0]["text"] == text_of(g["tokens"]) or \
                r.json()["choices"][0]["text"].strip() == text_of(g["tokens"]).strip(), g["prompt"]
            k.close()
        m = s.request("GET", "/metrics").body.decode()
        pre = [line for line in m.splitlines() if line.startswith("uvllm_preemptions_total")]
        assert pre and float(pre[0].split()[1]) > 0, pre
        h = s.health()[1]
        assert h["kv_pages_free"] == h["kv_pages_total"] == 16, h


if __name__ == "__main__":
    main(srv)
