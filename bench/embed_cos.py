#!/usr/bin/env python3
"""Do two servers serve the same embedding model? bench/embed.sh asks before it measures: the
same --n inputs of --tokens random token ids (as bench/embed_load.py draws them) to
/v1/embeddings on both ports, and one JSON line with the worst cosine between the two
answers ({"worst_cos":..,"n":..}). Both sides L2-normalise, so the cosine is the dot."""

import argparse
import http.client
import json
import random


def embed(port, ids):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    conn.request("POST", "/v1/embeddings", json.dumps({"input": ids, "model": "m"}),
                 {"Content-Type": "application/json"})
    r = conn.getresponse()
    data = r.read()
    conn.close()
    if r.status != 200:
        raise SystemExit(f"port {port}: HTTP {r.status}: {data[:200]!r}")
    return json.loads(data)["data"][0]["embedding"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port_a", type=int)
    ap.add_argument("port_b", type=int)
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=64)
    a = ap.parse_args()
    rng = random.Random(1)
    worst = 1.0
    for _ in range(a.n):
        ids = [rng.randrange(1000, 30000) for _ in range(a.tokens)]
        x, y = embed(a.port_a, ids), embed(a.port_b, ids)
        if len(x) != len(y):
            raise SystemExit(f"dimensions differ: {len(x)} and {len(y)}")
        worst = min(worst, sum(p * q for p, q in zip(x, y)))
    print(json.dumps({"worst_cos": worst, "n": a.n}))


if __name__ == "__main__":
    main()
