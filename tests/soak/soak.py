"""Soak and load driver: N concurrent clients against one real `uvllm serve` on the CPU
backend for a set time, each looping over requests with random prompt lengths, streaming
and not, some streams cut mid-way by FIN (close) and some by RST (SO_LINGER 0).

Every answer is checked: greedy (temperature 0) outputs of one prompt must be identical
whichever way they were asked for (the server runs with --batch-invariant), statuses must be 200, streams must end with a finish
chunk and [DONE]. The server's resident memory is sampled from /proc every few seconds;
after warm-up it must stay within a stated bound of its level at the end of warm-up. At the
end every KV page must be free (/health), and the server must exit 0 on SIGTERM.

--drain ends the run differently: SIGTERM arrives while streams are in flight, and each of
those must still complete (the server drains) before it exits 0.
--fail-on-tsan fails the run on any ThreadSanitizer report in the server's stderr.

Python 3 standard library only. Exit status 0 = pass; the summary is printed and, with
--json, written as JSON (RSS curve included)."""

import argparse
import json
import os
import random
import signal
import socket
import struct
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from uvllm_harness import Reader, Server, build_request, rss_kib, sse_events  # noqa: E402

WORDS = ("the a dream robot sky light river machine quiet garden night silver memory road "
         "window ocean paper clock forest signal winter engine voice mirror city stone "
         "cloud fire glass song").split()


class Soak:
    def __init__(self, a, srv):
        self.a, self.srv = a, srv
        rnd = random.Random(a.seed)
        # A fixed pool of prompts of random lengths, each with its own max_tokens: the
        # first answer to a prompt becomes its reference, every later one must match it.
        self.prompts = []
        for _ in range(a.n_prompts):
            n = rnd.randint(1, a.max_prompt_words)
            text = " ".join(rnd.choice(WORDS) for _ in range(n))
            self.prompts.append((text, rnd.randint(4, a.max_tokens)))
        self.ref = {}
        self.mu = threading.Lock()
        self.counts = {"requests": 0, "stream": 0, "plain": 0, "cut_fin": 0, "cut_rst": 0,
                       "errors": 0, "mismatches": 0, "drained": 0}
        self.errors = []  # first few error descriptions
        self.start = threading.Barrier(a.clients)  # the first requests arrive as one burst
        self.stop = threading.Event()
        self.in_drain = threading.Event()

    # ---- bookkeeping ----
    def count(self, k):
        with self.mu:
            self.counts[k] += 1

    def error(self, what):
        with self.mu:
            self.counts["errors"] += 1
            if len(self.errors) < 20:
                self.errors.append(what)

    def check_text(self, i, text, how):
        with self.mu:
            ref = self.ref.setdefault(i, text)
        if ref != text:
            self.count("mismatches")
            self.error(f"prompt {i} ({how}): got {text[:60]!r}, reference {ref[:60]!r}")
            return False
        return True

    # ---- one request of each kind ----
    def body(self, i, stream):
        prompt, n = self.prompts[i]
        return json.dumps({"prompt": prompt, "max_tokens": n, "temperature": 0,
                           "stream": stream})

    def plain(self, i):
        with self.srv.connect(timeout=self.a.timeout) as s:
            s.sendall(build_request("POST", "/v1/completions", self.body(i, False), close=True))
            r = Reader(s).response("POST")
        if r.status == 503 and self.in_drain.is_set():
            return  # arrived after SIGTERM: refused, as it should be
        if r.status != 200:
            return self.error(f"plain prompt {i}: status {r.status} {r.body[:200]!r}")
        j = r.json()
        c = j["choices"][0]
        if c.get("finish_reason") not in ("length", "stop"):
            return self.error(f"plain prompt {i}: finish_reason {c.get('finish_reason')!r}")
        self.check_text(i, c["text"], "plain")

    def stream(self, i, cut=None):
        s = self.srv.connect(timeout=self.a.timeout)
        try:
            s.sendall(build_request("POST", "/v1/completions", self.body(i, True), close=True))
            rd = Reader(s)
            _, status, _, headers = rd.head()
            if status == 503 and self.in_drain.is_set():
                return
            if status != 200:
                body = rd.body(headers, "POST", status)
                return self.error(f"stream prompt {i}: status {status} {body[:200]!r}")
            if cut:
                want = random.randint(1, 4)
                while rd.buf.count(b"data:") < want and not rd.eof:
                    rd._fill()
                if cut == "rst":
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                else:  # FIN now, even if events arrived unread (close() would then RST)
                    s.shutdown(socket.SHUT_WR)
                return
            ev = sse_events(rd.body(headers, "POST", status))
        finally:
            s.close()
        if not ev or ev[-1] != "[DONE]":
            return self.error(f"stream prompt {i}: no [DONE] (last {ev[-2:]!r})")
        chunks = [json.loads(e) for e in ev[:-1]]
        fins = [c["choices"][0].get("finish_reason") for c in chunks if c.get("choices")]
        if not fins or fins[-1] not in ("length", "stop"):
            return self.error(f"stream prompt {i}: last finish_reason {fins[-1:]!r}")
        text = "".join(c["choices"][0]["text"] for c in chunks if c.get("choices"))
        self.check_text(i, text, "stream")

    def client(self, k):
        rnd = random.Random(self.a.seed * 1000 + k)
        self.start.wait()
        while not self.stop.is_set() and not self.in_drain.is_set():
            i = rnd.randrange(len(self.prompts))
            x = rnd.random()
            kind = ("stream" if x < 0.4 else "plain" if x < 0.7 else
                    "cut_fin" if x < 0.85 else "cut_rst")
            drain_started = self.in_drain.is_set()
            try:
                if kind == "plain":
                    self.plain(i)
                else:
                    self.stream(i, cut=kind[4:] if kind.startswith("cut") else None)
                self.count(kind)
                self.count("requests")
                if self.in_drain.is_set() and not drain_started:
                    self.count("drained")
            except ConnectionRefusedError:
                if not self.in_drain.is_set():  # the listener is closed once draining
                    self.error(f"{kind} prompt {i}: connection refused")
            except Exception as e:  # noqa: BLE001 - every failure is counted and shown
                self.error(f"{kind} prompt {i}: {type(e).__name__}: {e}")


