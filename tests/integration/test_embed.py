#!/usr/bin/env python3
"""/v1/embeddings and /embedding on the null backend (issue 26): its vectors are a hash of
each token (8 floats, pooled as --pooling says), so the serving layer is checked exactly:
malformed bodies and inputs are 400s naming the field, a body over the job threshold
(UL_API_JOB_BYTES) goes through a worker job and gives the same vector, too many inputs are
refused, a client that leaves mid-request frees its sequences, inputs batched from many
clients each get their own vector, and pooling follows --pooling."""
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from uvllm_harness import (Lazy, Server, each_in_thread, expect_error,  # noqa: E402
                           leave_mid_request, main, post_json, test)

srv = Lazy("--null-ctx", "8192", "--max-batch-tokens", "4096")


def embed(s, body, path="/v1/embeddings"):
    return post_json(s, path, body)


def vec(r, i=0):
    assert r.status == 200, (r.status, r.body)
    return r.json()["data"][i]["embedding"]


def bad(s, body, param, status=400):
    return expect_error(s, "/v1/embeddings", body, param, status)


@test
def unit_vectors_equal_for_equal_inputs():
    s = srv()
    a, b = vec(embed(s, {"input": "the same words"})), vec(embed(s, {"input": "the same words"}))
    c = vec(embed(s, {"input": "other words"}))
    assert len(a) == 8 and a == b and a != c, (a, b, c)
    assert abs(math.sqrt(sum(x * x for x in a)) - 1) < 1e-6
    r = embed(s, {"input": ["one", "two three", "four"]})
    assert [d["index"] for d in r.json()["data"]] == [0, 1, 2]
    assert r.json()["usage"] == {"prompt_tokens": 4, "total_tokens": 4}, r.json()["usage"]
    assert vec(r, 0) == vec(embed(s, {"input": "one"}))


@test
def malformed_bodies_and_inputs_name_the_field():
    s = srv()
    r = embed(s, "{not json")
    assert r.status == 400 and r.json()["error"]["code"] == "invalid_json", r.body
    bad(s, {}, "input")
    bad(s, {"input": None}, "input")
    bad(s, {"input": 5}, "input")
    bad(s, {"input": {"text": "x"}}, "input")
    bad(s, {"input": ["a", 5]}, "input[1]")
    bad(s, {"input": ["a", [1, "b"]]}, "input[1]")
    bad(s, {"input": [[1, 2], [1.5]]}, "input[1]")
    bad(s, {"input": [[1, 2], [32000]]}, "input[1]")
    bad(s, {"input": ["a", ""]}, "input[1]")
    bad(s, {"input": "x", "encoding_format": 3}, "encoding_format")
    bad(s, {"input": "x", "dimensions": 4}, "dimensions")
    assert embed(s, {"input": "x", "dimensions": 8}).status == 200, "the model's own size"
    bad(s, {"input": "x", "model": "gpt-4"}, "model", status=404)
    bad(s, {"input": ["w"] * 2049}, "input")
    bad(s, {"input": " ".join(["w"] * 4097)}, "input")
    assert s.health()[0] == 200


@test
def large_body_through_a_job_gives_the_same_vector():
    s = srv()
    text = " ".join(f"w{i % 50}" for i in range(3000))  # > 4 KiB: parsed on a pool thread
    assert len(text) > 4096
    a = vec(embed(s, {"input": text}))
    b = vec(embed(s, {"input": [text[:20], text]}), 1)
    assert a == b
    # the same tokens as ids: the same vector
    ids = s.request("POST", "/tokenize", body=json.dumps({"content": text})).json()["tokens"]
    assert vec(embed(s, {"input": ids})) == a


@test
def base64_is_the_float_vector():
    import base64
    import struct
    s = srv()
    f = vec(embed(s, {"input": "some words", "encoding_format": "float"}))
    b = vec(embed(s, {"input": "some words", "encoding_format": "base64"}))
    raw = base64.b64decode(b)
    assert len(raw) == 32
    assert list(struct.unpack("<8f", raw)) == [struct.unpack("<f", struct.pack("<f", x))[0] for x in f]


@test
def llama_server_shape_on_embedding():
    s = srv()
    r = embed(s, {"content": ["one", "two"]}, "/embedding")
    assert r.status == 200, r.body
    j = r.json()
    assert [x["index"] for x in j] == [0, 1] and len(j[0]["embedding"]) == 1
    assert j[0]["embedding"][0] == vec(embed(s, {"input": "one"}))
    r = embed(s, {"content": "one"}, "/v1/embeddings")
    assert r.status == 400, "content is /embedding's field only"


@test
def client_leaving_mid_request_frees_its_sequences():
    with Server("--null-delay-us", "200000") as s:
        leave_mid_request(s, "/v1/embeddings", {"input": ["a b c"] * 50})
        assert vec(embed(s, {"input": "after"}))


@test
def pooling_option_is_applied():
    with Server("--pooling", "cls") as c, Server("--pooling", "last") as l:
        # cls of "x y" is x's vector; last of "y x" is x's too
        assert vec(embed(c, {"input": "x y"})) == vec(embed(l, {"input": "y x"}))
        assert vec(embed(c, {"input": "x y"})) != vec(embed(l, {"input": "x y"}))
    with Server("--pooling", "none") as n:
        r = embed(n, {"input": "x"})
        assert r.status == 400 and "--pooling" in r.json()["error"]["message"], r.body


@test
def many_clients_batched_each_get_their_own():
    s = srv()
    want = {i: vec(embed(s, {"input": f"client {i} text"})) for i in range(24)}
    got = each_in_thread(24, lambda i: vec(embed(s, {"input": f"client {i} text"})))
    assert got == want


if __name__ == "__main__":
    main(srv)
