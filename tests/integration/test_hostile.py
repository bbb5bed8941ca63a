"""Hostile and careless clients (issue 23), one test per failure a probe found, each against
the real binary over raw sockets. Every test fails on a server without the defence it
names: trailers, work on the loop, unread answers, slow bodies, the shutdown cut, UTF-8,
NUL, strict HTTP, slot hogging, log forgery, the descriptor limit. (Jinja's int64 edges are
tests/unit/chat/test_jinja_int.c.) The 60 s load version is `make test-hostile`."""

import json
import os
import re
import resource
import signal
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from uvllm_harness import (HANG_SCALE, Reader, Server, build_request, run, shared,  # noqa: E402
                           test, timed, wait_for)

MODEL = os.path.join(shared(), "models", "aidreams260K.gguf")
QWEN2 = os.path.join(shared(), "models", "qwen2-tiny-f16.gguf")
KEY = "sk-hostile-test"


def vocab_server(*extra):
    """The null backend with the aidreams260K vocabulary: a real tokenizer, no compute."""
    return Server("--model", MODEL, "--null-reply", "hello there", *extra)


def raw(srv, data, timeout=10, src=None):
    """Sends data on a new connection and reads one response. The server may answer before
    it has read everything (a large body refused at its head is never read): sending then
    fails, and the answer is read all the same. timeout only guards against a hang (scaled
    for sanitizer builds): no test here bounds a latency through it."""
    s = socket.socket()
    s.settimeout(timeout * HANG_SCALE)
    if src:
        s.bind((src, 0))
    s.connect(("127.0.0.1", srv.port))

    def send():
        try:
            s.sendall(data)
        except OSError:
            pass
    with s:
        t = threading.Thread(target=send)
        t.start()
        r = Reader(s).response()
        t.join()
        return r


def post(srv, path, body, headers=None, src=None, timeout=10):
    data = body if isinstance(body, (bytes, str)) else json.dumps(body)
    return raw(srv, build_request("POST", path, data, headers, close=True), timeout, src)


def strict_json(r):
    """The body as strict UTF-8 JSON: what every client library requires."""
    return json.loads(r.body.decode("utf-8"))


def refused_naming(srv, cases, code):
    """Each (path, body, param) of cases is a 400 with error code `code` naming param, in
    strict JSON."""
    for path, body, param in cases:
        r = post(srv, path, body)
        assert r.status == 400, (path, r.status, r.body[:200])
        e = strict_json(r)["error"]
        assert e["code"] == code and e["param"] == param, (path, e)


# ---- 1. trailers ------------------------------------------------------------------------


def chunked(path, chunks, trailer=b"", headers=b""):
    out = (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           "Transfer-Encoding: chunked\r\nConnection: close\r\n").encode() + headers + b"\r\n"
    for c in chunks:
        out += b"%x\r\n%s\r\n" % (len(c), c)
    return out + b"0\r\n" + trailer + b"\r\n"


@test
def trailers_never_authenticate_and_are_bounded():
    with Server("--api-key", KEY) as s:
        body = json.dumps({"prompt": "a b", "max_tokens": 2}).encode()
        # Authorization sent only as a trailer must not authenticate
        r = raw(s, chunked("/v1/completions", [body],
                           trailer=f"Authorization: Bearer {KEY}\r\n".encode()))
        assert r.status == 401, (r.status, r.body)
        # with the key in the head it works (and a trailer is simply dropped)
        r = raw(s, chunked("/v1/completions", [body], trailer=b"X-T: 1\r\n",
                           headers=f"Authorization: Bearer {KEY}\r\n".encode()))
        assert r.status == 200, (r.status, r.body)
        # a flood of tiny trailer fields: 431 at the header limit, not buffered forever
        sock = s.connect()
        sock.sendall(chunked("/v1/completions", [body], trailer=b"",
                             headers=f"Authorization: Bearer {KEY}\r\n".encode())[:-2])
        sent = 0
        try:
            for _ in range(64):
                sock.sendall(b"a:\r\n" * 16384)
                sent += 1
            sock.sendall(b"\r\n")
        except OSError:
            pass
        r = Reader(sock).response()
        sock.close()
        assert r.status == 431, (r.status, sent)
        # Expect: 100-continue without the key: 401 first, never 100 Continue
        sock = s.connect()
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 20\r\n"
                     b"Expect: 100-continue\r\n\r\n")
        head = Reader(sock).head()
        sock.close()
        assert head[1] == 401, head