def health(srv):
    st, h = srv.health()
    return h


def wait_exit(srv, soak, seconds):
    """The server's exit status within `seconds` of its SIGTERM; None (killed, an error)
    when it is still running then."""
    try:
        return srv.wait(seconds)
    except Exception:  # noqa: BLE001
        srv.kill()
        soak.error(f"server did not exit within {seconds} s of SIGTERM")
        return None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    shared = os.environ.get("UVLLM_SHARED", os.path.join(HERE, "..", "..", "..", "shared"))
    p.add_argument("--model", default="mini-q4_0.gguf",
                   help="a GGUF path, or a file name under $UVLLM_SHARED/models")
    p.add_argument("--clients", type=int, default=64)
    p.add_argument("--duration", type=float, default=600, help="seconds of load")
    p.add_argument("--warmup", type=float, default=None,
                   help="seconds before the RSS baseline (default: 10%% of duration, 5..120)")
    p.add_argument("--rss-bound-mib", type=float, default=16,
                   help="RSS may exceed its level at the end of warm-up by at most this")
    p.add_argument("--sample-every", type=float, default=5)
    p.add_argument("--threads", default="1")
    p.add_argument("--kv-mem", default="256M", help="the server's KV pool (its default is a "
                   "quarter of RAM, slow to set up and far more than the clients need)")
    p.add_argument("--n-prompts", type=int, default=32)
    p.add_argument("--max-prompt-words", type=int, default=200)
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument("--timeout", type=float, default=300, help="per-request socket timeout")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--drain", action="store_true", help="SIGTERM with streams in flight")
    p.add_argument("--fail-on-tsan", action="store_true")
    p.add_argument("--json", help="write the summary (with the RSS curve) here")
    p.add_argument("server_args", nargs="*", help="extra `uvllm serve` arguments (after --)")
    a = p.parse_args()
    if os.sep not in a.model:
        a.model = os.path.join(shared, "models", a.model)
    warm = a.warmup if a.warmup is not None else min(120, max(5, a.duration / 10))

    # --batch-invariant: the greedy check compares answers computed over cached prefixes
    # and in batches of every shape; without it the tiled attention path (64+ tokens of a
    # sequence in a step) differs from the per-token one in the last bits, and a
    # random-weight model's near-tied logits turn that into other tokens (mini-q4_0, 4
    # clients, 6 s: 295 of 2479 answers; 0 of 1190 with the option)
    srv = Server("--model", a.model, "--threads", a.threads, "--kv-mem", a.kv_mem,
                 "--batch-invariant", *a.server_args, backend="cpu")
    soak = Soak(a, srv)
    pid = srv.proc.pid
    print(f"soak: server pid {pid}, {a.clients} clients, {a.duration:.0f} s, model "
          f"{os.path.basename(a.model)}, warm-up {warm:.0f} s, RSS bound +{a.rss_bound_mib} MiB",
          flush=True)
    t0 = time.monotonic()
    curve = [(0.0, rss_kib(pid))]
    threads = [threading.Thread(target=soak.client, args=(k,), daemon=True)
               for k in range(a.clients)]
    for t in threads:
        t.start()
    next_print = 60
    while time.monotonic() - t0 < a.duration:
        time.sleep(a.sample_every)
        el = time.monotonic() - t0
        r = rss_kib(pid)
        curve.append((round(el, 1), r))
        if srv.proc.poll() is not None:
            soak.error(f"server exited {srv.proc.returncode} during the run")
            break
        if el >= next_print:
            next_print += 60
            with soak.mu:
                c = dict(soak.counts)
            print(f"soak: t={el:.0f}s rss={r / 1024 if r else 0:.1f}MiB requests={c['requests']} "
                  f"errors={c['errors']} mismatches={c['mismatches']}", flush=True)

    rc_server = None
    if a.drain and srv.proc.poll() is None:
        # SIGTERM with requests in flight: clients stop starting new ones; the ones running
        # must complete (the server drains them) before the process exits 0.
        soak.in_drain.set()
        srv.signal(signal.SIGTERM)
        for t in threads:
            t.join(a.timeout)
        rc_server = wait_exit(srv, soak, 60)
    else:
        soak.stop.set()
        for t in threads:
            t.join(a.timeout)
        # every sequence, stream and KV page given back once the clients are gone
        deadline = time.monotonic() + 30
        h = {}
        while time.monotonic() < deadline and srv.proc.poll() is None:
            h = health(srv)
            if (h["active_sequences"] == 0 and h["active_streams"] == 0 and
                    h["kv_pages_free"] == h["kv_pages_total"]):
                break
            time.sleep(0.2)
        print(f"soak: final /health {json.dumps(h)}", flush=True)
        if not h or h["kv_pages_free"] != h["kv_pages_total"] or h["active_sequences"]:
            soak.error(f"not idle at the end: {h}")
        srv.signal(signal.SIGTERM)
        rc_server = wait_exit(srv, soak, 40)
    if rc_server not in (0, None):
        soak.error(f"server exited {rc_server} after SIGTERM")
    srv._drain.join(5)
    log = "".join(srv.log)

    # RSS: the level at the end of warm-up is the baseline; every later sample must stay
    # within the bound of it.
    post = [r for t, r in curve if t >= warm and r]
    base = post[0] if post else None
    peak = max(post) if post else None
    growth_mib = (peak - base) / 1024 if post else None
    rss_ok = post and growth_mib <= a.rss_bound_mib
    if not rss_ok and not a.drain:
        soak.error(f"RSS grew {growth_mib} MiB after warm-up (bound {a.rss_bound_mib} MiB)")
    tsan = srv.tsan_reports
    if a.fail_on_tsan and tsan:
        soak.error(f"{tsan} ThreadSanitizer report(s) in the server's stderr")
    if tsan:
        i = log.find("WARNING: ThreadSanitizer")
        print(log[max(0, i - 200):i + 6000], file=sys.stderr)

    c = soak.counts
    summary = {"clients": a.clients, "duration_s": round(time.monotonic() - t0, 1),
               "model": os.path.basename(a.model), "threads": a.threads, **c,
               "server_exit": rc_server, "warmup_s": warm,
               "rss_baseline_mib": base and round(base / 1024, 1),
               "rss_peak_after_warmup_mib": peak and round(peak / 1024, 1),
               "rss_growth_mib": growth_mib and round(growth_mib, 2),
               "rss_bound_mib": a.rss_bound_mib, "tsan_reports": tsan,
               "first_errors": soak.errors,
               "rss_curve_kib": curve}
    short = {k: v for k, v in summary.items() if k != "rss_curve_kib"}
    print("soak: " + json.dumps(short), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(summary, f, indent=1)
    ok = c["errors"] == 0 and c["requests"] > 0
    print(f"soak: {'PASS' if ok else 'FAIL'}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
