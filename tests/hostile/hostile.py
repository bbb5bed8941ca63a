"""make test-hostile: hostile clients against a server that also serves honest ones (issue 23).

One `uvllm serve` (null backend with a fixed step time and the aidreams260K vocabulary, see
--help for why), 16 honest streaming clients (each from its own loopback address) and a
/health prober run throughout; after a baseline phase without attackers, an attacker
process (at nice +10, like a process of another user on the same host) opens 64
connections of each hostile kind for the attack phase:
  trailer   chunked POSTs followed by an endless flood of tiny trailer fields
  slowbody  POSTs announcing 1 MiB and sending a byte every 3 s
  unread    pipelined requests with ~60 KB answers that are never read
  tokenize  2 MiB /tokenize bodies with with_pieces (answers of ~30 MB asked for)
  hog       streams asking n=16 with 4000 tokens each, to take every sequence slot
The attack runs in rounds, each after a stretch without attackers (--rounds). Measured:
the server's RSS against the stated budget (its RSS with the honest clients
running, plus --max-buffered-mem), /health latency p99 (must be <= 50 ms), the honest
clients' inter-token gap p99 in the attack phase against the baseline phase (<= 1.5x),
and every KV page free at the end (and a clean exit on SIGTERM). Writes a Markdown report
(--report) for bench/RESULTS.md; exits 1 when a bound is missed."""

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from uvllm_harness import rss_kib  # noqa: E402
KINDS = ("trailer", "slowbody", "unread", "tokenize", "hog")
# Each kind is one attacker with its own loopback address (its 64 connections share it), so
# the per-client limits (job slots, --max-seqs-per-client) see five clients, not one.
SRC = {k: f"127.0.1.{i + 1}" for i, k in enumerate(KINDS)}


def connect(port, kind):
    return asyncio.open_connection("127.0.0.1", port, local_addr=(SRC[kind], 0))
REPLY = " ".join(["once upon a time there was a little girl who loved to play"] * 6)


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


def req(method, path, body=b"", extra=b""):
    return (f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n").encode() + extra + b"\r\n" + body


async def read_head(r):
    head = await r.readuntil(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), head


async def get_json(port, path):
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    data = await r.read()
    w.close()
    return json.loads(data.partition(b"\r\n\r\n")[2])


# ---- the measuring side (honest clients, health, RSS) ------------------------------------


class Meter:
    def __init__(self):
        self.phase = "warmup"
        self.itl = {"baseline": [], "attack": []}
        self.round_itl = []  # (baseline p99, attack p99) per round, ms
        self.health = {"baseline": [], "attack": []}
        self.health_fail = {"baseline": 0, "attack": 0}
        self.streams = {"baseline": 0, "attack": 0}
        self.stream_errors = {"baseline": 0, "attack": 0}
        self.rss = {"baseline": [], "attack": []}


async def honest(port, i, m, stop):
    body = json.dumps({"prompt": "tell me a story", "max_tokens": 64, "stream": True}).encode()
    while not stop.is_set():
        phase = m.phase
        try:
            r, w = await asyncio.open_connection("127.0.0.1", port,
                                                 local_addr=(f"127.0.0.{2 + i}", 0))
            w.write(req("POST", "/v1/completions", body))
            st, _ = await asyncio.wait_for(read_head(r), 10)
            if st != 200:
                raise RuntimeError(f"status {st}")
            last, done = None, False
            while not done:
                data = await asyncio.wait_for(r.read(65536), 10)
                if not data:
                    break
                now = time.monotonic()
                for _ in range(data.count(b'data: {"id"')):
                    if last is not None and m.phase == phase and phase in m.itl:
                        m.itl[phase].append(now - last)
                    last = now
                done = b"data: [DONE]" in data
            w.close()
            if phase in m.streams:
                m.streams[phase] += 1
                if not done:
                    m.stream_errors[phase] += 1
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, RuntimeError):
            if phase in m.stream_errors:
                m.stream_errors[phase] += 1
            await asyncio.sleep(0.1)


