#!/usr/bin/env python3
"""/v1/rerank (issue 26) as llama-server serves it. On the committed tiny reranker
(tests/models/bert-rerank-tiny-f16.gguf, cpu backend): every golden set of
tests/golden/bert-rerank-tiny.jsonl sent as text gets llama-server --rerank's scores (within
the unit golden's bound: the query/document join and tokenization are checked here, the
arithmetic in test_embed_golden.c) in llama-server's order, usage counts the joined tokens;
top_n and return_documents shape the answer; the four paths answer; bad bodies are 400s naming
the field; /v1/embeddings on the reranker is refused naming /v1/rerank, and /v1/rerank on a
model that is not a reranker is a 501. On the null backend (--pooling rank, its scores a hash):
a body over the job threshold and documents from many clients at once, each gets the score it
gets alone, and a client leaving mid-request frees its sequences."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from uvllm_harness import (Lazy, Server, each_in_thread, expect_error,  # noqa: E402
                           leave_mid_request, main, post_json, test)

SRC = os.environ.get("UVLLM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
MODEL = os.path.join(SRC, "tests", "models", "bert-rerank-tiny-f16.gguf")
EMBED_MODEL = os.path.join(SRC, "tests", "models", "bert-tiny-f16.gguf")
GOLDEN = os.path.join(SRC, "tests", "golden", "bert-rerank-tiny.jsonl")
TOL = 0.02  # tests/unit/cpu/test_embed_golden.c RANK_TOL
srv = Lazy("--model", MODEL, "--threads", "2", "--kv-mem", "16M", backend="cpu")


def rerank(s, body, path="/v1/rerank"):
    return post_json(s, path, body)


def ok(r):
    assert r.status == 200, (r.status, r.body)
    return r.json()


def bad(s, body, param, status=400):
    return expect_error(s, "/v1/rerank", body, param, status)


@test
def scores_and_order_are_llama_servers():
    s = srv()
    for line in open(GOLDEN):
        g = json.loads(line)
        j = ok(rerank(s, {"query": g["query"], "documents": g["documents"]}))
        assert j["object"] == "list" and j["model"] == "bert-rerank-tiny-f16.gguf", j
        got = {x["index"]: x["relevance_score"] for x in j["results"]}
        for i, want in enumerate(g["scores"]):
            assert abs(got[i] - want) <= TOL, (g["query"], i, got[i], want)
        assert [x["index"] for x in j["results"]] == g["order"], (j["results"], g["order"])
        n = sum(len(t) for t in g["tokens"])  # [CLS] q [SEP] d [SEP] per document
        assert j["usage"] == {"prompt_tokens": n, "total_tokens": n}, (j["usage"], n)
        assert all(set(x) == {"index", "relevance_score"} for x in j["results"]), j


@test
def top_n_and_return_documents():
    s = srv()
    g = json.loads(open(GOLDEN).readline())
    docs = g["documents"]
    j = ok(rerank(s, {"query": g["query"], "documents": docs, "top_n": 2,
                      "return_documents": True}))
    assert [x["index"] for x in j["results"]] == g["order"][:2], j
    assert [x["document"] for x in j["results"]] == [{"text": docs[i]} for i in g["order"][:2]]
    assert ok(rerank(s, {"query": g["query"], "documents": docs, "top_n": 0}))["results"] == []
    j = ok(rerank(s, {"query": g["query"], "documents": docs, "top_n": 100}))
    assert len(j["results"]) == len(docs)
    j = ok(rerank(s, {"query": g["query"], "documents": docs, "return_documents": False}))
    assert "document" not in j["results"][0]
    for path in ("/rerank", "/v1/reranking", "/reranking"):
        j = ok(rerank(s, {"query": g["query"], "documents": docs[:2]}, path))
        assert len(j["results"]) == 2, (path, j)


@test
def malformed_bodies_name_the_field():
    s = srv()
    r = rerank(s, "{not json")
    assert r.status == 400 and r.json()["error"]["code"] == "invalid_json", r.body
    bad(s, {"documents": ["a"]}, "query")
    bad(s, {"query": 5, "documents": ["a"]}, "query")
    bad(s, {"query": "q"}, "documents")
    bad(s, {"query": "q", "documents": []}, "documents")
    bad(s, {"query": "q", "documents": "a"}, "documents")
    bad(s, {"query": "q", "documents": ["a", 5]}, "documents[1]")
    bad(s, {"query": "q", "documents": ["a", {"text": "b"}]}, "documents[1]")
    bad(s, {"query": "q", "documents": ["a"], "top_n": -1}, "top_n")
    bad(s, {"query": "q", "documents": ["a"], "top_n": 1.5}, "top_n")
    bad(s, {"query": "q", "documents": ["a"], "return_documents": "yes"}, "return_documents")
    bad(s, {"query": "q", "documents": ["a"], "model": "gpt-4"}, "model", status=404)
    bad(s, {"query": "q", "documents": ["a"] * 2049}, "documents")
    bad(s, {"query": "q", "documents": ["a", " ".join(["hello"] * 600)]}, "documents[1]")
    bad(s, {"query": " ".join(["hello"] * 600), "documents": ["a"]}, "query")
    assert s.health()[0] == 200


@test
def embeddings_on_a_reranker_and_rerank_on_an_embedder_are_refused():
    r = srv().request("POST", "/v1/embeddings", body=json.dumps({"input": "hello"}))
    assert r.status == 400 and "/v1/rerank" in r.json()["error"]["message"], r.body
    with Server("--model", EMBED_MODEL, "--threads", "1", "--kv-mem", "16M", backend="cpu") as e:
        r = rerank(e, {"query": "q", "documents": ["a"]})
        assert r.status == 501 and "reranker" in r.json()["error"]["message"], r.body
        assert e.request("POST", "/v1/embeddings", body=json.dumps({"input": "x"})).status == 200


@test
def null_backend_jobs_and_many_clients():
    with Server("--pooling", "rank", "--null-ctx", "8192", "--max-batch-tokens", "4096") as s:
        long_doc = " ".join(f"w{i % 50}" for i in range(3000))  # > 4 KiB: a pool thread parses
        docs = ["one", long_doc, "two three"]
        j = ok(rerank(s, {"query": "q", "documents": docs}))
        alone = {i: ok(rerank(s, {"query": "q", "documents": [d]}))["results"][0]["relevance_score"]
                 for i, d in enumerate(docs)}
        assert {x["index"]: x["relevance_score"] for x in j["results"]} == alone
        scores = [x["relevance_score"] for x in j["results"]]
        assert scores == sorted(scores, reverse=True), scores
        def one(i):
            return ok(rerank(s, {"query": f"q{i}", "documents": [f"d{i}", "x"]}))["results"]
        want = {i: one(i) for i in range(16)}
        assert each_in_thread(16, one) == want
        # the query is repeated with every document: 2048 x 601 tokens is over the 2^20 cap,
        # refused before they are all held (a 3 KiB query, 8 KiB of documents)
        r = rerank(s, {"query": " ".join(["w"] * 600), "documents": ["a"] * 2048})
        assert r.status == 400 and r.json()["error"]["param"] == "documents", r.body
        assert "tokens" in r.json()["error"]["message"], r.body


@test
def client_leaving_mid_request_frees_its_sequences():
    with Server("--pooling", "rank", "--null-delay-us", "200000") as s:
        leave_mid_request(s, "/v1/rerank", {"query": "q", "documents": ["a b c"] * 50})
        assert ok(rerank(s, {"query": "q", "documents": ["after"]}))["results"]


if __name__ == "__main__":
    main(srv)