# ---- 2. work proportional to the request off the loop ------------------------------------


def health_latencies(srv, stop):
    out = []
    while not stop.is_set():
        t0 = time.monotonic()
        r = srv.request("GET", "/health")
        out.append(time.monotonic() - t0)
        assert r.status == 200
        time.sleep(0.01)
    return out


TEXT = ("Once upon a time there was a little girl who loved the park. " * 80000)[:4 << 20]


@timed
def tokenize_runs_off_the_loop():
    with vocab_server("--max-body", str(16 << 20)) as s:
        stop, lat = threading.Event(), []
        t = threading.Thread(target=lambda: lat.extend(health_latencies(s, stop)))
        t.start()
        t0 = time.monotonic()
        r = post(s, "/tokenize", {"content": TEXT})
        took = time.monotonic() - t0
        stop.set()
        t.join()
        assert r.status == 200 and len(strict_json(r)["tokens"]) > 500000, r.status
        worst = max(lat)
        print(f"  4 MiB /tokenize took {took:.2f} s; /health worst {worst * 1000:.1f} ms "
              f"over {len(lat)} probes")
        assert took > 0.3, "too fast to tell: make the text longer"
        assert worst < min(0.25, took / 2), f"/health waited {worst * 1000:.0f} ms"


@test
def tokenizer_answers_are_bounded():
    # 64 MiB for clients, 28 MiB of it per connection (--max-body 24M + 4M of output): a
    # 4 MiB text's work (3x) and its ~10 MB answer fit, the answers below do not
    with vocab_server("--max-body", str(24 << 20), "--max-buffered-mem", "64M") as s:
        # tokenizing 4 MiB takes ~1 s in Release, more than 10 s under TSan on a busy host
        r = post(s, "/tokenize", {"content": TEXT}, timeout=60)
        assert r.status == 200, (r.status, r.body[:200])
        # with pieces the answer would be ~60 MB: over one connection's budget
        r = post(s, "/tokenize", {"content": TEXT, "with_pieces": True}, timeout=60)
        assert r.status == 413, (r.status, r.body[:200])
        assert strict_json(r)["error"]["code"] == "response_too_large"
        # 2.5M ids of " unfolding" would be a 25 MB answer
        r = post(s, "/detokenize", "{\"tokens\":[" + ",".join(["422"] * 2500000) + "]}",
                 timeout=60)
        assert r.status == 413, (r.status, r.body[:200])
        r = post(s, "/detokenize", "{\"tokens\":[" + ",".join(["422"] * 250000) + "]}",
                 timeout=60)
        assert r.status == 200 and len(strict_json(r)["content"]) > 2000000
        assert s.health()[0] == 200


@test
def bodies_being_read_hold_their_clients_job_slots():
    # A client's large bodies hold its job slots (4) from their heads on, not only once read:
    # a flood of 2 MiB /tokenize bodies otherwise passed the head check all at once and the
    # loop read (and paged in) every body only to refuse most at submission, which tripled
    # the honest streams' inter-token p99 in make test-hostile.
    body = json.dumps({"content": "the little girl " * 65536}).encode()  # 1 MiB
    head = build_request("POST", "/tokenize", body, None, close=True)[:-len(body)]
    with vocab_server() as s:
        socks = []
        for _ in range(4):  # four heads and a part of each body: four slots held
            c = socket.create_connection(("127.0.0.1", s.port))
            c.sendall(head + body[:1000])
            socks.append(c)
        time.sleep(0.3)  # the server has read those heads (no answer is due to any yet)
        r = raw(s, head + body)  # a fifth: refused at its head, its body never read
        assert r.status == 429, (r.status, r.body[:200])
        assert strict_json(r)["error"]["code"] == "too_many_requests"
        socks.pop().close()  # a client that left gives its slot back
        assert wait_for(lambda: raw(s, head + body).status == 200, 5)
        for c in socks:  # the held ones finish their bodies and are answered
            c.sendall(body[1000:])
            with c:
                r = Reader(c).response()
                assert r.status == 200 and len(strict_json(r)["tokens"]) > 100000, r.status


