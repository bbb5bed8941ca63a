#!/usr/bin/env python3
"""Rerank goldens (issue 26): llama.cpp's llama-server --rerank on a reranker GGUF, for a few
query/document sets, written as JSONL lines
  {"query", "documents", "tokens": [[ids of document i's input]], "scores": [score of document i],
   "order": [indices as llama-server sorted them]}.
The input of one document is llama-server's format_prompt_rerank: the query and the document
tokenized without specials (its /tokenize), joined as the GGUF's add_bos/add_eos/add_sep say
([CLS] q [SEP] d [SEP] for tools/gguf_bert.py --pooling rank); each is checked against the token
count llama-server reports for that document alone (usage.prompt_tokens), so a wrong join fails
here. tests/unit/cpu/test_embed_golden.c runs the tokens through uvllm's forward pass and
tests/integration/test_rerank.py sends query and documents to /v1/rerank.
    scripts/golden_rerank.py LLAMA_SERVER MODEL.gguf OUT.jsonl
"""
import json
import subprocess
import sys
import time
import urllib.request

CLS, SEP = 2, 3  # tools/gguf_bert.py's vocabulary
SETS = [
    ("the quick fox", ["a lazy dog", "the quick brown fox jumps", "hello",
                       "search can rank documents by cosine", "un play able ness", "1 + 1 = 2"]),
    ("what is an embedding?", [
        "Embeddings turn a text into one vector; similar texts get vectors that point the same "
        "way, so a search can rank documents by the cosine of their vectors with the query's.",
        "The quick brown fox jumps over the lazy dog", "hello", "vector"]),
    ("hello", ["hello", "HELLO, hello!", "été 中 ; x"]),
]


def post(port, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def main():
    server, model, out = sys.argv[1:4]
    port = 18000 + int(time.time()) % 1000
    p = subprocess.Popen([server, "-m", model, "--rerank", "--port", str(port), "-t", "2", "-c",
                          "512", "-np", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        with open(out, "w") as f:
            for query, docs in SETS:
                r = post(port, "/v1/rerank", {"query": query, "documents": docs})
                scores = [None] * len(docs)
                for x in r["results"]:
                    scores[x["index"]] = x["relevance_score"]
                q = post(port, "/tokenize", {"content": query})["tokens"]
                toks = []
                for i, d in enumerate(docs):
                    ids = [CLS] + q + [SEP] + post(port, "/tokenize", {"content": d})["tokens"] + [SEP]
                    one = post(port, "/v1/rerank", {"query": query, "documents": [d]})
                    assert one["usage"]["prompt_tokens"] == len(ids), (d, one, ids)
                    assert abs(one["results"][0]["relevance_score"] - scores[i]) < 1e-5, (one, scores)
                    toks.append(ids)
                f.write(json.dumps({"query": query, "documents": docs, "tokens": toks,
                                    "scores": scores,
                                    "order": [x["index"] for x in r["results"]]},
                                   ensure_ascii=False) + "\n")
    finally:
        p.terminate()
        p.wait()
    print(f"wrote {len(SETS)} lines to {out}")


if __name__ == "__main__":
    main()
