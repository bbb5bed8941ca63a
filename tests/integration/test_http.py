"""HTTP behaviour of the real server: keep-alive, pipelining, error statuses (each followed
by a healthy server), slowloris resistance, HTTP/1.0 streaming without chunking."""

import json
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from uvllm_harness import Lazy, Reader, build_request, main, null_text, test, timed  # noqa: E402


srv = Lazy("--max-body", "65536", "--header-timeout", "3")


def healthy():
    st, h = srv().health()
    assert st == 200 and h["status"] == "ok", (st, h)


@test
def keepalive_100_sequential_requests():
    with srv().connect() as s:
        rd = Reader(s)
        for i in range(100):
            if i % 2:
                s.sendall(build_request("GET", "/health"))
            else:
                body = json.dumps({"prompt": f"req {i}", "max_tokens": 2})
                s.sendall(build_request("POST", "/v1/completions", body))
            r = rd.response()
            assert r.status == 200, (i, r.status, r.body)
            assert r.header("connection") != "close", i
            if i % 2 == 0:
                assert null_text(r.json()["choices"][0]["text"]) == 2


@test
def pipelined_requests_answered_in_order():
    with srv().connect() as s:
        a = json.dumps({"prompt": "first", "max_tokens": 4})
        b = json.dumps({"prompt": "second one", "max_tokens": 1})
        s.sendall(build_request("POST", "/v1/completions", a) +
                  build_request("POST", "/v1/completions", b) +
                  build_request("GET", "/v1/models"))
        rd = Reader(s)
        r1, r2, r3 = rd.response(), rd.response(), rd.response()
        assert r1.json()["usage"]["prompt_tokens"] == 1
        assert r1.json()["usage"]["completion_tokens"] == 4
        assert r2.json()["usage"]["prompt_tokens"] == 2
        assert r2.json()["usage"]["completion_tokens"] == 1
        assert r3.json()["object"] == "list"


def raw_exchange(data):
    with srv().connect() as s:
        s.sendall(data)
        return Reader(s).response()


def error_body(r):
    e = r.json()["error"]
    assert "message" in e and "type" in e and "param" in e and "code" in e, e
    return e


@test
def status_431_headers_too_large():
    big = "X-Big: " + "a" * 20000
    r = raw_exchange(f"GET /health HTTP/1.1\r\nHost: x\r\n{big}\r\n\r\n".encode())
    assert r.status == 431, r.status
    error_body(r)
    healthy()


@test
def status_413_body_too_large():
    body = json.dumps({"prompt": "a" * 70000})
    r = raw_exchange(build_request("POST", "/v1/completions", body))
    assert r.status == 413, r.status
    error_body(r)
    healthy()


@test
def status_400_malformed_request():
    r = raw_exchange(b"GARBAGE\r\n\r\n")
    assert r.status == 400, r.status
    healthy()
    r = raw_exchange(b"GET /health HTTP/1.1\r\nContent-Length: x\r\n\r\n")
    assert r.status == 400, r.status
    healthy()


@test
def status_404_unknown_path():
    r = srv().request("GET", "/nope")
    assert r.status == 404
    error_body(r)
    healthy()


@test
def status_405_with_allow():
    r = srv().request("GET", "/v1/completions")
    assert r.status == 405
    assert "POST" in r.header("allow"), r.headers
    r = srv().request("DELETE", "/health")
    assert r.status == 405
    assert "GET" in r.header("allow")
    healthy()


@timed
def slowloris_does_not_delay_normal_requests():
    conns = []
    try:
        for _ in range(50):
            s = srv().connect()
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
            conns.append(s)
        for round_ in range(3):
            for s in conns:
                s.sendall(b"X-Slow: 1\r\n")
            t0 = time.monotonic()
            r = srv().complete(prompt="quick", max_tokens=2)
            dt = time.monotonic() - t0
            assert r.status == 200
            assert dt < 1.0, f"normal request took {dt:.2f} s with 50 slow clients"
            time.sleep(0.3)
        # the header timeout (3 s here) closes the slow ones
        for s in conns:
            s.settimeout(6)
            try:
                data = s.recv(4096)
                while data and not data.endswith(b"}"):
                    more = s.recv(4096)
                    if not more:
                        break
                    data += more
            except (ConnectionResetError, socket.timeout) as e:
                raise AssertionError(f"slow connection not closed by the header timeout: {e}")
            assert data == b"" or data.startswith(b"HTTP/1.1 408"), data[:80]
    finally:
        for s in conns:
            s.close()
    healthy()


@test
def http10_stream_is_not_chunked():
    body = json.dumps({"prompt": "old client", "max_tokens": 3, "stream": True})
    with srv().connect() as s:
        s.sendall(build_request("POST", "/v1/completions", body, version="1.0"))
        rd = Reader(s)
        version, status, _, headers = rd.head()
        assert status == 200
        assert "transfer-encoding" not in headers, headers
        assert headers.get("content-type", "").startswith("text/event-stream")
        data = rd.body(headers)  # close-delimited
        assert b"\r\n0\r\n" not in data
        ev = [e for e in data.decode().split("\n\n") if e]
        assert ev[-1] == "data: [DONE]", ev[-2:]
        assert len(ev) == 5, ev  # 3 tokens, the finish chunk, [DONE]


@test
def http10_plain_request_closes():
    with srv().connect() as s:
        s.sendall(b"GET /health HTTP/1.0\r\n\r\n")
        rd = Reader(s)
        r = rd.response()
        assert r.status == 200
        assert s.recv(100) == b""


if __name__ == "__main__":
    main(srv)