def big_chat(schema, n_pad=6000, **extra):
    """A chat request over UL_API_JOB_BYTES (so it is prepared on a job's thread) asking for
    structured output."""
    return dict({"messages": [{"role": "user", "content": "answer"}],
                 "x_padding": "x" * n_pad,  # ignored (the model's context is 128 tokens)
                 "max_tokens": 24, "temperature": 0,
                 "response_format": {"type": "json_schema",
                                     "json_schema": {"name": "s", "schema": schema}}},
                **extra)


@test
def structured_output_of_large_requests_is_compiled_on_jobs():
    # the grammar cache is shared by jobs' threads and the loop: many schemas at once (more
    # than its 16 slots), each request's grammar held until its generation takes it
    with Server("--model", MODEL, "--threads", "1", backend="cpu") as s:
        results = {}

        def one(i):
            sch = {"type": "object", "properties": {f"k{i % 20}": {"type": "boolean"}},
                   "required": [f"k{i % 20}"], "additionalProperties": False}
            r = post(s, "/v1/chat/completions", big_chat(sch), src=f"127.0.2.{i + 1}")
            results[i] = (r.status, r.body)
        for start in range(0, 40, 8):
            ts = [threading.Thread(target=one, args=(i,)) for i in range(start, start + 8)]
            [t.start() for t in ts]
            [t.join() for t in ts]
        ok = 0
        for i, (status, body) in sorted(results.items()):
            if status == 503:  # the job queue is bounded: a refusal is fine, a crash not
                continue
            assert status == 200, (i, status, body)
            text = json.loads(body)["choices"][0]["message"]["content"]
            # this request's schema, not another's from the cache (whitespace aside)
            squeezed = re.sub(r"\s", "", text)
            assert squeezed and any(w.startswith(squeezed) for w in (
                '{"k%d":true}' % (i % 20), '{"k%d":false}' % (i % 20))), (i, text)
            ok += 1
        assert ok >= 10, results
        # a grammar that does not compile, on a job: 400 naming the field
        body = big_chat({"type": "object"})
        del body["response_format"]
        body["grammar"] = "root ::= ("
        r = post(s, "/v1/chat/completions", body)
        assert r.status == 400 and json.loads(r.body)["error"]["param"] == "grammar", r.body


# ---- 3. answers nobody reads ------------------------------------------------------------


@test
def unread_answers_are_not_all_built():
    # 600 pipelined /tokenize requests of 8 KiB, each answered with ~60 KB of pieces, and a
    # client that reads nothing: the kernel's socket buffers take some answers, then the
    # server must stop parsing instead of building all 36 MB of them
    text = ("the little girl " * 600)[:8000]
    one = build_request("POST", "/tokenize", json.dumps({"content": text, "with_pieces": True}))
    with vocab_server() as s:
        sock = s.connect()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.settimeout(5)
        try:
            sock.sendall(one * 600)
        except OSError:
            pass  # the server stopped reading: that is the point
        # wait until the server stops answering (a slow server needs a while for 600)
        count = lambda: sum(1 for ln in list(s.log) if "POST /tokenize status=200" in ln)  # noqa
        answered, deadline = -1, time.monotonic() + 20
        while time.monotonic() < deadline:
            time.sleep(1.0)
            prev, answered = answered, count()
            if answered == prev:
                break
        sock.close()
        print(f"  {answered} of 600 pipelined answers built for a client that reads none")
        assert 0 < answered < 150, answered


def rss_mib(srv):
    with open(f"/proc/{srv.proc.pid}/status") as f:
        return next(int(ln.split()[1]) for ln in f if ln.startswith("VmRSS:")) / 1024