async def prober(port, m, stop):
    while not stop.is_set():
        phase = m.phase
        t0 = time.monotonic()
        try:
            r, w = await asyncio.open_connection("127.0.0.1", port, local_addr=("127.0.0.200", 0))
            w.write(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            st, _ = await asyncio.wait_for(read_head(r), 5)
            await r.read()
            w.close()
            dt = time.monotonic() - t0
            if phase in m.health:
                m.health[phase].append(dt)
                if st != 200:
                    m.health_fail[phase] += 1
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError):
            if phase in m.health_fail:
                m.health_fail[phase] += 1
        await asyncio.sleep(0.02)


async def rss_sampler(pid, m, stop):
    while not stop.is_set():
        if m.phase in m.rss:
            m.rss[m.phase].append(rss_kib(pid) or 0)
        await asyncio.sleep(0.25)


# ---- the attackers (a separate process at nice +10) --------------------------------------


class Tally:
    def __init__(self):
        self.status = {k: {} for k in KINDS}
        self.conns = {k: 0 for k in KINDS}

    def note(self, kind, st):
        d = self.status[kind]
        d[st] = d.get(st, 0) + 1


async def attack_trailer(port, t, stop):
    head = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"5\r\nhello\r\n0\r\n")
    flood = b"a:\r\n" * 4096
    while not stop.is_set():
        try:
            r, w = await connect(port, "trailer")
            t.conns["trailer"] += 1
            w.write(head)
            answer = asyncio.ensure_future(read_head(r))
            while not answer.done() and not stop.is_set():
                w.write(flood)
                await asyncio.wait_for(w.drain(), 5)
            st, _ = await asyncio.wait_for(answer, 5)
            t.note("trailer", st)
            w.close()
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError):
            t.note("trailer", "reset")
            await asyncio.sleep(0.05)


async def attack_slowbody(port, t, stop):
    while not stop.is_set():
        try:
            r, w = await connect(port, "slowbody")
            t.conns["slowbody"] += 1
            # 1 MiB announced (a body the memory budget admits), then a byte every 3 s
            w.write(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1048576\r\n\r\n{")
            answer = asyncio.ensure_future(read_head(r))
            while not answer.done() and not stop.is_set():
                await asyncio.wait([answer], timeout=3)
                if not answer.done():
                    w.write(b" ")
            if answer.done():
                t.note("slowbody", answer.result()[0])
            w.close()
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError):
            t.note("slowbody", "reset")
            await asyncio.sleep(0.05)


async def attack_unread(port, t, stop):
    text = ("the little girl " * 600)[:8000]
    one = req("POST", "/tokenize", json.dumps({"content": text, "with_pieces": True}).encode())
    while not stop.is_set():
        try:
            r, w = await connect(port, "unread")
            t.conns["unread"] += 1
            w.transport.set_write_buffer_limits(high=1 << 20)
            w.write(one * 100)  # and never read: the server closes it (stall, memory)
            while not stop.is_set() and not r.at_eof():
                await asyncio.sleep(0.5)
                if w.transport.is_closing():
                    break
                try:
                    if await asyncio.wait_for(r.read(0), 0.01) == b"" and r.at_eof():
                        break
                except asyncio.TimeoutError:
                    pass
            t.note("unread", "closed" if not stop.is_set() else "open")
            w.close()
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError):
            t.note("unread", "reset")
            await asyncio.sleep(0.05)


TOKENIZE_BODY = None


async def attack_tokenize(port, t, stop):
    while not stop.is_set():
        try:
            r, w = await connect(port, "tokenize")
            t.conns["tokenize"] += 1
            w.write(TOKENIZE_BODY)
            st, head = await asyncio.wait_for(read_head(r), 60)
            t.note("tokenize", st)
            w.close()
            if st in (429, 503):
                await asyncio.sleep(0.2)
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError):
            t.note("tokenize", "reset")
            await asyncio.sleep(0.05)


