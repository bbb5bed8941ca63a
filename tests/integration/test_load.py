"""Serving under load (issue 11): the prefix cache on aidreams260K (a second request
sharing a 64-token prefix prefills only its own tokens, by counter, with the text of the
uncached run; a second chat turn reuses the first), every golden exact among 16 concurrent
mixed requests with a small KV pool, 429 with an honest Retry-After, per-request deadlines,
a paused reader that does not slow the others, a stalled reader dropped after
--stall-timeout-s, and the latency histograms in /metrics.
Needs the shared folder ($UVLLM_SHARED, else $UVLLM_SOURCE_DIR/../shared)."""

import json
import math
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from uvllm_harness import (Reader, Server, build_request, run, shared_file, sse_events,  # noqa: E402
                           test, timed, wait_for)



MODEL = shared_file("models", "aidreams260K.gguf")
GOLDEN = shared_file("golden", "aidreams260K.public.jsonl")
CASES = [json.loads(line) for line in open(GOLDEN)]


def n_golden(case):
    t = case["tokens"]
    return len(json.loads(t) if isinstance(t, str) else t)


def post(srv, path, body, headers=None):
    r = srv.request("POST", path, body=json.dumps(body), headers=headers)
    return r


def cpu_server(*extra):
    return Server("--model", MODEL, "--threads", "2", "--max-batch-tokens", "64", *extra,
                  backend="cpu")


# about 70 tokens (aidreams260K's context is 128)
PREFIX = ("Once upon a time, there was a little girl named Lily. She loved to play outside "
          "in the park with her friends. One day, she saw a big red ball.")
CHAT_PREFIX = "Lily loved the park."


# ---- prefix cache ------------------------------------------------------------------------

@test
def second_request_reuses_a_64_token_prefix():
    n = len(post_tokenize(PREFIX))
    assert n >= 64, f"the shared prefix is only {n} tokens"
    texts = {}
    for flag in ((), ("--no-prefix-cache",)):
        with cpu_server(*flag) as srv:
            outs = []
            for tail in (" The ball", " Her mom said"):
                m0 = srv.metrics()
                r = post(srv, "/v1/completions",
                         {"prompt": PREFIX + tail, "max_tokens": 24, "temperature": 0})
                assert r.status == 200, r.body
                j = r.json()
                m1 = srv.metrics()
                hit = m1["uvllm_prefix_cache_hit_tokens_total"] - \
                    m0["uvllm_prefix_cache_hit_tokens_total"]
                outs.append((j["choices"][0]["text"], j["usage"]["prompt_tokens"], hit))
            texts[bool(flag)] = outs
    (a, na, ha), (b, nb, hb) = texts[False]
    assert ha == 0, "the first request found nothing"
    # the second prefills only past the shared full pages (16 tokens each)
    assert hb >= 64 and hb <= n, (hb, n)
    print(f"  second request: {int(hb)} of {nb} prompt tokens from the cache")
    assert [t for t, _, _ in texts[True]] == [a, b], (texts, "cached text != uncached text")
    assert all(h == 0 for _, _, h in texts[True]), "--no-prefix-cache caches nothing"


def post_tokenize(text):
    with cpu_server() as srv:
        r = post(srv, "/tokenize", {"content": text})
        assert r.status == 200, r.body
        return r.json()["tokens"]


@test
def second_chat_turn_reuses_the_first():
    res = {}
    for flag in ((), ("--no-prefix-cache",)):
        with cpu_server(*flag) as srv:
            msgs = [{"role": "user", "content": CHAT_PREFIX}]
            r = post(srv, "/v1/chat/completions",
                     {"messages": msgs, "max_tokens": 8, "temperature": 0})
            assert r.status == 200, r.body
            n1 = r.json()["usage"]["prompt_tokens"]
            ans = r.json()["choices"][0]["message"]["content"]
            msgs += [{"role": "assistant", "content": ans},
                     {"role": "user", "content": "And then?"}]
            m0 = srv.metrics()
            r = post(srv, "/v1/chat/completions",
                     {"messages": msgs, "max_tokens": 4, "temperature": 0})
            assert r.status == 200, r.body
            j = r.json()
            hit = srv.metrics()["uvllm_prefix_cache_hit_tokens_total"] - \
                m0["uvllm_prefix_cache_hit_tokens_total"]
            res[bool(flag)] = (ans, j["choices"][0]["message"]["content"], hit,
                               j["usage"]["prompt_tokens"], n1)
    ans, second, hit, n, n1 = res[False]
    print(f"  turn 2: {int(hit)} of {n} prompt tokens from the cache (turn 1 prompt {n1})")
    assert hit >= n1 - 16 and hit > 0, res  # every full page of turn 1's prompt
    assert res[True][:2] == (ans, second), res


