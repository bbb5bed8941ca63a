#!/usr/bin/env python3
"""Embeddings load for bench/embed.sh: N clients, each on its own keep-alive connection,
POST /v1/embeddings bodies (one input of --tokens random token ids in [1000, 30000), a new
input each time, from a seeded generator per client: no server can answer from a cache, and
every run sends the same inputs) one after the other for a set time. Prints one JSON line: {"inputs_s":..,"n":..,"errors":..,"seconds":..} (inputs per
second over the whole run; any non-200 answer is an error). --ids LO:HI changes the range of
the ids (a small vocabulary: the synthetic BERT models have 142 tokens)."""

import argparse
import http.client
import json
import random
import threading
import time


def client(host, port, seed, n_tokens, stop_at, out, lo=1000, hi=30000):
    conn = http.client.HTTPConnection(host, port, timeout=300)
    rng = random.Random(seed)
    n = err = 0
    while time.monotonic() < stop_at:
        ids = [rng.randrange(lo, hi) for _ in range(n_tokens)]
        body = json.dumps({"input": ids, "model": "m", "encoding_format": "float"})
        conn.request("POST", "/v1/embeddings", body, {"Content-Type": "application/json"})
        r = conn.getresponse()
        data = r.read()
        if r.status == 200 and b'"embedding"' in data:
            n += 1
        else:
            err += 1
    conn.close()
    out.append((n, err))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--ids", default="1000:30000", help="LO:HI, the token ids' range")
    a = ap.parse_args()
    lo, hi = (int(x) for x in a.ids.split(":"))
    out, threads = [], []
    t0 = time.monotonic()
    stop_at = t0 + a.seconds
    for c in range(a.clients):
        t = threading.Thread(target=client, args=("127.0.0.1", a.port, c, a.tokens, stop_at, out, lo, hi))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    dt = time.monotonic() - t0
    n = sum(x for x, _ in out)
    print(json.dumps({"inputs_s": n / dt, "n": n, "errors": sum(e for _, e in out), "seconds": dt}))


if __name__ == "__main__":
    main()