async def attack_hog(port, t, stop):
    body = json.dumps({"prompt": "x", "max_tokens": 4000, "n": 16, "stream": True}).encode()
    while not stop.is_set():
        try:
            r, w = await connect(port, "hog")
            t.conns["hog"] += 1
            w.write(req("POST", "/v1/completions", body))
            st, _ = await asyncio.wait_for(read_head(r), 10)
            t.note("hog", st)
            if st == 200:  # keep the stream (and its 16 sequences) alive by reading it
                while not stop.is_set():
                    if not await asyncio.wait_for(r.read(65536), 30):
                        break
            else:
                await asyncio.sleep(0.1)
            w.close()
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError):
            t.note("hog", "reset")
            await asyncio.sleep(0.05)


async def attackers(port, seconds, per_kind, out, kinds):
    global TOKENIZE_BODY
    text = ("Once upon a time there was a little girl who loved the park. " * 80000)[:2 << 20]
    TOKENIZE_BODY = req("POST", "/tokenize", json.dumps({"content": text,
                                                         "with_pieces": True}).encode())
    t, stop = Tally(), asyncio.Event()
    fns = {"trailer": attack_trailer, "slowbody": attack_slowbody, "unread": attack_unread,
           "tokenize": attack_tokenize, "hog": attack_hog}
    tasks = [asyncio.ensure_future(fns[k](port, t, stop)) for k in kinds for _ in range(per_kind)]
    await asyncio.sleep(seconds)
    stop.set()
    await asyncio.wait(tasks, timeout=10)
    for x in tasks:
        x.cancel()
    with open(out, "w") as f:
        json.dump({"status": {k: {str(s): n for s, n in v.items()} for k, v in t.status.items()},
                   "conns": t.conns}, f)


# ---- the run -----------------------------------------------------------------------------


def start_server(a, log_path=None):
    log_path = log_path or a.log
    args = [a.bin, "serve", "--port", "0", "--host", "127.0.0.1", "--max-buffered-mem",
            a.budget, "--max-seqs", "256"]
    if a.backend == "cpu":
        args += ["--model", a.model, "--threads", "1"]
    else:
        args += ["--backend", "null", "--model", a.model, "--null-reply", REPLY,
                 "--null-delay-us", str(a.step_us)]
    # stderr to a file, not a pipe: a reader that falls behind must not block the server's
    # log writes (that would measure the harness, not the server)
    log = open(log_path, "wb")
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log)
    port = None
    deadline = time.monotonic() + 30
    while port is None and time.monotonic() < deadline and p.poll() is None:
        with open(log_path, "rb") as f:
            for ln in f.read().decode(errors="replace").splitlines():
                if "listening on http://" in ln:
                    port = int(ln.rsplit(":", 1)[1])
        time.sleep(0.05)
    if port is None:
        p.kill()
        raise SystemExit("hostile: the server did not start; see " + log_path)
    return p, port


async def attack_round(a, port, seconds, out):
    att = await asyncio.create_subprocess_exec(
        sys.executable, os.path.abspath(__file__), "--attack", str(port), "--seconds",
        str(seconds), "--per-kind", str(a.per_kind), "--attack-out", out, "--kinds", a.kinds,
        preexec_fn=lambda: os.setpriority(os.PRIO_PROCESS, 0, a.attacker_nice))
    await att.wait()


def merge_attacks(paths):
    total = {"status": {}, "conns": {}}
    for p in paths:
        if not os.path.exists(p):
            continue
        d = json.load(open(p))
        for k, n in d["conns"].items():
            total["conns"][k] = total["conns"].get(k, 0) + n
        for k, st in d["status"].items():
            t = total["status"].setdefault(k, {})
            for s_, n in st.items():
                t[s_] = t.get(s_, 0) + n
    return total