# ---- 16 concurrent mixed requests -----------------------------------------------------

def one_request(srv, body, out, key, errors):
    try:
        with srv.connect(timeout=120) as s:
            s.sendall(build_request("POST", "/v1/completions", json.dumps(body), close=True))
            r = Reader(s).response()
            assert r.status == 200, (r.status, r.body)
            if body.get("stream"):
                ev = r.events()
                assert ev[-1] == "[DONE]", ev[-3:]
                out[key] = "".join(json.loads(e)["choices"][0]["text"] for e in ev[:-1])
            else:
                out[key] = r.json()["choices"][0]["text"]
    except Exception as e:  # noqa: BLE001
        errors.append(f"{key}: {e!r}")


@test
def goldens_exact_among_16_concurrent_mixed_requests():
    # A pool of 24 pages (384 tokens) for 16 sequences of up to ~100 tokens: the prefix
    # cache evicts, sequences are preempted, streams and one-shot answers mix.
    with cpu_server("--ctx-size", "128", "--kv-mem", kv_mem_for_pages(24)) as srv:
        for rnd in range(2):
            out, errors, threads = {}, [], []
            for i in range(16):
                case = CASES[(i + rnd) % len(CASES)]
                body = {"prompt": case["prompt"], "max_tokens": n_golden(case),
                        "temperature": 0, "stream": i % 2 == 1}
                t = threading.Thread(target=one_request, args=(srv, body, out, i, errors))
                threads.append((t, case))
                t.start()
            for t, _ in threads:
                t.join(180)
            assert not errors, errors
            for i, (_, case) in enumerate(threads):
                assert out[i] == case["text"], (i, case["prompt"], out[i], case["text"])
        m = srv.metrics()
        print(f"  pages {int(m['uvllm_kv_pages_total'])}, preemptions "
              f"{int(m['uvllm_preemptions_total'])}, cache hits "
              f"{int(m['uvllm_prefix_cache_hit_tokens_total'])} tokens, evictions "
              f"{int(m['uvllm_prefix_cache_evictions_total'])}")
        # the "eviction under a small pool with every output still golden"
        assert m["uvllm_prefix_cache_evictions_total"] > 0, "the small pool evicted nothing"
        # Whether 16 concurrent requests hit each other's pages depends on their arrival
        # order (a busy host reorders them); the cache itself must still serve after all
        # that eviction: the longest prompt (22 tokens, one full page) twice, alone, the
        # second time from the page the first left, with the same answer.
        case = max(CASES, key=lambda c: len(c["prompt_tokens"]))
        for k in range(2):
            out, errors = {}, []
            one_request(srv, {"prompt": case["prompt"], "max_tokens": n_golden(case),
                              "temperature": 0}, out, 0, errors)
            assert not errors and out[0] == case["text"], (errors, out)
            if k == 0:
                before = srv.metrics()["uvllm_prefix_cache_hit_tokens_total"]
        hits = srv.metrics()["uvllm_prefix_cache_hit_tokens_total"]
        assert hits >= before + 16, f"a repeated prompt missed the cache ({before} -> {hits})"


def kv_mem_for_pages(n):
    # aidreams260K: 1 KiB of f16 K and V per token, 16 tokens per page
    return str(n * 16 * 1024)


# ---- admission ----------------------------------------------------------------------------

def stream_first_token(srv, body, t_first, key, errors, rejected=None, barrier=None,
                       dev_first=None):
    try:
        with srv.connect(timeout=60) as s:
            if barrier:
                barrier.wait(30)
            s.sendall(build_request("POST", "/v1/completions", json.dumps(body), close=True))
            rd = Reader(s)
            _, status, _, headers = rd.head()
            if status == 429 and rejected is not None:
                # admission may already price this one's wait over the limit (when the
                # step-time model learned before it arrived): honest, not a failure
                rejected.append(key)
                return
            assert status == 200, status
            seen = []

            def on_chunk(data):
                if not seen and b"data:" in data:
                    seen.append(1)
                    t_first[key] = time.monotonic()
                    if dev_first is not None:  # the backend's time spent so far
                        dev_first[key] = srv.metrics()["uvllm_step_compute_seconds_total"]
            rd.body(headers, "POST", status, on_chunk=on_chunk)
    except Exception as e:  # noqa: BLE001
        errors.append(f"{key}: {e!r}")


