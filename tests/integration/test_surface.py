"""The serving surface around the completion endpoints, on the real binary: the `serve`
flags (--ctx-size, --kv-mem, --max-tokens-default, --model-alias, --cors-origin,
--chat-template), X-Request-Id, CORS, and /tokenize + /detokenize in llama-server's
shapes, with the null backend and with aidreams260K.gguf (a llama SPM vocabulary of 512).
Needs the shared folder ($UVLLM_SHARED, else $UVLLM_SOURCE_DIR/../shared)."""

import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from uvllm_harness import Server, binary, null_text, run, shared_file, test, wait_for  # noqa: E402



MODEL = shared_file("models", "aidreams260K.gguf")

HEX32 = re.compile(r"^[0-9a-f]{32}$")
SMALL_KV = ("--kv-mem", "1M")  # keeps model servers quick to start


def model_shape():
    """n_layer, n_head_kv, head_dim, n_ctx_train, eos id from `uvllm info`."""
    out = subprocess.run([binary(), "info", MODEL], capture_output=True, text=True,
                         timeout=60).stdout
    val = {k: int(re.search(rf"^\s+{k}\s+(\d+)", out, re.M).group(1))
           for k in ("n_layer", "n_head_kv", "head_dim", "n_ctx_train")}
    val["eos"] = int(re.search(r"^\s+eos\s+(\d+)", out, re.M).group(1))
    return val


SHAPE = model_shape()
# one KV page as the cpu backend sizes it: [n_layer][K, V][n_head_kv][16 x head_dim] f16
PAGE_BYTES = SHAPE["n_layer"] * 2 * SHAPE["n_head_kv"] * 16 * SHAPE["head_dim"] * 2

MSRV = None


def msrv():
    """One shared model server for the read-only tests."""
    global MSRV
    if MSRV is None:
        MSRV = Server("--model", MODEL, "--threads", "1", *SMALL_KV, backend="cpu")
    return MSRV


def post(s, path, body, headers=None):
    return s.request("POST", path, body=json.dumps(body) if not isinstance(body, str) else body,
                     headers=headers)


def start_fails(*args):
    p = subprocess.run([binary(), "serve", "--port", "0", *args], capture_output=True, text=True,
                       timeout=60)
    return p.returncode, p.stderr


def kv_line(srv):
    # logged just after 'listening on', which is all Server() waits for
    line = wait_for(lambda: next((ln for ln in list(srv.log) if "kv cache:" in ln), None), 10)
    assert line, "no 'kv cache:' start-up line in:\n" + "".join(srv.log)
    return line


def kv_totals(srv):
    # after the start-up canary (a one-token request holding a page while it runs): ready
    assert wait_for(lambda: srv.request("GET", "/health/ready").status == 200, 10), "not ready"
    st, h = srv.health()
    assert st == 200
    m = srv.request("GET", "/metrics").body.decode()
    total = int(float(re.search(r"^uvllm_kv_pages_total (\S+)$", m, re.M).group(1)))
    free = int(float(re.search(r"^uvllm_kv_pages_free (\S+)$", m, re.M).group(1)))
    assert total == h["kv_pages_total"], (total, h)
    assert free == h["kv_pages_free"], (free, h)
    return h["kv_pages_total"]


# ---- flags ------------------------------------------------------------------------------

@test
def ctx_size_over_the_model_is_a_startup_error():
    rc, err = start_fails("--model", MODEL, "--ctx-size", str(SHAPE["n_ctx_train"] * 2))
    assert rc == 2, (rc, err)
    assert "--ctx-size" in err and f"({SHAPE['n_ctx_train']} tokens)" in err, err


@test
def ctx_size_shows_in_models_meta():
    with Server("--model", MODEL, "--threads", "1", "--ctx-size", "64", *SMALL_KV,
                backend="cpu") as s:
        j = s.request("GET", "/v1/models").json()
        assert j["data"][0]["meta"]["n_ctx"] == 64, j
        # 100 tokens more do not fit in 64: refused, or cut where the context ends
        r = s.complete(prompt="Once upon a time", max_tokens=100)
        assert r.status == 400 or r.json()["usage"]["total_tokens"] <= 64, r.body
    with Server("--ctx-size", "300") as s:
        assert s.request("GET", "/v1/models").json()["data"][0]["meta"]["n_ctx"] == 300


