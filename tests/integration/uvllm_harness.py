"""Shared helpers for the integration tests: start the real `uvllm serve` binary on
127.0.0.1 with port 0, read the port from its `listening on http://HOST:PORT` log line,
and talk HTTP/1.x over raw sockets (no client library, so malformed input can be sent on
purpose and framing is checked byte by byte).

Python 3 standard library only. Each test script registers functions with @test and ends
with `sys.exit(run())` (or main(), which also stops its Lazy servers), which prints one
line `N passed, N failed`."""

import json
import os
import errno
import re
import resource
import select
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback

_TESTS = []
# Hang guards (socket timeouts) stretch for a sanitizer build, several times slower.
HANG_SCALE = 4 if os.environ.get("UVLLM_SANITIZER_BUILD") else 1


def test(fn):
    _TESTS.append(fn)
    return fn


def timed(fn):
    """A test that asserts a time, a rate or the machine's load (the host's speed shows in
    it). CMake runs these alone, in the Release build only, as timing_<file> (label
    timing); integration_<file> and the sanitizer builds run the others (UVLLM_TESTS)."""
    fn.timing = True
    return test(fn)


def _selected(fn, only):
    """argv names tests to run; else UVLLM_TESTS=timing or untimed picks by kind."""
    if only:
        return fn.__name__ in only
    kind = os.environ.get("UVLLM_TESTS", "all")
    is_timing = getattr(fn, "timing", False)
    return kind == "all" or (kind == "timing") == is_timing


def run():
    only = sys.argv[1:]
    passed = failed = 0
    for fn in _TESTS:
        if not _selected(fn, only):
            continue
        t0 = time.monotonic()
        try:
            fn()
            passed += 1
            print(f"PASS {fn.__name__} ({time.monotonic() - t0:.2f}s)", flush=True)
        except Exception:
            failed += 1
            print(f"FAIL {fn.__name__} ({time.monotonic() - t0:.2f}s)", flush=True)
            traceback.print_exc()
    print(f"{passed} passed, {failed} failed", flush=True)
    return 1 if failed or not passed else 0


