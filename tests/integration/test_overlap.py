"""Double-buffered stepping seen from a client: the scheduler submits the next step before
it runs the current step's callbacks, so a stop string is usually found while the
sequence is already in the next step. That token must never reach the client: the text
ends right before the stop string, nothing follows the finish chunk, usage counts only
the tokens decided before the stop. Clients leaving mid-stream (their sequence is in a
step in flight) must still free every sequence and KV page."""

import json
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from uvllm_harness import (Reader, Server, build_request, dechunk, raise_nofile,  # noqa: E402
                           run, sse_events, stream_all, test, timed, wait_for)

DELAY = ("--null-delay-us", "20000")  # 20 ms steps: the next step is in flight for long


def stream(srv, **body):
    """One streaming completion; returns (text, data events as parsed JSON, raw events)."""
    body.setdefault("prompt", "overlap")
    body["stream"] = True
    with srv.connect() as s:
        s.sendall(build_request("POST", "/v1/completions", json.dumps(body), close=True))
        rd = Reader(s)
        _, status, _, headers = rd.head()
        assert status == 200, status
        ev = sse_events(rd.body(headers))
    assert ev and ev[-1] == "[DONE]", ev[-3:]
    chunks = [json.loads(e) for e in ev[:-1]]
    text = "".join(c["choices"][0]["text"] for c in chunks if c.get("choices"))
    return text, chunks, ev


def pieces(text):
    """The null backend's text split into its tokens (' tok<ID>' each)."""
    out = text.split(" tok")
    assert out[0] == "", text[:80]
    return [" tok" + p for p in out[1:]]


def idle(srv):
    """Every sequence, stream and KV page given back."""
    st, h = srv.health()
    return (h["active_sequences"] == 0 and h["active_streams"] == 0 and
            h["kv_pages_free"] == h["kv_pages_total"]), h


@test
def stop_string_while_the_next_step_is_in_flight():
    # The null backend's tokens depend on the sequence id and position only, so a fresh
    # server's first request is the same with and without a stop string: learn the text
    # first, then stop at a known place.
    with Server(*DELAY) as srv:
        ref, _, _ = stream(srv, max_tokens=40)
    toks = pieces(ref)
    assert len(toks) == 40, len(toks)
    k = next(i for i in range(8, 40) if toks[i] not in toks[:i])
    stop = toks[k] + " tok"  # token k and the start of token k+1: nowhere earlier
    with Server(*DELAY) as srv:
        text, chunks, ev = stream(srv, max_tokens=40, stop=stop,
                                  stream_options={"include_usage": True})
        assert text == "".join(toks[:k]), (text[-60:], k)
        fin = [c for c in chunks if c.get("choices") and c["choices"][0]["finish_reason"]]
        assert len(fin) == 1 and fin[0]["choices"][0]["finish_reason"] == "stop", chunks[-3:]
        assert chunks.index(fin[0]) == len(chunks) - 2, "events after the finish chunk"
        usage = chunks[-1]["usage"]
        # tokens 0..k+1 were decided (k+1 completes the stop string); the one sampled in
        # the step that was in flight is dropped
        assert usage["completion_tokens"] == k + 2, (usage, k)
        ok, h = wait_for(lambda: idle(srv), 2.0)
        assert ok, h


@test
def stop_string_non_stream_matches_the_stream():
    with Server(*DELAY) as srv:
        ref, _, _ = stream(srv, max_tokens=30)
    toks = pieces(ref)
    k = next(i for i in range(5, 30) if toks[i] not in toks[:i])
    with Server(*DELAY) as srv:
        j = srv.complete(prompt="overlap", max_tokens=30, stop=[toks[k] + " tok"]).json()
        ch = j["choices"][0]
        assert ch["finish_reason"] == "stop", j
        assert ch["text"] == "".join(toks[:k]), (ch["text"][-60:], k)
        assert j["usage"]["completion_tokens"] == k + 2, j["usage"]


@test
def clients_leaving_mid_stream_free_every_sequence_and_page():
    n, keep = 40, 20
    with Server(*DELAY) as srv:
        socks = []
        for i in range(n):
            s = srv.connect()
            body = json.dumps({"prompt": f"leave {i}", "max_tokens": 60 if i < keep else 4000,
                               "stream": True})
            s.sendall(build_request("POST", "/v1/completions", body))
            socks.append(s)
        readers = [Reader(s) for s in socks]
        for rd in readers[keep:]:  # wait for a few events, then leave at different times
            rd.head()
        for i, (s, rd) in enumerate(zip(socks[keep:], readers[keep:])):
            while rd.buf.count(b"data:") < 2 + i % 5:
                assert rd._fill(), "stream ended early"
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
                         if i % 2 else b"\x00" * 8)  # half reset, half FIN
            s.close()
            time.sleep(0.003)
        for s, rd in zip(socks[:keep], readers[:keep]):
            _, status, _, headers = rd.head()
            assert status == 200
            ev = sse_events(rd.body(headers))
            assert len(ev) == 62 and ev[-1] == "[DONE]", (len(ev), ev[-2:])
            s.close()
        ok, h = wait_for(lambda: idle(srv), 2.0)
        assert ok, f"not idle 2 s after the clients left: {h}"
        m = srv.request("GET", "/metrics").body.decode()
        assert f"uvllm_completions_cancelled_total {n - keep}" in m, \
            [ln for ln in m.splitlines() if "cancelled" in ln]


@timed
def overloaded_loop_paces_writes_and_loses_nothing():
    # 600 streams on 1 ms steps: the loop cannot write every stream every step, so the
    # scheduler makes streams write every few steps (several events per write). Every
    # event must still arrive, once, in order, each a whole token.
    n, max_tokens = 600, 80
    assert raise_nofile(2048) >= 1300, "cannot raise RLIMIT_NOFILE"
    with Server("--null-delay-us", "1000", "--log-level", "debug") as srv:
        reqs = [build_request("POST", "/v1/completions", json.dumps(
            {"prompt": f"pace {i}", "max_tokens": max_tokens, "stream": True}))
            for i in range(n)]
        answers, done = stream_all(srv.port, reqs, recv_size=262144)
        assert done == n, f"only {done}/{n} streams finished"
        for raw in answers:
            ev = sse_events(dechunk(raw))
            assert len(ev) == max_tokens + 2 and ev[-1] == "[DONE]", (len(ev), ev[-2:])
            texts = [json.loads(e)["choices"][0]["text"] for e in ev[:-2]]
            assert all(len(pieces(t)) == 1 for t in texts), texts[:5]
            assert json.loads(ev[-2])["choices"][0]["finish_reason"] == "length"
        ok, h = wait_for(lambda: idle(srv), 2.0)
        assert ok, h
        paced = [ln for ln in srv.log if "streams write every" in ln]
        assert paced, "the loop was never found overloaded (no pacing in the log)"
        print(f"  pacing: {paced[0].strip()[-90:]}")


if __name__ == "__main__":
    sys.exit(run())