@test
def kv_mem_bounds_the_pool():
    for size, nbytes in (("1M", 1 << 20), ("262144", 262144), ("0.5M", 1 << 19)):
        with Server("--model", MODEL, "--threads", "1", "--kv-mem", size, backend="cpu") as s:
            want = nbytes // PAGE_BYTES
            assert kv_totals(s) == want, (size, kv_totals(s), want)
            line = kv_line(s)
            assert f"in {want} pages of 16 tokens = {want * 16} tokens" in line, line
            assert "(--kv-mem)" in line, line


@test
def kv_mem_under_one_sequence_is_a_startup_error():
    one = (SHAPE["n_ctx_train"] + 15) // 16 * PAGE_BYTES
    rc, err = start_fails("--model", MODEL, "--kv-mem", str(one - 1))
    assert rc == 2 and "--kv-mem" in err, (rc, err)
    rc, err = start_fails("--model", MODEL, "--kv-mem", "4X")
    assert rc == 2 and "bad value '4X' for --kv-mem" in err, (rc, err)


@test
def kv_mem_default_is_logged_and_capped_by_max_seqs():
    # default: a quarter of MemAvailable, at most --max-seqs full sequences; 3 sequences
    # of 128 tokens are far below a quarter of any machine's memory, so the cap decides
    with Server("--model", MODEL, "--threads", "1", "--max-seqs", "3", backend="cpu") as s:
        want = 3 * ((SHAPE["n_ctx_train"] + 15) // 16)
        assert kv_totals(s) == want, (kv_totals(s), want)
        line = kv_line(s)
        # and names what it is a quarter of: MemAvailable, or the cgroup's limit when lower
        assert re.search(rf"in {want} pages of 16 tokens = {want * 16} tokens, 3 full-context "
                         r"sequences \(default: a quarter of (MemAvailable [\d.]+ \w+|"
                         r"cgroup v[12] /\S+ \([\d.]+ \w+\))", line), line


@test
def kv_mem_null_backend_pages():
    with Server("--kv-mem", "1M") as s:
        assert kv_totals(s) == (1 << 20) // (16 * 12)
        assert "(--kv-mem)" in kv_line(s)
    with Server() as s:
        assert kv_totals(s) == 65536, "the null default is unchanged"


@test
def max_tokens_default_sets_the_length():
    with Server("--max-tokens-default", "5") as s:
        j = s.complete(prompt="a b").json()
        assert j["usage"]["completion_tokens"] == 5, j
        assert null_text(j["choices"][0]["text"]) == 5
        j = s.complete(prompt="a b", max_tokens=2).json()
        assert j["usage"]["completion_tokens"] == 2, "an explicit max_tokens still wins"


@test
def model_alias_listed():
    with Server("--model-alias", "gpt-4o-mini", "--model-alias", "local") as s:
        j = s.request("GET", "/v1/models").json()
        ids = [m["id"] for m in j["data"]]
        assert ids == ["null", "gpt-4o-mini", "local"], ids
        assert all(m["meta"] == j["data"][0]["meta"] for m in j["data"])
        assert all(m["root"] == "null" for m in j["data"])
    rc, err = start_fails("--model-alias", "x", "--model-alias", "x")
    assert rc == 2 and "already a name" in err, (rc, err)


@test
def chat_template_must_be_readable():
    rc, err = start_fails("--chat-template", "/nonexistent/template.jinja")
    assert rc == 2 and "--chat-template" in err, (rc, err)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "uvllm_harness.py")
    with Server("--chat-template", path, "--truncate-max-tokens", "--no-parse-special") as s:
        assert s.health()[0] == 200


@test
def help_lists_every_new_flag():
    out = subprocess.run([binary(), "serve", "--help"], capture_output=True, text=True).stdout
    for f in ("--ctx-size", "--kv-mem", "--max-tokens-default", "--truncate-max-tokens",
              "--no-parse-special", "--model-alias", "--cors-origin", "--chat-template"):
        assert f in out, f


# ---- X-Request-Id -----------------------------------------------------------------------

