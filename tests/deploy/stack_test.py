#!/usr/bin/python3
"""make test-deploy, the checks: run by tests/deploy/run.sh inside its network namespace, with
DOCKER_HOST pointing at the namespace's docker daemon, which already has uvllm:test (the image
of docker/Dockerfile) and uvllm-nginx:test (docker/nginx/Dockerfile).

Each check prints `ok` or `FAIL` with what it saw; the run ends with `N passed, N failed`.
Checks run in order and share the compose stack (docker/compose.yaml with
tests/deploy/compose.test.yaml: two null-backend replicas at 100 ms a token behind nginx).
nginx routes by conversation (docker/nginx/README.md "Prefix affinity"): requests that should
reach a given replica carry an X-Session-Id that the stack was seen to route there.
"""
import http.client
import json
import os
import re
import subprocess
import sys
import threading
import time

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARED = os.path.abspath(os.environ.get("UVLLM_SHARED", os.path.join(ROOT, "..", "shared")))
LINT = os.environ.get("DOCKERFILE_UTILS", "dockerfile-utils")
KEY = "deploy-test-key-1"
NGINX = 8080  # published by compose inside the namespace
COMPOSE = ["docker-compose", "-p", "uvllmdeploy", "-f", "docker/compose.yaml",
           "-f", "tests/deploy/compose.test.yaml"]
COMPOSE_ENV = dict(os.environ, UVLLM_API_KEY=KEY, UVLLM_REPLICAS="2", UVLLM_PORT=str(NGINX))
T0 = time.monotonic()
passed, failed = [], []


class Fail(Exception):
    pass


def expect(cond, msg):
    if not cond:
        raise Fail(msg)


def run(*args, check=True, timeout=120, env=None):
    p = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)
    if check and p.returncode != 0:
        raise Fail(f"{' '.join(args)}: exit {p.returncode}: {p.stderr.strip()[-600:]}")
    return p


def docker(*args, **kw):
    return run("docker", *args, **kw)


def compose(*args, **kw):
    return run(*COMPOSE, *args, env=COMPOSE_ENV, **kw)


def request(method, path, body=None, key=KEY, port=NGINX, timeout=30, session=None,
            host="127.0.0.1"):
    """One HTTP request on a new connection: (status, lower-cased headers, body bytes)."""
    c = http.client.HTTPConnection(host, port, timeout=timeout)
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    if session:
        headers["X-Session-Id"] = session
    try:
        c.request(method, path, body=json.dumps(body) if body is not None else None,
                  headers=headers)
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        c.close()


def completion(max_tokens=1, port=NGINX, key=KEY, session=None, prompt="hello there", timeout=30):
    return request("POST", "/v1/completions", {"prompt": prompt, "max_tokens": max_tokens},
                   key=key, port=port, session=session, timeout=timeout)


def stream(max_tokens, port=NGINX, out=None, session=None):
    """A streamed completion; returns (and fills `out` with) status, upstream, the arrival time
    of each event with text, and whether [DONE] came."""
    res = out if out is not None else {}
    res.update(status=None, upstream=None, times=[], done=False, error=None)
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        c.request("POST", "/v1/completions",
                  body=json.dumps({"prompt": "hello there", "max_tokens": max_tokens,
                                   "stream": True}),
                  headers=dict({"Authorization": f"Bearer {KEY}",
                                "Content-Type": "application/json"},
                               **({"X-Session-Id": session} if session else {})))
        r = c.getresponse()
        res["status"] = r.status
        res["upstream"] = last_upstream(r.getheader("X-Upstream"))
        while True:
            line = r.readline()
            if not line:
                break
            line = line.strip()
            if line == b"data: [DONE]":
                res["done"] = True
            elif line.startswith(b"data: "):
                ev = json.loads(line[6:])
                if ev.get("choices") and ev["choices"][0].get("text"):
                    res["times"].append(time.monotonic())
    except Exception as e:  # the caller asserts on what arrived
        res["error"] = repr(e)
    finally:
        c.close()
    return res


def last_upstream(v):
    """$upstream_addr lists every replica tried ("a:8080, b:8080"); the last one answered."""
    return v.split(",")[-1].strip() if v else None


def wait_for(what, fn, timeout, interval=0.25):
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        try:
            last = fn()
            if last:
                return last
        except Exception as e:
            last = repr(e)
        time.sleep(interval)
    raise Fail(f"{what}: not within {timeout} s (last: {last})")


