"""The OpenAI-compatible endpoints of `uvllm serve --backend null`: /health, /metrics,
/v1/models, /v1/completions (non-stream and SSE), parameter validation, stop strings."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from uvllm_harness import Lazy, Reader, build_request, main, null_text, test  # noqa: E402


srv = Lazy()


@test
def health_ok_with_counters():
    st, h = srv().health()
    assert st == 200, st
    assert h["status"] == "ok"
    assert h["active_sequences"] == 0


@test
def models_lists_the_served_model():
    r = srv().request("GET", "/v1/models")
    assert r.status == 200
    assert r.header("content-type").startswith("application/json")
    j = r.json()
    assert j["object"] == "list"
    assert len(j["data"]) == 1 and j["data"][0]["id"] == "null"
    assert j["data"][0]["object"] == "model"


@test
def completion_non_stream():
    r = srv().complete(prompt="hello there world", max_tokens=7, temperature=0)
    assert r.status == 200, r.body
    j = r.json()
    assert j["object"] == "text_completion"
    assert j["id"].startswith("cmpl-")
    ch = j["choices"][0]
    assert ch["finish_reason"] == "length"
    assert null_text(ch["text"]) == 7, ch["text"]
    assert j["usage"] == {"prompt_tokens": 3, "completion_tokens": 7, "total_tokens": 10,
                          "prompt_tokens_details": {"cached_tokens": 0}}


@test
def completion_default_max_tokens_is_16():
    j = srv().complete(prompt="a").json()
    assert j["usage"]["completion_tokens"] == 16


@test
def completion_stream_chunks_then_done():
    body = json.dumps({"prompt": "one two", "max_tokens": 5, "stream": True})
    r = srv().request("POST", "/v1/completions", body=body)
    assert r.status == 200
    assert r.header("content-type").startswith("text/event-stream")
    assert r.header("x-accel-buffering") == "no"
    assert r.header("transfer-encoding") == "chunked"
    ev = r.events()
    assert ev[-1] == "[DONE]", ev[-3:]
    chunks = [json.loads(e) for e in ev[:-1]]
    assert len(chunks) == 6, len(chunks)  # 5 tokens + the finish chunk
    for c in chunks:
        assert c["object"] == "text_completion" and c["model"] == "null"
        assert c["id"] == chunks[0]["id"]
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None] * 5 + ["length"]
    text = "".join(c["choices"][0]["text"] for c in chunks)
    # Same sequence twice with the null backend -> the stream and the one-shot answer agree
    # in shape (5 pseudo-tokens), token ids depend on the sequence id.
    assert null_text(text) == 5, text


@test
def stream_include_usage_adds_a_usage_chunk():
    body = json.dumps({"prompt": "a b c", "max_tokens": 4, "stream": True,
                       "stream_options": {"include_usage": True}})
    ev = srv().request("POST", "/v1/completions", body=body).events()
    assert ev[-1] == "[DONE]"
    last = json.loads(ev[-2])
    assert last["choices"] == [], last
    assert last["usage"] == {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7,
                             "prompt_tokens_details": {"cached_tokens": 0}}
    assert json.loads(ev[-3])["choices"][0]["finish_reason"] == "length"
    assert len(ev) == 4 + 3
    expect_400({"prompt": "a", "stream": True, "stream_options": 3}, "stream_options")


@test
def stop_string_ends_generation_and_is_not_sent():
    # Every null token reads " tok<ID>": a stop on " tok" matches inside the first token.
    j = srv().complete(prompt="x", max_tokens=6, stop=[" tok"]).json()
    assert j["choices"][0]["finish_reason"] == "stop", j
    assert j["choices"][0]["text"] == "", j
    assert j["usage"]["completion_tokens"] == 1
    # A stop string that never appears changes nothing (held-back text is released).
    j = srv().complete(prompt="x", max_tokens=6, stop="zzz", stream=False).json()
    assert j["choices"][0]["finish_reason"] == "length", j
    assert null_text(j["choices"][0]["text"]) == 6


def expect_400(body, param, raw=False):
    r = srv().request("POST", "/v1/completions", body=body if raw else json.dumps(body))
    assert r.status == 400, (r.status, r.body)
    err = r.json()["error"]
    assert err["param"] == param, err
    assert err["type"] == "invalid_request_error"
    assert err["message"]
    return err


@test
def validation_names_the_param():
    expect_400({"max_tokens": 3}, "prompt")
    expect_400({"prompt": 5}, "prompt")
    expect_400({"prompt": "a", "max_tokens": 0}, "max_tokens")
    expect_400({"prompt": "a", "max_tokens": 2.5}, "max_tokens")
    expect_400({"prompt": "a", "max_tokens": "3"}, "max_tokens")
    expect_400({"prompt": "a", "temperature": 3}, "temperature")
    expect_400({"prompt": "a", "top_p": 0}, "top_p")
    expect_400({"prompt": "a", "stream": "yes"}, "stream")
    expect_400({"prompt": "a", "stop": ["a", "b", "c", "d", "e"]}, "stop")
    expect_400({"prompt": "a", "stop": [""]}, "stop")
    expect_400({"prompt": "a", "n": 0}, "n")
    expect_400({"prompt": "a", "n": 129}, "n")
    expect_400({"prompt": "   "}, "prompt")
    err = expect_400({"prompt": "w " * 5000}, "prompt")
    assert err["code"] == "context_length_exceeded"
    err = expect_400("{not json", None, raw=True)
    assert err["code"] == "invalid_json"
    expect_400("[1,2]", None, raw=True)
    st, h = srv().health()
    assert st == 200 and h["active_sequences"] == 0


@test
def long_prompt_is_tokenized_off_the_loop_and_served():
    # over 4 KiB of prompt goes through the thread pool; the answer must be the same shape
    j = srv().complete(prompt="w " * 3000, max_tokens=2).json()
    assert j["usage"]["prompt_tokens"] == 3000, j["usage"]
    assert null_text(j["choices"][0]["text"]) == 2
    body = json.dumps({"prompt": "x " * 2500, "max_tokens": 3, "stream": True})
    ev = srv().request("POST", "/v1/completions", body=body).events()
    assert len(ev) == 5 and ev[-1] == "[DONE]", ev[-2:]


@test
def metrics_are_prometheus_text():
    srv().complete(prompt="count me", max_tokens=3)
    r = srv().request("GET", "/metrics")
    assert r.status == 200
    assert r.header("content-type").startswith("text/plain")
    vals = {}
    for ln in r.body.decode().splitlines():
        if ln and not ln.startswith("#"):
            k, v = ln.split()
            vals[k] = float(v)
    for k in ("uvllm_http_requests_total", "uvllm_active_sequences",
              "uvllm_tokens_generated_total", "uvllm_http_connections"):
        assert k in vals, k
    assert vals["uvllm_tokens_generated_total"] >= 3
    assert vals["uvllm_active_sequences"] == 0
    assert vals["uvllm_http_connections"] >= 1  # this one


@test
def head_of_health_has_no_body():
    with srv().connect() as s:
        s.sendall(build_request("HEAD", "/health", close=True))
        rd = Reader(s)
        r = rd.response("HEAD")
        assert r.status == 200 and r.body == b""
        rest = b""
        while True:
            c = s.recv(4096)
            if not c:
                break
            rest += c
        assert rest == b"", rest


if __name__ == "__main__":
    main(srv)