@timed
def overloaded_429_retry_after_is_honest_and_the_retry_is_served():
    # 2 ms per prefill token, 0.5 ms per decode token: 8 prompts of 300 words queue
    # several seconds of prefill. They are sent together (a barrier, not a schedule), all
    # within far less than the first prefill step's 0.6 s, so that on any host they all meet
    # admission before it has priced a prompt token, and the queue is long.
    with Server("--null-prefill-us", "2000", "--null-token-us", "500",
                "--max-queue-wait-s", "1.5") as srv:
        t_first, errors, threads, rejected, dev_first = {}, [], [], [], {}
        words = lambda i: " ".join(f"w{i}x{k}" for k in range(300))  # noqa: E731
        together = threading.Barrier(8)
        for i in range(8):
            body = {"prompt": words(i), "max_tokens": 10, "stream": True}
            t = threading.Thread(target=stream_first_token,
                                 args=(srv, body, t_first, i, errors, rejected, together,
                                       dev_first))
            t.start()
            threads.append(t)

        # Not a sleep but what the late comer's answer depends on: all 8 reached admission
        # (accepted or refused), and a prefill step of theirs completed, so the model knows
        # what a prompt token costs (a 300-token chunk at 2 ms a token: 0.6 s of step time;
        # a canary step alone teaches only a decode token's cost). On a loaded or sanitised
        # host this takes longer, and the assertions below do not change.
        def queued_and_priced():
            m = srv.metrics()
            seen = m["uvllm_completions_total"] + m["uvllm_completions_overloaded_total"]
            return seen >= 8 and m["uvllm_step_compute_seconds_total"] >= 0.5
        assert wait_for(queued_and_priced, 60), srv.metrics()
        r = post(srv, "/v1/completions", {"prompt": "late comer", "max_tokens": 4})
        t429 = time.monotonic()
        dev429 = srv.metrics()["uvllm_step_compute_seconds_total"]
        assert r.status == 429, (r.status, r.body)
        ra = int(r.header("retry-after"))
        assert r.json()["error"]["code"] == "queue_full", r.body
        for t in threads:
            t.join(60)
        assert not errors, errors
        # the queue ahead of the late comer: every admitted prompt (at least 4 of the 8,
        # several seconds of prefill)
        assert len(t_first) >= 4, (sorted(t_first), rejected)
        # Until the queue ahead of it was served: in the backend's time (the steps the
        # prediction is about, what the null backend's configured costs add up to), and on
        # the wall clock, which a loaded or sanitised host stretches (the loop and the
        # backend thread wait for a core between steps) and which is only printed.
        real = max(dev_first.values()) - dev429
        wall = max(t_first.values()) - t429
        print(f"  Retry-After {ra} s, queue drained after {real:.2f} s of steps, {wall:.2f} s"
              f" of wall time ({len(t_first)} admitted, {len(rejected)} of 8 refused at arrival)")
        assert real / 2 <= ra <= max(2 * real, 1), (ra, real, wall)
        time.sleep(max(0, t429 + ra - time.monotonic()))
        r = post(srv, "/v1/completions", {"prompt": "late comer", "max_tokens": 4})
        assert r.status == 200, (r.status, r.body)
        assert srv.metrics()["uvllm_completions_overloaded_total"] == 1 + len(rejected)


@test
def max_queue_answers_429():
    with Server("--null-delay-us", "50000", "--max-queue", "2") as srv:
        socks = []
        try:
            for i in range(6):
                s = srv.connect()
                s.sendall(build_request("POST", "/v1/completions",
                                        json.dumps({"prompt": f"p{i}", "max_tokens": 50})))
                socks.append(s)
            codes = [Reader(s).response().status for s in socks]
        finally:
            for s in socks:
                s.close()
        assert 429 in codes and 200 in codes, codes