def health_status(cid):
    return docker("inspect", "-f", "{{.State.Health.Status}}", cid).stdout.strip()


def replicas():
    """{"ip:8080": container id} of the compose replicas that are running."""
    out = {}
    for cid in compose("ps", "-q", "uvllm").stdout.split():
        info = json.loads(docker("inspect", cid).stdout)[0]
        if info["State"]["Running"]:
            for net in info["NetworkSettings"]["Networks"].values():
                out[f"{net['IPAddress']}:8080"] = cid
    return out


def check(fn):
    name = fn.__name__.replace("_", " ")
    t = time.monotonic()
    try:
        note = fn()
        passed.append(name)
        print(f"ok   {name} ({time.monotonic() - t:.1f} s){': ' + note if note else ''}", flush=True)
    except Exception as e:
        failed.append(name)
        print(f"FAIL {name} ({time.monotonic() - t:.1f} s): {e}", flush=True)
    return fn


# ---------------------------------------------------------------------------------------------
# Files: Dockerfiles lint clean offline, the Kubernetes manifests render and validate strictly.

@check
def dockerfiles_lint_clean():
    files = ["docker/Dockerfile", "docker/Dockerfile.cuda", "docker/nginx/Dockerfile"]
    for f in files:
        p = run(LINT, "lint", f, check=False)
        expect(p.returncode == 0 and not p.stdout.strip(), f"{f}: {p.stdout}{p.stderr}")
        expect("# syntax=" not in open(os.path.join(ROOT, f)).read(), f"{f}: a # syntax= line")
    return f"dockerfile-utils lint: {len(files)} files"


rendered = []


@check
def kustomize_renders_and_validates_strictly():
    out = run("kubectl", "kustomize", "deploy/k8s").stdout
    p = subprocess.run(["/usr/bin/python3", "tests/deploy/k8s_validate.py"], cwd=ROOT, input=out,
                       capture_output=True, text=True)
    expect(p.returncode == 0, f"k8s_validate: {p.stderr.strip()}")
    # and the validator does fail on an unknown field
    bad = out.replace("periodSeconds:", "periodSecs:", 1)
    q = subprocess.run(["/usr/bin/python3", "tests/deploy/k8s_validate.py"], cwd=ROOT, input=bad,
                       capture_output=True, text=True)
    expect(q.returncode != 0 and "unknown field" in q.stderr, "a misspelt field passed")
    rendered.extend(d for d in yaml.safe_load_all(out) if d)
    kinds = sorted(d["kind"] for d in rendered)
    expect(kinds == ["Deployment", "Deployment", "HorizontalPodAutoscaler", "PodDisruptionBudget",
                     "Service", "Service"], f"kinds {kinds}")
    nginx = next(d for d in rendered
                 if d["kind"] == "Deployment" and d["metadata"]["name"] == "uvllm-nginx")
    c = nginx["spec"]["template"]["spec"]["containers"][0]
    expect(c["image"].startswith("uvllm-nginx") and c["command"] == ["/usr/local/bin/uvllm-nginx-follow"],
           f"the routing nginx: {c['image']} {c.get('command')}")
    svc = next(d for d in rendered if d["kind"] == "Service" and d["metadata"]["name"] == "uvllm")
    expect(svc["spec"].get("clusterIP") == "None", "the replicas' Service is not headless")
    return ", ".join(kinds)


def deployment():
    return next(d for d in rendered if d["kind"] == "Deployment" and d["metadata"]["name"] == "uvllm")


def uvllm_pod():
    """The rendered uvllm Deployment's pod spec and its (first) container."""
    expect(rendered, "nothing rendered")
    pod = deployment()["spec"]["template"]["spec"]
    return pod, pod["containers"][0]


def flag(args, name, default):
    return float(args[args.index(name) + 1]) if name in args else default


@check
def deployment_grace_exceeds_drain():
    pod, c = uvllm_pod()
    args = c["args"]
    pre = c["lifecycle"]["preStop"]["exec"]["command"]
    expect(pre[0] == "sleep", f"preStop {pre}")
    need = float(pre[1]) + flag(args, "--drain-delay-s", 0) + flag(args, "--shutdown-grace", 30)
    tgps = pod["terminationGracePeriodSeconds"]
    expect(tgps > need, f"terminationGracePeriodSeconds {tgps} <= preStop + drain + grace {need}")
    for probe, path in (("readinessProbe", "/health/ready"), ("livenessProbe", "/health/live"),
                        ("startupProbe", "/health/live")):
        expect(c[probe]["httpGet"]["path"] == path, f"{probe} path {c[probe]['httpGet']}")
    expect(c["resources"]["requests"] and c["resources"]["limits"], "resources")
    return f"terminationGracePeriodSeconds {tgps} > {need:g}"