@test
def request_id_echoed_or_made():
    with Server() as s:
        r = s.request("GET", "/health", headers={"X-Request-Id": "client-id-1"})
        assert r.header("x-request-id") == "client-id-1"
        r1 = s.request("GET", "/health")
        r2 = s.request("GET", "/v1/models")
        assert HEX32.match(r1.header("x-request-id")), r1.headers
        assert r1.header("x-request-id") != r2.header("x-request-id")
        r = s.request("GET", "/nope", headers={"X-Request-Id": "nf"})
        assert r.status == 404 and r.header("x-request-id") == "nf"
        r = s.request("GET", "/nope")
        assert r.status == 404 and HEX32.match(r.header("x-request-id"))
        r = s.request("GET", "/health", headers={"X-Request-Id": "x" * 129})
        assert HEX32.match(r.header("x-request-id")), "an over-long id is replaced"
        r = post(s, "/v1/completions", {"prompt": "a", "max_tokens": 3, "stream": True},
                 headers={"X-Request-Id": "sse-7"})
        assert r.status == 200 and r.header("x-request-id") == "sse-7"
        assert r.events()[-1] == "[DONE]"
        r = post(s, "/v1/completions", {"prompt": "a", "max_tokens": 3, "stream": True})
        assert HEX32.match(r.header("x-request-id"))
        r = post(s, "/v1/completions", {"prompt": 5}, headers={"X-Request-Id": "bad-1"})
        assert r.status == 400 and r.header("x-request-id") == "bad-1"
        # stderr is read by a thread: the line may land a moment after the response
        assert wait_for(lambda: any("request_id=sse-7" in ln for ln in list(s.log)), 10), \
            "id in the access log"


# ---- CORS -------------------------------------------------------------------------------

@test
def cors_preflight_and_headers():
    with Server("--cors-origin", "https://ui.example", "--cors-origin",
                "http://localhost:3000") as s:
        r = s.request("OPTIONS", "/v1/completions",
                      headers={"Origin": "https://ui.example",
                               "Access-Control-Request-Method": "POST",
                               "Access-Control-Request-Headers": "content-type, authorization"})
        assert r.status == 204, r.status
        assert r.header("access-control-allow-origin") == "https://ui.example"
        assert r.header("access-control-allow-methods") == "GET, POST, OPTIONS"
        assert r.header("access-control-allow-headers") == "content-type, authorization"
        assert r.header("access-control-max-age") == "86400"
        assert r.header("vary") == "Origin"
        r = s.request("OPTIONS", "/anything", headers={"Origin": "http://localhost:3000"})
        assert r.status == 204
        assert r.header("access-control-allow-headers") == \
            "Authorization, Content-Type, X-Request-Id, X-Api-Key, Anthropic-Version"
        r = s.complete(prompt="a", max_tokens=2)
        assert r.header("access-control-allow-origin") is None, "no Origin, no CORS"
        r = post(s, "/v1/completions", {"prompt": "a", "max_tokens": 2, "stream": True},
                 headers={"Origin": "https://ui.example"})
        assert r.header("access-control-allow-origin") == "https://ui.example"
        assert r.header("access-control-expose-headers") == "X-Request-Id"
        r = s.request("GET", "/nope", headers={"Origin": "https://ui.example"})
        assert r.status == 404 and r.header("access-control-allow-origin") == "https://ui.example"
        r = s.request("GET", "/health", headers={"Origin": "https://evil.example"})
        assert r.header("access-control-allow-origin") is None
    with Server("--cors-origin", "*") as s:
        r = s.request("GET", "/health", headers={"Origin": "https://any.example"})
        assert r.header("access-control-allow-origin") == "*"


@test
def no_cors_without_the_flag():
    with Server() as s:
        r = s.request("OPTIONS", "/v1/completions", headers={"Origin": "https://ui.example"})
        assert r.status == 405 and "POST" in r.header("allow"), r.status
        r = s.request("GET", "/health", headers={"Origin": "https://ui.example"})
        assert not [h for h in r.headers if h.startswith("access-control-")], r.headers
        assert r.header("vary") is None


# ---- /tokenize, /detokenize -------------------------------------------------------------

@test
def tokenize_special_tokens():
    s = msrv()
    eos = SHAPE["eos"]
    j = post(s, "/tokenize", {"content": "</s>"}).json()
    assert j == {"tokens": [eos]}, j
    j = post(s, "/tokenize", {"content": "</s>", "parse_special": True}).json()
    assert j == {"tokens": [eos]}, j
    j = post(s, "/tokenize", {"content": "</s>", "parse_special": False}).json()
    assert eos not in j["tokens"] and len(j["tokens"]) > 1, j
    plain = post(s, "/tokenize", {"content": "Once upon"}).json()["tokens"]
    bos = post(s, "/tokenize", {"content": "Once upon", "add_special": True}).json()["tokens"]
    assert bos == [1] + plain, (bos, plain)