# ---- deadlines ----------------------------------------------------------------------------

@timed
def deadline_ends_with_finish_reason_deadline():
    with Server("--null-delay-us", "20000") as srv:
        # The deadline is 0.3 s, or 5 times what a 2-token request takes now when the host is
        # so loaded that 0.3 s would not see a first token; the answer must come within 1.2 s
        # after the deadline either way.
        t0 = time.monotonic()
        assert post(srv, "/v1/completions", {"prompt": "warm", "max_tokens": 2}).status == 200
        timeout = max(0.3, 5 * (time.monotonic() - t0))
        t0 = time.monotonic()
        r = post(srv, "/v1/completions",
                 {"prompt": "slow", "max_tokens": 1000, "timeout": timeout})
        dt = time.monotonic() - t0
        assert r.status == 200, r.body
        j = r.json()
        assert j["choices"][0]["finish_reason"] == "deadline", j
        assert 0 < j["usage"]["completion_tokens"] < 1000 and dt < timeout + 1.2, \
            (j["usage"], dt, timeout)
        r = post(srv, "/v1/completions", {"prompt": "slow", "max_tokens": 1000, "stream": True},
                 headers={"X-Request-Timeout": "0.2"})
        ev = r.events()
        assert ev[-1] == "[DONE]"
        assert json.loads(ev[-2])["choices"][0]["finish_reason"] == "deadline", ev[-2]
        r = post(srv, "/v1/completions", {"prompt": "x", "timeout": -1})
        assert r.status == 400 and r.json()["error"]["param"] == "timeout", r.body
        assert srv.metrics()["uvllm_deadlines_total"] == 2


# ---- slow readers -------------------------------------------------------------------------

def timed_stream(srv, n):
    """Streams n tokens; returns the gaps between SSE chunks (seconds) and the total."""
    with srv.connect(timeout=30) as s:
        body = json.dumps({"prompt": "reader", "max_tokens": n, "stream": True})
        s.sendall(build_request("POST", "/v1/completions", body, close=True))
        rd = Reader(s)
        _, status, _, headers = rd.head()
        assert status == 200
        times = []
        rd.body(headers, "POST", status, on_chunk=lambda d: times.append(time.monotonic()))
        return [b - a for a, b in zip(times, times[1:])], times[-1] - times[0]