# ---------------------------------------------------------------------------------------------
# The image on its own.

@check
def image_default_command_serves_the_baked_model():
    docker("rm", "-f", "deploy-default", check=False)
    docker("run", "-d", "--name", "deploy-default", "-p", "127.0.0.1:18081:8080", "uvllm:test")
    wait_for("ready", lambda: request("GET", "/health/ready", key=None, port=18081)[0] == 200, 60)
    st, _, body = request("GET", "/v1/models", key=None, port=18081)
    ids = [m["id"] for m in json.loads(body)["data"]]
    expect(st == 200 and any("aidreams260K" in i for i in ids), f"/v1/models {st} {ids}")
    st, _, body = request("POST", "/v1/completions",
                          {"prompt": "Once upon a time", "max_tokens": 8}, key=None, port=18081)
    text = json.loads(body)["choices"][0]["text"] if st == 200 else body
    expect(st == 200 and text, f"completion {st} {text!r}")
    uid = docker("exec", "deploy-default", "id", "-u").stdout.strip()
    expect(uid == "10001", f"runs as uid {uid}")
    return f"models {ids}, completion {text!r}, uid {uid}"


@check
def image_healthcheck_goes_healthy():
    t = time.monotonic()
    wait_for("healthy", lambda: health_status("deploy-default") == "healthy", 60, 0.5)
    return f"healthy {time.monotonic() - t:.1f} s after the check began"


@check
def image_docker_stop_exits_0():
    t = time.monotonic()
    docker("stop", "deploy-default", timeout=60)  # docker's default 10 s
    took = time.monotonic() - t
    code = docker("inspect", "-f", "{{.State.ExitCode}}", "deploy-default").stdout.strip()
    docker("rm", "-f", "deploy-default", check=False)
    expect(code == "0" and took < 10, f"exit code {code} after {took:.1f} s")
    return f"exit 0 after {took:.1f} s"


@check
def image_serves_a_mounted_model():
    docker("rm", "-f", "deploy-mounted", check=False)
    docker("run", "-d", "--name", "deploy-mounted", "-p", "127.0.0.1:18082:8080",
           "-v", f"{SHARED}/models:/models/ext:ro", "uvllm:test",
           "serve", "--model", "/models/ext/aidreams260K-f16.gguf", "--host", "0.0.0.0")
    try:
        wait_for("ready", lambda: request("GET", "/health/ready", key=None,
                                          port=18082)[0] == 200, 60)
        st, _, body = request("GET", "/v1/models", key=None, port=18082)
        ids = [m["id"] for m in json.loads(body)["data"]]
        expect(any("f16" in i for i in ids), f"/v1/models {ids}")
        return f"models {ids}"
    finally:
        docker("rm", "-f", "deploy-mounted", check=False)


COMMON = ("the river stone light house green water small world people night morning table story "
          "music winter garden paper window mountain city money family friend school").split()


