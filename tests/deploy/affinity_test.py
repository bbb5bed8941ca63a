#!/usr/bin/python3
"""Prefix-affinity routing (issue 29), on the host: 3 uvllm replicas on loopback ports behind
Debian's nginx running docker/nginx/nginx.conf (with affinity.js; only the addresses and
paths rewritten), no docker needed. Part of `make test-deploy` (ctest deploy_affinity); alone:
    python3 tests/deploy/affinity_test.py [--json OUT]   (UVLLM_BINARY, UVLLM_SHARED)

The workload: 30 conversations of 4 turns each, all sharing a 500-token system prompt, each
with its own questions; every turn sends the whole history. Turns go in rounds (every
conversation's turn 1 in a shuffled order, 6 requests at a time, then every turn 2, ...), as
when users think between turns. It runs on a fresh fleet three times:
  affinity    the shipped config: ≥ 90% of turns after the first must find their own history
              in the replica's prefix cache (cached_tokens beyond what the previous turn's
              prompt needed, minus two pages of slack);
  least_conn  the same config with `least_conn` instead of the hash: the baseline, which
              must do clearly worse (a turn lands on the replica holding its history about
              1 time in 3);
  kill        affinity, with one replica SIGKILLed after turn 2: every request is answered
              200, the conversations it held move, and their turn 4 hits on the new replica.
Fleet prefill tokens (prompt tokens not served by a cache) are summed from the responses and,
where the replicas lived, from their /metrics; --json writes them for bench/affinity.sh.
"""
import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARED = os.path.abspath(os.environ.get("UVLLM_SHARED", os.path.join(ROOT, "..", "shared")))
BINARY = os.environ.get("UVLLM_BINARY", os.path.join(ROOT, "build", "uvllm"))
MODEL = os.path.join(SHARED, "models", "qwen2-tiny-f16.gguf")
REPLICAS, CONVERSATIONS, TURNS, PARALLEL = 3, 30, 4, 6
PAGE = 16
SLACK = 2 * PAGE  # a turn's prompt ends where the next one's template may re-tokenize
WORDS = ("river stone lantern harbor meadow cobalt thistle orbit velvet quarry ember signal "
         "willow prism canyon falcon marble tundra beacon cedar").split()