def server_cpu_s(srv):
    """CPU seconds (user + system) the server process has used."""
    with open(f"/proc/{srv.proc.pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_stream(srv, n, runs=5):
    """The best of runs n-token streams: the server's CPU seconds and the wall seconds."""
    best_cpu = best_wall = float("inf")
    for _ in range(runs):
        c0 = server_cpu_s(srv)
        _, wall = timed_stream(srv, n)
        best_cpu = min(best_cpu, server_cpu_s(srv) - c0)
        best_wall = min(best_wall, wall)
    return best_cpu, best_wall


@timed
def a_paused_reader_does_not_slow_the_others():
    # A reader that stops: once its ~256 KiB of output and the socket buffers are full its
    # sequence pauses (pages kept), the others run at full speed, and it resumes on drain.
    # Its frames carry 5 logprobs (~0.5 KiB a token) so the kernel's socket buffers (up to
    # 4 MiB on loopback) fill within seconds.
    # What a stream costs is the server's CPU time for its 2000 tokens (the null backend's
    # steps sleep, and cost no CPU): a paused reader that kept its sequence in the steps, or
    # made the loop spin on its socket, would show there. Wall time, which a loaded host
    # stretches by 2x from one second to the next, is only printed. Best of 5 each (of 3,
    # one make test measured 0.09 s alone against 0.17 s beside the reader, where six runs
    # alone gave 0.12-0.15 s for both: the CPU clock's ticks and the host's noise).
    with Server("--null-delay-us", "200", "--null-ctx", "20000") as srv:
        alone, alone_wall = cpu_stream(srv, 2000)
        slow = socket.socket()
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        slow.connect(("127.0.0.1", srv.port))
        g, _ = stall_until_paused(srv, slow)
        with_slow, with_wall = cpu_stream(srv, 2000)
        print(f"  paused after {int(g)} tokens; 2000 tokens alone {alone:.2f} s of server CPU "
              f"({alone_wall:.2f} s wall), next to the paused reader {with_slow:.2f} s "
              f"({with_wall:.2f} s wall), best of 5 each")
        # 1.5x as before; 0.03 s is three ticks of the CPU clock, where the wall-time bound
        # allowed 0.2 s
        assert with_slow < 1.5 * alone + 0.03, (alone, with_slow, alone_wall, with_wall)
        st, h = srv.health()
        assert h["active_sequences"] == 1, h
        assert srv.metrics()["uvllm_tokens_generated_total"] == g + 10000, "still paused"
        assert h["kv_pages_free"] < h["kv_pages_total"], "its pages are kept"
        # it drains: the stalled stream resumes and completes
        rd = Reader(slow)
        _, status, _, headers = rd.head()
        ev = sse_events(rd.body(headers, "POST", status))
        assert ev[-1] == "[DONE]", ev[-2:]
        assert len(ev) >= 14000 + 1, len(ev)
        slow.close()


def stall_until_paused(srv, slow):
    """Starts a stream on slow that is never read; returns the generated-token counter once
    the server stopped generating for it (its sequence paused), and the last time the
    counter was seen moving (about when its last output went out)."""
    body = json.dumps({"prompt": "never read " * 50, "max_tokens": 14000, "stream": True,
                       "logprobs": 5})
    slow.sendall(build_request("POST", "/v1/completions", body))
    # Paused: no token for 3 polls in a row (0.9 s). One quiet poll is not enough on a loaded
    # host, where the server may not get a core for 0.3 s while it still streams.
    g, quiet, t_end = -1, 0, time.monotonic() + 60
    t_moved = time.monotonic()
    while time.monotonic() < t_end:
        time.sleep(0.3)
        g, g_prev = srv.metrics()["uvllm_tokens_generated_total"], g
        quiet = quiet + 1 if g == g_prev else 0
        if not quiet:
            t_moved = time.monotonic()
        if quiet == 3:
            return g, t_moved
    raise AssertionError("the stalled reader's sequence never paused")


@timed
def a_stalled_reader_is_dropped_after_the_stall_timeout():
    # A client that keeps its connection open and never reads: paused, it holds its KV pages
    # until --stall-timeout-s passes with none of its output taken; then its sequence is
    # cancelled, its pages return, and the server serves others as before.
    with Server("--null-delay-us", "200", "--null-ctx", "20000",
                "--stall-timeout-s", "2") as srv:
        slow = socket.socket()
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        slow.connect(("127.0.0.1", srv.port))
        try:
            _, t_paused = stall_until_paused(srv, slow)  # when its output last moved
            _, h = srv.health()
            assert h["active_sequences"] == 1 and h["kv_pages_free"] < h["kv_pages_total"], h
            while time.monotonic() < t_paused + 10:
                _, h = srv.health()
                if h["active_sequences"] == 0:
                    break
                time.sleep(0.2)
            dt = time.monotonic() - t_paused
            print(f"  dropped {dt:.1f} s after it paused (stall timeout 2 s)")
            assert h["active_sequences"] == 0, ("still held after 10 s", h)
            assert h["kv_pages_free"] == h["kv_pages_total"], h
            assert 0.5 < dt < 5, dt  # from its last output, which was just before the pause
            r = post(srv, "/v1/completions", {"prompt": "next", "max_tokens": 5})
            assert r.status == 200 and r.json()["usage"]["completion_tokens"] == 5, r.body
        finally:
            slow.close()


# ---- metrics -----------------------------------------------------------------------------

@test
def latency_histograms_in_metrics():
    with Server("--null-delay-us", "2000") as srv:
        for _ in range(3):
            r = post(srv, "/v1/completions", {"prompt": "a b c", "max_tokens": 5, "stream": True})
            assert r.status == 200
        m = srv.metrics()
        assert m["uvllm_time_to_first_token_seconds_count"] == 3, m
        assert m["uvllm_inter_token_seconds_count"] == 12
        assert m["uvllm_queue_seconds_count"] == 3 and m["uvllm_e2e_seconds_count"] == 3
        assert m['uvllm_inter_token_seconds_bucket{le="+Inf"}'] == 12
        assert 0 < m["uvllm_e2e_seconds_sum"] < 5
        assert m["uvllm_step_predicted_seconds_total"] > 0
        assert m["uvllm_itl_target_seconds"] == 0.1


if __name__ == "__main__":
    sys.exit(run())