@test
def unread_large_answers_stay_within_the_budget():
    # 10 clients (one address each) ask for ~15 MB non-streamed answers and read none: the
    # probe saw 5 such clients make the server hold ~1 GB until the stall timeout; now the
    # memory budget (64 MiB) bounds it (503 past it, stalled readers closed first)
    one = build_request("POST", "/tokenize",
                        json.dumps({"content": TEXT[:1 << 20], "with_pieces": True}))
    with vocab_server("--max-body", str(24 << 20), "--max-buffered-mem", "64M") as s:
        base = rss_mib(s)
        socks = []
        for i in range(10):
            c = socket.socket()
            c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            c.bind((f"127.0.3.{i + 1}", 0))
            c.connect(("127.0.0.1", s.port))
            c.sendall(one)
            socks.append(c)
        done = lambda: sum(1 for ln in list(s.log) if "POST /tokenize" in ln)  # noqa
        peak, deadline = 0, time.monotonic() + 20
        while time.monotonic() < deadline:
            peak = max(peak, rss_mib(s))
            if done() >= 10:
                break
            time.sleep(0.05)
        time.sleep(0.5)
        peak = max(peak, rss_mib(s))
        for c in socks:
            c.close()
        print(f"  RSS {base:.0f} MiB at start, {peak:.0f} MiB at most; {done()} answered")
        # RSS bounds only where RSS is the program's: the sanitizers add shadow memory and a
        # quarantine of freed blocks (hundreds of MiB) that no budget can account for
        if not os.environ.get("UVLLM_SANITIZER_BUILD"):
            assert peak - base < 64 + 32, (base, peak)
        assert s.health()[0] == 200
        # the large buffers are kept for reuse while they keep coming (no page faults, no
        # mapping changes per request), and go back to the system ~2 s after the last one
        if not os.environ.get("UVLLM_SANITIZER_BUILD"):
            deadline, now = time.monotonic() + 15, rss_mib(s)
            while now - base > 16 and time.monotonic() < deadline:
                time.sleep(0.2)
                now = rss_mib(s)
            print(f"  RSS {now:.0f} MiB once the large answers are gone")
            assert now - base <= 16, (base, peak, now)


# ---- 4. slow bodies -----------------------------------------------------------------------


@timed
def slow_body_is_cut_with_408():
    # the default --min-body-rate (1024 B/s) counts once --header-timeout has passed
    with Server("--header-timeout", "1") as s:
        sock = s.connect()
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n")
        t0 = time.monotonic()
        sock.settimeout(0.2)
        got = b""
        while time.monotonic() - t0 < 8 and not got:
            try:
                sock.sendall(b" ")
                got = sock.recv(4096)
            except socket.timeout:
                continue
            except OSError:
                break
        took = time.monotonic() - t0
        sock.close()
        assert got.startswith(b"HTTP/1.1 408"), (got[:60], took)
        assert took < 4, took


# ---- 5. the shutdown deadline -------------------------------------------------------------


@test
def streams_cut_at_shutdown_say_so():
    srv = Server("--null-delay-us", "20000", "--shutdown-grace", "0.5")
    try:
        socks = []
        for version in ("1.1", "1.0"):
            sock = srv.connect()
            body = json.dumps({"prompt": "x", "max_tokens": 4000, "stream": True})
            sock.sendall(build_request("POST", "/v1/completions", body, version=version))
            socks.append(sock)
        time.sleep(0.3)
        srv.signal(signal.SIGTERM)
        for sock, version in zip(socks, ("1.1", "1.0")):
            data = b""
            sock.settimeout(10)
            while True:
                k = sock.recv(65536)
                if not k:
                    break
                data += k
            sock.close()
            head, _, body = data.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200"), head[:40]
            assert b'"code":"shutting_down"' in body, (version, body[-300:])
            assert b"[DONE]" not in body, version
            if version == "1.1":
                assert not body.endswith(b"0\r\n\r\n"), "a cut stream must not end cleanly"
        assert srv.wait(10) == 0
        log = "".join(srv.log)
        assert log.count("cut=shutdown") >= 2, log[-2000:]
    finally:
        srv.kill()


# ---- 6. UTF-8 -----------------------------------------------------------------------------