async def main(a):
    p, port = start_server(a)
    # --decoy: the attackers hit a second, identical server; the measured one sees none of
    # it. What the honest clients lose then is the host's (the attack's CPU), not the server's.
    decoy, attack_port = (start_server(a, a.log + ".decoy") if a.decoy else (None, port))
    m, stop = Meter(), asyncio.Event()
    tasks = [asyncio.ensure_future(honest(port, i, m, stop)) for i in range(16)]
    tasks += [asyncio.ensure_future(prober(port, m, stop)),
              asyncio.ensure_future(rss_sampler(p.pid, m, stop))]
    await asyncio.sleep(a.warmup)
    # Rounds of (baseline, attack, settle): the baseline is measured in the same stretches
    # of time as the attack, on a machine whose other load changes from second to second.
    hist = {"baseline": [], "attack": []}
    outs = []
    for r in range(a.rounds):
        m.phase = "baseline"
        nb, na = len(m.itl["baseline"]), len(m.itl["attack"])
        h0 = await itl_hist(port)
        await asyncio.sleep(a.baseline / a.rounds)
        h1 = await itl_hist(port)
        m.phase = "attack"
        outs.append(f"{a.log}.attack{r}.json")
        await attack_round(a, attack_port, a.seconds / a.rounds, outs[-1])
        h2 = await itl_hist(port)
        m.phase = "settle"
        await asyncio.sleep(a.settle)
        m.round_itl.append((pct(m.itl["baseline"][nb:], 99) * 1000,
                            pct(m.itl["attack"][na:], 99) * 1000))
        hist["baseline"].append((h0, h1))
        hist["attack"].append((h1, h2))
    m.server_itl = {k: hist_p99_sum(v) for k, v in hist.items()}
    metrics_text = ""
    try:
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        metrics_text = (await r.read()).decode(errors="replace")
        w.close()
    except OSError:
        pass
    m.phase = "cooldown"
    stop.set()
    await asyncio.wait(tasks, timeout=15)
    # every sequence ends and every KV page is free again
    free_ok, h = False, {}
    for _ in range(100):
        try:
            h = await get_json(port, "/health")
            if h["kv_pages_free"] == h["kv_pages_total"] and h["active_sequences"] == 0:
                free_ok = True
                break
        except (OSError, ValueError, KeyError):
            pass
        await asyncio.sleep(0.2)
    if decoy:
        decoy.send_signal(signal.SIGTERM)
    p.send_signal(signal.SIGTERM)
    try:
        rc = await asyncio.get_running_loop().run_in_executor(None, p.wait, 60)
    except subprocess.TimeoutExpired:
        p.kill()
        rc = "killed"
    return report(a, m, merge_attacks(outs), metrics_text, free_ok, h, rc)


async def itl_hist(port):
    """The server's inter-token histogram: {upper bound: cumulative count}."""
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    text = (await r.read()).decode(errors="replace")
    w.close()
    out = {}
    for ln in text.splitlines():
        if ln.startswith("uvllm_inter_token_seconds_bucket{le=\""):
            le = ln.split('"')[1]
            out[float("inf") if le == "+Inf" else float(le)] = float(ln.split()[-1])
    return out


def hist_p99_sum(pairs):
    """p99 (the bucket's upper bound, ms) of the counts between each (before, after) pair."""
    d = {}
    for a, b in pairs:
        for le in b:
            d[le] = d.get(le, 0) + b[le] - a.get(le, 0)
    d = sorted(d.items())
    total = d[-1][1] if d else 0
    for le, c in d:
        if total and c >= 0.99 * total:
            return le * 1000
    return float("nan")


def metric(text, name):
    for ln in text.splitlines():
        if ln.startswith(name + " "):
            return float(ln.split()[1])
    return float("nan")


def size_mib(s):
    units = {"K": 1 / 1024, "M": 1, "G": 1024}
    return float(s[:-1]) * units[s[-1].upper()] if s[-1].upper() in units else int(s) / 2**20