def metric(text, name):
    m = re.search(rf"^{name} (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


@check
def memory_limited_container_sizes_its_pool_and_survives_overload():
    """--memory 1g and no --kv-mem: the pool comes from the cgroup limit (not the host's
    MemAvailable), and a load whose KV is 1.5 times that pool is queued or preempted, not
    OOM-killed. mini-q4_0 with an f32 KV: 2 KiB a token, so the pool (a quarter of 1 GiB)
    holds 131072 tokens and the load (116 requests of 1705 tokens at once) needs 198,000."""
    name = "deploy-mem"
    docker("rm", "-f", name, check=False)
    docker("run", "-d", "--name", name, "--memory", "1g", "--memory-swap", "1g",
           "-p", "127.0.0.1:18085:8080", "-v", f"{SHARED}/models:/models/ext:ro", "uvllm:test",
           "serve", "--model", "/models/ext/mini-q4_0.gguf", "--host", "0.0.0.0",
           "--kv-type", "f32", "--threads", "2", "--max-tokens-default", "4")
    try:
        wait_for("ready", lambda: request("GET", "/health/ready", key=None,
                                          port=18085)[0] == 200, 90)
        log = docker("logs", name).stderr + docker("logs", name).stdout
        line = next((l for l in log.splitlines() if "kv cache:" in l), "")
        m = re.search(r"kv cache: ([\d.]+) (MiB|GiB) in \d+ pages of \d+ tokens = (\d+) tokens", line)
        expect(m and "cgroup v" in line and "(1.0 GiB)" in line, f"start-up line {line!r}")
        pool = float(m.group(1)) * (1024 if m.group(2) == "GiB" else 1)
        expect(pool < 1024, f"pool {pool} MiB")
        pool_tokens = int(m.group(3))
        n_req = pool_tokens * 3 // 2 // 1700 + 1
        codes = []

        def one(i):  # 1705 tokens, no prefix shared past the first few (no page reused)
            words = f"Request {i}: " + " ".join(
                COMMON[(i * 31 + k * 7 + k // 25) % len(COMMON)] for k in range(1700))
            try:
                codes.append(completion(max_tokens=4, port=18085, key=None, prompt=words,
                                        timeout=600)[0])
            except Exception as e:  # noqa: BLE001 - a reset is what the check is about
                codes.append(repr(e))

        t = time.monotonic()
        ths = [threading.Thread(target=one, args=(i,)) for i in range(n_req)]
        for th in ths:
            th.start()
        for th in ths:
            th.join(timeout=600)
        took = time.monotonic() - t
        state = json.loads(docker("inspect", name).stdout)[0]["State"]
        expect(state["Running"] and not state["OOMKilled"], f"container state {state}")
        bad = [c for c in codes if c not in (200, 429)]
        expect(len(codes) == n_req and not bad,
               f"{n_req} requests in {took:.0f} s: {codes.count(200)} x 200, "
               f"{codes.count(429)} x 429, others {bad[:5]}")
        text = request("GET", "/metrics", key=None, port=18085)[2].decode()
        prompt = metric(text, "uvllm_prompt_tokens_total")
        pre = metric(text, "uvllm_preemptions_total")
        return (f"{line.split('kv cache: ')[1][:150]}; {n_req} requests of 1705 tokens "
                f"({prompt:.0f} prompt tokens vs a pool of {pool_tokens}) in {took:.0f} s: "
                f"{codes.count(200)} x 200, {codes.count(429)} x 429, {pre:.0f} preemptions, "
                f"not OOM-killed")
    finally:
        docker("rm", "-f", name, check=False)


# ---------------------------------------------------------------------------------------------
# The compose stack: nginx in front of two replicas.

@check
def compose_stack_comes_up_healthy():
    compose("up", "-d", "--no-build", timeout=180)
    ids = compose("ps", "-q", "uvllm").stdout.split()
    expect(len(ids) == 2, f"replicas {ids}")
    wait_for("replicas healthy", lambda: all(health_status(i) == "healthy" for i in ids), 60)
    wait_for("nginx answers", lambda: request("GET", "/health/live", key=None)[0] == 200, 30)
    return f"{len(ids)} replicas healthy"


@check
def health_through_nginx():
    st, h, body = request("GET", "/health/ready", key=None)
    expect(st == 200 and json.loads(body)["status"] == "ready", f"/health/ready {st} {body!r}")
    st2, _, body2 = request("GET", "/health/live", key=None)
    expect(st2 == 200, f"/health/live {st2} {body2!r}")
    return f"ready {body[:40]!r}"


@check
def api_key_required_through_nginx():
    got = {}
    for label, key in (("missing", None), ("wrong", "not-the-key")):
        st, h, body = completion(key=key)
        err = json.loads(body).get("error", {}) if body.startswith(b"{") else {}
        expect(st == 401 and err.get("code") == "invalid_api_key" and "message" in err,
               f"{label} key: {st} {body[:200]!r}")
        got[label] = st
    st, _, _ = request("GET", "/v1/models", key=None)
    expect(st == 401, f"/v1/models without a key: {st}")
    st, _, body = completion()
    expect(st == 200, f"right key: {st} {body[:200]!r}")
    return f"missing {got['missing']}, wrong {got['wrong']}, right 200"


@check
def routing_headers_reach_the_client():
    st, h, _ = completion(max_tokens=2)
    timing, load = h.get("server-timing", ""), h.get("x-uvllm-load", "")
    expect(st == 200 and all(f"{p};dur=" in timing for p in ("queue", "prefill", "decode")),
           f"Server-Timing {timing!r}")
    expect(load.startswith("running=") and "waiting=" in load, f"X-Uvllm-Load {load!r}")
    return f"Server-Timing {timing!r}, X-Uvllm-Load {load!r}"


@check
def stream_arrives_token_by_token():
    r = stream(10)
    expect(r["status"] == 200 and r["done"], f"status {r['status']} done {r['done']} {r['error']}")
    times = r["times"]
    expect(len(times) == 10, f"{len(times)} token events")
    span = times[-1] - times[0]
    gaps = sum(1 for a, b in zip(times, times[1:]) if b - a >= 0.05)
    # a buffering proxy delivers the 10 at once; unbuffered, they come 100 ms apart (the null
    # backend's --null-token-us), so 9 x 100 ms is the nominal span, not a floor: a first
    # event that reaches the client late shortens it (0.896 s seen on a loaded host). At least
    # 8 gaps of 50 ms or more is what buffering cannot give.
    expect(span >= 0.45 and gaps >= 8, f"first-to-last {span:.3f} s, {gaps} gaps >= 50 ms")
    return f"10 tokens, first-to-last {span:.3f} s, {gaps} of 9 gaps >= 50 ms"


def sessions_by_replica(reps, n=24):
    """{replica: [session ids nginx sent there]} from n short requests."""
    out = {r: [] for r in reps}
    for i in range(n):
        st, h, _ = completion(session=f"probe-{i}")
        expect(st == 200, f"probe {i}: {st}")
        out.setdefault(last_upstream(h.get("x-upstream")), []).append(f"probe-{i}")
    return out


@check
def affinity_keeps_a_conversation_on_one_replica():
    reps = replicas()
    expect(len(reps) == 2, f"replicas {reps}")
    by = sessions_by_replica(reps)
    expect(set(by) == set(reps) and all(by.values()), f"24 sessions spread as {by}")
    for r, ids in by.items():  # a session stays where it went
        for sid in ids[:3]:
            seen = {last_upstream(completion(session=sid)[1].get("x-upstream")) for _ in range(3)}
            expect(seen == {r}, f"session {sid} went to {r}, then to {seen}")
    # no header: the prompt's first 2048 characters are the key (affinity.js), so later turns
    # of a conversation whose first turn is longer than that follow the first
    moved = []
    for c in range(6):
        first = f"conversation {c}: " + "tell me a story " * 140
        r1 = last_upstream(completion(prompt=first)[1].get("x-upstream"))
        r2 = last_upstream(completion(prompt=first + " and then? " * 3)[1].get("x-upstream"))
        if r1 != r2:
            moved.append(c)
    expect(not moved, f"keyless conversations {moved} changed replica between turns")
    return f"sessions per replica {[len(v) for v in by.values()]}, each sticky; 6 keyless followed"


@check
def drained_replica_finishes_its_streams_and_new_requests_go_elsewhere():
    reps = replicas()
    expect(len(reps) == 2, f"replicas {reps}")
    by = sessions_by_replica(reps)
    expect(all(by.get(r) for r in reps), f"sessions by replica {by}")
    sids = [by[r][0] for r in sorted(reps)]
    streams = [{} for _ in range(2)]
    threads = [threading.Thread(target=stream, args=(40,), kwargs={"out": s, "session": sid})
               for s, sid in zip(streams, sids)]
    for th in threads:
        th.start()
        wait_for("stream started", lambda s=streams[threads.index(th)]: s.get("times"), 10, 0.05)
    ups = [s["upstream"] for s in streams]
    expect(set(ups) == set(reps), f"the two streams went to {ups} (by session: one each)")
    victim = ups[0]
    other = next(u for u in reps if u != victim)
    stop = {}

    def do_stop():
        t = time.monotonic()
        stop["p"] = docker("stop", "-t", "30", reps[victim], check=False, timeout=60)
        stop["took"] = time.monotonic() - t

    st_th = threading.Thread(target=do_stop)
    st_th.start()
    # from when the victim refuses (SIGTERM can take a while to land on a loaded machine)
    vhost = victim.split(":")[0]
    wait_for("the victim drains", lambda: request("GET", "/health/ready", key=None, port=8080,
                                                  host=vhost, timeout=5)[0] == 503, 20, 0.05)
    seen, codes = [], []
    while st_th.is_alive() and len(codes) < 40:  # half of them keyed to the victim
        st, h, _ = completion(max_tokens=1, session=f"drain-{len(codes)}")
        codes.append(st)
        seen.append(last_upstream(h.get("x-upstream")))
    st_th.join()
    for th in threads:
        th.join()
    s = streams[0]
    expect(s["done"] and len(s["times"]) == 40 and not s["error"],
           f"drained replica's stream: done {s['done']}, {len(s['times'])} tokens, {s['error']}")
    expect(streams[1]["done"], "the other stream did not finish")
    expect(codes and all(c == 200 for c in codes), f"requests during the drain: {codes}")
    expect(all(u == other for u in seen), f"during the drain answered by {seen}; other {other}")
    code = docker("inspect", "-f", "{{.State.ExitCode}}", reps[victim]).stdout.strip()
    expect(code == "0", f"drained replica exit code {code}")
    return (f"stream finished with [DONE] (40 tokens), {len(codes)} requests during the "
            f"{stop['took']:.1f} s drain all 200 from the other replica, exit 0")


@check
def drained_replica_rejoins_after_restart_and_nginx_reload():
    stopped = [c for c in compose("ps", "-q", "uvllm").stdout.split()
               if docker("inspect", "-f", "{{.State.Running}}", c).stdout.strip() != "true"]
    for c in stopped:
        docker("start", c)
        wait_for("restarted replica healthy", lambda c=c: health_status(c) == "healthy", 60)
    compose("kill", "-s", "HUP", "nginx")
    reps = replicas()
    expect(len(reps) == 2, f"replicas {reps}")
    seen = set()

    def both():
        sid = f"rejoin-{len(seen)}-{time.monotonic()}"
        seen.add(last_upstream(completion(session=sid)[1].get("x-upstream")))
        return seen >= set(reps)

    wait_for("both replicas answer", both, 30, 0.1)
    return f"answered by {sorted(seen)}"


@check
def killed_replica_every_later_request_answers_200():
    reps = replicas()
    expect(len(reps) == 2, f"replicas {reps}")
    victim, other = sorted(reps)
    docker("kill", reps[victim])
    codes, seen, slow = [], [], 0.0
    for i in range(20):
        t = time.monotonic()
        st, h, _ = completion(max_tokens=1, session=f"after-kill-{i}")
        slow = max(slow, time.monotonic() - t)
        codes.append(st)
        seen.append(last_upstream(h.get("x-upstream")))
    expect(all(c == 200 for c in codes), f"codes after the kill {codes}")
    expect(all(u == other for u in seen), f"answered by {seen}")
    return f"20 of 20 answered 200 by the survivor; slowest {slow:.2f} s"


@check
def follow_script_reloads_nginx_when_replicas_change():
    """deploy/k8s runs the nginx image with uvllm-nginx-follow: new addresses behind the name
    `uvllm` (here: compose scaling the replicas to 3) reach nginx without a manual reload."""
    net = f"{COMPOSE[2]}_default"
    docker("rm", "-f", "deploy-follow", check=False)
    docker("run", "-d", "--name", "deploy-follow", "--network", net, "-p", "127.0.0.1:18086:8080",
           "-e", "UVLLM_RESOLVE_INTERVAL=1",
           "-v", f"{ROOT}/tests/deploy/nginx-test.conf:/etc/nginx/uvllm.d/test.conf:ro",
           "uvllm-nginx:test", "uvllm-nginx-follow")
    try:
        wait_for("follow nginx answers", lambda: request("GET", "/health/live", key=None,
                                                         port=18086)[0] == 200, 30)
        before = set(replicas())
        compose("up", "-d", "--no-build", "--no-recreate", "--scale", "uvllm=3", timeout=180)
        wait_for("more replicas, healthy", lambda: len(replicas()) > len(before) and all(
            health_status(c) == "healthy" for c in replicas().values()), 90)
        reps, seen = set(replicas()), set()

        def all_three():
            sid = f"follow-{len(seen)}-{time.monotonic()}"
            seen.add(last_upstream(completion(port=18086, session=sid)[1].get("x-upstream")))
            return seen >= reps

        wait_for("nginx (follow) reaches every replica", all_three, 40, 0.05)
        logs = docker("logs", "deploy-follow")
        expect("reloading" in logs.stderr + logs.stdout, "no reload logged")
        return f"replicas {len(before)} -> {len(reps)}; all answered through the follow nginx"
    finally:
        docker("rm", "-f", "deploy-follow", check=False)


@check
def stack_down():
    compose("down", "-t", "5", timeout=120)


# ---------------------------------------------------------------------------------------------
# Readiness is a real decode; the Kubernetes Deployment's container as docker runs it.

@check
def backend_that_cannot_decode_turns_readiness_503():
    docker("rm", "-f", "deploy-failing", check=False)
    docker("run", "-d", "--name", "deploy-failing", "-p", "127.0.0.1:18083:8080", "uvllm:test",
           "serve", "--backend", "null", "--host", "0.0.0.0", "--canary-interval-s", "1",
           "--null-fail-after", "4")
    try:
        wait_for("ready", lambda: request("GET", "/health/ready", key=None,
                                          port=18083)[0] == 200, 30, 0.1)
        t = time.monotonic()
        # no traffic: the idle canary finds out
        st = wait_for("503", lambda: (lambda r: r if r[0] == 503 else None)(
            request("GET", "/health/ready", key=None, port=18083)), 15, 0.1)
        took = time.monotonic() - t
        status = json.loads(st[2])["status"]
        expect(status == "failing", f"readiness body {st[2]!r}")
        code = completion(port=18083, key=None)[0]
        expect(code == 500, f"a completion on the failing backend: {code}")
        live = request("GET", "/health/live", key=None, port=18083)[0]
        expect(live == 200, f"/health/live {live}")
        return f"ready -> 503 failing {took:.1f} s later, completion 500, live 200"
    finally:
        docker("rm", "-f", "deploy-failing", check=False)


@check
def deployment_image_and_probes_answer_under_docker():
    pod, c = uvllm_pod()
    image = c["image"]
    docker("tag", "uvllm:test", image)
    port = c["ports"][0]["containerPort"]
    sc = c.get("securityContext", {})
    limits = c["resources"]["limits"]
    mem = limits["memory"].replace("Gi", "g").replace("Mi", "m")
    args = ["run", "-d", "--name", "deploy-k8s", "-p", f"127.0.0.1:18084:{port}",
            "--user", f"{pod['securityContext']['runAsUser']}:{pod['securityContext']['runAsGroup']}",
            "--memory", mem, "--cpus", str(limits["cpu"])]
    if sc.get("readOnlyRootFilesystem"):
        args.append("--read-only")
    if "ALL" in sc.get("capabilities", {}).get("drop", []):
        args += ["--cap-drop", "ALL"]
    if sc.get("allowPrivilegeEscalation") is False:
        args += ["--security-opt", "no-new-privileges"]
    docker("rm", "-f", "deploy-k8s", check=False)
    docker(*args, image, *c["args"])
    try:
        paths = {p: c[p]["httpGet"]["path"] for p in ("startupProbe", "livenessProbe",
                                                     "readinessProbe")}
        for probe, path in paths.items():
            wait_for(f"{probe} {path}", lambda path=path: request(
                "GET", path, key=None, port=18084)[0] == 200, 60)
        # no --kv-mem in the manifest: the pool is sized from the container's memory limit
        logs = docker("logs", "deploy-k8s")
        kv = next((l for l in (logs.stdout + logs.stderr).splitlines() if "kv cache:" in l), "")
        expect("--kv-mem" not in c["args"] and "cgroup v" in kv, f"kv cache line {kv!r}")
        pre = c["lifecycle"]["preStop"]["exec"]["command"]
        docker("exec", "deploy-k8s", *pre, timeout=60)
        grace = pod["terminationGracePeriodSeconds"]
        t = time.monotonic()
        docker("stop", "-t", str(grace), "deploy-k8s", timeout=grace + 30)
        code = docker("inspect", "-f", "{{.State.ExitCode}}", "deploy-k8s").stdout.strip()
        expect(code == "0", f"exit code {code}")
        return (f"{image} {' '.join(c['args'][:3])}...: {sorted(set(paths.values()))} 200, "
                f"preStop {pre} ok, stop -> exit 0 in {time.monotonic() - t:.1f} s")
    finally:
        docker("rm", "-f", "deploy-k8s", check=False)


print(f"test-deploy checks: {time.monotonic() - T0:.0f} s")
print(f"{len(passed)} passed, {len(failed)} failed")
sys.exit(1 if failed else 0)