def source_dir():
    """The source tree: $UVLLM_SOURCE_DIR, else the one this file is in."""
    return os.environ.get("UVLLM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))


def shared():
    """The shared test data: $UVLLM_SHARED, else ../shared beside the source tree."""
    return os.path.abspath(os.environ.get("UVLLM_SHARED") or
                           os.path.join(source_dir(), "..", "shared"))


def shared_file(*parts):
    """A file below shared(); when it is missing the script ends as one failure, with the
    `N passed, N failed` line ctest reads."""
    p = os.path.join(shared(), *parts)
    if not os.path.exists(p):
        print(f"missing shared file: {p}")
        print("0 passed, 1 failed")
        sys.exit(1)
    return p


def binary():
    b = os.environ.get("UVLLM_BIN")
    if not b:
        b = os.path.join(source_dir(), "build", "uvllm")
    if not os.access(b, os.X_OK):
        raise SystemExit(f"uvllm binary not found at '{b}' (set UVLLM_BIN)")
    return b


class Server:
    """A running `uvllm serve`; stderr is drained by a thread into self.log."""

    def __init__(self, *extra, backend="null"):
        args = [binary(), "serve", "--backend", backend, "--port", "0", "--host", "127.0.0.1"]
        # UVLLM_SERVE_EXTRA: options every server of the run gets (CMake runs some tests
        # again with "--pipeline 2": the same behaviour must hold with steps pipelined)
        args += os.environ.get("UVLLM_SERVE_EXTRA", "").split()
        self.proc = subprocess.Popen(args + list(extra), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.log = []
        self.tsan_reports = 0  # counted as lines arrive: self.log is trimmed on long runs
        self.port = None
        # A thread drains stderr from the start (the server logs a line per request and
        # must never block on a full pipe); the port is read from the lines it collects.
        self._drain = threading.Thread(target=self._read_log, daemon=True)
        self._drain.start()
        deadline = time.monotonic() + 15 * HANG_SCALE
        while self.port is None:
            for line in list(self.log):
                m = re.search(r"listening on http://([^:\s]+|\[[^\]]+\]):(\d+)", line)
                if m:
                    self.port = int(m.group(2))
            if self.port is not None:
                break
            if self.proc.poll() is not None:
                self._drain.join(2)
                raise AssertionError(f"server exited ({self.proc.returncode}) before listening:\n"
                                     + "".join(self.log))
            if time.monotonic() > deadline:
                self.kill()
                raise AssertionError("server did not log 'listening on' in time:\n" +
                                     "".join(self.log))
            time.sleep(0.01)

    def _read_log(self):
        for raw in self.proc.stderr:
            line = raw.decode(errors="replace")
            if "WARNING: ThreadSanitizer" in line:
                self.tsan_reports += 1
            self.log.append(line)
            if len(self.log) > 20000 and self.port is not None:
                del self.log[:10000]

    def connect(self, timeout=10):
        # A socket timeout only guards against a hang; a sanitised server on a loaded host
        # can take longer than 10 s to answer a heavy request (a JSON schema under TSan).
        s = socket.create_connection(("127.0.0.1", self.port), timeout=timeout * HANG_SCALE)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s

    def signal(self, sig=signal.SIGTERM):
        self.proc.send_signal(sig)

    def wait(self, timeout):
        return self.proc.wait(timeout)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.check_tsan()

    def check_tsan(self):
        """A server built with -fsanitize=thread fails the test on any report, whether
        the test stopped it cleanly or killed it."""
        self._drain.join(2)
        if self.tsan_reports:
            log = "".join(self.log)
            i = log.find("WARNING: ThreadSanitizer")
            raise AssertionError(f"{self.tsan_reports} ThreadSanitizer report(s):\n" +
                                 log[max(0, i - 200):i + 8000])

    def stop(self):
        """SIGTERM and expect a clean exit 0."""
        if self.proc.poll() is None:
            self.signal(signal.SIGTERM)
            try:
                rc = self.proc.wait(35)
            except subprocess.TimeoutExpired:
                self.kill()
                raise AssertionError("server did not exit within 35 s of SIGTERM")
            self.check_tsan()
            assert rc == 0, f"server exited {rc} after SIGTERM:\n" + "".join(self.log[-30:])
        else:
            self.check_tsan()

    def __enter__(self):
        return self

    def __exit__(self, et, ev, tb):
        if et is None:
            self.stop()
        else:
            self.kill()

    # --- one-shot helpers -----------------------------------------------------------

    def request(self, method, path, body=None, headers=None, version="1.1", timeout=10):
        with self.connect(timeout) as s:
            s.sendall(build_request(method, path, body, headers, version, close=True))
            return Reader(s).response(method)

    def health(self):
        r = self.request("GET", "/health")
        return r.status, r.json()

    def metrics(self):
        """/metrics as {name with labels: value}."""
        out = {}
        for ln in self.request("GET", "/metrics").body.decode().splitlines():
            if ln and not ln.startswith("#"):
                k, v = ln.rsplit(" ", 1)
                out[k] = float(v)
        return out

    def post(self, path, body):
        """POST a JSON body."""
        return self.request("POST", path, body=json.dumps(body))

    def chat(self, body):
        """A chat completion's answer (asserting 200), parsed."""
        r = self.post("/v1/chat/completions", body)
        assert r.status == 200, r.body
        return r.json()

    def chat_stream_text(self, body):
        """The text of body asked as a streamed chat completion (asserting 200)."""
        r = self.post("/v1/chat/completions", dict(body, stream=True))
        assert r.status == 200, r.body
        return stream_text(r.body)

    def first_completion(self, body):
        """The first choice of a /v1/completions answer (asserting 200)."""
        r = self.post("/v1/completions", body)
        assert r.status == 200, r.body
        return r.json()["choices"][0]

    def complete(self, **body):
        r = self.request("POST", "/v1/completions", body=json.dumps(body))
        return r

    def token_id(self, text):
        """The id of a token whose text is exactly `text` (a model's vocabulary)."""
        r = self.request("POST", "/tokenize",
                         body=json.dumps({"content": text, "add_special": False}))
        assert r.status == 200, r.body
        ids = [i for i in r.json()["tokens"]
               if self.request("POST", "/detokenize",
                               body=json.dumps({"tokens": [i]})).json()["content"] == text]
        assert ids, (text, r.json())
        return ids[0]


def rss_kib(pid):
    """The resident set of process pid in KiB (VmRSS), or None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for ln in f:
                if ln.startswith("VmRSS:"):
                    return int(ln.split()[1])
    except OSError:
        pass
    return None


def build_request(method, path, body=None, headers=None, version="1.1", close=False):
    if isinstance(body, str):
        body = body.encode()
    lines = [f"{method} {path} HTTP/{version}", "Host: 127.0.0.1"]
    hdrs = dict(headers or {})
    if body is not None:
        hdrs.setdefault("Content-Type", "application/json")
        hdrs.setdefault("Content-Length", str(len(body)))
    if close:
        hdrs.setdefault("Connection", "close")
    lines += [f"{k}: {v}" for k, v in hdrs.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + (body or b"")


class Response:
    def __init__(self, status, reason, headers, body, version):
        self.status, self.reason, self.headers, self.body, self.version = (
            status, reason, headers, body, version)

    def header(self, name):
        return self.headers.get(name.lower())

    def json(self):
        return json.loads(self.body)

    def events(self):
        return sse_events(self.body)


def stream_text(body):
    """The text a streamed chat completion wrote: its chunks' delta contents, joined."""
    events = [json.loads(e) for e in sse_events(body) if e != "[DONE]"]
    return "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e.get("choices"))


def sse_events(body):
    """The data payloads of an SSE body, in order ('[DONE]' included as a string)."""
    text = body.decode() if isinstance(body, bytes) else body
    out = []
    for block in text.split("\n\n"):
        data = [ln[5:].lstrip(" ") for ln in block.split("\n") if ln.startswith("data:")]
        if data:
            out.append("\n".join(data))
    return out


class Reader:
    """Parses successive HTTP/1.x responses from one socket. Unconsumed input is
    self.buf[self.pos:]; consuming moves pos (no copying), so multi-megabyte streams of
    small chunks parse in linear time."""

    def __init__(self, sock):
        self.sock = sock
        self._b = bytearray()
        self.pos = 0
        self.eof = False

    @property
    def buf(self):
        return bytes(self._b[self.pos:])

    def _fill(self):
        chunk = self.sock.recv(262144)
        if not chunk:
            self.eof = True
        if self.pos > 1 << 20:
            del self._b[:self.pos]
            self.pos = 0
        self._b += chunk
        return bool(chunk)

    def _until(self, sep):
        while True:
            i = self._b.find(sep, self.pos)
            if i >= 0:
                out = bytes(self._b[self.pos:i])
                self.pos = i + len(sep)
                return out
            if not self._fill():
                raise EOFError(f"connection closed while waiting for {sep!r}; "
                               f"have {bytes(self._b[self.pos:self.pos + 200])!r}")

    def _exact(self, n):
        while len(self._b) - self.pos < n:
            if not self._fill():
                raise EOFError("connection closed inside a body")
        out = bytes(self._b[self.pos:self.pos + n])
        self.pos += n
        return out

    def head(self):
        head = self._until(b"\r\n\r\n").decode("latin-1")
        lines = head.split("\r\n")
        m = re.match(r"HTTP/(\d\.\d) (\d{3}) ?(.*)", lines[0])
        assert m, f"bad status line {lines[0]!r}"
        headers = {}
        for ln in lines[1:]:
            k, _, v = ln.partition(":")
            headers[k.strip().lower()] = v.strip()
        return m.group(1), int(m.group(2)), m.group(3), headers

    def body(self, headers, method="GET", status=200, on_chunk=None):
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            return b""
        if "chunked" in headers.get("transfer-encoding", "").lower():
            parts = []
            while True:
                size = int(self._until(b"\r\n").split(b";")[0], 16)
                if size == 0:
                    self._until(b"\r\n")
                    return b"".join(parts)
                data = self._exact(size)
                self._exact(2)
                parts.append(data)
                if on_chunk:
                    on_chunk(data)
        if "content-length" in headers:
            return self._exact(int(headers["content-length"]))
        while self._fill():
            pass
        out = bytes(self._b[self.pos:])
        self.pos = len(self._b)
        return out

    def response(self, method="GET"):
        version, status, reason, headers = self.head()
        body = self.body(headers, method, status)
        return Response(status, reason, headers, body, version)


def assert_close(a, b, tol, path=""):
    """a equals b (JSON values, compared recursively), floats within tol; path names where."""
    if isinstance(a, float) or isinstance(b, float):
        assert abs(a - b) <= tol, (path, a, b)
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), (path, a.keys(), b.keys())
        for k in a:
            assert_close(a[k], b[k], tol, f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), (path, len(a), len(b))
        for i, (x, y) in enumerate(zip(a, b)):
            assert_close(x, y, tol, f"{path}[{i}]")
    else:
        assert a == b, (path, a, b)


# Soft checks for the scripts that report every failure, then exit 1 if there was one.
failures = []


def check(cond, msg):
    """Records msg (and prints it) unless cond holds."""
    if not cond:
        failures.append(msg)
        print("FAIL:", msg, file=sys.stderr)


def wait_for(pred, timeout, interval=0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(interval)
    return pred()


def post_json(s, path, body):
    """POST body to s: a dict is sent as JSON, a str as it is (malformed on purpose)."""
    return s.request("POST", path, body=body if isinstance(body, str) else json.dumps(body))


def expect_error(s, path, body, param, status=400):
    """POST body; the answer must be `status` with an OpenAI error naming `param`."""
    r = post_json(s, path, body)
    assert r.status == status, (body, r.status, r.body)
    err = r.json()["error"]
    assert err["param"] == param, (body, err)
    return err


def expect_needs_vocabulary(response_format):
    """A structured-output request on the null backend (pseudo-tokens, no vocabulary) is
    refused with a 400 naming response_format."""
    with Server() as s:
        expect_error(s, "/v1/completions", {"prompt": "a", "max_tokens": 4,
                                            "response_format": response_format},
                     "response_format")


def leave_mid_request(s, path, body):
    """Send a request and close the socket 0.1 s later; then the server must come back to
    no active sequences. Returns its /health body."""
    sock = s.connect()
    sock.sendall(build_request("POST", path, json.dumps(body)))
    time.sleep(0.1)
    sock.close()

    def idle():
        st, h = s.health()
        return st == 200 and h.get("active_sequences", h.get("sequences", 0)) == 0 and h
    h = wait_for(idle, 10)
    assert h, s.health()
    return h


def each_in_thread(n, fn):
    """fn(i) for i in range(n), each on its own thread at once; {i: result}, re-raising the
    first exception a thread met."""
    got, errs = {}, []

    def one(i):
        try:
            got[i] = fn(i)
        except Exception as e:  # noqa: BLE001
            errs.append(e)
    ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errs, errs
    return got


def raise_nofile(n):
    """Raises the soft RLIMIT_NOFILE towards n (the hard limit caps it); returns it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(n, hard), hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def dechunk(raw):
    """The body of a whole raw 200 answer in chunked encoding (ValueError if cut short)."""
    head, _, rest = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head[:80]
    body, p = [], 0
    while True:
        e = rest.index(b"\r\n", p)
        size = int(rest[p:e], 16)
        if size == 0:
            return b"".join(body)
        body.append(rest[e + 2:e + 2 + size])
        p = e + 2 + size + 2


def stream_all(port, requests, timeout=60, recv_size=65536):
    """Sends every request at once, each on its own non-blocking connection, and reads each
    answer until its chunked stream ends after [DONE] or the server closes. Returns the raw
    answers in request order and how many of them ended within timeout seconds."""
    sel = selectors.DefaultSelector()
    conns = []
    for req in requests:
        s = socket.socket()
        s.setblocking(False)
        err = s.connect_ex(("127.0.0.1", port))
        assert err in (0, errno.EINPROGRESS), err
        rec = [req, bytearray()]  # what is left to send, what has come
        conns.append((s, rec))
        sel.register(s, selectors.EVENT_WRITE | selectors.EVENT_READ, rec)
    done, deadline = 0, time.monotonic() + timeout
    while done < len(conns) and time.monotonic() < deadline:
        for key, ev in sel.select(timeout=1):
            s, rec = key.fileobj, key.data
            if ev & selectors.EVENT_WRITE and rec[0]:
                try:
                    rec[0] = rec[0][s.send(rec[0]):]
                except BlockingIOError:
                    pass
                if not rec[0]:
                    sel.modify(s, selectors.EVENT_READ, rec)
            if ev & selectors.EVENT_READ:
                try:
                    data = s.recv(recv_size)
                except (BlockingIOError, InterruptedError):
                    continue
                rec[1] += data
                if not data or rec[1].endswith(b"data: [DONE]\n\n\r\n0\r\n\r\n"):
                    sel.unregister(s)
                    done += 1
    sel.close()
    for s, _ in conns:
        s.close()
    return [bytes(rec[1]) for _, rec in conns], done


def null_text(n_tokens_text):
    """Number of pseudo-tokens in a null-backend completion text (' tok<ID>' each)."""
    return len(re.findall(r" tok\d+", n_tokens_text))


class Lazy:
    """A script's shared server, started by the first test that calls it (a filtered run
    that needs none starts none); main() stops it."""

    def __init__(self, *extra, **kw):
        self.extra, self.kw, self.srv = extra, kw, None

    def __call__(self):
        if self.srv is None:
            self.srv = Server(*self.extra, **self.kw)
        return self.srv


def main(*lazies):
    """Runs the script's tests and exits with run()'s status; then each Lazy server that
    started must stop cleanly (exit 0, no TSan report), and is killed whatever happens."""
    try:
        rc = run()
        for lz in lazies:
            if lz.srv:
                lz.srv.stop()
    finally:
        for lz in lazies:
            if lz.srv:
                lz.srv.kill()
    sys.exit(rc)
