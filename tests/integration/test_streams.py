"""Streaming under stress: a client leaving mid-stream frees its sequence, 1,000
concurrent SSE streams from one client all complete, SIGTERM lets a stream finish and the
process exit 0, and the command line rejects bad flags with exit 2."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from uvllm_harness import (HANG_SCALE, Reader, Server, binary, build_request, dechunk,  # noqa: E402
                           raise_nofile, run, sse_events, stream_all, test, timed, wait_for)


def stream_body(n, prompt="stream me"):
    return json.dumps({"prompt": prompt, "max_tokens": n, "stream": True})


def open_stream(srv, n):
    """A streamed completion of n tokens on a new connection: (socket, reader, status,
    headers) once its head has arrived."""
    s = srv.connect()
    s.sendall(build_request("POST", "/v1/completions", stream_body(n)))
    rd = Reader(s)
    _, status, _, headers = rd.head()
    return s, rd, status, headers


@test
def client_close_mid_stream_frees_the_sequence():
    with Server("--null-delay-us", "20000") as srv:
        s, rd, status, _ = open_stream(srv, 4000)
        assert status == 200
        while rd.buf.count(b"data:") < 3:  # a few events arrive
            assert rd._fill(), "stream ended early"
        st, h = srv.health()
        assert h["active_sequences"] == 1, h
        s.close()
        t0 = time.monotonic()
        ok = wait_for(lambda: srv.health()[1]["active_sequences"] == 0, 1.0)
        assert ok, f"sequence still live {time.monotonic() - t0:.2f} s after the client left"
        m = srv.request("GET", "/metrics").body.decode()
        assert "uvllm_completions_cancelled_total 1" in m, m


@test
def sigterm_lets_the_stream_finish_and_exits_0():
    srv = Server("--null-delay-us", "20000", "--shutdown-grace", "10")
    try:
        s, rd, status, headers = open_stream(srv, 30)
        assert status == 200
        rd._fill()
        srv.signal(signal.SIGTERM)
        # the listener is closed / health answers 503 while draining
        def refused_or_503():
            try:
                st, h = srv.health()
                return st == 503 and h["status"] == "draining"
            except OSError:
                return True
        assert wait_for(refused_or_503, 2.0), "server still accepting work after SIGTERM"
        body = rd.body(headers)
        ev = sse_events(body)
        assert ev[-1] == "[DONE]", ev[-3:]
        assert len(ev) == 32, len(ev)  # 30 tokens + finish chunk + [DONE]
        assert json.loads(ev[-2])["choices"][0]["finish_reason"] == "length"
        rc = srv.wait(10)
        assert rc == 0, f"exit {rc}"
    finally:
        srv.kill()


@timed
def sigterm_cuts_streams_after_the_grace_period():
    srv = Server("--null-delay-us", "20000", "--shutdown-grace", "1")
    try:
        s, rd, _, _ = open_stream(srv, 4000)
        rd._fill()
        t0 = time.monotonic()
        srv.signal(signal.SIGTERM)
        rc = srv.wait(10)
        dt = time.monotonic() - t0
        assert rc == 0, rc
        assert 0.8 < dt < 5, f"exited {dt:.2f} s after SIGTERM with a 1 s grace"
    finally:
        srv.kill()


def metric(srv, name):
    for ln in srv.request("GET", "/metrics").body.decode().splitlines():
        if ln.startswith(name + " "):
            return float(ln.split()[1])
    raise AssertionError(f"metric {name} missing")


@test
def slow_reader_pauses_its_sequence_then_resumes():
    n = 60000  # ~190 bytes per event: far more than socket buffers + the soft limit
    with Server("--null-ctx", "65536") as srv:
        s = srv.connect(timeout=30)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        s.sendall(build_request("POST", "/v1/completions", stream_body(n)))
        # Not reading: output piles up until the stream is backpressured and the
        # scheduler stops generating for it. Wait for the token count to stand still.
        # (20 s is a hang guard: a TSan server on a loaded host needed more, HANG_SCALE)
        prev, a = -1.0, metric(srv, "uvllm_tokens_generated_total")
        deadline = time.monotonic() + 20 * HANG_SCALE
        while a != prev and time.monotonic() < deadline:
            time.sleep(0.5)
            prev, a = a, metric(srv, "uvllm_tokens_generated_total")
        assert a == prev, f"generation never paused ({prev} -> {a}) while the client read nothing"
        assert 0 < a < n, f"{a} of {n} tokens generated before pausing"
        rd = Reader(s)
        _, status, _, headers = rd.head()
        assert status == 200
        ev = sse_events(rd.body(headers))
        assert len(ev) == n + 2 and ev[-1] == "[DONE]", (len(ev), ev[-1:])
        s.close()
        assert metric(srv, "uvllm_tokens_generated_total") == n


@test
def thousand_concurrent_streams():
    n, max_tokens = 1000, 20
    assert raise_nofile(4096) >= 2200, "cannot raise RLIMIT_NOFILE for 1000 sockets"
    # The server inherits the raised limit (it is our child).
    with Server("--null-delay-us", "2000") as srv:
        reqs = [build_request("POST", "/v1/completions", stream_body(max_tokens, f"p{i}"))
                for i in range(n)]
        t0 = time.monotonic()
        answers, done = stream_all(srv.port, reqs)
        elapsed = time.monotonic() - t0
        bad = 0
        for raw in answers:
            try:
                events = sse_events(dechunk(raw))
            except (AssertionError, ValueError):  # not a 200, or the stream was cut
                events = []
            if len(events) != max_tokens + 2 or events[-1] != "[DONE]":
                bad += 1
        print(f"  {n} streams x {max_tokens} tokens: {done} finished in {elapsed:.2f} s")
        assert done == n, f"only {done}/{n} streams finished"
        assert bad == 0, f"{bad} streams had the wrong number of events"
        assert wait_for(lambda: srv.health()[1]["active_sequences"] == 0, 2.0)


@test
def over_max_seqs_is_503_with_retry_after():
    with Server("--max-seqs", "1", "--null-delay-us", "20000") as srv:
        s, rd, status, _ = open_stream(srv, 4000)
        assert status == 200
        r = srv.request("POST", "/v1/completions", body=json.dumps({"prompt": "b"}))
        assert r.status == 503, r.status
        assert r.header("retry-after"), r.headers
        assert r.json()["error"]["code"] == "server_busy"
        s.close()
        assert wait_for(lambda: srv.health()[1]["active_sequences"] == 0, 1.0)
        r = srv.request("POST", "/v1/completions", body=json.dumps({"prompt": "b"}))
        assert r.status == 200, "capacity must come back once the first stream is gone"


@test
def cli_rejects_bad_flags_with_exit_2():
    for args in (["--bogus"], ["--port", "70000"], ["--port"], ["--backend", "gpu9"],
                 ["--max-batch-tokens", "0"], ["--null-delay-us", "abc"],
                 ["--backend", "cpu"], ["--log-level", "loud"]):
        p = subprocess.run([binary(), "serve", *args], capture_output=True, timeout=10)
        assert p.returncode == 2, (args, p.returncode, p.stderr)
        assert p.stderr.strip(), args
    p = subprocess.run([binary(), "serve", "--help"], capture_output=True, timeout=10)
    assert p.returncode == 0 and b"--max-batch-tokens" in p.stdout


@test
def port_in_use_fails_cleanly():
    with Server() as srv:
        p = subprocess.run([binary(), "serve", "--backend", "null", "--host", "127.0.0.1",
                            "--port", str(srv.port)], capture_output=True, timeout=10)
        assert p.returncode == 1, (p.returncode, p.stderr)
        assert b"listen" in p.stderr


if __name__ == "__main__":
    sys.exit(run())