SYSTEM = ("You are the assistant of a research library. Answer briefly and cite the shelf. "
          + " ".join(f"Rule {i}: {WORDS[i % 20]} {WORDS[(i * 7) % 20]} {WORDS[(i * 3) % 20]}."
                     for i in range(58)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(port, method, path, body=None, timeout=60):
    """One request on a new connection: (status, lower-cased headers, body bytes)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request(method, path, body=json.dumps(body) if body is not None else None,
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        c.close()


class Fleet:
    """REPLICAS uvllm processes and one nginx in front, in a temporary folder."""

    def __init__(self, balance, extra=()):
        self.extra = list(extra)
        self.dir = tempfile.mkdtemp(prefix="uvllm-affinity.")
        os.chmod(self.dir, 0o755)
        self.ports = [free_port() for _ in range(REPLICAS)]
        self.procs = [self.replica(p) for p in self.ports]
        self.nginx_port = free_port()
        self.nginx = None
        for p in self.ports:
            self.wait_up(p)
        self.start_nginx(balance)

    def replica(self, port):
        log = open(os.path.join(self.dir, f"uvllm-{port}.log"), "w")
        return subprocess.Popen(
            [BINARY, "serve", "--model", MODEL, "--port", str(port), "--threads", "1",
             "--kv-mem", "64M", "--max-seqs", "64", "--max-tokens-default", "8",
             "--canary-interval-s", "3600", *self.extra], stdout=log, stderr=subprocess.STDOUT)

    def wait_up(self, port, timeout=120):
        t = time.monotonic() + timeout
        while time.monotonic() < t:
            try:
                if call(port, "GET", "/health", timeout=5)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"replica on {port} did not come up")

    def conf(self, balance):
        """docker/nginx/nginx.conf with loopback replicas and this folder's paths."""
        text = open(os.path.join(ROOT, "docker", "nginx", "nginx.conf")).read()
        d = self.dir
        subs = [
            (r"include /etc/nginx/upstream.d/\*.conf;",  # what follow.sh writes
             "\n        ".join(f"server 127.0.0.1:{p} max_fails=1 fail_timeout=5s;"
                              for p in self.ports)),
            (r"listen 8080;", f"listen 127.0.0.1:{self.nginx_port};"),
            (r"pid /run/nginx.pid;", f"pid {d}/nginx.pid;"),
            (r"error_log /dev/stderr warn;", f"error_log {d}/error.log warn;"),
            (r"access_log /dev/stdout uvllm;",
             f"access_log {d}/access.log uvllm;\n    client_body_temp_path {d}/body;\n"
             f"    proxy_temp_path {d}/proxy;\n    fastcgi_temp_path {d}/fcgi;\n"
             f"    uwsgi_temp_path {d}/uwsgi;\n    scgi_temp_path {d}/scgi;"),
            (r"js_import affinity from /etc/nginx/affinity.js;",
             f"js_import affinity from {ROOT}/docker/nginx/affinity.js;"),
            (r"include /etc/nginx/uvllm.d/\*.conf;", "add_header X-Upstream $upstream_addr always;"),
        ]
        if balance == "least_conn":
            subs.append((r"hash \$uvllm_conversation consistent;", "least_conn;"))
        for pat, rep in subs:
            text, n = re.subn(pat, rep, text)
            assert n == 1, f"nginx.conf: '{pat}' found {n} times"
        return text

    def start_nginx(self, balance):
        path = os.path.join(self.dir, "nginx.conf")
        with open(path, "w") as f:
            f.write(self.conf(balance))
        cmd = ["nginx", "-p", self.dir, "-c", path, "-g", "daemon off;"]
        t = subprocess.run(cmd + ["-t"], capture_output=True, text=True)
        assert t.returncode == 0, f"nginx -t: {t.stderr}"
        self.nginx = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.wait_up(self.nginx_port)

    def kill(self, i):
        self.procs[i].send_signal(signal.SIGKILL)
        self.procs[i].wait()

    def prefill_from_metrics(self):
        """Sum over the live replicas of prompt tokens looked up minus found in the cache."""
        total = 0
        for i, p in enumerate(self.ports):
            if self.procs[i].poll() is not None:
                continue
            text = call(p, "GET", "/metrics")[2].decode()
            v = {m.group(1): float(m.group(2)) for m in
                 re.finditer(r"^(uvllm_prefix_cache_(?:query|hit)_tokens_total) (\S+)$", text, re.M)}
            total += v["uvllm_prefix_cache_query_tokens_total"] - v["uvllm_prefix_cache_hit_tokens_total"]
        return int(total)

    def close(self):
        for p in self.procs + ([self.nginx] if self.nginx else []):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM if p is self.nginx else signal.SIGKILL)
        for p in self.procs + ([self.nginx] if self.nginx else []):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


def question(c, t):
    w = [WORDS[(c * 5 + t * 3 + k) % 20] for k in range(40)]
    return f"Conversation {c}, question {t}: which shelf holds " + " ".join(w) + "?"


def turn(fleet, conv, c, t, out):
    """Turn t of conversation c (its history in conv[c])."""
    msgs = conv[c]
    msgs.append({"role": "user", "content": question(c, t)})
    body = {"messages": msgs, "max_tokens": 8, "temperature": 0}
    try:
        status, h, raw = call(fleet.nginx_port, "POST", "/v1/chat/completions", body)
    except OSError as e:
        status, h, raw = 0, {}, str(e).encode()
    prev = [r for r in out if r["conv"] == c and r["turn"] == t - 1]
    rec = {"conv": c, "turn": t, "status": status, "prev_prompt": prev[0].get("prompt", 0) if prev else 0,
           "upstream": h.get("x-upstream", "").split(",")[-1].strip()}
    if status == 200:
        r = json.loads(raw)
        u = r["usage"]
        rec.update(prompt=u["prompt_tokens"], cached=u["prompt_tokens_details"]["cached_tokens"],
                   header=h.get("x-uvllm-cached-tokens"))
        msgs.append({"role": "assistant", "content": r["choices"][0]["message"]["content"]})
    else:
        rec["error"] = raw[:200].decode(errors="replace")
        msgs.append({"role": "assistant", "content": "(no answer)"})
    out.append(rec)


def run_workload(balance, kill_after_turn=None):
    """TURNS rounds; in each, every conversation's next turn, in a shuffled order, PARALLEL at
    a time. A conversation's next turn thus comes after the other conversations' turns have
    been dispatched, as after a user's think time: a least_conn balancer sees the load of
    that moment, not a connection its previous turn just freed."""
    fleet = Fleet(balance)
    conv = {c: [{"role": "system", "content": SYSTEM}] for c in range(CONVERSATIONS)}
    out, killed, lock = [], None, threading.Lock()
    t0 = time.monotonic()
    for t in range(TURNS):
        if t == kill_after_turn:  # the replica that served the most of the last turn
            held = [r["upstream"] for r in out if r["turn"] == t - 1]
            killed = max(sorted(set(held)), key=held.count)
            fleet.kill([f"127.0.0.1:{p}" for p in fleet.ports].index(killed))
        order = list(range(CONVERSATIONS))
        random.Random(t).shuffle(order)

        def worker():
            while True:
                with lock:
                    if not order:
                        return
                    c = order.pop()
                turn(fleet, conv, c, t, out)

        ths = [threading.Thread(target=worker) for _ in range(PARALLEL)]
        for th in ths:
            th.start()
        for th in ths:
            th.join()
    secs = time.monotonic() - t0
    metrics = fleet.prefill_from_metrics() if kill_after_turn is None else None
    fleet.close()
    return summarize(balance, out, secs, metrics, killed)


def own_hit(r):
    return r.get("cached", 0) >= r["prev_prompt"] - SLACK


def summarize(balance, out, secs, metrics, killed):
    later = [r for r in out if r["turn"] > 0 and r["status"] == 200]
    s = {"balance": balance, "requests": len(out), "seconds": round(secs, 1),
         "ok": sum(r["status"] == 200 for r in out),
         "later_turns": len(later),
         "hit_any": sum(r["cached"] > 0 for r in later),
         "hit_own": sum(own_hit(r) for r in later),
         "first_turn_prompt": min((r["prompt"] for r in out if r["turn"] == 0 and "prompt" in r),
                                  default=0),
         "prompt_tokens": sum(r.get("prompt", 0) for r in out),
         "prefill_tokens": sum(r.get("prompt", 0) - r.get("cached", 0) for r in out),
         "prefill_tokens_metrics": metrics,
         "header_matches": all(r["header"] == str(r["cached"]) for r in out if r["status"] == 200),
         "errors": [r for r in out if r["status"] != 200][:3]}
    if killed:
        moved = {r["conv"] for r in out if r["turn"] == 1 and killed in r["upstream"]}
        t4 = [r for r in out if r["conv"] in moved and r["turn"] == 3 and r["status"] == 200]
        s.update(killed=killed, moved=len(moved), moved_turn4_hits=sum(own_hit(r) for r in t4),
                 moved_turn4=len(t4))
    return s


def overload_spills_to_the_next_replica():
    """Replicas with --max-queue 2: a burst of 6 requests of one session is more than its
    replica queues, not more than the fleet does; the ones it refuses (429) are retried on the
    next replicas on the ring, so all are answered 200, by more than one replica."""
    fleet = Fleet("hash", ["--max-queue", "2"])
    res = []

    def one(i):
        body = {"messages": [{"role": "system", "content": SYSTEM},
                             {"role": "user", "content": question(i, 0)}], "max_tokens": 8}
        c = http.client.HTTPConnection("127.0.0.1", fleet.nginx_port, timeout=120)
        try:
            c.request("POST", "/v1/chat/completions", json.dumps(body),
                      {"Content-Type": "application/json", "X-Session-Id": "one-busy-user"})
            r = c.getresponse()
            r.read()
            res.append((r.status, r.getheader("X-Upstream", "")))
        finally:
            c.close()

    ths = [threading.Thread(target=one, args=(i,)) for i in range(6)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    fleet.close()
    answered = {u.split(",")[-1].strip() for st, u in res if st == 200}
    retried = sum("," in u for _, u in res)
    return {"codes": sorted(st for st, _ in res), "replicas": len(answered), "retried": retried}


def main():
    results, failed = {}, []
    for name, balance, kill in (("affinity", "hash", None), ("least_conn", "least_conn", None),
                                ("kill", "hash", 2)):
        s = results[name] = run_workload(balance, kill)
        print(f"{name}: " + json.dumps({k: v for k, v in s.items() if k != "errors"}), flush=True)
        for e in s["errors"]:
            print(f"  error: {e}", flush=True)

    def check(cond, msg):
        print(("ok   " if cond else "FAIL ") + msg, flush=True)
        if not cond:
            failed.append(msg)

    a, b, k = results["affinity"], results["least_conn"], results["kill"]
    n = CONVERSATIONS * TURNS
    check(a["ok"] == n and b["ok"] == n, f"every request answered 200 ({a['ok']}, {b['ok']} of {n})")
    check(a["header_matches"] and b["header_matches"],
          "X-Uvllm-Cached-Tokens equals usage's cached_tokens on every answer")
    check(a["hit_own"] >= 0.9 * a["later_turns"],
          f"affinity: {a['hit_own']}/{a['later_turns']} later turns hit their own history (>= 90%)")
    check(b["hit_own"] <= 0.7 * b["later_turns"],
          f"least_conn baseline: {b['hit_own']}/{b['later_turns']} (affinity must be the cause)")
    check(a["prefill_tokens"] < b["prefill_tokens"],
          f"fleet prefill tokens: affinity {a['prefill_tokens']} < least_conn {b['prefill_tokens']}")
    check(k["ok"] == n, f"replica killed after turn 2: {k['ok']}/{n} answered 200 (none lost)")
    check(k["moved"] > 0 and k["moved_turn4_hits"] >= 0.9 * k["moved_turn4"],
          f"its {k['moved']} conversations moved; turn 4 hit on the new replica: "
          f"{k['moved_turn4_hits']}/{k['moved_turn4']}")
    o = overload_spills_to_the_next_replica()
    print("overload: " + json.dumps(o), flush=True)
    check(o["codes"] == [200] * 6 and o["replicas"] > 1 and o["retried"] > 0,
          f"one session's burst over --max-queue 2: {o['codes'].count(200)}/6 answered 200, by "
          f"{o['replicas']} replicas, {o['retried']} retried after a 429")
    if len(sys.argv) > 2 and sys.argv[1] == "--json":
        with open(sys.argv[2], "w") as f:
            json.dump(results, f, indent=1)
    print(f"{8 - len(failed)} passed, {len(failed)} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