@test
def logprob_tokens_are_valid_utf8_json():
    prompts = ["用中文讲一个故事", "今天天气怎么样？", "🙂🎉 emoji time", "日本語で答えて", "你好，世界"]
    with Server("--model", QWEN2, "--threads", "1", backend="cpu") as s:
        bad = 0
        for i, p in enumerate(prompts * 2):
            r = post(s, "/v1/chat/completions", {
                "messages": [{"role": "user", "content": p}], "max_tokens": 24, "seed": i,
                "temperature": 1.0, "logprobs": True, "top_logprobs": 5})
            assert r.status == 200, r.body[:200]
            try:
                j = strict_json(r)
            except (UnicodeDecodeError, json.JSONDecodeError):
                bad += 1
                continue
            for e in j["choices"][0]["logprobs"]["content"]:
                # the bytes keep the token's raw bytes; the string is its valid UTF-8 form
                assert bytes(e["bytes"]).decode("utf-8", "replace") == e["token"], e
        assert bad == 0, f"{bad} of 10 answers were not valid UTF-8 JSON"
        # completions' logprobs and streams likewise
        r = post(s, "/v1/completions", {"prompt": "中文", "max_tokens": 24, "logprobs": 5,
                                        "temperature": 1.0, "seed": 3})
        strict_json(r)


@test
def invalid_request_bytes_are_refused_not_echoed():
    with vocab_server() as s:
        cases = [
            ("/v1/completions", b'{"prompt": "a\xff\xfeb", "echo": true, "max_tokens": 1}',
             "prompt"),
            ("/apply-template", b'{"messages": [{"role": "user", "content": "hi \xc3"}]}',
             "messages[0].content"),
            ("/v1/completions", b'{"prompt": "a", "model": "m\xff"}', "model"),
            ("/v1/chat/completions", b'{"messages": [{"role": "user\xe4", "content": "x"}]}',
             "messages[0].role"),
            ("/tokenize", b'{"content": "\xed\xa0\x80"}', "content"),
        ]
        refused_naming(s, cases, "invalid_utf8")


# ---- 7. NUL ---------------------------------------------------------------------------------


@test
def nul_in_strings_is_refused_naming_the_field():
    with vocab_server() as s:
        cases = [
            ("/v1/completions", {"prompt": "before\u0000after"}, "prompt"),
            ("/v1/completions", {"prompt": ["ok", "x\u0000"]}, "prompt[1]"),
            ("/v1/completions", {"prompt": "a", "stop": ["\u0000"]}, "stop[0]"),
            ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi\u0000"}]},
             "messages[0].content"),
            ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                                      "response_format": {"type": "json_schema", "json_schema": {
                                          "name": "n", "schema": {"type": "object", "properties": {
                                              "a\u0000b": {"type": "string"}}}}}},
             "response_format.json_schema.schema.properties.a"),
            ("/tokenize", {"content": "\u0000"}, "content"),
        ]
        refused_naming(s, cases, "nul_character")


# ---- 8. strict HTTP -----------------------------------------------------------------------


@test
def http_parsing_is_strict():
    body = b'{"prompt":"a","max_tokens":1}'
    cases = [
        (b"POST /v1/completions HTTP/1.1\r\nContent-Length:\r\n %d\r\n\r\n%s"
         % (len(body), body), 400),
        (b"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
         b"%x\r\n%sJUNK\r\n0\r\n\r\n" % (len(body), body), 400),
        (b"GET /health HTTP/1.1\r\nX Bad: 1\r\n\r\n", 400),
        (b"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
         b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body), 501),
    ]
    with Server() as s:
        for data, status in cases:
            r = raw(s, data)
            assert r.status == status, (data[:60], r.status)
            assert r.header("connection") == "close"


# ---- 9. slot hogging ----------------------------------------------------------------------


def stream_open(srv, n, src=None, headers=None):
    s = socket.socket()
    if src:
        s.bind((src, 0))
    s.settimeout(10)
    s.connect(("127.0.0.1", srv.port))
    body = json.dumps({"prompt": "x", "max_tokens": 4000, "stream": True, "n": n})
    s.sendall(build_request("POST", "/v1/completions", body, headers))
    return s, Reader(s).head()[1]