def report(a, m, att, metrics_text, free_ok, h, rc):
    base_rss = pct(m.rss["baseline"], 50) / 1024
    peak = max(m.rss["attack"] or [0]) / 1024
    budget = size_mib(a.budget)
    h99, hmax = pct(m.health["attack"], 99) * 1000, max(m.health["attack"] or [0]) * 1000
    hb99 = pct(m.health["baseline"], 99) * 1000
    i99b, i99a = pct(m.itl["baseline"], 99) * 1000, pct(m.itl["attack"], 99) * 1000
    i50b, i50a = pct(m.itl["baseline"], 50) * 1000, pct(m.itl["attack"], 50) * 1000
    ratio = i99a / i99b if i99b > 0 else float("nan")
    checks = [
        (f"RSS peak {peak:.0f} MiB <= baseline {base_rss:.0f} MiB + budget {budget:.0f} MiB",
         peak <= base_rss + budget),
        (f"/health p99 {h99:.1f} ms <= 50 ms"
         f"{' (advisory: --latency-advisory)' if a.latency_advisory else ''}", h99 <= 50),
        (f"honest inter-token p99 {i99a:.1f} ms <= 1.5 x baseline {i99b:.1f} ms "
         f"(ratio {ratio:.2f}){' (advisory: --latency-advisory)' if a.latency_advisory else ''}",
         ratio <= 1.5),
        (f"/health answered every probe (failures {m.health_fail['attack']})",
         m.health_fail["attack"] == 0),
        (f"honest streams: {m.streams['attack']} in the attack phase, "
         f"{m.stream_errors['attack']} failed", m.stream_errors["attack"] == 0),
        (f"every KV page free at the end ({h.get('kv_pages_free')}/{h.get('kv_pages_total')})",
         free_ok),
        (f"clean exit on SIGTERM (rc {rc})", rc == 0),
    ]
    # --latency-advisory: the two latency bounds (/health p99, the honest inter-token ratio)
    # are reported, not gating (for runs on a host busy with other work). CI gates on them:
    # the tokenize flood that carried the whole excess (ratio 1.65-2.90, /health 33-61 ms on
    # quiet hosts) no longer passes the head check with every body at once (api job holds).
    ok = all(c for i, (_, c) in enumerate(checks) if not (a.latency_advisory and i in (1, 2)))
    cpu = ""
    try:
        cpu = next(ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo")
                   if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    lines = [
        "## hostile clients (`make test-hostile`, tests/hostile/hostile.py)",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {cpu}, {os.cpu_count()} cores "
        f"(shared), load average at the end {open('/proc/loadavg').read().split()[0]}. Server: "
        + (f"null backend, {a.step_us / 1000:.0f} ms per step, aidreams260K vocabulary"
           if a.backend == "null" else f"cpu backend, {os.path.basename(a.model)}, 1 thread")
        + f", --max-buffered-mem {a.budget}, --max-seqs 256 (so 64 per client). 16 honest "
        f"streaming clients (64 tokens each, one address each) and a /health prober "
        f"(fresh connection every 20 ms) throughout. {a.rounds} round(s) of: "
        f"{a.baseline / a.rounds:.0f} s without attackers (the baseline), then "
        f"{a.per_kind} connections of each hostile kind at once for "
        f"{a.seconds / a.rounds:.0f} s from another process at nice +{a.attacker_nice} "
        f"({a.seconds:.0f} s of attack in all), then {a.settle:.0f} s unmeasured; the baseline "
        f"is measured in the same stretches of time as the attack because the shared "
        f"machine's other load changes from second to second."
        + (" CONTROL RUN (--decoy): the attackers hit a second, identical server process on "
           "the same host; the measured server saw none of the attack." if a.decoy else ""),
        "",
        "| | baseline | under attack |",
        "| --- | --- | --- |",
        f"| server RSS (MiB): median / peak | {base_rss:.0f} / "
        f"{max(m.rss['baseline'] or [0]) / 1024:.0f} | {pct(m.rss['attack'], 50) / 1024:.0f} / "
        f"{peak:.0f} |",
        f"| /health latency p99 / max (ms) | {hb99:.1f} / "
        f"{max(m.health['baseline'] or [0]) * 1000:.1f} | {h99:.1f} / {hmax:.1f} |",
        f"| honest inter-token gap p50 / p99 (ms) | {i50b:.1f} / {i99b:.1f} | {i50a:.1f} / "
        f"{i99a:.1f} |",
        f"| server-side inter-token p99 (histogram bucket, ms) | "
        f"{m.server_itl.get('baseline', float('nan')):g} | "
        f"{m.server_itl.get('attack', float('nan')):g} |",
        f"| honest streams completed (failed) | {m.streams['baseline']} "
        f"({m.stream_errors['baseline']}) | {m.streams['attack']} ({m.stream_errors['attack']}) |",
        "",
        "Honest inter-token p99 per round (baseline / attack, ms): " +
        ", ".join(f"{b:.1f} / {x:.1f}" for b, x in m.round_itl) + ".",
        "",
        "Attackers (connections opened; answers by status):",
        "",
    ]
    for k in KINDS:
        st = att["status"].get(k, {})
        lines.append(f"- {k}: {att['conns'].get(k, 0)} connections; " +
                     ", ".join(f"{s}: {n}" for s, n in sorted(st.items())))
    lines += ["", "Server counters at the end of the attack: "
              f"budget refusals {metric(metrics_text, 'uvllm_http_budget_refused_total'):.0f}, "
              f"evictions {metric(metrics_text, 'uvllm_http_budget_evictions_total'):.0f}, "
              f"408s {metric(metrics_text, 'uvllm_http_timeouts_total'):.0f}, "
              f"429 per client {metric(metrics_text, 'uvllm_seqs_per_client_refused_total'):.0f}, "
              f"jobs {metric(metrics_text, 'uvllm_jobs_total'):.0f} "
              f"(refused {metric(metrics_text, 'uvllm_jobs_refused_total'):.0f}), "
              f"peak of buffered bytes not sampled; at the end "
              f"{metric(metrics_text, 'uvllm_http_buffered_bytes') / 2**20:.1f} MiB.", ""]
    lines += [f"- {'PASS' if c else 'FAIL'}: {t}" for t, c in checks]
    text = "\n".join(lines) + "\n"
    print(text)
    if a.report:
        with open(a.report, "w") as f:
            f.write(text)
    return 0 if ok else 1


def parse():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.environ.get("UVLLM_BIN", os.path.join(ROOT, "build",
                                                                               "uvllm")))
    shared = os.environ.get("UVLLM_SHARED", os.path.join(ROOT, "..", "shared"))
    ap.add_argument("--model", default=os.path.join(shared, "models", "aidreams260K.gguf"))
    ap.add_argument("--backend", choices=("null", "cpu"), default="null",
                    help="null (default): a fixed step time, so the honest clients' "
                    "inter-token gaps measure the serving layer the attackers target, not "
                    "the CPU the attackers' processes take from a 2-core shared machine")
    ap.add_argument("--step-us", type=int, default=20000, help="null backend step time")
    ap.add_argument("--budget", default="256M", help="--max-buffered-mem")
    ap.add_argument("--warmup", type=float, default=5)
    ap.add_argument("--rounds", type=int, default=3,
                    help="baseline/attack rounds the times below are split into")
    ap.add_argument("--baseline", type=float, default=30, help="seconds without attackers")
    ap.add_argument("--seconds", type=float, default=60, help="seconds of attack")
    ap.add_argument("--settle", type=float, default=5,
                    help="unmeasured seconds after each attack round")
    ap.add_argument("--per-kind", type=int, default=64)
    ap.add_argument("--attacker-nice", type=int, default=10)
    ap.add_argument("--latency-advisory", action="store_true",
                    help="report the /health and inter-token bounds without failing on them")
    ap.add_argument("--decoy", action="store_true",
                    help="aim the attackers at a second server (a control: the host's share "
                         "of the honest clients' latency)")
    ap.add_argument("--kinds", default=",".join(KINDS), help="attack kinds (comma-separated)")
    ap.add_argument("--log", default="/tmp/uvllm-hostile.log")
    ap.add_argument("--report", help="write the Markdown report here")
    ap.add_argument("--attack", type=int, help=argparse.SUPPRESS)  # the attacker process
    ap.add_argument("--attack-out", help=argparse.SUPPRESS)
    return ap.parse_args()


if __name__ == "__main__":
    a = parse()
    if a.attack:
        asyncio.run(attackers(a.attack, a.seconds, a.per_kind, a.attack_out, a.kinds.split(",")))
        sys.exit(0)
    sys.exit(asyncio.run(main(a)))