@test
def tokenize_with_pieces():
    s = msrv()
    text = "Once upon a time"
    j = post(s, "/tokenize", {"content": text, "with_pieces": True}).json()
    ids = post(s, "/tokenize", {"content": text}).json()["tokens"]
    assert [t["id"] for t in j["tokens"]] == ids
    assert all(isinstance(t["piece"], str) for t in j["tokens"])
    # SPM puts a space before the text; the pieces keep it
    assert "".join(t["piece"] for t in j["tokens"]) == " " + text
    # é is two byte-fallback tokens here: each piece is a lone byte, so a list of ints
    j = post(s, "/tokenize", {"content": "é", "with_pieces": True}).json()
    pieces = [t["piece"] for t in j["tokens"]]
    byte_pieces = [p for p in pieces if isinstance(p, list)]
    assert bytes(b for p in byte_pieces for b in p) == "é".encode(), pieces


@test
def detokenize_round_trip():
    s = msrv()
    for text in ("Once upon a time, there was a little girl named Lily.", "é and ü", "x"):
        ids = post(s, "/tokenize", {"content": text}).json()["tokens"]
        j = post(s, "/detokenize", {"tokens": ids}).json()
        assert j == {"content": text}, (text, ids, j)
    j = post(s, "/detokenize", {"tokens": []}).json()
    assert j == {"content": ""}
    j = post(s, "/detokenize", {"tokens": [1, SHAPE["eos"]]}).json()
    assert j == {"content": "<s></s>"}, j
    # a lone byte of a longer character becomes U+FFFD, the JSON stays valid
    e = post(s, "/tokenize", {"content": "é"}).json()["tokens"]
    j = post(s, "/detokenize", {"tokens": e[-1:]}).json()
    assert j["content"] == "\ufffd", j


@test
def tokenize_bad_bodies_name_the_param():
    s = msrv()
    cases = [
        ("/tokenize", {"content": 5}, "content"),
        ("/tokenize", {}, "content"),
        ("/tokenize", {"content": "a", "add_special": "yes"}, "add_special"),
        ("/tokenize", {"content": "a", "parse_special": 1}, "parse_special"),
        ("/tokenize", {"content": "a", "with_pieces": []}, "with_pieces"),
        ("/detokenize", {}, "tokens"),
        ("/detokenize", {"tokens": "1 2"}, "tokens"),
        ("/detokenize", {"tokens": [1, 512]}, "tokens"),
        ("/detokenize", {"tokens": [-1]}, "tokens"),
        ("/detokenize", {"tokens": [1.5]}, "tokens"),
        ("/detokenize", {"tokens": ["1"]}, "tokens"),
    ]
    for path, body, param in cases:
        r = post(s, path, body)
        assert r.status == 400, (path, body, r.status)
        e = r.json()["error"]
        assert e["param"] == param and e["type"] == "invalid_request_error", (body, e)
    for path in ("/tokenize", "/detokenize"):
        r = post(s, path, "{not json")
        assert r.status == 400 and r.json()["error"]["code"] == "invalid_json"
        r = post(s, path, "[1,2]")
        assert r.status == 400
        r = s.request("GET", path)
        assert r.status == 405


@test
def tokenize_null_backend():
    with Server() as s:
        j = post(s, "/tokenize", {"content": "hello there hello"}).json()
        t = j["tokens"]
        assert len(t) == 3 and t[0] == t[2] and t[0] != t[1], t
        j = post(s, "/tokenize", {"content": "hi", "with_pieces": True}).json()
        assert j["tokens"][0]["piece"] == f" tok{j['tokens'][0]['id']}", j
        j = post(s, "/detokenize", {"tokens": [5, 7]}).json()
        assert j == {"content": " tok5 tok7"}, j
        r = post(s, "/detokenize", {"tokens": [32000]})
        assert r.status == 400 and r.json()["error"]["param"] == "tokens"


def main():
    try:
        return run()
    finally:
        if MSRV is not None:
            MSRV.stop()


if __name__ == "__main__":
    sys.exit(main())