@test
def one_client_cannot_take_every_slot():
    # --max-seqs 64: by default a client (address, or API key) may hold a quarter
    with Server("--max-seqs", "64", "--null-delay-us", "20000") as s:
        a1, st1 = stream_open(s, 8)
        a2, st2 = stream_open(s, 8)
        assert (st1, st2) == (200, 200)
        r = post(s, "/v1/completions", {"prompt": "x", "max_tokens": 1})
        assert r.status == 429, r.status
        assert strict_json(r)["error"]["code"] == "too_many_sequences" and r.header("retry-after")
        r = post(s, "/v1/completions", {"prompt": "x", "max_tokens": 1}, src="127.0.0.2")
        assert r.status == 200, "another client was refused"
        a1.close()
        assert wait_for(lambda: s.health()[1]["active_sequences"] == 8, 3)
        r = post(s, "/v1/completions", {"prompt": "x", "max_tokens": 1})
        assert r.status == 200, "the share comes back when sequences end"
        a2.close()
    with Server("--max-seqs-per-client", "4", "--api-key", KEY, "--api-key", KEY + "2",
                "--null-delay-us", "20000") as s:
        auth = {"Authorization": f"Bearer {KEY}"}
        a1, st = stream_open(s, 4, headers=auth)
        assert st == 200
        r = post(s, "/v1/completions", {"prompt": "x", "max_tokens": 1}, headers=auth)
        assert r.status == 429
        r = post(s, "/v1/completions", {"prompt": "x", "max_tokens": 1},
                 headers={"Authorization": f"Bearer {KEY}2"})
        assert r.status == 200, "the other key has its own share"
        a1.close()


# ---- 10. log forgery ----------------------------------------------------------------------


@test
def logs_cannot_be_forged():
    forged = "2026-01-01T00:00:00.000Z info  conn=999 req=1 GET /admin status=200"
    with Server("--log-level", "debug") as s:
        r = post(s, "/v1/completions", {"prompt": "a", "max_tokens": 1, "user": "eve\n" + forged,
                                        "x\n" + forged: 1},
                 headers={"X-Request-Id": "abc status=500 bytes=1"})
        assert r.status == 200
        time.sleep(0.2)
        lines = "".join(s.log).splitlines()
    assert not any(ln.startswith(forged[:24]) for ln in lines), "a client forged a log line"
    assert any('user="eve\\x0a2026' in ln for ln in lines), "user not quoted/escaped"
    assert any('request_id="abc status=500 bytes=1"' in ln for ln in lines), \
        "request id not quoted"
    assert any('"x\\x0a2026' in ln for ln in lines), "unknown field name not escaped"


# ---- 12. descriptors ----------------------------------------------------------------------


def with_nofile(soft, hard):
    def pre():
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    return pre


@test
def connections_over_the_descriptor_limit_get_503():
    import subprocess  # noqa: F401  (Server uses Popen; limits go through preexec)
    orig = subprocess.Popen.__init__

    def popen(self, *a, **k):
        k["preexec_fn"] = with_nofile(256, 256)
        orig(self, *a, **k)
    subprocess.Popen.__init__ = popen
    try:
        s = Server()
    finally:
        subprocess.Popen.__init__ = orig
    try:
        assert any("max-conns 4096 lowered to 192" in ln for ln in s.log), "".join(s.log)
        socks, statuses = [], []
        for i in range(232):  # 40 over the limit: the descriptors left take them
            c = socket.socket()
            c.settimeout(5)
            c.connect(("127.0.0.1", s.port))
            socks.append(c)
        for c in socks[192:]:
            try:
                statuses.append(Reader(c).head()[1])
            except (OSError, EOFError):
                statuses.append(None)  # a reset: what the kernel does past EMFILE
        for c in socks:
            c.close()
        assert statuses and all(st == 503 for st in statuses), statuses
        assert wait_for(lambda: any("connection limit reached" in ln for ln in s.log), 3)
    finally:
        s.stop()


if __name__ == "__main__":
    sys.exit(run())
