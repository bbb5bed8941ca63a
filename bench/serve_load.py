#!/usr/bin/env python3
"""Streaming load for bench/serve.sh: N clients, each sending R streaming completions one
after the other (a ~PROMPT-word prompt, MAX tokens, greedy, ignore_eos), all started
within the first second, so new prompts arrive while others decode. Measures per request
the time to first token and every gap between two SSE chunks carrying text, and the
aggregate generated tokens per second. Prints one JSON line:
{"n":..,"ttft_p50":..,"ttft_p99":..,"itl_p50":..,"itl_p99":..,"tok_s":..,"errors":..}
(seconds; tok_s counts completion tokens from the chunks). --dump FILE also writes one JSON
line per request: client, round, start (seconds since the load began), ttft, max_gap."""

import argparse
import json
import random
import socket
import threading
import time


def one(host, port, body, out):
    t0 = time.monotonic()
    s = socket.create_connection((host, port), timeout=300)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    req = (f"POST /v1/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
           f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body
    s.sendall(req)
    buf, times, n_tok = b"", [], 0
    head_done = False
    while True:
        d = s.recv(65536)
        if not d:
            break
        now = time.monotonic()
        buf += d
        if not head_done:
            i = buf.find(b"\r\n\r\n")
            if i < 0:
                continue
            status = int(buf.split(b" ", 2)[1])
            if status != 200:
                out["error"] = status
                s.close()
                return
            buf, head_done = buf[i + 4:], True
        while True:
            i = buf.find(b"\n\n")
            if i < 0:
                break
            ev, buf = buf[:i], buf[i + 2:]
            j = ev.find(b"data: ")
            if j < 0:
                continue
            data = ev[j + 6:]
            if data.startswith(b"[DONE]"):
                continue
            try:
                c = json.loads(data)
            except ValueError:
                continue
            ch = c.get("choices") or [{}]
            if ch[0].get("text"):
                times.append(now)
                n_tok += 1
    s.close()
    out["ttft"] = times[0] - t0 if times else None
    out["gaps"] = [b - a for a, b in zip(times, times[1:])]
    out["tokens"] = n_tok


def pct(v, q):
    if not v:
        return None
    v = sorted(v)
    return v[min(len(v) - 1, int(q * (len(v) - 1) + 0.5))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("-n", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--prompt-words", type=int, default=40)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--dump", help="per-request lines (JSON) to this file")
    a = ap.parse_args()
    words = "the quick brown fox jumps over a lazy dog while seven small birds sing".split()
    results, lock = [], threading.Lock()
    t0 = time.monotonic()

    def client(k):
        rnd = random.Random(k)
        time.sleep(rnd.random())  # arrivals spread over the first second
        for r in range(a.rounds):
            prompt = " ".join(rnd.choice(words) for _ in range(a.prompt_words))
            body = json.dumps({"prompt": f"{k} {r} {prompt}", "max_tokens": a.max_tokens,
                               "temperature": 0, "stream": True, "ignore_eos": True,
                               "n_predict": a.max_tokens}).encode()
            out = {"client": k, "round": r, "start": time.monotonic() - t0}
            try:
                one(a.host, a.port, body, out)
            except OSError as e:
                out["error"] = repr(e)
            with lock:
                results.append(out)

    th = [threading.Thread(target=client, args=(k,)) for k in range(a.n)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    wall = time.monotonic() - t0
    ok = [r for r in results if "error" not in r and r.get("ttft") is not None]
    if a.dump:
        with open(a.dump, "w") as f:
            for r in sorted(results, key=lambda r: r["start"]):
                f.write(json.dumps({"client": r["client"], "round": r["round"],
                                    "start": round(r["start"], 3), "ttft": r.get("ttft"),
                                    "max_gap": max(r.get("gaps") or [0]),
                                    "error": r.get("error")}) + "\n")
    gaps = [g for r in ok for g in r["gaps"]]
    ttft = [r["ttft"] for r in ok]
    print(json.dumps({"n": a.n, "requests": len(results), "errors": len(results) - len(ok),
                      "ttft_p50": pct(ttft, .5), "ttft_p99": pct(ttft, .99),
                      "itl_p50": pct(gaps, .5), "itl_p99": pct(gaps, .99),
                      "tok_s": sum(r["tokens"] for r in ok) / wall}))


if __name__ == "__main__":
    main()
