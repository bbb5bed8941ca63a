"""What `uvllm serve` offers a deployment behind a load balancer (issue 14): readiness by a
real decode (/health/ready, /health/live, the canary, --null-fail-after), draining with
--drain-delay-s, API keys (--api-key, --api-key-file, UVLLM_API_KEY, --metrics-key), and the
headers a proxy may route on (Server-Timing, X-Uvllm-Load)."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from uvllm_harness import (Reader, Server, binary, build_request, run, sse_events,  # noqa: E402
                           test, timed, wait_for)

UNAUTHORIZED = {"error": {"message": "Incorrect API key provided",
                          "type": "invalid_request_error", "param": None,
                          "code": "invalid_api_key"}}


def get(srv, path, key=None, headers=None):
    h = dict(headers or {})
    if key is not None:
        h["Authorization"] = f"Bearer {key}"
    return srv.request("GET", path, headers=h)


def post(srv, path, body, key=None, headers=None):
    h = dict(headers or {})
    if key is not None:
        h["Authorization"] = f"Bearer {key}"
    return srv.request("POST", path, body=json.dumps(body), headers=h)


def ready(srv):
    r = get(srv, "/health/ready")
    return r.status, r.json()


def wait_ready(srv, timeout=5):
    assert wait_for(lambda: ready(srv)[0] == 200, timeout), f"not ready: {ready(srv)}"


def stream_body(n, prompt="stream me"):
    return json.dumps({"prompt": prompt, "max_tokens": n, "stream": True})


def timing(value):
    """Server-Timing 'a;dur=1.5, b;dur=2' -> {'a': 1.5, 'b': 2.0}."""
    out = {}
    for part in value.split(","):
        name, _, params = part.strip().partition(";")
        m = re.fullmatch(r"dur=(\d+(?:\.\d+)?)", params.strip())
        assert re.fullmatch(r"[A-Za-z0-9_-]+", name) and m, f"unparseable entry {part!r}"
        out[name] = float(m.group(1))
    return out


def load(r):
    v = r.header("x-uvllm-load")
    assert v, f"no X-Uvllm-Load on a {r.status}: {r.headers}"
    m = re.fullmatch(r"running=(\d+), waiting=(\d+)", v)
    assert m, v
    return int(m.group(1)), int(m.group(2))


# ---- readiness ----------------------------------------------------------------------


@test
def ready_after_start_live_always():
    with Server() as srv:
        wait_ready(srv)
        assert ready(srv) == (200, {"status": "ready"})
        r = get(srv, "/health/live")
        assert r.status == 200 and r.json() == {"status": "live"}, (r.status, r.body)
        st, h = srv.health()  # /health keeps its own shape
        assert st == 200 and h["status"] == "ok", h
        m = get(srv, "/metrics").body.decode()
        assert re.search(r"^uvllm_ready 1$", m, re.M), "uvllm_ready gauge"
        assert re.search(r"^uvllm_canary_total [1-9]", m, re.M), "start-up canary not counted"
        # the canary's token is not a generated token
        assert re.search(r"^uvllm_tokens_generated_total 0$", m, re.M), "canary counted"


@test
def idle_server_reruns_the_canary():
    with Server("--canary-interval-s", "0.2") as srv:
        wait_ready(srv)
        time.sleep(1.5)
        assert ready(srv)[0] == 200, "readiness expired on an idle server"
        m = get(srv, "/metrics").body.decode()
        n = int(float(re.search(r"^uvllm_canary_total (\S+)$", m, re.M).group(1)))
        assert n >= 3, f"{n} canaries in 1.5 s at a 0.2 s interval"


@test
def canary_is_not_load():
    # 200 ms steps and a 0.1 s interval: a canary is in flight most of the time, yet it
    # takes no --max-seqs slot and stays out of the latency histograms and token counts
    with Server("--max-seqs", "1", "--null-delay-us", "200000",
                "--canary-interval-s", "0.1") as srv:
        wait_ready(srv)
        for i in range(4):
            time.sleep(0.15)
            r = post(srv, "/v1/completions", {"prompt": f"p{i}", "max_tokens": 1})
            assert r.status == 200, (i, r.status, r.body)
        m = get(srv, "/metrics").body.decode()
        assert re.search(r"^uvllm_time_to_first_token_seconds_count 4$", m, re.M)
        assert re.search(r"^uvllm_tokens_generated_total 4$", m, re.M)
        assert int(re.search(r"^uvllm_canary_total (\d+)", m, re.M).group(1)) >= 2


@test
def failing_backend_fails_requests_and_readiness():
    with Server("--null-fail-after", "2", "--canary-interval-s", "0.3") as srv:
        wait_ready(srv)  # step 1 is the start-up canary
        ok = post(srv, "/v1/completions", {"prompt": "one step", "max_tokens": 1})
        assert ok.status == 200, ok.body  # step 2
        t0 = time.monotonic()
        r = post(srv, "/v1/completions", {"prompt": "a b", "max_tokens": 5})
        assert r.status == 500, (r.status, r.body)
        e = r.json()["error"]
        assert e["type"] == "server_error" and "message" in e and "code" in e, e
        assert time.monotonic() - t0 < 5, "a failed step hung its request"
        assert wait_for(lambda: ready(srv)[0] == 503, 3), ready(srv)
        st, body = ready(srv)
        assert body["status"] == "failing" and body.get("reason"), body
        # the process keeps serving: liveness, other endpoints, more failing requests
        assert get(srv, "/health/live").status == 200
        assert get(srv, "/v1/models").status == 200
        with srv.connect() as s:
            s.sendall(build_request("POST", "/v1/completions", stream_body(5), close=True))
            rd = Reader(s)
            _, status, _, headers = rd.head()
            assert status == 200
            ev = sse_events(rd.body(headers))
        assert "error" in json.loads(ev[-1]) and "[DONE]" not in ev, ev
        time.sleep(1)  # canaries keep failing: it stays 503
        assert ready(srv)[1]["status"] == "failing"
        assert any("step failed" in ln for ln in srv.log), "failed step not logged"
        m = get(srv, "/metrics").body.decode()
        assert re.search(r"^uvllm_ready 0$", m, re.M)
        assert re.search(r"^uvllm_step_errors_total [1-9]", m, re.M)


@test
def fault_from_the_first_step_is_failing_not_loading():
    with Server("--null-fail-after", "0") as srv:
        assert wait_for(lambda: ready(srv)[1]["status"] == "failing", 3), ready(srv)
        assert ready(srv)[0] == 503


@timed
def sigterm_drains_readiness_first_while_a_stream_finishes():
    srv = Server("--null-token-us", "100000", "--drain-delay-s", "2", "--shutdown-grace", "10",
                 "--canary-interval-s", "0.2")
    try:
        wait_ready(srv)
        s = srv.connect(timeout=20)
        s.sendall(build_request("POST", "/v1/completions", stream_body(40)))  # ~4 s
        rd = Reader(s)
        _, status, _, headers = rd.head()
        assert status == 200
        while rd.buf.count(b"data:") < 2:
            assert rd._fill(), "stream ended early"
        t_term = time.monotonic()
        srv.signal(signal.SIGTERM)
        assert wait_for(lambda: ready(srv)[0] == 503, 1.0), ready(srv)
        st, body = ready(srv)
        assert body["status"] == "draining", body
        assert get(srv, "/health/live").status == 200
        r = post(srv, "/v1/completions", {"prompt": "late", "max_tokens": 1})
        assert r.status == 503 and r.json()["error"]["code"] == "shutting_down", r.body
        assert r.header("connection") == "close", r.headers
        assert time.monotonic() - t_term < 1.8, "probes too slow to test the delay window"

        def refused():
            try:
                socket.create_connection(("127.0.0.1", srv.port), timeout=1).close()
                return False
            except OSError:
                return True
        assert wait_for(refused, 5), "listener still open 5 s after a 2 s drain delay"
        closed_after = time.monotonic() - t_term
        assert closed_after >= 1.9, f"listener closed {closed_after:.2f} s after SIGTERM"
        ev = sse_events(rd.body(headers))
        assert ev[-1] == "[DONE]" and len(ev) == 42, (len(ev), ev[-2:])
        assert srv.wait(10) == 0
        srv.check_tsan()
    finally:
        srv.kill()


# ---- API keys -------------------------------------------------------------------------


def assert_401(r):
    assert r.status == 401, (r.status, r.body)
    assert r.json() == UNAUTHORIZED, r.body
    assert r.header("www-authenticate") == "Bearer", r.headers


@test
def api_keys_guard_v1_and_tokenizer_routes():
    with Server("--api-key", "sk-one-1234", "--api-key", "sk-two-5678") as srv:
        body = {"prompt": "a b", "max_tokens": 2}
        assert_401(post(srv, "/v1/completions", body))
        for bad in ("sk-one-123", "sk-one-12345", "sk-two-5679", "SK-ONE-1234", "x"):
            assert_401(post(srv, "/v1/completions", body, key=bad))
        assert_401(post(srv, "/v1/completions", body,
                        headers={"Authorization": "Basic sk-one-1234"}))
        assert_401(get(srv, "/v1/models"))
        assert_401(get(srv, "/v1/no-such-route"))
        assert_401(post(srv, "/tokenize", {"content": "hi"}))
        assert_401(post(srv, "/detokenize", {"tokens": [1]}))
        assert_401(post(srv, "/apply-template", {"messages": [{"role": "user", "content": "x"}]}))
        for key in ("sk-one-1234", "sk-two-5678"):
            r = post(srv, "/v1/completions", body, key=key)
            assert r.status == 200 and r.json()["usage"]["completion_tokens"] == 2, r.body
            assert get(srv, "/v1/models", key=key).status == 200
            assert post(srv, "/tokenize", {"content": "hi"}, key=key).status == 200
            chat = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
            assert post(srv, "/v1/chat/completions", chat, key=key).status == 200
        r = post(srv, "/v1/completions", body, headers={"Authorization": "bearer  sk-two-5678"})
        assert r.status == 200, "scheme is case-insensitive"
        for path in ("/health", "/health/live", "/health/ready", "/metrics"):
            assert get(srv, path).status in (200, 503), path  # open without a key
        assert get(srv, "/health/live").status == 200
        log = "".join(srv.log)
        assert "sk-one" not in log and "sk-two" not in log, "a key reached the log"
        m = get(srv, "/metrics").body.decode()
        assert re.search(r"^uvllm_http_unauthorized_total 1[0-9]$", m, re.M), "401s counted"


@test
def api_key_file_and_environment():
    with tempfile.NamedTemporaryFile("w", suffix=".keys", delete=False) as f:
        f.write("# team keys\n\n  file-key-a  \nfile-key-b\r\n# not-a-key\n")
        path = f.name
    old = os.environ.get("UVLLM_API_KEY")
    os.environ["UVLLM_API_KEY"] = "env-key-c"
    try:
        with Server("--api-key-file", path) as srv:
            body = {"prompt": "a", "max_tokens": 1}
            for key in ("file-key-a", "file-key-b", "env-key-c"):
                assert post(srv, "/v1/completions", body, key=key).status == 200, key
            for key in ("# team keys", "not-a-key", "#", "file-key-"):
                assert_401(post(srv, "/v1/completions", body, key=key))
            assert_401(post(srv, "/v1/completions", body))
    finally:
        if old is None:
            del os.environ["UVLLM_API_KEY"]
        else:
            os.environ["UVLLM_API_KEY"] = old
        os.unlink(path)


@test
def key_file_without_a_key_is_refused():
    with tempfile.NamedTemporaryFile("w", suffix=".keys", delete=False) as f:
        f.write("# nothing here\n\n")
        path = f.name
    try:
        p = subprocess.run([binary(), "serve", "--port", "0", "--api-key-file", path],
                           capture_output=True, timeout=20)
        assert p.returncode == 2 and b"holds no key" in p.stderr, (p.returncode, p.stderr)
        p = subprocess.run([binary(), "serve", "--port", "0", "--api-key", "has space"],
                           capture_output=True, timeout=20)
        assert p.returncode == 2 and b"has space" not in p.stderr, p.stderr
    finally:
        os.unlink(path)


@test
def metrics_key_guards_metrics_only():
    with Server("--metrics-key", "scrape-me") as srv:
        assert_401(get(srv, "/metrics"))
        assert_401(get(srv, "/metrics", key="scrape-mE"))
        r = get(srv, "/metrics", key="scrape-me")
        assert r.status == 200 and b"uvllm_http_requests_total" in r.body
        assert get(srv, "/v1/models").status == 200  # no API key configured: open


@test
def cors_preflight_needs_no_key():
    with Server("--api-key", "sk-cors", "--cors-origin", "https://app.example") as srv:
        h = {"Origin": "https://app.example", "Access-Control-Request-Method": "POST",
             "Access-Control-Request-Headers": "authorization, content-type"}
        r = srv.request("OPTIONS", "/v1/chat/completions", headers=h)
        assert r.status == 204, (r.status, r.body)
        assert r.header("access-control-allow-origin") == "https://app.example"
        assert "authorization" in r.header("access-control-allow-headers").lower()
        r = post(srv, "/v1/completions", {"prompt": "a", "max_tokens": 1}, key="sk-cors",
                 headers={"Origin": "https://app.example"})
        assert r.status == 200 and r.header("access-control-allow-origin") == "https://app.example"
        assert_401(post(srv, "/v1/completions", {"prompt": "a"},
                        headers={"Origin": "https://app.example"}))
    with Server("--api-key", "sk-nocors") as srv:  # without CORS: the router's answer, no 401
        assert srv.request("OPTIONS", "/v1/completions").status == 405


# ---- headers ----------------------------------------------------------------------------


@test
def server_timing_on_completions():
    with Server("--null-delay-us", "10000") as srv:
        r = post(srv, "/v1/completions", {"prompt": "a b c", "max_tokens": 5})
        assert r.status == 200
        t = timing(r.header("server-timing"))
        assert list(t) == ["queue", "prefill", "decode"], t
        # every step sleeps 10 ms: the prompt's step, then 4 more for tokens 2..5
        assert t["prefill"] >= 9 and t["decode"] >= 36, t
        chat = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}
        r = post(srv, "/v1/chat/completions", chat)
        assert r.status == 200
        t = timing(r.header("server-timing"))
        assert list(t) == ["queue", "prefill", "decode"] and t["decode"] >= 18, t
        for path, body in (("/v1/completions", {"prompt": "a", "max_tokens": 2, "stream": True}),
                           ("/v1/chat/completions", dict(chat, stream=True))):
            r = post(srv, path, body)
            assert r.status == 200 and sse_events(r.body)[-1] == "[DONE]"
            t = timing(r.header("server-timing"))
            assert list(t) == ["setup"], t  # queue, prefill, decode not known yet


@test
def load_header_on_every_response():
    with Server("--null-delay-us", "20000") as srv:
        wait_ready(srv)
        assert load(get(srv, "/health")) == (0, 0)
        for r in (get(srv, "/health/ready"), get(srv, "/nope"), srv.request("DELETE", "/health"),
                  post(srv, "/v1/completions", {"prompt": "a", "max_tokens": 1}),
                  post(srv, "/v1/completions", {"prompt": 1})):
            load(r)
        with srv.connect() as s:  # an error net writes itself (431)
            s.sendall(b"GET /health HTTP/1.1\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n")
            r = Reader(s).response()
            assert r.status == 431 and load(r)
        socks = []
        try:
            for i in range(3):
                s = srv.connect()
                s.sendall(build_request("POST", "/v1/completions", stream_body(500, f"p{i}")))
                rd = Reader(s)
                _, status, _, headers = rd.head()
                assert status == 200
                load(_Head(headers))
                socks.append(s)
            assert wait_for(lambda: load(get(srv, "/health")) == (3, 0), 3), \
                load(get(srv, "/health"))
        finally:
            for s in socks:
                s.close()
        assert wait_for(lambda: load(get(srv, "/health")) == (0, 0), 3)


class _Head:
    def __init__(self, headers):
        self.headers, self.status = headers, 200

    def header(self, name):
        return self.headers.get(name.lower())


@test
def help_documents_the_flags():
    out = subprocess.run([binary(), "serve", "--help"], capture_output=True, timeout=20).stdout
    for flag in (b"--api-key ", b"--api-key-file", b"--metrics-key", b"--canary-interval-s",
                 b"--drain-delay-s", b"--null-fail-after", b"UVLLM_API_KEY"):
        assert flag in out, flag


if __name__ == "__main__":
    sys.exit(run())
